// The peer's session, the same for every transport: says hello, keeps the session and the heartbeat, signs on keyed
// connections, and exposes call / stream / post / handle / on over the link. A platform gives it a transport (the
// Node peer a ZMTP DEALER, src/peer.js; the browser peer a WebSocket, src/browser.js), the HMAC of its channels and
// its SHA-256. Nothing here imports node:*: src/browser.js loads it in a page.

import { Link, DEFAULT_MAX_IN_FLIGHT, nextTurn } from './link.js';
import { BridgeError } from './errors.js';
import { bodies, decode, encode, isName, isObject, readableId } from './wire.js';
import { clockSkewDiagnosis, isBatchSignature } from './channel.js';
import {
  BATCH_BYTES, UNKEYED_BATCH, batchEntryLength, decodeZeroMQBatch, encodeWebSocketBatch, isUnkeyedBatch,
} from './websocket-frames.js';
import { buildCatalogue, catalogueProblem, describeAction } from './describe.js';
import { schemaProblem } from './validate.js';
import { startPayload, attachPayload, cancelPayload, listPayload, recordFrom, recordsFrom } from './jobs.js';

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_HEARTBEAT_MS = 5000;
// SPEC 6: a hello refused with name_taken is said again after this long, until a welcome (or the connect timeout).
const NAME_RETRY_MS = 1000;
// Refused messages are warned about at most this often (the rest go to debug): a flood must not flood the log.
const REFUSAL_WARN_MS = 1000;
/** The largest message this peer processes (frames 1..n, SPEC 7.10), as the Swift and Python peers' default. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** How much more a batch may hold (SPEC 3.3). */
const BATCH_SLACK_BYTES = 131072;
// The most messages of a turn that go in one ZeroMQ batch (SPEC 3.3 allows 1,000): the first 16 leave while the turn
// still makes the rest, so the host works on them meanwhile instead of waiting for the whole turn (it sends its own in
// bursts of 16); in a turn that read from the socket they all leave in its one write, still as batches of 16. At 64
// calls in flight this raised the rate by a quarter to a half, keyed and not, for ~1 us more host CPU a call
// (CHANGELOG, issue 26).
const TURN_BATCH_MESSAGES = 16;
const isCatalogueHash = (value) => typeof value === 'string' && /^[0-9a-f]{64}$/.test(value);
// Failures of a `$describe` fetch that say nothing about the host's catalogue: the fetch is tried again at the next welcome.
const TRANSIENT = new Set(['peer_lost', 'timeout', 'cancelled', 'overloaded', 'too_large']);

// Session states.
const NEW = 'new'; // connect() not called yet
const CONNECTING = 'connecting'; // no ZMTP connection
const GREETING = 'greeting'; // connected, hello sent, waiting for welcome
const READY = 'ready'; // welcome received: a session is in force
const LOST = 'lost'; // the host went silent, said bye or the connection broke; a fresh connection is on its way
const CLOSED = 'closed';

/** A broadcast topic as subscribed (SPEC 7.15): 1..128 characters of text that has a UTF-8 form; throws a TypeError. */
function checkTopic(topic) {
  if (!isName(topic) || !topic.isWellFormed()) {
    const shown = typeof topic === 'string' ? JSON.stringify(topic) : String(topic);
    throw new TypeError(`${shown} is not a topic: a topic is a string of 1..128 characters (without unpaired surrogates)`);
  }
}

/** A stream() that failed before anything was sent. */
function failedStream(error, lastSeq = 0) {
  const result = Promise.reject(error);
  result.catch(() => {});
  return { progress: (async function* none() {})(), result, skipped: 0, lastSeq };
}

/**
 * A ZeroBridge peer over a platform's transport (src/peer.js, src/browser.js). See index.d.ts for the documentation
 * of each member.
 */
export class PeerCore extends EventTarget {
  // The session last welcomed into and its resume token, kept to resume it after a loss (SPEC 6). The token is a
  // secret: private, so no inspect, JSON or log of the peer shows it; null when the host gave none (1.1).
  #welcomed = null;
  // Keyed connections (SPEC 3.1): the key, the current connection's channel, and what was sent while no connection
  // was up, kept unsigned since it can only be signed for the channel of the connection that carries it. Private,
  // like the token: the key is a secret.
  #key = null;
  #channel = null;
  #platform;
  #unsent = [];
  #unsentBytes = 0;
  #rejected = 0;
  // Batches under one frame 0, keyed or not (SPEC 3.3; on WebSocket connections since 1.11): whether the current
  // connection's welcome said the host reads them; the messages ready to go out together at the end of this turn
  // (signed then when keyed, in order), their bytes in a batch and what they weigh against the send buffer; the
  // batches read and sent, for diagnostics; and the current connection's number, so that a batch whose message ended
  // the connection reads no further.
  #batching = false;
  #outbox = [];
  #outboxBytes = 0;
  #outboxWeight = 0;
  #outboxQueued = false;
  #batchesRead = 0;
  #batchesSent = 0;
  #connection = 0;
  #lastWarned = 0;
  // The host's first unauthorized answer (its error: message, data), for the connect timeout's error: the first names
  // the cause; the hellos retried on a refused channel are refused for being on it.
  #unauthorized = null;
  // SPEC 2.1: why `$evaluate` was withdrawn (without CURVE, only the first host that welcomed us may evaluate), or null.
  #evaluateWithdrawn = null;
  // SPEC 7.8: this peer's own catalogue, built when first asked for after its handlers changed.
  #catalogue = null;
  // The `validate` option (SPEC 7.14): the host's catalogue payloads are checked against ({hash, byName}, or null),
  // the `$describe` fetch in flight (a promise that never rejects, or null), and the welcome's `catalogue` the last
  // settled fetch answers for (undefined: fetch at the next welcome).
  #checked = null;
  #describing = null;
  #fetchedFor = undefined;
  // What calls made before the first welcome wait for, with validate: the first fetch settling (or close()).
  #firstFetch = null;
  // SPEC 7.15: the broadcast topics this peer subscribes to, sent in every hello (so kept across reconnects).
  #topics = new Set();
  // SPEC 10.1: a peer launched by a host (connected from the environment) ends with its host: once welcomed, its host's
  // bye or loss closes it instead of redialling.
  #launched = false;
  // Resolves (never rejects) with why the peer closed, whatever closed it; #closeReason is set as closing starts.
  #closed;
  #resolveClosed;
  #closeReason = null;

