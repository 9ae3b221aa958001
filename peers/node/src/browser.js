// The browser peer (SPEC 2.2, 3.2; since 1.7): the session of src/core.js over a WebSocket, signing with the
// synchronous HMAC-SHA256 of src/sha256.js (WebCrypto's promises cost a page more than the hashing: issue 24). The
// same API as the Node peer:
//
//   import { connect } from '/_zerobridge/browser.js';
//   const peer = await connect();                       // a page the host serves: globalThis.__zerobridge says where
//   const sum = await peer.call('add', { a: 1, b: 2 });
//
// Nothing here (or in what it imports) uses node:* or Buffer: a page loads it as it is, with no build step.

import { PeerCore } from './core.js';
import { PeerChannel, parseKey } from './channel.js';
import { BridgeError } from './errors.js';
import { isName, isObject } from './wire.js';
import { randomBytes, toHex, utf8Bytes } from './bytes.js';
import { hmacSha256, macsEqual, prepareHmacKey, sha256 } from './sha256.js';
import {
  BATCH_BYTES, BATCH_SUBPROTOCOL, MAX_BATCH_MESSAGES, SUBPROTOCOL, batchEntryLength, decodeWebSocketBatch, decodeWebSocketMessage,
  encodeWebSocketBatch, encodeWebSocketMessage,
} from './websocket-frames.js';

export { BridgeError } from './errors.js';
export { version } from './version.js';
export { withTrace, currentTrace } from './trace.js';
export { BATCH_SUBPROTOCOL, SUBPROTOCOL } from './websocket-frames.js';

// What a connection offers, the batches first (SPEC 2.2): a 1.8 host selects zerobridge.1.
const OFFERED = [BATCH_SUBPROTOCOL, SUBPROTOCOL];
// What may wait to be written before calls wait for room (SPEC 7.13): the socket's bufferedAmount, the queue before
// the connection is up, and the batch being collected.
const SEND_BUFFER_BYTES = 1024 * 1024;
// How often a full socket is looked at again: a WebSocket has no drain event.
const DRAIN_POLL_MS = 5;
// How long close() lets what is written reach the host before closing the socket.
const CLOSE_LINGER_MS = 1000;
// Earlier sockets a redial keeps open until the host welcomes the peer again (at most this many; the oldest is closed).
const MAX_SUPERSEDED = 4;

function defaultLog(level, message) {
  if (level === 'warn') console.warn(`zerobridge: ${message}`);
  else console.debug(`zerobridge: ${message}`);
}

// --- signing --------------------------------------------------------------------------------------------------------

/**
 * HMAC-SHA256 for src/channel.js, synchronous (src/sha256.js): the channel's key is the connection key prepared once
 * (pageChannel()), each MAC written into one reused array, and a received MAC compared in constant time.
 */
const PAGE_MAC = new Uint8Array(32);
const PAGE_HMAC = {
  mac: (preparedKey, parts) => hmacSha256(preparedKey, parts, PAGE_MAC),
  equal: macsEqual,
};

