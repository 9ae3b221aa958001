// ZMTP 3.1 (RFC 37, compatible with 3.0 / RFC 23) DEALER client over node:net, with the NULL mechanism
// or, as a client, CURVE (RFC 26 CurveZMQ, crypto in ./curve.js). It speaks just enough ZeroMQ to talk
// to a libzmq ROUTER: greeting, handshake, frames, PING/PONG, and reconnects with backoff like a libzmq
// socket does.

import net from 'node:net';
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { debuglog } from 'node:util';
import {
  boxBeforenm, box, boxOpen, curveKey, generateKeyPair, publicKeyOf, secretbox, secretboxInPlace, secretboxOpen, TAG_BYTES,
  z85Encode,
} from './curve.js';

const debug = debuglog('zerobridge:zmtp');

const GREETING_SIZE = 64;
const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;
const FLAG_RESERVED = 0xf8;
// Below this total size a message is copied into one buffer (one write); above, frames are written as they are.
const COALESCE_LIMIT = 16 * 1024;
// SPEC 7.13: the bytes a side lets wait for the other side (here: the socket's buffer plus the pre-handshake queue).
const SEND_BUFFER_BYTES = 8 * 1024 * 1024;

// RFC 37's table of legal socket type pairs, for the two socket types spoken here.
const LEGAL_PEERS = {
  DEALER: new Set(['ROUTER', 'DEALER', 'REP']),
  ROUTER: new Set(['DEALER', 'REQ', 'ROUTER']),
};

/** A ZMTP connection-level failure (bad greeting, bad frame, handshake timeout, ERROR command...). */
export class ZmtpError extends Error {
  constructor(message, code = 'EPROTO') {
    super(message);
    this.name = 'ZmtpError';
    this.code = code;
  }
}

/**
 * Parses `tcp://host:port` or `ipc:///path` (also `ipc://relative` and `ipc://@abstract`) into
 * `net.connect` options. Throws a TypeError that quotes the endpoint when it cannot.
 */
export function parseEndpoint(endpoint) {
  if (typeof endpoint !== 'string') throw new TypeError(`endpoint must be a string, got ${typeof endpoint}`);
  const match = /^([a-z]+):\/\/(.*)$/.exec(endpoint);
  if (!match) throw new TypeError(`not a ZeroMQ endpoint (want tcp://host:port or ipc:///path): ${JSON.stringify(endpoint)}`);
  const [, transport, rest] = match;
  if (transport === 'ipc') {
    if (rest.length === 0) throw new TypeError(`ipc endpoint without a path: ${JSON.stringify(endpoint)}`);
    // libzmq's convention: a leading '@' names a Linux abstract socket.
    const path = rest.startsWith('@') ? `\0${rest.slice(1)}` : rest;
    return { transport, path };
  }
  if (transport === 'tcp') {
    const hostPort = /^(\[[^\]]+\]|[^:/[\]]+):(\d{1,5})$/.exec(rest);
    if (!hostPort) throw new TypeError(`tcp endpoint must be tcp://host:port: ${JSON.stringify(endpoint)}`);
    let host = hostPort[1];
    if (host.startsWith('[')) host = host.slice(1, -1);
    const port = Number(hostPort[2]);
    if (host === '*' || port < 1 || port > 65535) {
      throw new TypeError(`cannot connect to ${JSON.stringify(endpoint)}: need a concrete host and a port in 1..65535`);
    }
    return { transport, host, port };
  }
  throw new TypeError(`unsupported transport ${JSON.stringify(transport)} in ${JSON.stringify(endpoint)} (tcp and ipc only)`);
}

/** A FIFO of received chunks from which exact byte counts are taken without re-copying whole buffers. */
class ByteQueue {
  constructor() {
    this.chunks = [];
    this.offset = 0; // read position in chunks[0]
    this.length = 0;
  }

  push(chunk) {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  byteAt(index) {
    let i = index + this.offset;
    for (const chunk of this.chunks) {
      if (i < chunk.length) return chunk[i];
      i -= chunk.length;
    }
    return undefined;
  }

  take(count) {
    this.length -= count;
    const first = this.chunks[0];
    if (count === 0) return Buffer.alloc(0);
    if (first.length - this.offset >= count) {
      const out = first.subarray(this.offset, this.offset + count);
      this.offset += count;
      if (this.offset === first.length) { this.chunks.shift(); this.offset = 0; }
      return out;
    }
    const out = Buffer.allocUnsafe(count);
    let written = 0;
    while (written < count) {
      const chunk = this.chunks[0];
      const n = Math.min(chunk.length - this.offset, count - written);
      chunk.copy(out, written, this.offset, this.offset + n);
      written += n;
      this.offset += n;
      if (this.offset === chunk.length) { this.chunks.shift(); this.offset = 0; }
    }
    return out;
  }

  clear() {
    this.chunks = [];
    this.offset = 0;
    this.length = 0;
  }
}

function ourGreeting(mechanism) {
  const greeting = Buffer.alloc(GREETING_SIZE); // padding and filler are zeros
  greeting[0] = 0xff;
  greeting[9] = 0x7f;
  greeting[10] = 3; // version 3.1
  greeting[11] = 1;
  greeting.write(mechanism, 12, 'ascii');
  greeting[32] = 0; // as-server: 0 with NULL, and we are only ever the CURVE client
  return greeting;
}

function commandFrame(name, data) {
  const body = Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'ascii'), data]);
  return encodeFrames([body], FLAG_COMMAND);
}