  /**
   * `where`: what the platform's peer made of its arguments: `{endpoint, key (bytes or null), name, launched}`.
   * `platform`: `{transport(peer), channel(key), sha256Hex(text), log, batches, turnEnd}`: the transport (ZmtpDealer's
   * interface), a PeerChannel for a connection key (src/channel.js), the SHA-256 of catalogue hashes, the default log,
   * whether connections carry batches under one frame 0 (SPEC 3.3: ZeroMQ, and WebSocket since 1.11), and
   * `turnEnd(run)`, what runs `run` once this turn's messages are made (by default the next turn: setImmediate in Node).
   */
  constructor(where, options, platform) {
    super();
    this.#launched = where.launched;
    this.#platform = platform;
    this.#closed = new Promise((resolve) => { this.#resolveClosed = resolve; });
    const { actions, evaluate = false, heartbeatMs = DEFAULT_HEARTBEAT_MS, timeout = DEFAULT_TIMEOUT_MS, log = platform.log } = options;
    const { maxInFlight = DEFAULT_MAX_IN_FLIGHT, validate = false, connectTimeout = DEFAULT_CONNECT_TIMEOUT_MS, waitForName = false } = options;
    if (connectTimeout !== null && connectTimeout !== Infinity && !(Number.isFinite(connectTimeout) && connectTimeout > 0)) {
      throw new TypeError('options.connectTimeout must be a positive number of milliseconds, null or Infinity');
    }
    if (typeof validate !== 'boolean') throw new TypeError('options.validate must be a boolean');
    if (!Number.isInteger(heartbeatMs) || heartbeatMs < 1) throw new TypeError('options.heartbeatMs must be a positive integer');
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new TypeError('options.maxInFlight must be a positive integer');
    if (timeout !== null && timeout !== Infinity && !(Number.isFinite(timeout) && timeout > 0)) {
      throw new TypeError('options.timeout must be a positive number of milliseconds, null or Infinity');
    }
    this.endpoint = where.endpoint;
    this.#key = where.key;
    this.name = where.name;
    // true runs scripts in this process; a function runs them where it chooses (a sandbox: see the README).
    this.evaluator = typeof evaluate === 'function' ? evaluate : null;
    this.evaluate = evaluate === true || this.evaluator !== null;
    this.requestedHeartbeatMs = heartbeatMs;
    this.heartbeatMs = heartbeatMs;
    this.timeout = timeout;
    this.connectTimeout = connectTimeout;
    this.waitForName = waitForName === true;
    this.log = log;
    this.validate = validate;
    this.handlers = new Map();
    this.descriptions = new Map(); // action -> its description in the catalogue (SPEC 7.8)
    for (const [action, entry] of actions instanceof Map ? actions : Object.entries(actions ?? {})) {
      // A handler, or { handler, doc?, payload?, result?, progress? } to describe it as handle()'s options do.
      if (typeof entry === 'object' && entry !== null) {
        const { handler, ...description } = entry;
        this.addHandler(action, handler, description);
      } else {
        this.addHandler(action, entry);
      }
    }
    if (options.topics !== undefined) {
      if (typeof options.topics?.[Symbol.iterator] !== 'function' || typeof options.topics === 'string') {
        throw new TypeError('options.topics must be an array of topic names');
      }
      for (const topic of options.topics) checkTopic(topic);
      for (const topic of options.topics) this.#topics.add(topic);
    }
    this.listeners = new Map();
    this.state = NEW;
    this.session = null;
    this.host = null;
    this.hostActions = [];
    this.hostCatalogue = null;
    this.hostInfo = null;
    this.hostLibraryVersion = null;
    this.limits = null;
    this.helloScheduled = false;
    this.heartbeatTimer = null;
    this.firstWelcome = null;
    this.nameTaken = false; // the host refuses our name (name_taken) and has not welcomed us since
    this.helloRetry = null;
    this.abandoned = null; // what we gave up at a loss, to tell a host that resumes the session (see the welcome)
    this.lostBecause = null; // why the host was lost, until it welcomes us again (calls fail at once meanwhile)
    this.redials = 0; // fresh connections since the last welcome, for the backoff
    this.reconnectIvl = options.reconnectIvl ?? 100;
    this.reconnectIvlMax = options.reconnectIvlMax ?? 5000;

    this.dealer = platform.transport(this);
    this.link = new Link({
      send: (frames) => this.sendFrames(frames),
      isFull: () => this.dealer.queuedBytes + this.#unsentBytes + this.#outboxWeight >= this.dealer.sendBufferBytes,
      handlers: this.handlers,
      evaluate: () => (this.evaluate ? this.#evaluateWithdrawn : 'this peer does not evaluate scripts (connect with evaluate: true to allow it)'),
      evaluator: this.evaluator,
      maxInFlight,
      onEvent: (action, payload, context) => this.runListeners(action, payload, context),
      onSession: (body) => this.onSessionMessage(body),
      onBadMessage: (problem) => this.onBadMessage(problem),
      maxMessageBytes: () => this.limits?.max_message_bytes ?? Infinity,
      describe: () => this.#ownCatalogue(),
      checkPayload: (action, payload) => this.#checkPayload(action, payload),
      log,
    });
    this.dealer.on('connect', () => this.onConnected());
    this.dealer.on('disconnect', () => this.onDisconnected());
    this.dealer.on('message', (frames) => this.onMessage(frames));
    this.dealer.on('drain', () => this.link.onRoom());
    this.dealer.on('turnEnd', () => this.#sendTurn()); // the turn's last batch in the transport's one write (src/zmtp.js)
    this.dealer.on('error', (error) => this.onTransportError(error));
    this.dealer.on('unreachable', (error) => this.#failFirstConnect(new BridgeError('unreachable', error.code === 'ENOENT'
      ? `no host listens at ${this.endpoint}: the socket file does not exist (is the host running?)`
      : `no host listens at ${this.endpoint}: the connection was refused (is the host running?)`, { cause: error })));
  }

