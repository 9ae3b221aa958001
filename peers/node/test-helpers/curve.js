// Test support for CURVE: a pyzmq ROUTER with CURVE_SERVER=1 (curve_router.py), and a scripted CurveZMQ
// server in Node that does the server's half of RFC 26 honestly, or misbehaves on request, so the tests
// can see what the client sends and how it reacts. Lives outside test/ so the test runner skips it.

import net from 'node:net';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import {
  box, boxBeforenm, boxOpen, curveKey, generateKeyPair, secretbox, secretboxOpen,
} from '../src/curve.js';
import { PyRouter, python, within } from './processes.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const live = new Set();

/** Kills the CURVE ROUTER processes a test started and did not stop (for a file-level `after`). */
export async function stopCurveProcesses() {
  const children = [...live];
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? once(child, 'exit') : null)));
}

/**
 * A pyzmq ROUTER with CURVE_SERVER=1 and the given long-term secret key (Z85), driven like PyRouter.
 * `allow`: client public keys (Z85) a ZAP handler admits; without it any client key is accepted.
 */
export async function startCurveRouter(bindEndpoint, { secretKey, echo = false, allow = [], heartbeatIvl = 0, heartbeatTimeout = 0 }) {
  // A Z85 key may start with '-', which argparse would take for an option: keys go as --allow=KEY and after '--'.
  const args = [path.join(here, 'curve_router.py')];
  if (echo) args.push('--echo');
  for (const key of allow) args.push(`--allow=${key}`);
  if (heartbeatIvl) args.push('--heartbeat-ivl', String(heartbeatIvl));
  if (heartbeatTimeout) args.push('--heartbeat-timeout', String(heartbeatTimeout));
  args.push('--', bindEndpoint, secretKey);
  const child = spawn(python, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  live.add(child);
  child.on('exit', () => live.delete(child));
  const router = new PyRouter(child);
  const ready = await router.next((e) => e.event === 'ready', 30_000, 'the CURVE ROUTER to bind');
  router.endpoint = ready.endpoint;
  router.publicKey = ready.public_key;
  return router;
}

const prefixed = (prefix, tail) => Buffer.concat([Buffer.from(prefix, 'latin1'), tail]);
const u64 = (n) => {
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(BigInt(n));
  return out;
};

function frame(body, flags = 0) {
  if (body.length > 255) {
    const header = Buffer.alloc(9);
    header[0] = flags | 0x02;
    header.writeBigUInt64BE(BigInt(body.length), 1);
    return Buffer.concat([header, body]);
  }
  return Buffer.concat([Buffer.from([flags, body.length]), body]);
}

function command(name, data) {
  return frame(Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'latin1'), data]), 0x04);
}

function parseMetadata(data) {
  const properties = {};
  let at = 0;
  while (at < data.length) {
    const nameLength = data[at];
    const name = data.subarray(at + 1, at + 1 + nameLength).toString('latin1');
    at += 1 + nameLength;
    const valueLength = data.readUInt32BE(at);
    at += 4;
    properties[name] = data.subarray(at, at + valueLength);
    at += valueLength;
  }
  return properties;
}

/**
 * One connection to a FakeCurveServer. `log` records what the client sent, in order:
 * { kind: 'greeting' | 'command' | 'frame', name?, nonce?, ... }. After READY, `sendMessage(frames)` seals
 * frames with the next short nonce; `sendBox(payload, { nonce, tamper })` seals anything with any nonce.
 */