/** ZMTP metadata: Socket-Type, and Identity (always with NULL, as libzmq does; with CURVE only when set). */
function metadata(socketType, routingId, always) {
  const properties = [];
  const add = (name, value) => {
    const header = Buffer.alloc(1 + name.length + 4);
    header[0] = name.length;
    header.write(name, 1, 'ascii');
    header.writeUInt32BE(value.length, 1 + name.length);
    properties.push(header, value);
  };
  add('Socket-Type', Buffer.from(socketType, 'ascii'));
  if (always || routingId.length > 0) add('Identity', routingId);
  return Buffer.concat(properties);
}

function readyCommand(socketType, routingId) {
  return commandFrame('READY', metadata(socketType, routingId, true));
}

/**
 * The `curve` option as 32-byte keys: `serverKey` is required (the host's long-term public key, pinned);
 * without `secretKey` the socket makes itself a fresh long-term key pair; a `publicKey` given must match
 * `secretKey`. Keys are 40-character Z85 strings or 32 bytes.
 */
function curveOptions(options) {
  if (typeof options !== 'object' || options === null) throw new TypeError('curve must be an object { serverKey, publicKey?, secretKey? }');
  const serverKey = curveKey(options.serverKey, 'curve.serverKey');
  if (options.secretKey === undefined) {
    if (options.publicKey !== undefined) throw new TypeError('curve.publicKey needs its curve.secretKey');
    return { serverKey, ...generateKeyPair() };
  }
  const secretKey = curveKey(options.secretKey, 'curve.secretKey');
  const publicKey = publicKeyOf(secretKey);
  if (options.publicKey !== undefined && !curveKey(options.publicKey, 'curve.publicKey').equals(publicKey)) {
    throw new TypeError('curve.publicKey is not the public key of curve.secretKey');
  }
  return { serverKey, publicKey, secretKey };
}

const nonce = (prefix, tail) => Buffer.concat([Buffer.from(prefix, 'latin1'), tail]);
const MESSAGE_PREFIX = Buffer.from('\x07MESSAGE', 'latin1');
// A MESSAGE body: the command name (8 bytes), the short nonce (8), then the box: tag (16) and flags byte + frame.
const MESSAGE_BOX_AT = 16;
const MESSAGE_HEADER_BYTES = MESSAGE_BOX_AT + TAG_BYTES + 1;
const MESSAGE_MORE = 0x01;
const MESSAGE_COMMAND = 0x02;

/**
 * One connection's CurveZMQ client state (RFC 26): our transient key pair, the short nonces both ways,
 * and, from WELCOME on, the transient box key. It builds and checks command bodies; the socket code
 * moves them. Every check that fails throws a ZmtpError, and the connection is dropped.
 */
class CurveClient {
  #keys; // the socket's long-term keys, secret key included: private, like the socket's own copy

  constructor(keys, endpoint) {
    this.#keys = keys;
    this.endpoint = endpoint;
    this.transient = generateKeyPair();
    this.sent = 0n; // our last short nonce (HELLO is 1)
    this.received = 0n; // the server's last short nonce (READY, then MESSAGEs)
    this.phase = 'welcome'; // awaiting WELCOME, then 'ready' (awaiting READY), then 'open'
    this.serverTransient = null;
    this.boxKey = null;
    this.cookie = null;
    this.failed = false; // set once a failure on this connection was reported
    // MESSAGE nonces: the prefix, then the short nonce written in place for each message (no allocation per message).
    this.sendNonce = nonce('CurveZMQMESSAGEC', Buffer.alloc(8));
    this.receiveNonce = nonce('CurveZMQMESSAGES', Buffer.alloc(8));
  }

  shortNonce() {
    this.sent += 1n;
    const tail = Buffer.alloc(8);
    tail.writeBigUInt64BE(this.sent);
    return tail;
  }

