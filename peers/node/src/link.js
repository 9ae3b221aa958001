// One conversation with the host: our pending calls (ids, deadlines, progress, cancel), the host's
// requests to us (exactly one response each), events, ping/pong and liveness bookkeeping, and flow
// control towards the host (SPEC 7.13: calls wait for room, progress is held and coalesced).
// The link knows nothing of sockets or sessions: it is given a `send(frames)` and an `isFull()`, and
// reports session-level messages (welcome, bye, hello) to its owner.

import { BridgeError } from './errors.js';
import { randomBytes, toHex } from './bytes.js';
import { decode, encode, encodeProgress, messageBytes, bodies, isName } from './wire.js';
import { ValueRefusal, encodeRequest, encodeEvent, encodeResult, encodeFailure, serializePayload } from './values.js';
import { currentTrace, runWithTrace, traceOf } from './trace.js';

const AsyncFunction = (async () => {}).constructor;
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*$/u;
// SPEC 7.13: progress held back while the host is not reading, per request and for the whole peer.
const HELD_PROGRESS_PER_REQUEST = 64;
const HELD_PROGRESS_BYTES = 1024 * 1024;
export const DEFAULT_MAX_IN_FLIGHT = 4096;
const MAX_TIMER_MS = 2 ** 31 - 1; // setTimeout fires at once for longer delays
// A later turn of the event loop: Node's setImmediate; in a page, a message to itself over a MessageChannel (a
// browser has no setImmediate). Not a setTimeout: a browser throttles timers in a tab in the background (to one a
// second in Chromium), which would hold each request the host sends such a page for up to a second.
export const nextTurn = globalThis.setImmediate ?? messageTurns() ?? ((run) => setTimeout(run, 0));

/** Runs each function given on a later turn, in order, through a MessageChannel; undefined where there is none. */
function messageTurns() {
  if (typeof globalThis.MessageChannel !== 'function') return undefined;
  const channel = new MessageChannel();
  const waiting = [];
  channel.port1.onmessage = () => waiting.shift()();
  return (run) => {
    waiting.push(run);
    channel.port2.postMessage(null);
  };
}

/**
 * The deadlines of one link (its calls' and those of the host's requests it serves) on one timer, armed for the
 * earliest: a timer per call cost a page a tenth of its time at 64 calls in flight, in setTimeout and clearTimeout
 * (issue 26). A min-heap by instant (performance.now(), monotonic). A cleared deadline stays in the heap until it
 * comes to the top or the cleared ones outnumber the live ones (the heap is then rebuilt without them), so the heap
 * holds at most twice the live deadlines and COMPACT_AFTER more. Delays past setTimeout's 24.8-day limit are waited
 * for in steps. In Node the timer keeps the process alive only while a deadline is live, as a timer per call did.
 */
export class Deadlines {
  #heap = [];
  #cleared = 0; // entries in #heap that no longer fire
  #timer = null;
  #armedAt = Infinity;