  /**
   * The first connect cannot succeed (the host or the kernel said so): connect() rejects with `error` now instead of
   * after its timeout. Once welcomed, a peer keeps reconnecting as before.
   */
  #failFirstConnect(error) {
    if (this.#welcomed === null && this.session === null && this.firstWelcome && !this.firstWelcome.settled) {
      this.failConnect(error);
    }
  }

  /** Messages from the host not processed for their signature on a keyed connection (SPEC 3.1), since the peer started. */
  get rejectedMessages() {
    return this.#rejected;
  }

  /** Batches (SPEC 3.3) read from the host and sent to it since the peer started: `{read, sent}`. */
  get batches() {
    return { read: this.#batchesRead, sent: this.#batchesSent };
  }

  /** This peer's CURVE public key (Z85), for the host's allow-list; null without CURVE. */
  get curvePublicKey() {
    return this.dealer.curvePublicKey;
  }

  /** True while a session with the host is in force (welcome received, host not lost). */
  get connected() {
    return this.state === READY;
  }

  /** Resolves with why the peer closed, once it has: close(), a failed connect(), or (launched) its host's bye or loss. */
  get closed() {
    return this.#closed;
  }

  /** Connects, says hello and resolves with this peer once the host's welcome arrives. */
  connect() {
    if (this.firstWelcome) return this.firstWelcome.promise;
    if (this.state === CLOSED) return Promise.reject(new BridgeError('cancelled', 'the peer is closed'));
    let resolve;
    let reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    this.firstWelcome = { promise, resolve, reject, settled: false, timer: null };
    if (this.connectTimeout !== null && this.connectTimeout !== Infinity) {
      this.firstWelcome.timer = setTimeout(() => {
        this.failConnect(this.nameTaken
          ? new BridgeError('name_taken', `the name ${JSON.stringify(this.name)} is held by another live session on the host at ${this.endpoint}: `
            + `still refused after ${this.connectTimeout} ms`)
          : new BridgeError('timeout', `no welcome from the host at ${this.endpoint} within ${this.connectTimeout} ms`
            + (this.#unauthorized === null ? '' : `; it answered unauthorized (${this.#unauthorized.message}): `
              + (clockSkewDiagnosis(this.#unauthorized.data) ?? (this.#key === null
                ? 'it requires a key (connect through its connection file)' : 'is the key the host\'s?')))));
      }, this.connectTimeout);
    }
    this.state = CONNECTING;
    this.dealer.connect();
    this.startHeartbeat();
    return promise;
  }

  failConnect(error) {
    const waiter = this.firstWelcome;
    if (!waiter || waiter.settled) return;
    waiter.settled = true;
    clearTimeout(waiter.timer);
    waiter.reject(error);
    this.#close(`connecting failed: ${error.message}`).catch(() => {});
  }

  // --- the public API -----------------------------------------------------------------------

  /** A call's own `timeout` wins, `null` (no timeout) included; only an absent one takes the peer's default. */
  callTimeout(options) {
    return options.timeout === undefined ? this.timeout : options.timeout;
  }

  /** Why nothing can be sent now: closed, or the host lost and not back yet (SPEC 6: fail at once, queue nothing). */
  refusal() {
    if (this.state === CLOSED) return new BridgeError('cancelled', `the peer is closed (${this.#closeReason})`);
    if (this.lostBecause !== null) {
      return new BridgeError('peer_lost', `the host is lost (${this.lostBecause}); nothing is sent until it welcomes this peer again`);
    }
    return null;
  }

  call(action, payload = null, options = {}) {
    const refused = this.refusal();
    if (refused) return Promise.reject(refused);
    const { signal, idempotencyKey } = options;
    return this.link.call(action, payload, { timeout: this.callTimeout(options), signal, idempotencyKey, gate: this.#gate(action) });
  }

  stream(action, payload = null, options = {}) {
    const refused = this.refusal();
    if (refused) return failedStream(refused);
    const { signal, idempotencyKey } = options;
    return this.link.stream(action, payload, { timeout: this.callTimeout(options), signal, idempotencyKey, gate: this.#gate(action) });
  }

  // --- jobs (SPEC 7.16): the reserved $job actions, records in camelCase (src/jobs.js) ---------------------------

  /** `$job.start`: starts a job (or, with `key`, finds the one that key started) and resolves with its record. */
  async startJob(action, payload = null, options = {}) {
    const { key, timeout, signal } = options;
    const result = await this.call('$job.start', startPayload(action, payload, key), { timeout, signal });
    return recordFrom(result, '$job.start');
  }

  /**
   * `$job.attach` with progress: the job's progress after `afterSeq`, then its outcome. Without a timeout of its own
   * an attach waits as long as the job runs (a job may run for hours); aborting `signal` detaches and leaves the job
   * running. A selector or afterSeq the host would refuse fails the stream at once with a TypeError.
   */
  attachJob(selector, options = {}) {
    const { afterSeq = 0, timeout = Infinity, signal } = options;
    let payload;
    try {
      payload = attachPayload(selector, afterSeq);
    } catch (error) {
      return failedStream(error);
    }
    const refused = this.refusal();
    if (refused) return failedStream(refused, afterSeq);
    return this.link.stream('$job.attach', payload, { timeout, signal, startSeq: afterSeq });
  }

  /** `$job.cancel`: cancels a running job (a finished one is left as it is) and resolves with its record. */
  async cancelJob(selector, options = {}) {
    const { timeout, signal } = options;
    return recordFrom(await this.call('$job.cancel', cancelPayload(selector), { timeout, signal }), '$job.cancel');
  }

  /** `$job.list`: the host's jobs that match the filter, newest first, as records. */
  async listJobs(filter = {}, options = {}) {
    const { timeout, signal } = options;
    return recordsFrom(await this.call('$job.list', listPayload(filter), { timeout, signal }));
  }

  /** Fetches the host's catalogue (`$describe`, SPEC 7.8): `{catalogue, actions}`. With `validate`, checks use it from then on. */
  async describe(options = {}) {
    const result = await this.call('$describe', null, options);
    const problem = catalogueProblem(result);
    if (problem !== null) throw new BridgeError('bad_message', `the host's $describe result is not a catalogue: ${problem}`);
    if (this.validate) this.#adoptCatalogue(result);
    return result;
  }

  post(action, payload = null) {
    const refused = this.refusal();
    if (refused) throw refused;
    this.link.post(action, payload);
  }

  handle(action, handler, options) {
    this.addHandler(action, handler, options);
    this.scheduleHello();
    return () => {
      if (this.handlers.get(action) !== handler) return;
      this.handlers.delete(action);
      this.descriptions.delete(action);
      this.#catalogue = null;
      this.scheduleHello();
    };
  }

  addHandler(action, handler, options) {
    if (!isName(action) || action.startsWith('$') || !action.isWellFormed()) {
      throw new TypeError(`cannot handle ${JSON.stringify(action)}: an action is 1..128 characters and must not start with $ (reserved)`);
    }
    if (typeof handler !== 'function') throw new TypeError(`the handler for ${action} must be a function`);
    const description = describeAction(action, options); // throws a TypeError for options that are not a description
    this.handlers.set(action, handler);
    this.descriptions.set(action, description);
    this.#catalogue = null;
  }

  /** SPEC 7.8: this peer's catalogue, `{catalogue: hash, actions}`, the result of `$describe`. */
  #ownCatalogue() {
    this.#catalogue ??= buildCatalogue(this.descriptions.values(), this.#platform.sha256Hex);
    return this.#catalogue;
  }

  /** SPEC 7.15: the topics subscribed to, sorted (UTF-16 code units), as the next hello sends them. */
  get topics() {
    return [...this.#topics].sort();
  }

  /**
   * Subscribes to broadcast topics. A change to the set is announced as a change of handlers is: by a new hello
   * (with the full `topics`), one per turn; before connecting or while the host is lost, by the next hello.
   */
  subscribe(...topics) {
    for (const topic of topics) checkTopic(topic);
    const before = this.#topics.size;
    for (const topic of topics) this.#topics.add(topic);
    if (this.#topics.size !== before) this.scheduleHello();
    return this;
  }

  /** Unsubscribes from broadcast topics; topics not subscribed to are ignored. */
  unsubscribe(...topics) {
    for (const topic of topics) checkTopic(topic);
    let changed = false;
    for (const topic of topics) changed = this.#topics.delete(topic) || changed;
    if (changed) this.scheduleHello();
    return this;
  }

  on(action, listener) {
    if (typeof listener !== 'function') throw new TypeError('listener must be a function');
    if (!this.listeners.has(action)) this.listeners.set(action, new Set());
    this.listeners.get(action).add(listener);
    return this;
  }

  off(action, listener) {
    this.listeners.get(action)?.delete(listener);
    return this;
  }

  close() {
    return this.#close('the program closed the peer');
  }

  /**
   * Closes the peer for `reason` (what `closed` resolves with, once the connection is closed): says bye unless told
   * not to (the host's session is over), and drops what is unsent after `lingerMs` at most.
   */
  async #close(reason, { sayBye = true, lingerMs } = {}) {
    if (this.state === CLOSED) return this.dealer.close();
    const wasConnected = sayBye && this.dealer.connected;
    this.state = CLOSED;
    this.#closeReason = reason;
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.helloRetry);
    if (this.firstWelcome && !this.firstWelcome.settled) {
      this.firstWelcome.settled = true;
      clearTimeout(this.firstWelcome.timer);
      this.firstWelcome.reject(new BridgeError('cancelled', 'the peer was closed before the host welcomed it'));
    }
    this.link.abandonAll(new BridgeError('cancelled', 'the peer was closed'));
    this.#firstFetch?.resolve(); // calls still waiting for a first catalogue go on, to fail as closed
    this.#dropUnsent();
    if (wasConnected) {
      try {
        this.transmit(encode(bodies.bye()));
      } catch (error) {
        this.log('debug', `could not say bye: ${error.message}`);
      }
    }
    this.#sendOutbox(); // what this turn made, the bye last, before the connection closes
    try {
      await this.dealer.close(lingerMs);
    } finally {
      this.#resolveClosed(reason);
      this.dispatchEvent(Object.assign(new Event('close'), { reason }));
    }
  }

  // --- plumbing ------------------------------------------------------------------------------

  sendFrames(frames) {
    // A hello announcing new handlers or topics goes before anything sent after handle() or subscribe() in the same turn.
    if (this.helloScheduled && (this.state === READY || this.state === GREETING)) this.sayHello();
    try {
      this.transmit(frames);
    } catch (error) {
      // The transport's own codes (ZmtpError's, and the WebSocket transport's).
      if (error?.code === 'EAGAIN') throw new BridgeError('overloaded', `cannot send: ${error.message}`);
      if (error?.code === 'ECLOSED') throw new BridgeError('cancelled', 'the peer is closed');
      throw error;
    }
  }

  /**
   * Writes one message. On a keyed connection it is signed for the connection's channel (the first message on it,
   * always the hello onConnected() sends, opens the channel); while no connection is up it waits here unsigned. Once
   * the connection's welcome says the host reads batches, it goes with the rest of this turn's (SPEC 3.3).
   */
  transmit(frames) {
    if (this.#key !== null && (this.#channel === null || !this.dealer.connected)) {
      if (this.state === CLOSED) throw new BridgeError('cancelled', 'the peer is closed');
      if (this.#unsent.length >= this.dealer.sendQueueLimit) {
        throw new BridgeError('overloaded', `cannot send: not connected to ${this.endpoint} and ${this.#unsent.length} messages are already queued`);
      }
      this.#unsent.push(frames);
      for (let i = 1; i < frames.length; i += 1) this.#unsentBytes += frames[i].length;
      return;
    }
    if (this.#batching) this.#collect(frames);
    else this.#sendAlone(frames);
  }

  /** Sends one message alone: signed `m.` when keyed; without a key as it is (frame 0 empty), the dealer queueing it. */
  #sendAlone(frames) {
    if (this.#key === null) {
      this.dealer.send(frames);
      return;
    }
    const rest = frames.slice(1);
    this.dealer.send([this.#channel.sign(rest), ...rest]);
  }

  /**
   * Adds a message to the batch that goes out at the end of this turn (SPEC 3.3: what is ready together, never a
   * timer). A batch is sent before it would pass BATCH_BYTES or TURN_BATCH_MESSAGES; a message too large for one goes
   * alone, after what was collected before it.
   */
  #collect(frames) {
    const bytes = batchEntryLength(frames);
    if (bytes > BATCH_BYTES) {
      this.#sendOutbox();
      this.#sendAlone(frames);
      return;
    }
    if (this.#outbox.length === TURN_BATCH_MESSAGES || this.#outboxBytes + bytes > BATCH_BYTES) this.#sendOutbox();
    this.#outbox.push(frames);
    this.#outboxBytes += bytes;
    for (let i = 1; i < frames.length; i += 1) this.#outboxWeight += frames[i].length;
    if (this.#outboxQueued) return;
    this.#outboxQueued = true;
    // In Node the next check phase: after the handlers and answers this turn started (they run at setImmediate
    // themselves), unless the transport's turnEnd comes first. In a page the microtask that ends this task, as its
    // WebSocket batch does: a page's calls of one task go together, and a next task could come much later.
    (this.#platform.turnEnd ?? nextTurn)(() => this.#sendTurn());
  }

  /** Sends what this turn collected, once: at the turn's end, or at the transport's turnEnd if that comes first. */
  #sendTurn() {
    if (!this.#outboxQueued) return;
    this.#outboxQueued = false;
    try {
      this.#sendOutbox();
    } catch (error) { // the transport closed under it: what it held goes as a write to a closed connection does
      this.log('warn', `could not send the messages of this turn: ${error?.message ?? error}`);
    }
  }

  /** Sends what was collected: one message alone; more as one batch, under one `b.` signature when keyed, else behind `b`. */
  #sendOutbox() {
    const messages = this.#outbox;
    if (messages.length === 0) return;
    this.#dropOutbox();
    if (messages.length === 1) {
      this.#sendAlone(messages[0]);
      return;
    }
    const batch = encodeWebSocketBatch(messages);
    this.dealer.send([this.#key === null ? UNKEYED_BATCH : this.#channel.signBatch(batch), batch]);
    this.#batchesSent += 1;
  }

  /** Forgets what was collected: its connection is gone, and with it everything written to it. */
  #dropOutbox() {
    this.#outbox = [];
    this.#outboxBytes = 0;
    this.#outboxWeight = 0;
  }

  #dropUnsent() {
    this.#unsent = [];
    this.#unsentBytes = 0;
  }

  sayHello() {
    this.helloScheduled = false;
    const features = this.evaluate && this.#evaluateWithdrawn === null ? ['evaluate'] : [];
    if (this.#platform.batches) features.push('batch'); // SPEC 3.3: every connection, keyed or not
    // A hello while a session is in force keeps it (handlers or topics changed). After a loss it asks to resume the last
    // session, which takes that session's token (SPEC 6); without one (a 1.1 host) we start afresh.
    const last = this.#welcomed;
    const resume = this.state === READY || last?.token ? last : null;
    if (this.state !== READY) this.state = GREETING;
    const hello = bodies.hello(this.name, [...this.handlers.keys()], features, this.requestedHeartbeatMs, resume?.session, resume?.token, this.topics);
    hello.catalogue = this.#ownCatalogue().catalogue; // SPEC 5, 7.8: recomputed whenever the handlers change
    this.link.trySend(hello);
  }

  scheduleHello() {
    if (this.helloScheduled || (this.state !== READY && this.state !== GREETING)) return;
    this.helloScheduled = true;
    // Several handle(), subscribe() and unsubscribe() calls in one turn make one hello.
    queueMicrotask(() => {
      if (this.helloScheduled && (this.state === READY || this.state === GREETING)) this.sayHello();
    });
  }

  onConnected() {
    if (this.state === CLOSED) return;
    if (this.#key !== null) this.#channel = this.#platform.channel(this.#key); // SPEC 3.1: a fresh channel per connection
    this.#connection += 1;
    this.#batching = false; // SPEC 3.3: until this connection's welcome says the host reads batches
    this.link.lastHeard = Date.now();
    this.session = null;
    this.nameTaken = false;
    clearTimeout(this.helloRetry); // this connection's hello goes now
    this.state = GREETING;
    this.sayHello();
    if (this.#unsent.length === 0) return;
    // What was sent before this connection was up follows the hello, as the dealer's own queue does unkeyed.
    const unsent = this.#unsent;
    this.#dropUnsent();
    for (const frames of unsent) this.transmit(frames);
    this.link.onRoom();
  }

  onDisconnected() {
    this.#channel = null;
    this.#connection += 1;
    this.#batching = false;
    this.#dropOutbox();
    if (this.state === CLOSED) return;
    // The dealer redials by itself; what was written to the broken connection is gone with it.
    if (this.state === READY || this.state === GREETING) this.hostLost(`the connection to the host at ${this.endpoint} broke`, false);
  }

  /**
   * The host is lost: our calls fail with `peer_lost`, its requests and events are cancelled, and
   * (for silence and bye) the connection is dropped with everything still queued on it and a fresh
   * one dialled, so nothing meant for the lost host arrives later (SPEC 7.3). Until the next welcome,
   * new calls, streams and posts fail at once.
   */
  hostLost(why, redial) {
    this.log('warn', `lost the host: ${why}`);
    this.#reportError(new BridgeError('peer_lost', `lost the host at ${this.endpoint}: ${why}`));
    this.#withdrawEvaluate();
    if (this.#launched && this.state === READY) {
      // SPEC 10.1: a launched peer's life is bounded by its host's; a host that comes back after a crash launches its
      // own peers anew, and this one would only hold their name. Calls in flight fail as for any loss.
      this.log('debug', 'a peer launched by its host ends with it (SPEC 10.1): closing, not reconnecting');
      this.link.abandonAll(new BridgeError('peer_lost', `lost the host: ${why}`));
      this.#close(`lost the host: ${why}`, { sayBye: false, lingerMs: 0 }).catch(() => {});
      return;
    }
    this.state = LOST;
    this.lostBecause = why;
    this.session = null;
    this.helloScheduled = false; // the next hello is the fresh one sent on the new connection
    clearTimeout(this.helloRetry);
    const dropped = this.link.abandonAll(new BridgeError('peer_lost', `lost the host: ${why}`));
    if (this.#welcomed?.token) {
      this.abandoned = {
        calls: [...(this.abandoned?.calls ?? []), ...dropped.calls],
        served: [...(this.abandoned?.served ?? []), ...dropped.served],
      };
    }
    if (!redial) return;
    this.#channel = null;
    this.#connection += 1;
    this.#batching = false;
    this.#dropOutbox();
    this.#dropUnsent(); // dropped with the dealer's queue: nothing meant for the lost host goes out later
    this.redials += 1;
    // The first redial is at once; a host that keeps refusing us (bye again, silence again) is retried with backoff.
    const delay = this.redials === 1 ? 0 : Math.min(this.reconnectIvl * 2 ** (this.redials - 2), this.reconnectIvlMax);
    this.dealer.reconnect(delay);
  }

  /**
   * SPEC 2.1: without CURVE nothing proves that the host reached after a loss is the one that welcomed us (another
   * local process may have taken the endpoint), so `$evaluate` is for that first host only. With CURVE every
   * connection proves the pinned server key, and evaluation stays on.
   */
  #withdrawEvaluate() {
    if (!this.evaluate || this.dealer.mechanism === 'CURVE' || this.#welcomed === null || this.#evaluateWithdrawn !== null) return;
    this.#evaluateWithdrawn = 'evaluation was turned off when this peer lost the first host that welcomed it: without CURVE '
      + 'nothing proves that a host is that one';
    this.log('warn', `$evaluate is refused from now on: this peer lost the first host that welcomed it, and without CURVE nothing `
      + `proves that the host at ${this.endpoint} is still that one (give the peer the host's CURVE server key to keep evaluation on)`);
  }

  onMessage(frames) {
    if (this.state === CLOSED) return;
    if (frames.length >= 2 && this.#tooLarge(frames)) return;
    if (this.#key === null) {
      // Without a key frame 0 is ignored, but for the one byte `b` that marks a batch (SPEC 3.3).
      if (this.#platform.batches && frames.length >= 2 && isUnkeyedBatch(frames[0])) this.#readBatch(frames, null);
      else this.link.receive(frames);
      return;
    }
    const channel = this.#channel;
    if (frames.length < 2 || channel === null) {
      this.#refuse(frames, frames.length < 2 ? 'fewer than 2 frames' : 'no channel');
      return;
    }
    const batch = isBatchSignature(frames[0]);
    if (batch && !this.#platform.batches) {
      this.#refuse(frames, 'a batch signature: this peer does not read batches (SPEC 3.3)');
      return;
    }
    let why;
    try {
      why = channel.refusal(frames[0], frames.slice(1));
    } catch (error) {
      why = `cannot check its signature: ${error?.message ?? error}`;
    }
    if (why !== null) this.#refuse(frames, why);
    else if (batch) this.#readBatch(frames, channel);
    else this.link.receive(frames);
  }

  /**
   * SPEC 7.10: a message over this peer's MAX_MESSAGE_BYTES (frames 1..n), or a batch over it and 128 KiB (3.3), is
   * answered too_large before its signature is checked, unread but for a message's id in its first 4096 bytes.
   */
  #tooLarge(frames) {
    let size = 0;
    for (let index = 1; index < frames.length; index += 1) size += frames[index].length;
    if (size <= MAX_MESSAGE_BYTES) return false;
    const batch = this.#key === null ? isUnkeyedBatch(frames[0]) : isBatchSignature(frames[0]);
    const limit = batch ? MAX_MESSAGE_BYTES + BATCH_SLACK_BYTES : MAX_MESSAGE_BYTES;
    if (size <= limit) return false;
    this.link.refuse(new BridgeError('too_large', `the ${batch ? 'batch' : 'message'} has ${size} bytes; the limit is ${limit}`),
      batch ? null : readableId(frames[1]));
    return true;
  }

  /**
   * A batch (SPEC 3.3), keyed (its signature accepted by `channel`) or not (`channel` null): one whose structure is bad
   * is answered bad_message once; otherwise its messages are read in order as if each had come alone (signed, when
   * keyed), and a bad one is answered on its own.
   */
  #readBatch(frames, channel) {
    const connection = this.#connection;
    this.#batchesRead += 1;
    this.link.lastHeard = Date.now();
    let messages;
    try {
      if (frames.length !== 2) throw new BridgeError('bad_message', `a batch is one frame after its frame 0, not ${frames.length - 1}`);
      messages = decodeZeroMQBatch(frames[1]);
    } catch (error) {
      if (!(error instanceof BridgeError)) throw error;
      this.link.refuse(error);
      return;
    }
    for (const message of messages) {
      // A message of it that ended the connection (a bye, a close) takes the rest of the batch with it.
      if (this.#connection !== connection || this.state === CLOSED) return;
      if (message instanceof BridgeError) this.link.refuse(message);
      else {
        const early = channel === null ? null : channel.beforeWelcome(message[1]);
        if (early === null) this.link.receive(message);
        else this.#refuse(message, early);
      }
    }
  }

  /**
   * A message refused on a keyed connection: counted and logged, never answered; an unsigned unauthorized answer (the
   * host refused something of ours) is logged as such, and fails a first connect.
   */
  #refuse(frames, why) {
    this.#rejected += 1;
    const body = frames.length >= 2 && frames[0].length === 0 ? decode(frames).body : undefined;
    const unauthorized = body?.type === 'response' && body.id === null && body.ok === false && body.error.code === 'unauthorized';
    if (unauthorized) {
      this.#unauthorized ??= body.error;
      this.#failFirstConnect(new BridgeError('unauthorized', `the host at ${this.endpoint} refused this peer's messages as unauthorized `
        + `(${body.error.message}): ${clockSkewDiagnosis(body.error.data) ?? 'is the key the host\'s?'}`, { data: body.error.data }));
    }
    const now = Date.now();
    const level = now - this.#lastWarned >= REFUSAL_WARN_MS ? 'warn' : 'debug';
    if (level === 'warn') this.#lastWarned = now;
    this.log(level, unauthorized
      ? `the host refused a message of this peer as unauthorized (${body.error.message}): ${clockSkewDiagnosis(body.error.data) ?? 'is the key the host\'s?'}`
      : `dropped a message from the host: ${why} (${this.#rejected} refused so far)`);
  }

  onSessionMessage(body) {
    switch (body.type) {
      case 'welcome': {
        if (body.catalogue !== undefined && !isCatalogueHash(body.catalogue)) {
          // A field of the welcome (since 1.3) out of its range: a bad message (SPEC 7.5), answered and reported as the
          // decoder reports those (a welcome that cannot be taken fails connect()).
          const message = 'welcome.catalogue must be 64 lowercase hex digits';
          this.log('warn', `bad message from the host (bad_message): ${message}`);
          this.link.trySend(bodies.failure(isName(body.id) ? body.id : null, { code: 'bad_message', message }));
          this.onBadMessage({ code: 'bad_message', message, type: 'welcome' });
          return;
        }
        // The session we asked to resume: the host kept it, and with it our calls and its requests that we gave up
        // at the loss. Its requests get their one response (cancelled), and ours are cancelled, so none dangle.
        const abandoned = this.abandoned;
        this.abandoned = null;
        const resumed = abandoned !== null && body.session === this.#welcomed?.session;
        this.#welcomed = { session: body.session, token: body.resume_token ?? null };
        this.nameTaken = false;
        clearTimeout(this.helloRetry);
        this.session = body.session;
        this.host = body.host;
        this.hostActions = body.actions;
        this.hostCatalogue = body.catalogue ?? null;
        this.hostInfo = body.info ?? null; // SPEC 5 (1.3): opaque context from the host's configuration
        this.hostLibraryVersion = body.library_version ?? null; // decision 44: the host's ZeroBridge version
        this.limits = body.limits;
        // SPEC 3.3: this connection's welcome says whether its host reads batches (on WebSocket, a 1.11 host's).
        this.#batching = body.batch === true && this.#platform.batches === true && (this.#key === null || this.#channel !== null);
        if (body.heartbeat_ms !== this.heartbeatMs) {
          this.heartbeatMs = body.heartbeat_ms;
          this.startHeartbeat();
        }
        this.state = READY;
        this.lostBecause = null;
        this.redials = 0;
        this.dealer.welcomed?.(); // a WebSocket closes the sockets a redial kept open for the resume (SPEC 2.2)
        if (resumed) {
          for (const id of abandoned.served) {
            this.link.trySend(bodies.failure(id, { code: 'cancelled', message: 'cancelled when this peer lost its connection to the host' }));
          }
          for (const id of abandoned.calls) this.link.trySend(bodies.cancel(id));
        }
        if (this.validate) this.#fetchCatalogue();
        const waiter = this.firstWelcome;
        if (waiter && !waiter.settled) {
          clearTimeout(waiter.timer);
          // With validate, connect() resolves once the host's catalogue is in (or known not to come), so that the calls
          // made after it are checked. (A close() meanwhile rejects it.)
          const resolve = () => {
            if (waiter.settled) return;
            waiter.settled = true;
            waiter.resolve(this);
          };
          if (this.#describing === null) resolve();
          else this.#describing.then(resolve);
        }
        return;
      }
      case 'bye':
        if (this.state === READY || this.state === GREETING) this.hostLost('the host said bye', true);
        return;
      case 'response':
        // An error answering no call of ours. name_taken refuses our hello: our name is held by a session that has
        // not ended (typically our own, before a restart); SPEC 6 says to try again until the connect timeout.
        if (body.error.code === 'name_taken' && this.state === GREETING) {
          if (!this.waitForName && this.#welcomed === null && this.session === null) {
            this.#failFirstConnect(new BridgeError('name_taken', `the host at ${this.endpoint} refused the name ${JSON.stringify(this.name)}: `
              + `another live session holds it (${body.error.message}); close that peer, pick another name, or connect with waitForName: true`));
            return;
          }
          this.retryHello(body.error.message);
          return;
        }
        if (body.error.code === 'unauthorized') { // a keyed host, and we have no key
          this.#unauthorized ??= body.error;
          this.#failFirstConnect(new BridgeError('unauthorized', `the host at ${this.endpoint} answered unauthorized (${body.error.message}): `
            + 'it requires a key (connect through its connection file, or give options.key)', { data: body.error.data }));
        }
        this.log('warn', `the host answered ${body.error.code}: ${body.error.message}`);
        return;
      case 'hello':
        // Only a peer says hello: from the host it is a bad message (SPEC 7.5, step 8), answered like any.
        this.log('warn', 'answered a hello from the host with bad_message');
        this.link.trySend(bodies.failure(isName(body.id) ? body.id : null, { code: 'bad_message', message: 'a host does not send hello' }));
        return;
      default:
        this.log('warn', `ignored a ${body.type} from the host (a peer does not expect one)`);
    }
  }

  // --- validate: the host's catalogue (SPEC 7.8, 7.14) -----------------------------------------------------------

  /** After a welcome: fetches the host's catalogue unless the one in hand answers for the welcome's hash. */
  #fetchCatalogue() {
    const announced = this.hostCatalogue;
    if (this.#describing !== null) return;
    if (this.#fetchedFor !== undefined && (announced === null || announced === this.#fetchedFor)) return;
    this.#describing = this.link.call('$describe', null, { timeout: this.timeout }).then((result) => {
      const problem = catalogueProblem(result);
      if (problem === null) {
        this.#adoptCatalogue(result);
        return;
      }
      this.#fetchedFor = announced;
      this.log('warn', `validate: the host's $describe result is not a catalogue (${problem}); payloads are not checked against schemas`);
    }, (error) => {
      if (TRANSIENT.has(error?.code)) {
        this.log('debug', `validate: could not fetch the host's catalogue (${error.code}: ${error.message}); trying again at the next welcome`);
        return;
      }
      this.#fetchedFor = announced;
      this.log('warn', `validate: the host does not describe its actions ($describe answered ${error?.code ?? error}: ${error?.message ?? ''}); `
        + `payloads are not checked against schemas${this.#checked === null ? '' : ' other than the catalogue fetched before'}`);
    }).finally(() => {
      this.#describing = null;
      this.#firstFetch?.resolve();
      // A welcome that announced another catalogue while this fetch was under way: fetch that one too.
      if (this.state === READY && this.hostCatalogue !== null && this.hostCatalogue !== announced) this.#fetchCatalogue();
    });
  }

  #adoptCatalogue(result) {
    const byName = new Map();
    for (const description of result.actions) byName.set(description.name, description);
    this.#checked = { hash: result.catalogue, byName };
    this.#fetchedFor = result.catalogue;
  }

  /**
   * What a call waits for before it is checked and sent, with validate: the catalogue fetch in flight, or before the
   * first welcome the first fetch (so that calls queued before it are checked too).
   */
  #gate(action) {
    if (!this.validate || typeof action !== 'string' || action.startsWith('$')) return null;
    if (this.#describing !== null) return this.#describing;
    if (this.#welcomed !== null || this.state === CLOSED) return null;
    if (this.#firstFetch === null) {
      let resolve;
      const promise = new Promise((res) => { resolve = res; });
      this.#firstFetch = { promise, resolve };
    }
    return this.#firstFetch.promise;
  }

  /** With validate: why `payload` does not match the host's payload schema for `action`, or null (no schema: any). */
  #checkPayload(action, payload) {
    if (!this.validate || this.#checked === null || action.startsWith('$')) return null;
    const description = this.#checked.byName.get(action);
    return description === undefined ? null : schemaProblem(description.payload, payload, 'payload');
  }

  retryHello(message) {
    if (!this.nameTaken) {
      this.log('warn', `the host refuses the name ${JSON.stringify(this.name)} for now (name_taken: ${message}); saying hello again every ${NAME_RETRY_MS} ms`);
    }
    this.nameTaken = true;
    clearTimeout(this.helloRetry);
    this.helloRetry = setTimeout(() => {
      if (this.state === GREETING) this.sayHello();
    }, NAME_RETRY_MS);
    this.helloRetry.unref?.(); // the socket, not the retry, keeps a process alive
  }

  onBadMessage(problem) {
    // A host that cannot give us a proper welcome will never give us one: fail connect() at once.
    if (problem.type === 'welcome' && this.state === GREETING) {
      this.failConnect(new BridgeError(problem.code, `the host's welcome is not valid: ${problem.message}`));
    }
  }

  onTransportError(error) {
    this.log('warn', `ZMTP error: ${error.message}`);
    this.#reportError(this.#connectError(error));
    if (this.state !== READY && this.state !== LOST) this.failConnect(this.#connectError(error));
  }

  /** An 'error' event (its `error` a BridgeError) for what went wrong outside any call: a lost host, a transport failure. */
  #reportError(error) {
    this.dispatchEvent(Object.assign(new Event('error'), { error }));
  }

  /** Why connecting failed: a CURVE handshake that failed says which side's key was the problem. */
  #connectError(error) {
    const curve = this.dealer.mechanism === 'CURVE';
    if (curve && error.code === 'EREFUSED') {
      return new BridgeError('unauthorized', `the host at ${this.endpoint} refused this peer's CURVE key ${this.curvePublicKey}: `
        + `is it on the host's allow-list? (${error.message})`, { cause: error });
    }
    if (curve && error.code === 'EAUTH') {
      return new BridgeError('unauthorized', `the host at ${this.endpoint} did not prove it holds the CURVE server key `
        + `${this.dealer.curveServerKey}: is that the host's key? (${error.message})`, { cause: error });
    }
    return new BridgeError('bad_message', `cannot talk to ${this.endpoint}: ${error.message}`, { cause: error });
  }

  /** Runs an event's listeners; returns a promise (never rejecting) while async ones still run, else null. */
  runListeners(action, payload, context) {
    const listeners = this.listeners.get(action);
    if (!listeners || listeners.size === 0) {
      this.log('debug', `dropped event ${action}: no listener`);
      return null;
    }
    const running = [];
    for (const listener of [...listeners]) {
      try {
        const returned = listener(payload, context);
        if (returned && typeof returned.then === 'function') {
          running.push(Promise.resolve(returned).then(undefined, (error) => {
            if (!context.signal.aborted) this.log('warn', `listener for event ${action} failed: ${error?.message ?? error}`);
          }));
        }
      } catch (error) {
        this.log('warn', `listener for event ${action} threw: ${error?.message ?? error}`);
      }
    }
    return running.length === 0 ? null : Promise.all(running);
  }

  startHeartbeat() {
    clearInterval(this.heartbeatTimer);
    const tick = Math.max(10, Math.floor(this.heartbeatMs / 4));
    this.heartbeatTimer = setInterval(() => this.checkHeartbeat(), tick);
    this.heartbeatTimer.unref?.(); // the socket, not the heartbeat, keeps a process alive
  }

  checkHeartbeat() {
    if (!this.dealer.connected || this.state === CLOSED) return;
    const now = Date.now();
    if ((this.state === READY || this.state === GREETING) && now - this.link.lastHeard >= 3 * this.heartbeatMs) {
      this.hostLost(`nothing heard for ${now - this.link.lastHeard} ms (heartbeat ${this.heartbeatMs} ms)`, true);
      return;
    }
    if (now - this.link.lastSent >= this.heartbeatMs) this.link.trySend(bodies.ping());
  }
}