  /** HELLO: version 1.0, 72 bytes of anti-amplification padding, C', short nonce, Box[64 zeros](C'->S). */
  hello() {
    const short = this.shortNonce();
    const signature = box(Buffer.alloc(64), nonce('CurveZMQHELLO---', short), this.#keys.serverKey, this.transient.secretKey);
    return commandFrame('HELLO', Buffer.concat([Buffer.from([1, 0]), Buffer.alloc(72), this.transient.publicKey, short, signature]));
  }

  /** WELCOME: Box[S' + cookie](S->C'). Only the holder of the server's secret key can make it. */
  welcome(data) {
    if (this.phase !== 'welcome') throw new ZmtpError(`unexpected WELCOME from ${this.endpoint}`);
    if (data.length !== 16 + 144) throw new ZmtpError(`malformed WELCOME from ${this.endpoint} (${data.length} bytes)`);
    const opened = boxOpen(data.subarray(16), nonce('WELCOME-', data.subarray(0, 16)), this.#keys.serverKey, this.transient.secretKey);
    if (opened === null) {
      throw new ZmtpError(`${this.endpoint} could not prove it holds the secret key of curve.serverKey `
        + `${z85Encode(this.#keys.serverKey)} (its WELCOME does not open): refusing it`, 'EAUTH');
    }
    this.serverTransient = opened.subarray(0, 32);
    try {
      this.boxKey = boxBeforenm(this.serverTransient, this.transient.secretKey);
    } catch {
      throw new ZmtpError(`${this.endpoint} sent an unusable transient key in WELCOME`, 'EAUTH');
    }
    this.cookie = opened.subarray(32, 128);
    this.phase = 'ready';
  }

  /** INITIATE: cookie, short nonce, Box[C + vouch + metadata](C'->S'), the vouch being Box[C' + S](C->S'). */
  initiate(metadataBytes) {
    const vouchNonce = randomBytes(16);
    const vouch = box(Buffer.concat([this.transient.publicKey, this.#keys.serverKey]), nonce('VOUCH---', vouchNonce),
      this.serverTransient, this.#keys.secretKey);
    const short = this.shortNonce();
    const sealed = secretbox(Buffer.concat([this.#keys.publicKey, vouchNonce, vouch, metadataBytes]),
      nonce('CurveZMQINITIATE', short), this.boxKey);
    return commandFrame('INITIATE', Buffer.concat([this.cookie, short, sealed]));
  }

  /** READY: Box[metadata](S'->C'); its short nonce starts the server's sequence. */
  ready(data) {
    if (this.phase !== 'ready') throw new ZmtpError(`unexpected READY from ${this.endpoint}`);
    if (data.length < 8 + 16) throw new ZmtpError(`malformed READY from ${this.endpoint} (${data.length} bytes)`);
    const short = data.readBigUInt64BE(0);
    const opened = secretboxOpen(data.subarray(8), nonce('CurveZMQREADY---', data.subarray(0, 8)), this.boxKey);
    if (opened === null) throw new ZmtpError(`the READY box from ${this.endpoint} does not open`, 'EAUTH');
    this.received = short;
    this.phase = 'open';
    return opened;
  }

  /**
   * One frame (or, with MESSAGE_COMMAND, one command body) as a ZMTP frame holding a MESSAGE command, sealed in one
   * buffer: frame header, MESSAGE body, box. The box's contents land 4-byte aligned, which lets XSalsa20 go by words.
   */
  sealFrame(payload, flags) {
    this.sent += 1n;
    this.sendNonce.writeBigUInt64BE(this.sent, 16);
    const bodyBytes = MESSAGE_HEADER_BYTES + payload.length;
    const headerBytes = frameHeaderBytes(bodyBytes);
    const space = Buffer.allocUnsafe(3 + headerBytes + bodyBytes);
    const pad = (4 - ((space.byteOffset + headerBytes + MESSAGE_BOX_AT + TAG_BYTES) & 3)) & 3;
    const frame = space.subarray(pad, pad + headerBytes + bodyBytes);
    writeFrameHeader(frame, 0, 0, bodyBytes);
    const body = headerBytes;
    MESSAGE_PREFIX.copy(frame, body);
    this.sendNonce.copy(frame, body + 8, 16);
    frame[body + MESSAGE_HEADER_BYTES - 1] = flags;
    frame.set(payload, body + MESSAGE_HEADER_BYTES);
    secretboxInPlace(frame, body + MESSAGE_BOX_AT, 1 + payload.length, this.sendNonce, this.boxKey);
    return frame;
  }

  /** Opens a MESSAGE from the server: { flags, payload }. Its short nonce must exceed every one before it. */
  open(body) {
    if (body.length < MESSAGE_PREFIX.length || MESSAGE_PREFIX.compare(body, 0, MESSAGE_PREFIX.length) !== 0) {
      throw new ZmtpError(`${this.endpoint} sent something other than a CURVE MESSAGE after the handshake`);
    }
    if (body.length < MESSAGE_HEADER_BYTES) throw new ZmtpError(`malformed MESSAGE from ${this.endpoint} (${body.length} bytes)`);
    const short = body.readBigUInt64BE(8);
    if (short <= this.received) {
      throw new ZmtpError(`MESSAGE from ${this.endpoint} with short nonce ${short} after ${this.received} (replayed or reordered)`);
    }
    body.copy(this.receiveNonce, 16, 8, MESSAGE_BOX_AT);
    const opened = secretboxOpen(body.subarray(MESSAGE_BOX_AT), this.receiveNonce, this.boxKey);
    if (opened === null) throw new ZmtpError(`a MESSAGE box from ${this.endpoint} does not open (altered or forged)`, 'EAUTH');
    this.received = short;
    const flags = opened[0];
    if (flags & ~(MESSAGE_MORE | MESSAGE_COMMAND)) {
      throw new ZmtpError(`MESSAGE from ${this.endpoint} with reserved flags 0x${flags.toString(16)}`);
    }
    return { flags, payload: opened.subarray(1) };
  }
}

/** Encodes one message (or one command when `extraFlags` has COMMAND) as a list of buffers to write. */
function encodeFrames(frames, extraFlags = 0) {
  const parts = [];
  const last = frames.length - 1;
  frames.forEach((frame, i) => {
    const header = Buffer.allocUnsafe(frameHeaderBytes(frame.length));
    writeFrameHeader(header, 0, extraFlags | (i < last ? FLAG_MORE : 0), frame.length);
    parts.push(header);
    if (frame.length > 0) parts.push(frame);
  });
  return parts;
}

/** The size of the header of a frame of `size` bytes: short (one size byte) up to 255 bytes, long (eight) above. */
const frameHeaderBytes = (size) => (size > 255 ? 9 : 2);

/** Writes the header of a frame of `size` bytes with `flags` at `buffer[at]` (frameHeaderBytes(size) bytes). */
function writeFrameHeader(buffer, at, flags, size) {
  if (size > 255) {
    buffer[at] = flags | FLAG_LONG;
    buffer.writeBigUInt64BE(BigInt(size), at + 1);
  } else {
    buffer[at] = flags;
    buffer[at + 1] = size;
  }
}

function toBuffer(frame) {
  if (Buffer.isBuffer(frame)) return frame;
  if (typeof frame === 'string') return Buffer.from(frame, 'utf8');
  if (frame instanceof Uint8Array) return Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
  throw new TypeError(`a frame must be a Buffer, Uint8Array or string, got ${frame === null ? 'null' : typeof frame}`);
}

// Connection states.
const IDLE = 'idle';
const CONNECTING = 'connecting'; // TCP/ipc connect in progress
const GREETING = 'greeting'; // waiting for the other side's 64-byte greeting
const HANDSHAKE = 'handshake'; // waiting for its READY
const READY = 'ready';
const CLOSED = 'closed';

/**
 * A ZeroMQ DEALER socket connected to one endpoint.
 *
 * Events: `connect` (handshake done; `{ socketType, identity }` of the other side), `disconnect`
 * (a ready connection was lost), `message` (an array of Buffers), `error` (a ZmtpError: the other
 * side broke the protocol; the connection is dropped and retried), `drain` (the bytes waiting to be
 * sent may have fallen below `sendBufferBytes`: see `full`), `turnEnd` (a turn that read a chunk is ending: what a
 * listener sends now goes out in the one write of that turn), `close` (after close()).
 * Messages sent while not connected are queued (up to `sendQueueLimit`) and sent in order once the
 * handshake is done; messages written to a connection that then breaks are lost, as with libzmq.
 * send() itself never refuses for size: callers that must bound what waits check `full` first.
 *
 * With `curve: { serverKey, publicKey?, secretKey? }` the socket is a CURVE client (RFC 26): the other
 * side must prove it holds the secret key of `serverKey` before anything but our HELLO is sent, and every
 * frame then travels in a MESSAGE box. A failure drops the connection (retried like any other) and is
 * reported as a ZmtpError: `EAUTH` when the other side cannot prove its key (or a box does not open),
 * `EREFUSED` when it refuses us (an ERROR command, or a close after our INITIATE: our key is not allowed),
 * `EPROTO` for the rest.
 */
export class ZmtpDealer extends EventEmitter {
  // The long-term CURVE keys, or null. Private: they hold our secret key, which no inspect, JSON or log shows.
  #curveKeys = null;
  // The socket whose writes are held until the event loop's check phase (corkUntilIdle), or null.
  #corked = null;

  constructor(endpoint, options = {}) {
    super();
    this.endpoint = endpoint;
    this.address = parseEndpoint(endpoint);
    this.routingId = options.routingId === undefined ? Buffer.alloc(0) : toBuffer(options.routingId);
    if (this.routingId.length > 255 || this.routingId[0] === 0) {
      throw new TypeError('routingId must be at most 255 bytes and must not start with a zero byte');
    }
    this.reconnectIvl = options.reconnectIvl ?? 100;
    this.reconnectIvlMax = options.reconnectIvlMax ?? 5000;
    this.handshakeTimeout = options.handshakeTimeout ?? 10_000;
    this.sendQueueLimit = options.sendQueueLimit ?? 1000;
    this.sendBufferBytes = options.sendBufferBytes ?? SEND_BUFFER_BYTES;
    this.maxMessageBytes = options.maxMessageBytes ?? 256 * 1024 * 1024;
    // 'ROUTER' only for connections a ZmtpRouter accepted (see adopt()).
    this.socketType = options.socketType ?? 'DEALER';
    if (!LEGAL_PEERS[this.socketType]) throw new TypeError(`socketType must be DEALER or ROUTER, not ${JSON.stringify(this.socketType)}`);
    this.accepted = false;
    this.#curveKeys = options.curve === undefined || options.curve === null ? null : curveOptions(options.curve);
    if (this.#curveKeys && this.socketType !== 'DEALER') throw new TypeError('CURVE is implemented for the client (DEALER) side only');
    this.mechanism = this.#curveKeys ? 'CURVE' : 'NULL';
    this.curve = null; // this connection's CurveClient, from the greeting on

    this.state = IDLE;
    this.socket = null;
    this.input = new ByteQueue();
    this.pending = []; // messages (lists of buffers to write) waiting for a connection
    this.pendingBytes = 0;
    this.partial = []; // frames of the message being received
    this.partialBytes = 0;
    this.frameFlags = 0;
    this.frameSize = -1; // -1: reading flags; -2: reading size; >= 0: reading a body of that size
    this.failures = 0; // consecutive failed attempts, for the backoff
    this.reconnectTimer = null;
    this.handshakeTimer = null;
    this.closedPromise = null;
    this.pingsAnswered = 0; // ZMTP PINGs answered, for diagnostics
  }

  /** Our long-term CURVE public key in Z85 (for a host's allow-list), or null without CURVE. */
  get curvePublicKey() {
    return this.#curveKeys ? z85Encode(this.#curveKeys.publicKey) : null;
  }

  /** The server's public key we require it to prove, in Z85, or null without CURVE. */
  get curveServerKey() {
    return this.#curveKeys ? z85Encode(this.#curveKeys.serverKey) : null;
  }

  /** True once the handshake with the other side is complete and until the connection breaks. */
  get connected() {
    return this.state === READY;
  }

  /** Bytes handed to send() and not yet passed to the kernel: the socket's buffer and the pre-handshake queue. */
  get queuedBytes() {
    return this.pendingBytes + (this.socket?.writableLength ?? 0);
  }

  /** True while `queuedBytes` is at or over `sendBufferBytes`; a `drain` event follows when it may no longer be. */
  get full() {
    return this.queuedBytes >= this.sendBufferBytes;
  }

  /** Starts connecting (and reconnecting when the connection breaks) until close(). */
  connect() {
    if (this.state !== IDLE) return this;
    this.attempt();
    return this;
  }

  /**
   * Sends one message (a list of frames). Queued while disconnected. Throws a ZmtpError with code
   * `EAGAIN` when the queue is full and `ECLOSED` after close().
   */
  send(frames) {
    if (this.state === CLOSED) throw new ZmtpError('the socket is closed', 'ECLOSED');
    if (!Array.isArray(frames) || frames.length === 0) throw new TypeError('a message is a non-empty array of frames');
    const buffers = frames.map(toBuffer);
    if (this.state === READY) {
      this.writeMessage(buffers);
      return;
    }
    if (this.pending.length >= this.sendQueueLimit) {
      throw new ZmtpError(`not connected to ${this.endpoint} and ${this.pending.length} messages are already queued`, 'EAGAIN');
    }
    // Queued as frames: with CURVE they can only be sealed once the connection's keys and nonces exist.
    this.pending.push(buffers);
    for (const frame of buffers) this.pendingBytes += frame.length;
  }

  /**
   * Gives up on the current connection: drops it at once with everything not yet sent (no linger; a
   * tcp connection is reset, so not even the kernel delivers what it still held) and dials a fresh
   * one after `delayMs`. No `disconnect` is emitted: the caller asked for this. Used when the other
   * side is considered lost, so that nothing queued for it arrives later (SPEC 7.3).
   */
  reconnect(delayMs = 0) {
    if (this.state === CLOSED || this.accepted) return;
    const socket = this.socket;
    this.socket = null;
    this.dropPending();
    clearTimeout(this.handshakeTimer);
    clearTimeout(this.reconnectTimer);
    if (socket && !socket.destroyed) {
      if (typeof socket.resetAndDestroy === 'function' && this.address.transport === 'tcp' && socket.readyState === 'open') {
        socket.resetAndDestroy();
      } else {
        socket.destroy();
      }
    }
    this.state = CONNECTING; // not IDLE: connect() stays a no-op while the timer runs
    this.reconnectTimer = setTimeout(() => {
      if (this.state === CONNECTING && this.socket === null) this.attempt();
    }, delayMs);
    this.emitSafely('drain');
  }

  dropPending() {
    this.pending = [];
    this.pendingBytes = 0;
  }

  /**
   * Stops reconnecting, lets written data drain (up to `lingerMs`) and closes the connection.
   * Queued, unsent messages are dropped.
   */
  close(lingerMs = 1000) {
    if (this.closedPromise) return this.closedPromise;
    this.state = CLOSED;
    this.dropPending();
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.handshakeTimer);
    const socket = this.socket;
    this.closedPromise = new Promise((resolve) => {
      if (!socket || socket.destroyed) {
        resolve();
        return;
      }
      const linger = setTimeout(() => socket.destroy(), lingerMs);
      linger.unref();
      socket.once('close', () => {
        clearTimeout(linger);
        resolve();
      });
      socket.end();
    }).then(() => this.emitSafely('close'));
    return this.closedPromise;
  }

  // --- connection lifecycle ---------------------------------------------------------------

  attempt() {
    this.reconnectTimer = null;
    this.state = CONNECTING;
    this.input.clear();
    this.partial = [];
    this.partialBytes = 0;
    this.frameSize = -1;
    this.curve = null;
    const { transport } = this.address;
    const socket = transport === 'tcp'
      ? net.connect({ host: this.address.host, port: this.address.port, noDelay: true })
      : net.connect({ path: this.address.path });
    socket.on('connect', () => {
      if (this.socket !== socket || this.state !== CONNECTING) return;
      this.state = GREETING;
      socket.write(ourGreeting(this.mechanism));
    });
    this.watch(socket);
  }

  /**
   * Takes over a connection a server accepted (the ROUTER side of src/zmtp-router.js): the handshake starts at
   * once, and when the connection ends it is not redialled (`disconnect`, then the state stays closed).
   */
  adopt(socket) {
    this.accepted = true;
    this.state = GREETING;
    socket.setNoDelay?.(true);
    this.watch(socket);
    socket.write(ourGreeting(this.mechanism));
  }

  watch(socket) {
    this.socket = socket;
    this.handshakeTimer = setTimeout(() => {
      this.fail(socket, new ZmtpError(`no ZMTP handshake from ${this.endpoint} within ${this.handshakeTimeout} ms`, 'ETIMEDOUT'));
    }, this.handshakeTimeout);
    socket.on('data', (chunk) => {
      if (this.socket !== socket || socket.destroyed) return;
      this.corkUntilIdle(socket);
      this.input.push(chunk);
      try {
        this.parse(socket);
      } catch (error) {
        // Our own bug or an exotic failure: never let it escape into the event loop.
        this.fail(socket, error instanceof ZmtpError ? error : new ZmtpError(`internal error: ${error.message}`, 'EINTERNAL'));
      }
    });
    socket.on('error', (error) => {
      // Refused/absent endpoints are routine while the other side is not up yet: reported (the peer decides whether a
      // first connect fails at once), then retried.
      debug('socket error on %s: %s', this.endpoint, error.message);
      if (error.code === 'ECONNREFUSED' || error.code === 'ENOENT') this.emitSafely('unreachable', error);
    });
    socket.on('drain', () => {
      if (this.socket === socket) this.emitSafely('drain');
    });
    socket.on('close', () => this.onSocketClose(socket));
  }

  onSocketClose(socket) {
    if (this.socket !== socket) return;
    this.socket = null;
    clearTimeout(this.handshakeTimer);
    const curve = this.curve;
    this.curve = null;
    if (this.state === CLOSED) return;
    const wasReady = this.state === READY;
    if (this.accepted) {
      this.state = CLOSED;
      if (wasReady) this.emitSafely('disconnect');
      return;
    }
    this.state = IDLE;
    if (wasReady) {
      this.failures = 0;
      this.emitSafely('disconnect');
    } else {
      this.failures += 1;
    }
    if (curve && curve.phase !== 'open' && !curve.failed && this.listenerCount('error') > 0) {
      // libzmq drops a CURVE client silently when our HELLO does not open for its key (a wrong
      // curve.serverKey) and, under RFC 26, may do the same when it refuses our key after INITIATE.
      this.emitSafely('error', curve.phase === 'welcome'
        ? new ZmtpError(`${this.endpoint} closed the connection after our CURVE HELLO: is curve.serverKey ${this.curveServerKey} its key?`, 'EAUTH')
        : new ZmtpError(`${this.endpoint} closed the connection after our CURVE INITIATE: it did not accept our key ${this.curvePublicKey}`, 'EREFUSED'));
    }
    this.emitSafely('drain'); // what the socket held is gone with it
    if (this.state !== IDLE) return; // a 'disconnect' or 'drain' listener closed or redialled us
    const delay = Math.min(this.reconnectIvl * 2 ** Math.max(0, this.failures - 1), this.reconnectIvlMax);
    this.state = CONNECTING; // not IDLE, so connect() stays a no-op while we wait
    this.reconnectTimer = setTimeout(() => {
      if (this.state === CONNECTING && this.socket === null) this.attempt();
    }, delay);
  }

  /** Reports a protocol failure and drops the connection; it is retried after a backoff. */
  fail(socket, error) {
    if (this.socket !== socket || this.state === CLOSED) return;
    debug('protocol error on %s: %s', this.endpoint, error.message);
    this.input.clear();
    if (this.curve) this.curve.failed = true; // reported here, not again as a close mid-handshake
    socket.destroy();
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }

  /** Writes one message: as ZMTP frames, or with CURVE one MESSAGE box per frame (MORE inside the box). */
  writeMessage(frames) {
    if (!this.#curveKeys) {
      this.write(encodeFrames(frames));
      return;
    }
    const last = frames.length - 1;
    this.write(frames.map((frame, i) => this.curve.sealFrame(frame, i < last ? MESSAGE_MORE : 0)));
  }

  /** Writes a ZMTP command after the handshake: sealed in a MESSAGE box with CURVE. */
  writeCommand(name, data) {
    if (!this.#curveKeys) {
      this.write(commandFrame(name, data));
      return;
    }
    const body = Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'ascii'), data]);
    this.write([this.curve.sealFrame(body, MESSAGE_COMMAND)]);
  }

  /**
   * Holds what is written while a chunk read is handled, and what the calls and answers it settles write in turn
   * (promise callbacks run before the event loop's check phase), and writes it all at once then: one write(2) per
   * chunk read rather than one per message (the answers to 64 calls in flight arrive in one chunk). `turnEnd` comes
   * just before, for what its owner keeps back until the turn's end (the peer's last batch of the turn), so that it
   * goes in the same write rather than in one of its own.
   */
  corkUntilIdle(socket) {
    if (this.#corked === socket) return;
    this.#corked = socket;
    socket.cork();
    setImmediate(() => {
      if (this.#corked === socket) {
        this.emitSafely('turnEnd');
        this.#corked = null;
      }
      socket.uncork();
    });
  }

  write(parts) {
    const socket = this.socket;
    let total = 0;
    for (const part of parts) total += part.length;
    if (parts.length === 1) {
      socket.write(parts[0]);
    } else if (total <= COALESCE_LIMIT) {
      socket.write(Buffer.concat(parts, total));
    } else {
      socket.cork();
      for (const part of parts) socket.write(part);
      socket.uncork();
    }
  }

  // --- reading ----------------------------------------------------------------------------

  parse(socket) {
    const input = this.input;
    while (this.socket === socket && !socket.destroyed) {
      if (this.state === GREETING) {
        if (!this.readGreeting(socket)) return;
        continue;
      }
      if (this.frameSize === -1) {
        if (input.length < 1) return;
        this.frameFlags = input.take(1)[0];
        if (this.frameFlags & FLAG_RESERVED) {
          throw new ZmtpError(`invalid frame flags 0x${this.frameFlags.toString(16)} from ${this.endpoint} (reserved bits set)`);
        }
        if ((this.frameFlags & FLAG_COMMAND) && (this.frameFlags & FLAG_MORE)) {
          throw new ZmtpError(`command frame with the MORE flag from ${this.endpoint}`);
        }
        this.frameSize = -2;
      }
      if (this.frameSize === -2) {
        const long = (this.frameFlags & FLAG_LONG) !== 0;
        if (input.length < (long ? 8 : 1)) return;
        const size = long ? input.take(8).readBigUInt64BE(0) : BigInt(input.take(1)[0]);
        if (size + BigInt(this.partialBytes) > BigInt(this.maxMessageBytes)) {
          throw new ZmtpError(`message from ${this.endpoint} exceeds ${this.maxMessageBytes} bytes (frame of ${size} bytes)`, 'EMSGSIZE');
        }
        this.frameSize = Number(size);
      }
      if (input.length < this.frameSize) return;
      const body = input.take(this.frameSize);
      const flags = this.frameFlags;
      this.frameSize = -1;
      if (this.curve?.phase === 'open') this.onCurveMessage(socket, body);
      else if (flags & FLAG_COMMAND) this.onCommand(socket, body);
      else this.onDataFrame(body, (flags & FLAG_MORE) !== 0);
    }
  }

  /** Validates the greeting as soon as its bytes arrive, so garbage is reported without waiting for 64 bytes. */
  readGreeting(socket) {
    const input = this.input;
    if (input.length >= 1 && input.byteAt(0) !== 0xff) {
      throw new ZmtpError(`invalid greeting from ${this.endpoint}: not a ZMTP signature (first byte 0x${input.byteAt(0).toString(16)})`);
    }
    if (input.length >= 10 && (input.byteAt(9) & 0x01) !== 1) {
      throw new ZmtpError(`invalid greeting from ${this.endpoint}: ZMTP 1.0 signature, version 3 required`);
    }
    if (input.length >= 11 && input.byteAt(10) < 3) {
      throw new ZmtpError(`unsupported ZMTP version ${input.byteAt(10)} from ${this.endpoint} (3.x required)`);
    }
    if (input.length < GREETING_SIZE) return false;
    const greeting = input.take(GREETING_SIZE);
    const mechanism = greeting.subarray(12, 32).toString('latin1').replace(/\0+$/, '');
    if (mechanism !== this.mechanism) {
      throw new ZmtpError(this.#curveKeys
        ? `${this.endpoint} offers the ${JSON.stringify(mechanism)} security mechanism, not CURVE: refusing to talk without it`
        : `${this.endpoint} requires the ${JSON.stringify(mechanism)} security mechanism (CURVE needs the curve option); we speak NULL`,
      this.#curveKeys ? 'EAUTH' : 'EPROTO');
    }
    // The as-server byte is not checked: libzmq sends 0 even from a CURVE server. The handshake itself
    // proves the server role (only the holder of curve.serverKey's secret key can answer HELLO).
    this.peerVersion = `${greeting[10]}.${greeting[11]}`;
    this.state = HANDSHAKE;
    if (this.#curveKeys) {
      this.curve = new CurveClient(this.#curveKeys, this.endpoint);
      this.write(this.curve.hello());
    } else {
      this.write(readyCommand(this.socketType, this.routingId));
    }
    return true;
  }

  onCommand(socket, body) {
    const nameLength = body.length > 0 ? body[0] : 0;
    if (nameLength === 0 || body.length < 1 + nameLength) {
      throw new ZmtpError(`malformed command frame from ${this.endpoint}`);
    }
    const name = body.subarray(1, 1 + nameLength).toString('latin1');
    const data = body.subarray(1 + nameLength);
    if (this.state === HANDSHAKE) {
      if (name === 'ERROR') return this.onErrorCommand(data);
      if (this.curve && name === 'WELCOME') {
        this.curve.welcome(data);
        this.write(this.curve.initiate(metadata(this.socketType, this.routingId, false)));
        return undefined;
      }
      if (name === 'READY') return this.onReady(this.curve ? this.curve.ready(data) : data);
      throw new ZmtpError(`expected ${this.curve?.phase === 'welcome' ? 'WELCOME' : 'READY'} from ${this.endpoint}, got command ${JSON.stringify(name)}`);
    }
    switch (name) {
      case 'PING': {
        if (data.length < 2 || data.length > 2 + 16) throw new ZmtpError(`malformed PING from ${this.endpoint}`);
        // The context (up to 16 bytes after the 2-byte TTL) is echoed back.
        this.writeCommand('PONG', data.subarray(2));
        this.pingsAnswered += 1;
        return;
      }
      case 'PONG':
        return; // any traffic is a sign of life; we send no ZMTP pings ourselves
      case 'ERROR':
        return this.onErrorCommand(data);
      case 'READY':
        throw new ZmtpError(`second READY from ${this.endpoint}`);
      default:
        debug('ignoring command %s from %s', name, this.endpoint);
    }
  }

  onReady(data) {
    const properties = new Map();
    let at = 0;
    while (at < data.length) {
      const nameLength = data[at];
      if (nameLength === 0 || at + 1 + nameLength + 4 > data.length) {
        throw new ZmtpError(`malformed READY metadata from ${this.endpoint}`);
      }
      const name = data.subarray(at + 1, at + 1 + nameLength).toString('latin1').toLowerCase();
      at += 1 + nameLength;
      const valueLength = data.readUInt32BE(at);
      at += 4;
      if (at + valueLength > data.length) throw new ZmtpError(`malformed READY metadata from ${this.endpoint}`);
      properties.set(name, data.subarray(at, at + valueLength));
      at += valueLength;
    }
    const socketType = properties.get('socket-type')?.toString('latin1');
    if (socketType !== undefined && !LEGAL_PEERS[this.socketType].has(socketType)) {
      throw new ZmtpError(`a ${this.socketType} cannot talk to a ${socketType} socket at ${this.endpoint}`);
    }
    clearTimeout(this.handshakeTimer);
    this.state = READY;
    this.failures = 0;
    // Listeners may send here (e.g. a hello) ahead of the queue; the queue follows in order.
    this.emitSafely('connect', { socketType, identity: properties.get('identity'), version: this.peerVersion, mechanism: this.mechanism });
    if (this.state !== READY) return;
    const queued = this.pending;
    this.dropPending();
    for (const frames of queued) this.writeMessage(frames);
    if (queued.length > 0) this.emitSafely('drain');
  }

  onErrorCommand(data) {
    const reasonLength = data.length > 0 ? data[0] : 0;
    const reason = data.subarray(1, 1 + reasonLength).toString('latin1');
    const error = new ZmtpError(`${this.endpoint} refused the connection: ERROR ${JSON.stringify(reason)}`, 'EREFUSED');
    error.reason = reason;
    throw error;
  }

  /** A frame after a CURVE handshake: a MESSAGE box holding one frame or one command. */
  onCurveMessage(socket, body) {
    const { flags, payload } = this.curve.open(body);
    if (flags & MESSAGE_COMMAND) this.onCommand(socket, payload);
    else this.onDataFrame(payload, (flags & MESSAGE_MORE) !== 0);
  }

  onDataFrame(body, more) {
    if (this.state !== READY) throw new ZmtpError(`message frame before the handshake from ${this.endpoint}`);
    this.partial.push(body);
    this.partialBytes += body.length;
    if (more) return;
    const message = this.partial;
    this.partial = [];
    this.partialBytes = 0;
    this.emitSafely('message', message);
  }

  // A listener's exception must not be mistaken for a protocol error (which would drop the
  // connection): it is rethrown on its own, as an uncaught exception like any listener bug.
  emitSafely(event, ...args) {
    try {
      this.emit(event, ...args);
    } catch (error) {
      process.nextTick(() => { throw error; });
    }
  }
}