  /** Runs `fire` once `ms` milliseconds have passed, unless the deadline returned is cleared first. */
  after(ms, fire) {
    const deadline = new Deadline(this, performance.now() + ms, fire);
    this.#push(deadline);
    if (deadline.at < this.#armedAt) this.#arm(deadline.at);
    else this.#timer?.ref?.();
    return deadline;
  }

  /** How many deadlines are live (not fired, not cleared). */
  get size() {
    return this.#heap.length - this.#cleared;
  }

  /** How many the heap holds, cleared ones included (for tests of its bound). */
  get heapLength() {
    return this.#heap.length;
  }

  clear(deadline) {
    if (deadline.fire === null) return;
    deadline.fire = null;
    this.#cleared += 1;
    if (this.#cleared > COMPACT_AFTER && this.#cleared * 2 > this.#heap.length) this.#compact();
    if (this.size === 0) this.#timer?.unref?.();
  }

  #arm(at) {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#armedAt = at;
    // Whole milliseconds, rounded up: a timer that fires a fraction early is armed again for 1 ms, not for 0 (which
    // a page would run at once, again and again, until the instant has come).
    this.#timer = setTimeout(() => this.#expire(), Math.min(Math.max(0, Math.ceil(at - performance.now())), MAX_TIMER_MS));
  }

  /** Fires every deadline that has passed, in order, then arms the timer for the next. */
  #expire() {
    this.#timer = null;
    this.#armedAt = Infinity;
    const now = performance.now();
    const due = [];
    while (this.#heap.length > 0 && (this.#heap[0].fire === null || this.#heap[0].at <= now)) {
      const deadline = this.#pop();
      if (deadline.fire === null) this.#cleared -= 1;
      else {
        due.push(deadline.fire);
        deadline.fire = null;
      }
    }
    if (this.#heap.length > 0) this.#arm(this.#heap[0].at); // before firing: a fire may add or clear deadlines
    for (const fire of due) {
      try {
        fire();
      } catch (error) { // thrown as an uncaught error, as from a timer of its own, without stopping the others
        queueMicrotask(() => { throw error; });
      }
    }
  }

  #push(deadline) {
    const heap = this.#heap;
    let at = heap.length;
    heap.push(deadline);
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (heap[parent].at <= deadline.at) break;
      heap[at] = heap[parent];
      at = parent;
    }
    heap[at] = deadline;
  }

  #pop() {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0) this.#sink(last, 0);
    return top;
  }

  /** Puts `deadline` at `at` or below, where the heap's order wants it. */
  #sink(deadline, at) {
    const heap = this.#heap;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= heap.length) break;
      if (child + 1 < heap.length && heap[child + 1].at < heap[child].at) child += 1;
      if (heap[child].at >= deadline.at) break;
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = deadline;
  }

  #compact() {
    this.#heap = this.#heap.filter((deadline) => deadline.fire !== null);
    this.#cleared = 0;
    for (let at = (this.#heap.length >> 1) - 1; at >= 0; at -= 1) this.#sink(this.#heap[at], at);
  }
}

const COMPACT_AFTER = 64;

class Deadline {
  constructor(deadlines, at, fire) {
    this.deadlines = deadlines;
    this.at = at;
    this.fire = fire;
  }

  clear() {
    this.deadlines.clear(this);
  }
}

/**
 * Progress payloads of one call, consumed with `for await`; ends when the call ends. `lastSeq` is the `seq` of the
 * last payload handed to the consumer (`startSeq` before any): what a reader re-attaching to a job passes as
 * `after_seq` to get exactly what it has not taken yet (SPEC 7.16).
 */
class ProgressStream {
  constructor(startSeq = 0) {
    this.items = [];
    this.waiters = [];
    this.ended = false;
    this.lastSeq = startSeq;
  }

  push(payload, seq) {
    if (this.ended) return;
    const waiter = this.waiters.shift();
    if (waiter) this.hand(waiter, { payload, seq });
    else this.items.push({ payload, seq });
  }

  hand(waiter, item) {
    this.lastSeq = item.seq;
    waiter({ value: item.payload, done: false });
  }

