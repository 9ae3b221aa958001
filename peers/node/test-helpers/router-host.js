// A scripted host in this very process, on src/zmtp-router.js: FakeHost's moves, plus what a host in a
// child process cannot do on cue: stop reading (so that what the peer sends piles up in its own queue),
// write several messages in one turn (so that the peer reads them together), and tell connections apart. Given a
// key, it plays a keyed host (SPEC 3.1): it checks each message on arrival (in order, as counters need) and records
// why it would refuse it in `refusal` (null: accepted), and signs what it sends; tests forge with sendFrames(). It
// reads batches (SPEC 3.3) as a host does, each of their messages recorded as if it had come alone (`batch` set), and
// sends them with sendBatch().

import { ZmtpRouter } from '../src/zmtp-router.js';
import { FakeHost } from './fake-host.js';
import { within, transports } from './processes.js';
import { Peer } from '../index.js';
import { KeyedHost } from './keyed-host.js';
import { isBatchSignature, parseKey } from '../src/signing.js';
import { UNKEYED_BATCH, decodeZeroMQBatch, encodeWebSocketBatch, isUnkeyedBatch } from '../src/websocket-frames.js';

const bodyOf = (frame) => {
  try {
    return JSON.parse(Buffer.from(frame).toString('utf8'));
  } catch {
    return null; // not JSON: only a predicate that looks at the raw frames can match it
  }
};

export class RouterHost extends FakeHost {
  static async start(bindEndpoint, { key } = {}) {
    const router = new ZmtpRouter();
    await router.bind(bindEndpoint);
    return new RouterHost(router, key);
  }

  constructor(router, key) {
    super(router);
    this.keyed = key ? new KeyedHost(parseKey(key)) : null;
    this.messages = []; // everything received and not taken by next(), in arrival order
    this.batches = []; // the batches accepted: { messages, bytes } each, in arrival order
    this.connected = []; // routing ids (hex) in the order their connections completed the handshake
    this.disconnected = new Set(); // routing ids (hex) whose connections closed
    this.wakers = new Set();
    router.on('message', (routingId, frames) => {
      const refusal = this.keyed ? this.keyed.receive(routingId.toString('hex'), frames[0], frames.slice(1)) : null;
      if (refusal === null && (this.keyed ? isBatchSignature(frames[0]) : isUnkeyedBatch(frames[0]))) {
        const messages = decodeZeroMQBatch(frames[1]); // the peer's batches are well formed: a test fails on one that is not
        this.batches.push({ messages: messages.length, bytes: frames[1].length });
        for (const message of messages) {
          this.messages.push({ routingId, signature: frames[0], body: bodyOf(message[1]), frames: message, refusal, batch: true });
        }
      } else {
        this.messages.push({ routingId, signature: frames[0], body: bodyOf(frames[1]), frames, refusal });
      }
      this.wake();
    });
    router.on('connect', (routingId) => {
      this.connected.push(routingId.toString('hex'));
      this.wake();
    });
    router.on('disconnect', (routingId) => {
      this.disconnected.add(routingId.toString('hex'));
      this.wake();
    });
  }

  // Once per turn, not per message: a flood of messages must not make every waiter rescan for each one.
  wake() {
    if (this.waking) return;
    this.waking = true;
    setImmediate(() => {
      this.waking = false;
      for (const waker of [...this.wakers]) waker();
    });
  }

  /** Resolves with `condition()`'s first truthy value, checked on every arrival (and every 20 ms); rejects after `ms`. */
  waitFor(condition, ms = 30_000, what = 'a condition') {
    let waker;
    let timer;
    return within(new Promise((resolve) => {
      waker = () => {
        const value = condition();
        if (value) resolve(value);
      };
      this.wakers.add(waker);
      timer = setInterval(waker, 20);
      waker();
    }), ms, what).finally(() => {
      this.wakers.delete(waker);
      clearInterval(timer);
    });
  }

  async next(predicate = () => true, ms = 10_000, what = 'a matching message') {
    const message = await this.waitFor(() => {
      const index = this.messages.findIndex((m) => predicate(m.body, m));
      return index < 0 ? null : this.messages.splice(index, 1)[0];
    }, ms, what);
    this.routingId = message.routingId;
    return message;
  }

  send(body, options) {
    this.router.send(options?.routingId ?? this.routingId, this.framesOf(body, options));
  }

  /** The frames send() would send (signed, with a key: each call takes the next counter), to send later or twice. */
  framesOf(body, { routingId = this.routingId, attachments = [] } = {}) {
    const bytes = typeof body === 'string' || Buffer.isBuffer(body) ? Buffer.from(body) : Buffer.from(JSON.stringify(body));
    const frames = [bytes, ...attachments];
    return [this.keyed ? this.keyed.sign(Buffer.from(routingId).toString('hex'), frames) : Buffer.alloc(0), ...frames];
  }

  sendFrames(frames, routingId = this.routingId) {
    this.router.send(routingId, frames);
  }

  /**
   * Sends a batch (SPEC 3.3), signed for the connection's channel when keyed (frame 0 `b` without a key): `bodies`
   * (objects) as its messages, or a frame 1 given as bytes (a malformed one, for tests of what the peer refuses).
   */
  sendBatch(bodies, routingId = this.routingId) {
    const batch = bodies instanceof Uint8Array
      ? bodies
      : encodeWebSocketBatch(bodies.map((body) => [Buffer.alloc(0), Buffer.from(JSON.stringify(body))]));
    this.router.send(routingId, [this.keyed ? this.keyed.sign(Buffer.from(routingId).toString('hex'), [batch], { batch: true }) : UNKEYED_BATCH, batch]);
  }

  /** Sends the bodies in this one turn: the peer reads them together. */
  sendTogether(bodies, routingId = this.routingId) {
    for (const body of bodies) this.send(body, { routingId });
  }

  socketOf(routingId = this.routingId) {
    const connection = this.router.connections.get(Buffer.from(routingId).toString('hex'));
    if (!connection?.socket) throw new Error('no such connection');
    return connection.socket;
  }

  /** Stops reading from the peer's connection: what it sends stays in the kernel, then in its own queue. */
  stopReading(routingId) {
    this.socketOf(routingId).pause();
  }

  resumeReading(routingId) {
    this.socketOf(routingId).resume();
  }

  stop() {
    return this.router.close();
  }
}

/**
 * A peer named `name` connected to a RouterHost of this test (ipc), welcomed with `welcome`'s fields; both are
 * stopped after the test. `before(peer)` runs before connecting; `logs` collects what the peer logs.
 */
export async function welcomedPeer(t, name, { peer: peerOptions = {}, welcome = {}, before } = {}) {
  const host = await RouterHost.start(transports.ipc());
  t.after(() => host.stop());
  const logs = [];
  const peer = new Peer(host.endpoint, { name, log: (level, message) => logs.push(`${level}: ${message}`), ...peerOptions });
  before?.(peer);
  t.after(() => peer.close());
  const connected = peer.connect();
  const hello = await host.welcome(welcome);
  await within(connected, 10_000, 'connect() to resolve');
  return { host, peer, hello, logs };
}