class FakeConnection extends EventEmitter {
  constructor(server, socket) {
    super();
    this.server = server;
    this.socket = socket;
    this.log = [];
    this.input = Buffer.alloc(0);
    this.greeted = false;
    this.nonce = 0n; // the server's short nonce
    this.key = null;
    this.clientKey = null; // the client's long-term key, from its vouched INITIATE
    this.metadata = null;
    this.closed = once(socket, 'close');
    socket.on('data', (chunk) => {
      this.input = Buffer.concat([this.input, chunk]);
      try {
        this.parse();
      } catch (error) {
        this.log.push({ kind: 'server-error', message: error.message });
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    const greeting = Buffer.alloc(64);
    greeting[0] = 0xff;
    greeting[9] = 0x7f;
    greeting[10] = 3;
    greeting[11] = 1;
    greeting.write(server.options.mechanism ?? 'CURVE', 12, 'latin1');
    greeting[32] = 1;
    socket.write(greeting);
  }

  parse() {
    for (;;) {
      if (!this.greeted) {
        if (this.input.length < 64) return;
        this.log.push({ kind: 'greeting', mechanism: this.input.subarray(12, 32).toString('latin1').replace(/\0+$/, '') });
        this.input = this.input.subarray(64);
        this.greeted = true;
        continue;
      }
      if (this.input.length < 2) return;
      const flags = this.input[0];
      let size;
      let at;
      if (flags & 0x02) {
        if (this.input.length < 9) return;
        size = Number(this.input.readBigUInt64BE(1));
        at = 9;
      } else {
        size = this.input[1];
        at = 2;
      }
      if (this.input.length < at + size) return;
      const body = this.input.subarray(at, at + size);
      this.input = this.input.subarray(at + size);
      this.onFrame(flags, Buffer.from(body));
    }
  }

  onFrame(flags, body) {
    const name = body.subarray(1, 1 + body[0]).toString('latin1');
    const data = body.subarray(1 + body[0]);
    if (name === 'HELLO') return this.onHello(body);
    if (name === 'INITIATE') return this.onInitiate(data);
    if (name === 'MESSAGE' && this.key) return this.onMessage(data);
    this.log.push({ kind: 'frame', flags, body });
    return undefined;
  }

  onHello(body) {
    const short = body.readBigUInt64BE(112);
    this.clientTransient = body.subarray(80, 112);
    const signature = boxOpen(body.subarray(120, 200), prefixed('CurveZMQHELLO---', body.subarray(112, 120)),
      this.clientTransient, this.server.secretKey);
    this.log.push({ kind: 'command', name: 'HELLO', size: body.length, version: [body[6], body[7]], nonce: short,
      padding: body.subarray(8, 80), signatureOpens: signature !== null && signature.equals(Buffer.alloc(64)) });
    const { errorAfter, impostorSecretKey } = this.server.options;
    if (errorAfter === 'hello') {
      this.socket.write(command('ERROR', Buffer.concat([Buffer.from([this.server.options.errorReason.length]), Buffer.from(this.server.options.errorReason)])));
      return;
    }
    if (signature === null && !impostorSecretKey) {
      this.socket.destroy(); // as libzmq does with a HELLO it cannot open
      return;
    }
    this.transient = generateKeyPair();
    this.cookieKey = randomBytes(32);
    const cookieNonce = randomBytes(16);
    const cookie = Buffer.concat([cookieNonce,
      secretbox(Buffer.concat([this.clientTransient, this.transient.secretKey]), prefixed('COOKIE--', cookieNonce), this.cookieKey)]);
    const welcomeNonce = randomBytes(16);
    // An impostor makes its WELCOME with a key of its own: it cannot make one with the pinned key's secret.
    const welcome = box(Buffer.concat([this.transient.publicKey, cookie]), prefixed('WELCOME-', welcomeNonce),
      this.clientTransient, impostorSecretKey ?? this.server.secretKey);
    this.socket.write(command('WELCOME', Buffer.concat([welcomeNonce, welcome])));
  }

  onInitiate(data) {
    const cookie = data.subarray(0, 96);
    const inner = secretboxOpen(cookie.subarray(16), prefixed('COOKIE--', cookie.subarray(0, 16)), this.cookieKey);
    if (inner === null || !inner.subarray(0, 32).equals(this.clientTransient)) throw new Error('INITIATE cookie does not open');
    const key = boxBeforenm(this.clientTransient, this.transient.secretKey);
    const short = data.readBigUInt64BE(96);
    const opened = secretboxOpen(data.subarray(104), prefixed('CurveZMQINITIATE', data.subarray(96, 104)), key);
    if (opened === null) throw new Error('INITIATE box does not open');
    const clientKey = opened.subarray(0, 32);
    const vouch = boxOpen(opened.subarray(48, 128), prefixed('VOUCH---', opened.subarray(32, 48)), clientKey, this.transient.secretKey);
    const vouched = vouch !== null && vouch.subarray(0, 32).equals(this.clientTransient) && vouch.subarray(32).equals(this.server.publicKey);
    this.metadata = parseMetadata(opened.subarray(128));
    this.log.push({ kind: 'command', name: 'INITIATE', nonce: short, vouched, metadata: this.metadata });
    if (!vouched) throw new Error('INITIATE vouch does not prove the client key');
    this.clientKey = clientKey;
    if (this.server.options.closeAfterInitiate) {
      this.socket.destroy(); // RFC 26 lets a server refuse a client key without a word
      return;
    }
    if (this.server.options.errorAfter === 'initiate') {
      this.socket.write(command('ERROR', Buffer.concat([Buffer.from([this.server.options.errorReason.length]), Buffer.from(this.server.options.errorReason)])));
      return;
    }
    this.key = key;
    const ready = Buffer.concat([Buffer.from([11]), Buffer.from('Socket-Type'), u64(6).subarray(4), Buffer.from('ROUTER')]);
    const short1 = this.nextNonce();
    this.socket.write(command('READY', Buffer.concat([short1, secretbox(ready, prefixed('CurveZMQREADY---', short1), key)])));
    this.server.emit('ready', this);
  }

  onMessage(data) {
    const short = data.readBigUInt64BE(0);
    const opened = secretboxOpen(data.subarray(8), prefixed('CurveZMQMESSAGEC', data.subarray(0, 8)), this.key);
    if (opened === null) throw new Error('MESSAGE box does not open');
    this.log.push({ kind: 'message', nonce: short, flags: opened[0], payload: opened.subarray(1) });
    this.emit('message', { flags: opened[0], payload: opened.subarray(1) });
  }

  nextNonce() {
    this.nonce += 1n;
    return u64(this.nonce);
  }

  /** Seals `payload` (flags byte first) as a MESSAGE with short nonce `nonce` (default: the next one). */
  sendBox(flags, payload, { nonce, tamper = false } = {}) {
    const short = nonce === undefined ? this.nextNonce() : u64(nonce);
    const sealed = secretbox(Buffer.concat([Buffer.from([flags]), payload]), prefixed('CurveZMQMESSAGES', short), this.key);
    if (tamper) sealed[sealed.length - 1] ^= 0x01;
    this.socket.write(frame(Buffer.concat([Buffer.from('\x07MESSAGE', 'latin1'), short, sealed])));
  }

  /** Sends one message, one MESSAGE box per frame. */
  sendMessage(frames) {
    frames.forEach((payload, i) => this.sendBox(i < frames.length - 1 ? 1 : 0, Buffer.from(payload)));
  }

  /** Writes raw bytes (a clear frame, say) on the connection. */
  sendRaw(bytes) {
    this.socket.write(bytes);
  }
}

/**
 * A CurveZMQ server on tcp://127.0.0.1 holding `secretKey` (Z85 or 32 bytes). Options: `mechanism` for the
 * greeting (default CURVE), `impostorSecretKey` (answer HELLO with a WELCOME made with this key instead),
 * `errorAfter: 'hello' | 'initiate'` with `errorReason` (send ERROR there), `closeAfterInitiate` (close instead of READY). Events: `connection`, `ready`.
 */
export class FakeCurveServer extends EventEmitter {
  static async start(options) {
    const server = new FakeCurveServer(options);
    server.net.listen({ host: '127.0.0.1', port: 0 });
    await once(server.net, 'listening');
    server.endpoint = `tcp://127.0.0.1:${server.net.address().port}`;
    return server;
  }

  constructor(options) {
    super();
    this.options = options;
    this.secretKey = curveKey(options.secretKey);
    this.publicKey = curveKey(options.publicKey);
    if (options.impostorSecretKey) this.options = { ...options, impostorSecretKey: curveKey(options.impostorSecretKey) };
    this.connections = [];
    this.net = net.createServer((socket) => {
      const connection = new FakeConnection(this, socket);
      this.connections.push(connection);
      this.emit('connection', connection);
    });
  }

  /** The next connection to reach READY: call it before the handshake it waits for can happen. */
  nextReady(ms = 30_000) {
    return within(once(this, 'ready').then(([connection]) => connection), ms, 'a CURVE handshake on the fake server');
  }

  async close() {
    for (const connection of this.connections) connection.socket.destroy();
    await new Promise((resolve) => this.net.close(resolve));
  }
}
