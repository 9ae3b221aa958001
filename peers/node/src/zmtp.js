// ZMTP 3.1 (RFC 37, compatible with 3.0 / RFC 23) DEALER client over node:net, NULL mechanism only.
// It speaks just enough ZeroMQ to talk to a libzmq ROUTER: greeting, READY, frames, PING/PONG,
// and reconnects with backoff like a libzmq socket does.

import net from 'node:net';
import { EventEmitter } from 'node:events';
import { debuglog } from 'node:util';

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

function ourGreeting() {
  const greeting = Buffer.alloc(GREETING_SIZE); // padding and filler are zeros
  greeting[0] = 0xff;
  greeting[9] = 0x7f;
  greeting[10] = 3; // version 3.1
  greeting[11] = 1;
  greeting.write('NULL', 12, 'ascii');
  greeting[32] = 0; // as-server: always 0 with NULL
  return greeting;
}

function commandFrame(name, data) {
  const body = Buffer.concat([Buffer.from([name.length]), Buffer.from(name, 'ascii'), data]);
  return encodeFrames([body], FLAG_COMMAND);
}

function readyCommand(socketType, routingId) {
  const properties = [];
  const add = (name, value) => {
    const header = Buffer.alloc(1 + name.length + 4);
    header[0] = name.length;
    header.write(name, 1, 'ascii');
    header.writeUInt32BE(value.length, 1 + name.length);
    properties.push(header, value);
  };
  add('Socket-Type', Buffer.from(socketType, 'ascii'));
  add('Identity', routingId);
  return commandFrame('READY', Buffer.concat(properties));
}

/** Encodes one message (or one command when `extraFlags` has COMMAND) as a list of buffers to write. */
function encodeFrames(frames, extraFlags = 0) {
  const parts = [];
  const last = frames.length - 1;
  frames.forEach((frame, i) => {
    const flags = extraFlags | (i < last ? FLAG_MORE : 0);
    if (frame.length > 255) {
      const header = Buffer.allocUnsafe(9);
      header[0] = flags | FLAG_LONG;
      header.writeBigUInt64BE(BigInt(frame.length), 1);
      parts.push(header);
    } else {
      parts.push(Buffer.from([flags, frame.length]));
    }
    if (frame.length > 0) parts.push(frame);
  });
  return parts;
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
 * sent may have fallen below `sendBufferBytes`: see `full`), `close` (after close()).
 * Messages sent while not connected are queued (up to `sendQueueLimit`) and sent in order once the
 * handshake is done; messages written to a connection that then breaks are lost, as with libzmq.
 * send() itself never refuses for size: callers that must bound what waits check `full` first.
 */
export class ZmtpDealer extends EventEmitter {
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
    const parts = encodeFrames(frames.map(toBuffer));
    if (this.state === READY) {
      this.write(parts);
      return;
    }
    if (this.pending.length >= this.sendQueueLimit) {
      throw new ZmtpError(`not connected to ${this.endpoint} and ${this.pending.length} messages are already queued`, 'EAGAIN');
    }
    this.pending.push(parts);
    for (const part of parts) this.pendingBytes += part.length;
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
    const { transport } = this.address;
    const socket = transport === 'tcp'
      ? net.connect({ host: this.address.host, port: this.address.port, noDelay: true })
      : net.connect({ path: this.address.path });
    socket.on('connect', () => {
      if (this.socket !== socket || this.state !== CONNECTING) return;
      this.state = GREETING;
      socket.write(ourGreeting());
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
    socket.write(ourGreeting());
  }

  watch(socket) {
    this.socket = socket;
    this.handshakeTimer = setTimeout(() => {
      this.fail(socket, new ZmtpError(`no ZMTP handshake from ${this.endpoint} within ${this.handshakeTimeout} ms`, 'ETIMEDOUT'));
    }, this.handshakeTimeout);
    socket.on('data', (chunk) => {
      if (this.socket !== socket || socket.destroyed) return;
      this.input.push(chunk);
      try {
        this.parse(socket);
      } catch (error) {
        // Our own bug or an exotic failure: never let it escape into the event loop.
        this.fail(socket, error instanceof ZmtpError ? error : new ZmtpError(`internal error: ${error.message}`, 'EINTERNAL'));
      }
    });
    socket.on('error', (error) => {
      // Refused/absent endpoints are routine while the other side is not up yet.
      debug('socket error on %s: %s', this.endpoint, error.message);
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
    socket.destroy();
    if (this.listenerCount('error') > 0) this.emit('error', error);
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
      if (flags & FLAG_COMMAND) this.onCommand(socket, body);
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
    if (mechanism !== 'NULL') {
      throw new ZmtpError(`security mechanism ${JSON.stringify(mechanism)} from ${this.endpoint}; only NULL is supported`);
    }
    this.peerVersion = `${greeting[10]}.${greeting[11]}`;
    this.state = HANDSHAKE;
    this.write(readyCommand(this.socketType, this.routingId));
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
      if (name === 'READY') return this.onReady(data);
      if (name === 'ERROR') return this.onErrorCommand(data);
      throw new ZmtpError(`expected READY from ${this.endpoint}, got command ${JSON.stringify(name)}`);
    }
    switch (name) {
      case 'PING': {
        if (data.length < 2 || data.length > 2 + 16) throw new ZmtpError(`malformed PING from ${this.endpoint}`);
        // The context (up to 16 bytes after the 2-byte TTL) is echoed back.
        this.write(commandFrame('PONG', data.subarray(2)));
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
    this.emitSafely('connect', { socketType, identity: properties.get('identity'), version: this.peerVersion });
    if (this.state !== READY) return;
    const queued = this.pending;
    this.dropPending();
    for (const parts of queued) this.write(parts);
    if (queued.length > 0) this.emitSafely('drain');
  }

  onErrorCommand(data) {
    const reasonLength = data.length > 0 ? data[0] : 0;
    const reason = data.subarray(1, 1 + reasonLength).toString('latin1');
    throw new ZmtpError(`${this.endpoint} refused the connection: ERROR ${JSON.stringify(reason)}`, 'EREFUSED');
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