  end() {
    this.ended = true;
    for (const waiter of this.waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  next() {
    if (this.items.length > 0) return new Promise((resolve) => this.hand(resolve, this.items.shift()));
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  // Leaving a `for await` early (break, return, a throw) cancels the call, as Node's own streams release their source.
  return() {
    this.items = [];
    this.end();
    this.onReturn?.();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/**
 * How an aborted call fails: `timeout` when its signal is `AbortSignal.timeout()`'s (reason a TimeoutError), else
 * `cancelled`; the signal's reason is the cause.
 */
function abortError(signal, action, when = '') {
  const reason = signal.reason;
  const suffix = when ? ` ${when}` : '';
  if (reason?.name === 'TimeoutError') {
    return new BridgeError('timeout', `call to ${action} timed out${suffix}: its AbortSignal's timeout passed`, { cause: reason });
  }
  if (reason instanceof BridgeError) return new BridgeError(reason.code, `call to ${action} cancelled${suffix}: ${reason.message}`, { cause: reason });
  return new BridgeError('cancelled', `call to ${action} cancelled${suffix}`, { cause: reason });
}

/**
 * Runs `script` as the body of an async function whose parameters are the argument names: in this process, or
 * through `evaluator(script, args, context)` when the peer was given one (one that runs it somewhere else).
 */
async function evaluateScript(payload, evaluator, context) {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload) || typeof payload.script !== 'string') {
    throw new BridgeError('invalid_payload', '$evaluate takes {"script": string, "arguments"?: object}');
  }
  const args = payload.arguments ?? {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new BridgeError('invalid_payload', '$evaluate arguments must be an object of name -> value');
  }
  const names = Object.keys(args);
  const badName = names.find((name) => !IDENTIFIER.test(name));
  if (badName !== undefined) {
    throw new BridgeError('invalid_payload', `$evaluate argument name ${JSON.stringify(badName)} is not a JavaScript identifier`);
  }
  if (evaluator !== null) return evaluator(payload.script, args, context);
  const fn = new AsyncFunction(...names, payload.script);
  return fn(...names.map((name) => args[name]));
}

/** A payload this peer was asked to send and refuses (SPEC 7.14, or the `validate` option): `invalid_payload`, at once. */
function invalidPayload(refusal) {
  return new BridgeError('invalid_payload', refusal.message, { data: { path: refusal.path } });
}

/** A name as sent (an action, an idempotency key, a job id): 1..128 characters, and text that has a UTF-8 form. */
export function checkName(value, what) {
  if (!isName(value) || !value.isWellFormed()) {
    const shown = typeof value === 'string' ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value) : String(value);
    throw new TypeError(`${what} must be a string of 1..128 characters (without unpaired surrogates), not ${shown}`);
  }
}

function errorBody(error) {
  if (error instanceof BridgeError) return error.toJSON();
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { code: 'handler_error', message };
}

export class Link {
  /**
   * @param {object} options
   * @param {(frames: Uint8Array[]) => void} options.send writes one message; throws a BridgeError when it cannot
   * @param {() => boolean} options.isFull             whether what waits for the host is at its bound (SPEC 7.13);
   *                                                   the owner calls onRoom() when it may no longer be
   * @param {Map<string, Function>} options.handlers   action name -> handler, read at each request
   * @param {() => string|null} options.evaluate        why `$evaluate` is refused now (`not_allowed`), or null: it runs scripts
   * @param {((script: string, args: object, context: object) => unknown)|null} [options.evaluator]
   *   runs an `$evaluate` script instead of this process (a sandbox), or null
   * @param {number} options.maxInFlight               the host's requests and events run at once (SPEC 7.11, 7.13)
   * @param {(action: string, payload: any, context: {action: string, topic: string|null, signal: AbortSignal}) => Promise<unknown>|null} options.onEvent
   *   runs the listeners of an event; returns a promise (never rejecting) while some still run, else null
   * @param {(body: object) => void} options.onSession  welcome, bye, (unexpected) hello, and error responses with a
   *                                                   null id (a refused hello, an event over the limit, ...)
   * @param {(problem: {code: string, message: string, type: string|null}) => void} options.onBadMessage
   * @param {() => number} options.maxMessageBytes       the host's limit (Infinity until known)
   * @param {() => object} [options.describe]           this peer's catalogue, the result of `$describe` (SPEC 7.8)
   * @param {(action: string, payload: any) => {path: string, message: string}|null} [options.checkPayload]
   *   why a payload (already known to be JSON) must not be sent to `action`, or null (the `validate` option)
   * @param {(level: string, message: string) => void} options.log
   */
  constructor(options) {
    this.sendFrames = options.send;
    this.isFull = options.isFull ?? (() => false);
    this.handlers = options.handlers;
    this.evaluate = options.evaluate;
    this.evaluator = options.evaluator ?? null;
    this.maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.onEvent = options.onEvent;
    this.onSession = options.onSession;
    this.onBadMessage = options.onBadMessage ?? (() => {});
    this.maxMessageBytes = options.maxMessageBytes;
    this.describe = options.describe ?? (() => ({ catalogue: null, actions: [] }));
    this.checkPayload = options.checkPayload ?? (() => null);
    this.log = options.log;
    this.idPrefix = `${toHex(randomBytes(4))}-`;
    this.nextId = 0;
    this.calls = new Map(); // our requests in flight, by id
    this.waiting = []; // our calls not sent yet, waiting for room (SPEC 7.13), in order
    this.served = new Map(); // the host's requests we are answering, by id
    this.deadlines = new Deadlines(); // of both
    this.events = new Set(); // the host's events whose listeners still run
    this.holding = new Set(); // served requests with progress held back, oldest first
    this.heldProgressBytes = 0;
    this.lastHeard = Date.now();
    this.lastSent = 0;
    this.overloadWarnedAt = -Infinity; // when an event not run was last warned about
  }

  // --- sending ----------------------------------------------------------------------------

  sendBody(body) {
    const frames = encode(body);
    this.sendFrames(frames);
    this.lastSent = Date.now();
    return frames;
  }

  /**
   * Sends a request and settles with its result. `progress` (a function) asks for progress.
   * Timeouts and cancellation settle the call locally, whatever the host does later. A payload that cannot be
   * carried, or that checkPayload refuses, rejects at once with `invalid_payload`, nothing sent (SPEC 7.14).
   * `gate`, a promise (never rejecting), holds the call back until it settles; its wait counts against `timeout`.
   * `idempotencyKey` goes on the request as `idempotency_key` (SPEC 7.16). `progress` is called with each progress
   * message's payload, `skipped` and `seq`; `startSeq` is the seq progress must be above (an attach's `after_seq`:
   * the host sends nothing at or below it, and a reader gets nothing twice).
   */
  call(action, payload, { timeout, signal, progress, gate, idempotencyKey, startSeq = 0 } = {}) {
    if (gate) {
      const start = Date.now();
      return gate.then(() => {
        const left = timeout === null || timeout === Infinity || timeout === undefined ? timeout : timeout - (Date.now() - start);
        if (left !== null && left !== Infinity && left !== undefined && left <= 0) {
          throw new BridgeError('timeout', `${action} was not sent within ${timeout} ms: the host's catalogue (validate) did not come in time`);
        }
        return this.call(action, payload, { timeout: left, signal, progress, idempotencyKey, startSeq });
      });
    }
    return new Promise((resolve, reject) => {
      checkName(action, 'action');
      if (idempotencyKey !== undefined) checkName(idempotencyKey, 'idempotencyKey');
      if (timeout !== null && timeout !== Infinity && !(Number.isFinite(timeout) && timeout > 0)) {
        throw new TypeError(`timeout must be a positive number of milliseconds, null or Infinity (got ${timeout})`);
      }
      if (signal?.aborted) {
        reject(abortError(signal, action, 'before it was sent'));
        return;
      }
      const timeoutMs = timeout === null || timeout === Infinity ? undefined : Math.ceil(timeout);
      // SPEC 7.3: the deadline travels both ways, as a duration and as an instant on our clock.
      const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
      const id = `${this.idPrefix}${this.nextId + 1}`;
      let frames;
      try {
        frames = encodeRequest(id, action, payload, timeoutMs, progress !== undefined, deadline, idempotencyKey, currentTrace());
      } catch (error) {
        if (!(error instanceof ValueRefusal)) throw error;
        reject(invalidPayload(error));
        return;
      }
      const mismatch = this.checkPayload(action, payload);
      if (mismatch !== null) {
        reject(invalidPayload(mismatch));
        return;
      }
      this.nextId += 1;
      const size = messageBytes(frames);
      if (size > this.maxMessageBytes()) {
        reject(new BridgeError('too_large', `request to ${action} is ${size} bytes; the host accepts at most ${this.maxMessageBytes()}`));
        return;
      }
      const call = { id, action, frames, sent: false, resolve, reject, progress, lastSeq: startSeq, timer: null, signal, onAbort: null };
      // SPEC 7.13: while the host is not keeping up, a request waits for room (in order) up to its deadline.
      if (this.waiting.length > 0 || this.isFull()) this.waiting.push(call);
      else this.transmit(call); // throws (-> rejection) when the message cannot even be queued
      this.calls.set(id, call);
      if (timeoutMs !== undefined) {
        call.timer = this.deadlines.after(timeoutMs, () => {
          const message = call.sent
            ? `no response to ${action} within ${timeoutMs} ms`
            : `${action} was not sent within ${timeoutMs} ms: the host did not read what was already queued for it`;
          this.settle(id, new BridgeError('timeout', message));
        });
      }
      if (signal) {
        call.onAbort = () => {
          if (!this.calls.has(id)) return;
          this.settle(id, abortError(signal, action));
          if (!call.sent) return; // never sent: nothing to cancel
          try {
            this.sendBody(bodies.cancel(id));
          } catch (error) {
            this.log('debug', `could not send cancel for ${id}: ${error.message}`);
          }
        };
        signal.addEventListener('abort', call.onAbort, { once: true });
      }
    });
  }

  transmit(call) {
    this.sendFrames(call.frames);
    call.sent = true;
    call.frames = null;
    this.lastSent = Date.now();
  }

  /**
   * The transport has room again (or its queue was dropped): waiting calls go first, in order, then
   * held progress, each only while there is room.
   */
  onRoom() {
    while (this.waiting.length > 0 && !this.isFull()) {
      const call = this.waiting.shift();
      try {
        this.transmit(call);
      } catch (error) {
        this.settle(call.id, error);
      }
    }
    for (const entry of this.holding) {
      if (this.isFull()) return;
      this.flushProgress(entry);
    }
  }

  /**
   * Like call(), with the progress payloads as an async iterable; `skipped` counts the payloads the
   * host coalesced away (the sum of `progress.skipped`), `lastSeq` is the seq of the last payload the
   * iterable yielded (`startSeq` before any: an attach's `after_seq`).
   */
  stream(action, payload, { startSeq = 0, ...options } = {}) {
    const progress = new ProgressStream(startSeq);
    const leaving = new AbortController();
    progress.onReturn = () => leaving.abort(new BridgeError('cancelled', `the progress loop over ${action} ended early`));
    let skipped = 0;
    const result = this.call(action, payload, {
      ...options,
      signal: options.signal ? AbortSignal.any([options.signal, leaving.signal]) : leaving.signal,
      startSeq,
      progress: (p, coalesced, seq) => {
        skipped += coalesced;
        progress.push(p, seq);
      },
    });
    result.then(() => progress.end(), () => progress.end());
    // The caller may only iterate progress; a failure then surfaces through `result` when awaited,
    // not as an unhandled rejection.
    result.catch(() => {});
    return { progress, result, get skipped() { return skipped; }, get lastSeq() { return progress.lastSeq; } };
  }

  /**
   * Fire-and-forget event to the host; refused with `overloaded` while the host is not keeping up (SPEC 7.13), and
   * with `invalid_payload` for a payload that cannot be carried or that checkPayload refuses (SPEC 7.14). Throws.
   */
  post(action, payload) {
    checkName(action, 'action');
    let frames;
    try {
      frames = encodeEvent(action, payload, currentTrace());
    } catch (error) {
      if (error instanceof ValueRefusal) throw invalidPayload(error);
      throw error;
    }
    const mismatch = this.checkPayload(action, payload);
    if (mismatch !== null) throw invalidPayload(mismatch);
    if (this.waiting.length > 0 || this.isFull()) {
      throw new BridgeError('overloaded', `event ${action} not sent: the host is not reading what is already queued for it`);
    }
    this.sendFrames(frames);
    this.lastSent = Date.now();
  }

  /** Ends a pending call with a result (`ok`) or a BridgeError. */
  settle(id, error, result) {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    call.timer?.clear();
    if (call.onAbort) call.signal.removeEventListener('abort', call.onAbort);
    if (!call.sent) {
      const at = this.waiting.indexOf(call);
      if (at >= 0) this.waiting.splice(at, 1);
    }
    if (error) call.reject(error);
    else call.resolve(result);
  }

  // --- receiving --------------------------------------------------------------------------

  /** Handles one message from the host. Never throws. */
  receive(frames) {
    this.lastHeard = Date.now();
    const decoded = decode(frames);
    if (decoded.error) {
      this.refuse(decoded.error, decoded.id, decoded.type);
      return;
    }
    const { body } = decoded;
    switch (body.type) {
      case 'request': return this.serve(body);
      case 'response': {
        if (body.id === null) return this.onSession(body); // answers no call: the session's business (name_taken, ...)
        if (!this.calls.has(body.id)) {
          this.log('debug', `dropped a response for unknown or finished request ${body.id}`);
          return;
        }
        if (body.ok) return this.settle(body.id, null, body.result ?? null);
        const { code, message, data } = body.error;
        return this.settle(body.id, new BridgeError(code, message, { data }));
      }
      case 'progress': {
        const call = this.calls.get(body.id);
        if (!call?.progress) {
          this.log('debug', `dropped progress for ${body.id}: unknown, finished or not asked for`);
          return;
        }
        if (body.seq <= call.lastSeq) {
          this.log('warn', `dropped progress ${body.seq} for ${body.id}: already had ${call.lastSeq}`);
          return;
        }
        call.lastSeq = body.seq;
        return call.progress(body.payload ?? null, body.skipped ?? 0, body.seq);
      }
      case 'event': return this.serveEvent(body);
      case 'cancel': return this.cancelServed(body.id);
      case 'ping': return this.trySend(bodies.pong());
      case 'pong': return undefined;
      default: return this.onSession(body); // welcome, bye, hello
    }
  }

  /**
   * Answers a message from the host that cannot be read (SPEC 7.5; a batch or a message of one, SPEC 3.3): `error` a
   * BridgeError (`bad_message`, `unsupported_version`), `id` and `type` the message's when readable. Never throws.
   */
  refuse(error, id = null, type = null) {
    this.log('warn', `bad message from the host (${error.code}): ${error.message}`);
    this.trySend(bodies.failure(id, error.toJSON()));
    if (type === 'response' && id !== null && this.calls.has(id)) {
      // The answer to our call arrived but cannot be read: fail the call now rather than at its deadline.
      this.settle(id, new BridgeError(error.code, `the host's response could not be read: ${error.message}`));
    }
    this.onBadMessage({ code: error.code, message: error.message, type });
  }

  trySend(body) {
    if (body.type === 'response' && body.id === null && this.isFull()) {
      // SPEC 7.13, decision 54: an answer to a refused event or an unreadable message answers nothing anyone waits
      // for; past the queue's bound, to a host that sends such messages and reads nothing, it is dropped.
      this.log('debug', `answer not queued (${body.error?.code}): what waits for the host is at its bound`);
      return false;
    }
    try {
      this.sendBody(body);
      return true;
    } catch (error) {
      this.log('warn', `could not send ${body.type}: ${error.message}`);
      return false;
    }
  }

  // --- serving the host's requests --------------------------------------------------------

  /** The host's requests and events running now, against `maxInFlight`. */
  get inFlight() {
    return this.served.size + this.events.size;
  }

  serve(request) {
    const { id, action } = request;
    if (this.served.has(id)) {
      this.trySend(bodies.failure(id, { code: 'duplicate_id', message: `request ${id} is already in flight` }));
      return;
    }
    const receivedAt = Date.now();
    if (request.deadline !== undefined && request.deadline <= receivedAt) {
      // SPEC 7.3: its caller has given up already; running it now would run it after that.
      const late = receivedAt - request.deadline;
      const skewed = request.timeout_ms !== undefined && late > request.timeout_ms;
      this.log(skewed ? 'warn' : 'debug', `request ${id} (${action}) arrived ${late} ms after its deadline and was answered timeout without running`
        + (skewed ? `; that is more than its whole timeout_ms (${request.timeout_ms}), so this clock is likely ahead of the host's (clock skew)` : ''));
      this.trySend(bodies.failure(id, { code: 'timeout', message: `${action} arrived ${late} ms after its deadline and was not started` }));
      return;
    }
    if (this.inFlight >= this.maxInFlight) {
      this.trySend(bodies.failure(id, { code: 'overloaded', message: `${action} not run: this peer already runs ${this.maxInFlight} requests and events` }));
      return;
    }
    const limits = [];
    if (request.timeout_ms !== undefined) limits.push(receivedAt + request.timeout_ms);
    if (request.deadline !== undefined) limits.push(request.deadline);
    const deadline = limits.length === 0 ? null : Math.min(...limits);
    const controller = new AbortController();
    const entry = { id, action, done: false, seq: 0, held: [], wantsProgress: request.progress === true, timer: null, controller };
    this.served.set(id, entry);
    if (deadline !== null) {
      entry.timer = this.deadlines.after(deadline - receivedAt, () => {
        const error = new BridgeError('timeout', `${action} did not finish within ${deadline - receivedAt} ms`);
        this.finish(entry, null, error);
        controller.abort(error);
      });
    }
    const trace = traceOf(request);
    const context = {
      id,
      action,
      deadline,
      traceparent: trace?.traceparent ?? null,
      tracestate: trace?.tracestate ?? null,
      signal: controller.signal,
      progress: (payload) => this.reportProgress(entry, payload),
    };
    let run;
    if (action === '$actions') {
      run = async () => [...this.handlers.keys()];
    } else if (action === '$describe') {
      run = async () => this.describe(); // SPEC 7.8: the payload is ignored
    } else if (action === '$evaluate') {
      const refusal = this.evaluate();
      run = refusal === null
        ? () => evaluateScript(request.payload, this.evaluator, context)
        : async () => { throw new BridgeError('not_allowed', refusal); };
    } else {
      const handler = this.handlers.get(action);
      run = handler
        ? () => handler(request.payload ?? null, context)
        : async () => { throw new BridgeError('unknown_action', `this peer has no handler for ${JSON.stringify(action)}`); };
    }
    // Started on a later turn, after the rest of what was read with it: a cancel that came along
    // means the handler never begins (SPEC 7.3).
    nextTurn(() => {
      if (entry.done) return;
      let pending;
      try {
        // The received trace is current for the handler, so what it sends carries it (SPEC 7.18).
        pending = Promise.resolve(runWithTrace(trace, run));
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then((result) => this.finish(entry, result), (error) => this.finish(entry, null, error));
    });
  }

  // --- progress towards a slow reader (SPEC 7.13) ---------------------------------------------

  /**
   * A handler's ctx.progress(): sent at once when there is room and nothing of this request is held,
   * else held; past the holding bounds it replaces the newest held payload and is counted. Never
   * waits and never fails for flow reasons.
   */
  reportProgress(entry, payload) {
    if (!entry.wantsProgress || entry.done) return false;
    let encoded;
    try {
      encoded = serializePayload(payload ?? null, 'progress');
    } catch (error) {
      // SPEC 7.14: a progress payload that cannot be carried fails the request as the handler's failure, with the path;
      // the handler learns it here (and through its signal), and what it does next is discarded.
      const failure = new BridgeError('handler_error', error instanceof ValueRefusal ? error.message : `progress cannot be written as JSON: ${error?.message ?? error}`);
      this.log('warn', `${entry.action} (request ${entry.id}) reported progress that cannot be sent; answered handler_error: ${failure.message}`);
      this.finish(entry, null, failure);
      entry.controller.abort(failure);
      throw failure;
    }
    if (entry.held.length === 0 && !this.isFull()) {
      this.sendProgress(entry, encoded, 0);
      return true;
    }
    const newest = entry.held.at(-1);
    if (newest && (entry.held.length >= HELD_PROGRESS_PER_REQUEST || this.heldProgressBytes + encoded.bytes > HELD_PROGRESS_BYTES)) {
      this.heldProgressBytes += encoded.bytes - newest.payload.bytes;
      newest.payload = encoded;
      newest.skipped += 1;
      return true;
    }
    // A request's first held payload is kept even past the byte bound: every request gets its newest through.
    entry.held.push({ payload: encoded, skipped: 0 });
    this.heldProgressBytes += encoded.bytes;
    this.holding.add(entry);
    return true;
  }

  /** Sends held progress in order while there is room (all of it with `force`). */
  flushProgress(entry, force = false) {
    while (entry.held.length > 0 && (force || !this.isFull())) {
      const { payload, skipped } = entry.held.shift();
      this.heldProgressBytes -= payload.bytes;
      this.sendProgress(entry, payload, skipped);
    }
    if (entry.held.length === 0) this.holding.delete(entry);
  }

  dropProgress(entry) {
    for (const { payload } of entry.held) this.heldProgressBytes -= payload.bytes;
    entry.held = [];
    this.holding.delete(entry);
  }

  /** `seq` counts what was actually sent, so it stays gapless whatever was coalesced. */
  sendProgress(entry, payload, skipped) {
    const seq = entry.seq + 1;
    try {
      this.sendFrames(encodeProgress(entry.id, seq, payload, skipped));
      entry.seq = seq;
      this.lastSent = Date.now();
    } catch (error) {
      this.log('warn', `could not send progress ${seq} of ${entry.id}: ${error.message}`);
    }
  }

  // --- events from the host -----------------------------------------------------------------

  /**
   * Runs an event's listeners; events count toward `maxInFlight` with requests (SPEC 7.13). The context carries the
   * topic the host broadcast it on (SPEC 7.15), null for an event that has none.
   */
  serveEvent({ action, payload, topic, traceparent, tracestate }) {
    if (this.inFlight >= this.maxInFlight) {
      // At warn level at most once a second: a flood of events must not flood the log.
      const now = Date.now();
      const level = now - this.overloadWarnedAt >= 1000 ? 'warn' : 'debug';
      if (level === 'warn') this.overloadWarnedAt = now;
      this.log(level, `event ${action} not run: ${this.maxInFlight} requests and events already in flight`);
      this.trySend(bodies.failure(null, {
        code: 'overloaded',
        message: `event ${JSON.stringify(action)} not run: this peer already runs ${this.maxInFlight} requests and events`,
      }));
      return;
    }
    const controller = new AbortController();
    const trace = traceOf({ traceparent, tracestate });
    const running = runWithTrace(trace, () => this.onEvent(action, payload ?? null, {
      action, topic: topic ?? null, traceparent: trace?.traceparent ?? null, tracestate: trace?.tracestate ?? null, signal: controller.signal,
    }));
    if (!running) return; // no listener, or every listener finished at once
    const entry = { action, controller };
    this.events.add(entry);
    running.then(() => this.events.delete(entry));
  }

  /**
   * Sends the one response of a served request, unless it was already answered or discarded. Progress
   * still held goes first, whatever the outcome (all progress precedes the response, and none is dropped
   * silently: SPEC 7.13); it is bounded, so this overshoots the queue's bound by little.
   */
  finish(entry, result, error) {
    if (entry.done) return;
    entry.done = true;
    entry.timer?.clear();
    this.served.delete(entry.id);
    this.flushProgress(entry, true);
    let frames;
    try {
      frames = error ? encodeFailure(entry.id, errorBody(error)) : encodeResult(entry.id, result);
    } catch (refusal) {
      // SPEC 7.14: a result (or an error's data) that cannot be carried is the handler's failure, named by its path.
      const message = refusal instanceof ValueRefusal ? refusal.message : `the ${error ? 'error' : 'result'} of ${entry.action} cannot be written as JSON: ${refusal?.message ?? refusal}`;
      this.log('warn', `${entry.action} (request ${entry.id}) ${error ? 'failed with data' : 'returned a result'} that cannot be sent; answered handler_error: ${message}`);
      frames = encodeFailure(entry.id, { code: 'handler_error', message });
    }
    const size = messageBytes(frames);
    if (size > this.maxMessageBytes()) {
      frames = encode(bodies.failure(entry.id, { code: 'too_large', message: `the result of ${entry.action} is ${size} bytes; the host accepts at most ${this.maxMessageBytes()}` }));
    }
    try {
      this.sendFrames(frames);
      this.lastSent = Date.now();
    } catch (sendError) {
      this.log('warn', `could not answer ${entry.id}: ${sendError.message}`);
    }
  }

  cancelServed(id) {
    const entry = this.served.get(id);
    if (!entry) return; // unknown or finished: ignored, as the protocol says
    this.finish(entry, null, new BridgeError('cancelled', `${entry.action} was cancelled by the host`));
    entry.controller.abort(new BridgeError('cancelled', `${entry.action} was cancelled by the host`));
  }

  // --- losing the host --------------------------------------------------------------------

  /**
   * The host is gone (silence, bye, broken connection, or we are closing): our calls fail with
   * `error`, its requests and events are cancelled and their responses and progress discarded.
   * Returns the ids of our calls that had been sent and of the host's requests, in case the host
   * turns out to have kept the session.
   */
  abandonAll(error) {
    const dropped = { calls: [], served: [] };
    for (const [id, call] of [...this.calls]) {
      if (call.sent) dropped.calls.push(id);
      this.settle(id, error);
    }
    this.waiting = [];
    for (const entry of [...this.served.values()]) {
      entry.done = true;
      entry.timer?.clear();
      this.served.delete(entry.id);
      this.dropProgress(entry);
      entry.controller.abort(error);
      dropped.served.push(entry.id);
    }
    for (const entry of [...this.events]) {
      this.events.delete(entry);
      entry.controller.abort(error);
    }
    return dropped;
  }
}