/** The peer's channel for one connection under `connectionKey` (bytes), as the browser peer signs it. */
export const pageChannel = (connectionKey, nonce) => new PeerChannel(prepareHmacKey(connectionKey), PAGE_HMAC, nonce);

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text` (a catalogue's hash, SPEC 7.8). */
export const sha256Hex = (text) => toHex(sha256(utf8Bytes(text)));

// --- the transport --------------------------------------------------------------------------------------------------

/** A transport error with the codes the session knows from the ZMTP DEALER. */
class TransportError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'TransportError';
    this.code = code;
  }
}

/**
 * A WebSocket to a host's `/zerobridge` with the interface the session expects of a transport (src/zmtp.js ZmtpDealer's):
 * `connect()`, `send(frames)`, `reconnect(delay)`, `close(lingerMs)`, `connected`, `queuedBytes`, `sendBufferBytes`,
 * `sendQueueLimit`, and the events connect, disconnect, message, drain, error, unreachable. It redials by itself
 * after a loss, with backoff. Messages go out in the order they were sent, each already signed. Under
 * zerobridge.1.batch (SPEC 3.2, since 1.9) the messages sent in one task go out together in one WebSocket message at
 * its end (a microtask): never later, and never on a timer.
 */
export class WebSocketTransport {
  #listeners = new Map();
  #socket = null;
  #closed = false;
  #everOpened = false;
  #attempts = 0; // dials since the last open, for the backoff
  #redial = null;
  #pending = []; // sent before the connection was up (unkeyed: a keyed session keeps its own, unsigned)
  #pendingBytes = 0;
  // Under batches: the messages ready to go out in the next batch, their bytes in it, and what they weigh.
  #batch = [];
  #batchBytes = 0;
  #batchWeight = 0;
  // Whether the microtask that ends the current task is queued: the messages sent in one task go out together.
  #taskEnding = false;
  #subprotocol = null;
  #drainPoll = null;
  #whenClosed = null;
  // Sockets a redial replaced, still open: their close frame would end the session we mean to resume (SPEC 2.2).
  #superseded = [];

  constructor(endpoint, { sendQueueLimit = 1000, reconnectIvl = 100, reconnectIvlMax = 5000, log = defaultLog } = {}) {
    if (typeof globalThis.WebSocket !== 'function') throw new TypeError('this platform has no WebSocket (a browser has one; Node 20 does not)');
    this.endpoint = endpoint;
    this.sendQueueLimit = sendQueueLimit;
    this.sendBufferBytes = SEND_BUFFER_BYTES;
    this.reconnectIvl = reconnectIvl;
    this.reconnectIvlMax = reconnectIvlMax;
    this.log = log;
    this.connected = false;
    // What the session asks of a ZMTP transport: a WebSocket has no CURVE (SPEC 2.2).
    this.mechanism = 'NULL';
    this.curvePublicKey = null;
    this.curveServerKey = null;
  }

  on(event, listener) {
    if (!this.#listeners.has(event)) this.#listeners.set(event, []);
    this.#listeners.get(event).push(listener);
    return this;
  }

  #emit(event, ...args) {
    for (const listener of this.#listeners.get(event) ?? []) {
      try {
        listener(...args);
      } catch (error) {
        this.log('warn', `a ${event} listener threw: ${error?.message ?? error}`);
      }
    }
  }

  /** The subprotocol the host selected for the current connection (SUBPROTOCOL or BATCH_SUBPROTOCOL), or null. */
  get subprotocol() {
    return this.#subprotocol;
  }

  get queuedBytes() {
    return (this.#socket?.bufferedAmount ?? 0) + this.#pendingBytes + this.#batchWeight;
  }

  connect() {
    if (this.#socket === null && this.#redial === null && !this.#closed) this.#dial();
    return this;
  }

  #dial() {
    this.#redial = null;
    this.#attempts += 1;
    let socket;
    try {
      socket = new WebSocket(this.endpoint, OFFERED);
    } catch (error) { // a malformed URL: nothing will ever connect
      this.#emit('unreachable', Object.assign(new Error(`cannot open a WebSocket to ${this.endpoint}: ${error.message}`), { code: 'EINVAL' }));
      return;
    }
    socket.binaryType = 'arraybuffer';
    this.#socket = socket;
    socket.onopen = () => this.#opened(socket);
    socket.onmessage = (event) => this.#received(socket, event.data);
    socket.onclose = (event) => this.#ended(socket, event);
  }

  #opened(socket) {
    if (socket !== this.#socket) return;
    if (!OFFERED.includes(socket.protocol)) {
      socket.close(1002, 'subprotocol');
      this.#emit('error', new TransportError(`the server at ${this.endpoint} did not select the subprotocol ${SUBPROTOCOL}: not a ZeroBridge host`, 'EPROTO'));
      return;
    }
    this.#subprotocol = socket.protocol;
    this.connected = true;
    this.#everOpened = true;
    this.#attempts = 0;
    this.#emit('connect'); // the session's hello goes first; what waited follows
    const pending = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    for (const frames of pending) this.#write(frames);
    if (pending.length > 0) this.#emit('drain');
  }

  #received(socket, data) {
    if (socket !== this.#socket) return;
    if (typeof data === 'string') {
      this.log('warn', `the host sent a text WebSocket message: a protocol message is binary (SPEC 3.2); answered as a message without frames`);
      this.#emit('message', []);
      return;
    }
    if (this.#subprotocol !== BATCH_SUBPROTOCOL) {
      let frames;
      try {
        frames = decodeWebSocketMessage(data);
      } catch (error) {
        frames = this.#notFrames(error);
      }
      this.#emit('message', frames);
      return;
    }
    let messages;
    try {
      messages = decodeWebSocketBatch(data);
    } catch (error) { // refused whole: answered bad_message once (SPEC 3.2, Batches)
      this.log('warn', `the host sent a batch refused whole (${error.message}); none of it is read, answered as one message without frames`);
      this.#emit('message', []);
      return;
    }
    for (const message of messages) {
      if (socket !== this.#socket) return; // a listener replaced the connection: the rest of this one's batch goes with it
      this.#emit('message', message instanceof BridgeError ? this.#notFrames(message) : message);
    }
  }

  /** No frames, for a payload the decoder refused: the session answers it bad_message (SPEC 3.2). */
  #notFrames(error) {
    this.log('warn', `the host sent a WebSocket message that is not frames (${error.message}); answered as a message without frames`);
    return [];
  }

  #ended(socket, event) {
    if (socket !== this.#socket) return;
    this.#socket = null;
    this.#dropUnwritten();
    const wasConnected = this.connected;
    this.connected = false;
    this.#subprotocol = null;
    if (this.#closed) {
      this.#whenClosed?.();
      return;
    }
    if (wasConnected) this.#emit('disconnect');
    else if (!this.#everOpened && this.#attempts === 1) {
      // A browser tells a refused upgrade (wrong Origin, 403) from no server at all only in its console: say both.
      this.#emit('unreachable', Object.assign(new Error(`no WebSocket upgrade at ${this.endpoint} (close code ${event.code}): no host listens `
        + 'there, or it refused this page (its Origin not allowed)'), { code: 'ECONNREFUSED' }));
    }
    const delay = this.#attempts <= 1 ? this.reconnectIvl : Math.min(this.reconnectIvl * 2 ** (this.#attempts - 1), this.reconnectIvlMax);
    this.#redial = setTimeout(() => this.#dial(), delay);
  }

  send(frames) {
    if (this.#closed) throw new TransportError('the socket is closed', 'ECLOSED');
    if (!Array.isArray(frames) || frames.length === 0) throw new TypeError('a message is a non-empty array of frames');
    if (this.connected) {
      this.#write(frames);
      return;
    }
    if (this.#pending.length >= this.sendQueueLimit) {
      throw new TransportError(`not connected to ${this.endpoint} and ${this.#pending.length} messages are already queued`, 'EAGAIN');
    }
    this.#pending.push(frames);
    this.#pendingBytes += weight(frames);
  }

  #write(frames) {
    if (this.#subprotocol !== BATCH_SUBPROTOCOL) this.#socket.send(encodeWebSocketMessage(frames));
    else {
      if (!this.#taskEnding) { // this task's first message: the batch goes out at the microtask that ends the task
        this.#taskEnding = true;
        queueMicrotask(() => {
          this.#taskEnding = false;
          this.#sendBatch();
        });
      }
      this.#collect(frames);
    }
    this.#watchRoom();
  }

  /** Adds a ready message to the batch, sending the batch first if the message would take it past its bounds. */
  #collect(frames) {
    const bytes = batchEntryLength(frames);
    if (this.#batch.length === MAX_BATCH_MESSAGES || (this.#batch.length > 0 && this.#batchBytes + bytes > BATCH_BYTES)) this.#sendBatch();
    this.#batch.push(frames);
    this.#batchBytes += bytes;
    this.#batchWeight += weight(frames);
  }

  /** Sends the collected messages as one batch (SPEC 3.2), if there are any. */
  #sendBatch() {
    if (this.#batch.length === 0) return;
    const messages = this.#batch;
    this.#batch = [];
    this.#batchBytes = 0;
    this.#batchWeight = 0;
    this.#socket?.send(encodeWebSocketBatch(messages)); // none once close() gave up on it: its messages go with it
  }

  /** Forgets what this connection has not written yet: its connection is gone. */
  #dropUnwritten() {
    this.#batch = [];
    this.#batchBytes = 0;
    this.#batchWeight = 0;
  }

  /** After a write that filled the buffer: polls until there is room again, then emits drain (SPEC 7.13). */
  #watchRoom() {
    if (this.#drainPoll !== null || this.queuedBytes < this.sendBufferBytes) return;
    this.#drainPoll = setInterval(() => {
      if (this.queuedBytes >= this.sendBufferBytes && this.#socket !== null) return;
      clearInterval(this.#drainPoll);
      this.#drainPoll = null;
      this.#emit('drain');
    }, DRAIN_POLL_MS);
  }

  /** Drops this connection with everything not yet written and dials a fresh one after `delayMs` (no disconnect event). */
  reconnect(delayMs = 0) {
    if (this.#closed) return;
    const socket = this.#socket;
    this.#socket = null;
    this.connected = false;
    this.#subprotocol = null;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#dropUnwritten();
    // Not closed yet: a close frame is a leaving to the host, which would end the session before the new connection
    // resumes it (SPEC 2.2, decision 50). It is closed once the host has welcomed us again (welcomed()).
    if (socket) {
      this.#superseded.push(socket);
      if (this.#superseded.length > MAX_SUPERSEDED) this.#superseded.shift().close(1000, 'reconnected');
    }
    clearTimeout(this.#redial);
    this.#redial = setTimeout(() => this.#dial(), delayMs);
  }

  /** The host welcomed the peer on the current connection: the sockets a redial replaced can close now. */
  welcomed() {
    for (const socket of this.#superseded.splice(0)) socket.close(1000, 'reconnected');
  }

  /** Closes the connection once what was written has gone out, or after `lingerMs`; resolves when it is closed. */
  async close(lingerMs = CLOSE_LINGER_MS) {
    if (this.#closed && this.#socket === null) return;
    this.#closed = true;
    clearTimeout(this.#redial);
    clearInterval(this.#drainPoll);
    this.#pending = [];
    this.welcomed();
    const socket = this.#socket;
    if (socket === null) return;
    const deadline = Date.now() + lingerMs;
    this.#sendBatch(); // a bye sent just before is in it
    // The socket's own buffer: out before the close frame, within the linger.
    while (socket.bufferedAmount > 0 && Date.now() < deadline) await new Promise((resolve) => { setTimeout(resolve, DRAIN_POLL_MS); });
    await new Promise((resolve) => {
      this.#whenClosed = resolve;
      socket.close(1000, 'bye');
      setTimeout(resolve, Math.max(0, deadline - Date.now()) + 100); // a host that never completes the close handshake
    });
    this.#socket = null;
    this.#dropUnwritten();
    this.connected = false;
  }
}

/** Bytes of frames 1..n, what a queue weighs (SPEC 7.13). */
function weight(frames) {
  let total = 0;
  for (let i = 1; i < frames.length; i += 1) total += frames[i].length;
  return total;
}

// --- the peer -------------------------------------------------------------------------------------------------------

/** What the host that served this page injected (SPEC decision 47): `{endpoint, key, info}`, or null. */
export function injectedConfiguration() {
  const injected = globalThis.__zerobridge;
  return isObject(injected) && typeof injected.endpoint === 'string' ? injected : null;
}

/**
 * A ZeroBridge peer in a browser: a WebSocket to a host's `/zerobridge`. The API is the Node peer's (index.d.ts);
 * what differs: the endpoint is `ws://HOST:PORT/zerobridge` (or, without one, the page's injected configuration),
 * `key` is the connection key in hex (the injected one by default), `name` defaults to `page-` and 8 random hex
 * digits, there are no connection files and no CURVE, and `evaluate: true` runs `$evaluate` scripts in the page.
 */
export class Peer extends PeerCore {
  constructor(endpoint, options) {
    if (isObject(endpoint) && options === undefined) [endpoint, options] = [undefined, endpoint];
    options ??= {};
    const injected = injectedConfiguration();
    if (endpoint === undefined) {
      if (injected === null) {
        throw new TypeError('connect() was not told where the host is, and this page has no globalThis.__zerobridge (a page the host '
          + 'serves has it): give the host\'s ws://HOST:PORT/zerobridge endpoint');
      }
      endpoint = injected.endpoint;
    }
    if (typeof endpoint !== 'string' || !/^wss?:\/\/[^/]+\//.test(endpoint)) {
      throw new TypeError('the browser peer connects to a WebSocket endpoint such as ws://127.0.0.1:8080/zerobridge');
    }
    if (options.curve !== undefined) throw new TypeError('options.curve is for ZeroMQ: a WebSocket connection has no CURVE (SPEC 2.2); it is keyed');
    let key = options.key ?? (injected?.endpoint === endpoint ? injected.key : null) ?? '';
    if (typeof key !== 'string') throw new TypeError('options.key must be the connection key as hex');
    const name = options.name ?? `page-${toHex(randomBytes(4))}`;
    if (!isName(name)) throw new TypeError('options.name (the peer name sent in hello) must be a string of 1..128 characters');
    const where = { endpoint, key: key === '' ? null : parseKey(key), name, launched: false };
    super(where, options, {
      transport: (peer) => new WebSocketTransport(endpoint, {
        sendQueueLimit: options.sendQueueLimit,
        reconnectIvl: options.reconnectIvl,
        reconnectIvlMax: options.reconnectIvlMax,
        log: (level, message) => peer.log(level, message),
      }),
      channel: (connectionKey) => pageChannel(connectionKey),
      sha256Hex,
      log: defaultLog,
      batches: true,
      turnEnd: queueMicrotask,
    });
  }
}

/**
 * Creates a browser peer, connects it, says hello and resolves once the host has welcomed it. Without an endpoint
 * (`connect()`, `connect(options)`): the configuration the host injected into the page it served.
 */
export async function connect(endpoint, options) {
  return new Peer(endpoint, options).connect();
}
