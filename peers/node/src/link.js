// One conversation with the host: our pending calls (ids, deadlines, progress, cancel), the host's
// requests to us (exactly one response each), events, ping/pong and liveness bookkeeping.
// The link knows nothing of sockets or sessions: it is given a `send(frames)` and reports
// session-level messages (welcome, bye, hello) to its owner.

import { randomBytes } from 'node:crypto';
import { BridgeError } from './errors.js';
import { decode, encode, messageBytes, bodies, isName } from './wire.js';

const AsyncFunction = (async () => {}).constructor;
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*$/u;

/** Progress payloads of one call, consumed with `for await`; ends when the call ends. */
class ProgressStream {
  constructor() {
    this.items = [];
    this.waiters = [];
    this.ended = false;
  }

  push(payload) {
    if (this.ended) return;
    const waiter = this.waiters.shift();
    if (waiter) waiter({ value: payload, done: false });
    else this.items.push(payload);
  }

  end() {
    this.ended = true;
    for (const waiter of this.waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  next() {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift(), done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  // Leaving a `for await` early stops buffering; the call itself goes on (cancel with its signal).
  return() {
    this.items = [];
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** Runs `script` as the body of an async function whose parameters are the argument names. */
async function evaluateScript(payload) {
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
  const fn = new AsyncFunction(...names, payload.script);
  return fn(...names.map((name) => args[name]));
}

function errorBody(error) {
  if (error instanceof BridgeError) return error.toJSON();
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { code: 'handler_error', message };
}

export class Link {
  /**
   * @param {object} options
   * @param {(frames: Buffer[]) => void} options.send  writes one message; throws a BridgeError when it cannot
   * @param {Map<string, Function>} options.handlers   action name -> handler, read at each request
   * @param {boolean} options.evaluate                 whether `$evaluate` runs scripts
   * @param {(action: string, payload: any) => void} options.onEvent
   * @param {(body: object) => void} options.onSession  welcome, bye and (unexpected) hello bodies
   * @param {(problem: {code: string, message: string, type: string|null}) => void} options.onBadMessage
   * @param {() => number} options.maxMessageBytes       the host's limit (Infinity until known)
   * @param {(level: string, message: string) => void} options.log
   */
  constructor(options) {
    this.sendFrames = options.send;
    this.handlers = options.handlers;
    this.evaluate = options.evaluate;
    this.onEvent = options.onEvent;
    this.onSession = options.onSession;
    this.onBadMessage = options.onBadMessage ?? (() => {});
    this.maxMessageBytes = options.maxMessageBytes;
    this.log = options.log;
    this.idPrefix = `${randomBytes(4).toString('hex')}-`;
    this.nextId = 0;
    this.calls = new Map(); // our requests in flight, by id
    this.served = new Map(); // the host's requests we are answering, by id
    this.lastHeard = Date.now();
    this.lastSent = 0;
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
   * Timeouts and cancellation settle the call locally, whatever the host does later.
   */
  call(action, payload, { timeout, signal, progress } = {}) {
    return new Promise((resolve, reject) => {
      if (!isName(action)) throw new TypeError('action must be a string of 1..128 characters');
      if (timeout !== null && timeout !== Infinity && !(Number.isFinite(timeout) && timeout > 0)) {
        throw new TypeError(`timeout must be a positive number of milliseconds, null or Infinity (got ${timeout})`);
      }
      if (signal?.aborted) {
        reject(new BridgeError('cancelled', `call to ${action} cancelled before it was sent`));
        return;
      }
      this.nextId += 1;
      const id = `${this.idPrefix}${this.nextId}`;
      const timeoutMs = timeout === null || timeout === Infinity ? undefined : Math.ceil(timeout);
      const frames = encode(bodies.request(id, action, payload, timeoutMs, progress !== undefined));
      const size = messageBytes(frames);
      if (size > this.maxMessageBytes()) {
        reject(new BridgeError('too_large', `request to ${action} is ${size} bytes; the host accepts at most ${this.maxMessageBytes()}`));
        return;
      }
      const call = { id, action, resolve, reject, progress, lastSeq: 0, timer: null, signal, onAbort: null };
      this.sendFrames(frames); // throws (-> rejection) when the message cannot even be queued
      this.lastSent = Date.now();
      this.calls.set(id, call);
      if (timeoutMs !== undefined) {
        call.timer = setTimeout(() => {
          this.settle(id, new BridgeError('timeout', `no response to ${action} within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      if (signal) {
        call.onAbort = () => {
          if (!this.calls.has(id)) return;
          this.settle(id, new BridgeError('cancelled', `call to ${action} cancelled`, { cause: signal.reason }));
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

  /** Like call(), with the progress payloads as an async iterable. */
  stream(action, payload, options = {}) {
    const progress = new ProgressStream();
    const result = this.call(action, payload, { ...options, progress: (p) => progress.push(p) });
    result.then(() => progress.end(), () => progress.end());
    // The caller may only iterate progress; a failure then surfaces through `result` when awaited,
    // not as an unhandled rejection.
    result.catch(() => {});
    return { progress, result };
  }

  /** Fire-and-forget event to the host. */
  post(action, payload) {
    if (!isName(action)) throw new TypeError('action must be a string of 1..128 characters');
    this.sendBody(bodies.event(action, payload));
  }

  /** Ends a pending call with a result (`ok`) or a BridgeError. */
  settle(id, error, result) {
    const call = this.calls.get(id);
    if (!call) return;
    this.calls.delete(id);
    clearTimeout(call.timer);
    if (call.onAbort) call.signal.removeEventListener('abort', call.onAbort);
    if (error) call.reject(error);
    else call.resolve(result);
  }

  // --- receiving --------------------------------------------------------------------------

  /** Handles one message from the host. Never throws. */
  receive(frames) {
    this.lastHeard = Date.now();
    const decoded = decode(frames);
    if (decoded.error) {
      const { error, id, type } = decoded;
      this.log('warn', `bad message from the host (${error.code}): ${error.message}`);
      this.trySend(bodies.failure(id, error.toJSON()));
      if (type === 'response' && id !== null && this.calls.has(id)) {
        // The answer to our call arrived but cannot be read: fail the call now rather than at its deadline.
        this.settle(id, new BridgeError(error.code, `the host's response could not be read: ${error.message}`));
      }
      this.onBadMessage({ code: error.code, message: error.message, type });
      return;
    }
    const { body } = decoded;
    switch (body.type) {
      case 'request': return this.serve(body);
      case 'response': {
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
        return call.progress(body.payload ?? null);
      }
      case 'event': return this.onEvent(body.action, body.payload ?? null);
      case 'cancel': return this.cancelServed(body.id);
      case 'ping': return this.trySend(bodies.pong());
      case 'pong': return undefined;
      default: return this.onSession(body); // welcome, bye, hello
    }
  }

  trySend(body) {
    try {
      this.sendBody(body);
      return true;
    } catch (error) {
      this.log('warn', `could not send ${body.type}: ${error.message}`);
      return false;
    }
  }

  // --- serving the host's requests --------------------------------------------------------

  serve(request) {
    const { id, action } = request;
    if (this.served.has(id)) {
      this.trySend(bodies.failure(id, { code: 'duplicate_id', message: `request ${id} is already in flight` }));
      return;
    }
    const controller = new AbortController();
    const entry = { id, action, done: false, seq: 0, timer: null, controller };
    this.served.set(id, entry);
    const deadline = request.timeout_ms === undefined ? null : Date.now() + request.timeout_ms;
    if (deadline !== null) {
      entry.timer = setTimeout(() => {
        this.finish(entry, null, new BridgeError('timeout', `${action} did not finish within ${request.timeout_ms} ms`));
        controller.abort(new BridgeError('timeout', `${action} timed out`));
      }, request.timeout_ms);
    }
    const wantsProgress = request.progress === true;
    const context = {
      id,
      action,
      deadline,
      signal: controller.signal,
      progress: (payload) => {
        if (!wantsProgress || entry.done) return false;
        entry.seq += 1;
        this.sendBody(bodies.progress(id, entry.seq, payload));
        return true;
      },
    };
    let run;
    if (action === '$actions') {
      run = async () => [...this.handlers.keys()];
    } else if (action === '$evaluate') {
      run = this.evaluate
        ? () => evaluateScript(request.payload)
        : async () => { throw new BridgeError('not_allowed', 'this peer does not evaluate scripts (connect with evaluate: true to allow it)'); };
    } else {
      const handler = this.handlers.get(action);
      run = handler
        ? () => handler(request.payload ?? null, context)
        : async () => { throw new BridgeError('unknown_action', `this peer has no handler for ${JSON.stringify(action)}`); };
    }
    let pending;
    try {
      pending = Promise.resolve(run());
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then((result) => this.finish(entry, result), (error) => this.finish(entry, null, error));
  }

  /** Sends the one response of a served request, unless it was already answered or discarded. */
  finish(entry, result, error) {
    if (entry.done) return;
    entry.done = true;
    clearTimeout(entry.timer);
    this.served.delete(entry.id);
    let frames;
    try {
      frames = encode(error ? bodies.failure(entry.id, errorBody(error)) : bodies.result(entry.id, result));
    } catch (encodeError) {
      frames = encode(bodies.failure(entry.id, { code: 'handler_error', message: `the result of ${entry.action} is not JSON: ${encodeError.message}` }));
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
   * `error`, its requests are cancelled and their responses discarded.
   */
  abandonAll(error) {
    for (const id of [...this.calls.keys()]) this.settle(id, error);
    for (const entry of [...this.served.values()]) {
      entry.done = true;
      clearTimeout(entry.timer);
      this.served.delete(entry.id);
      entry.controller.abort(error);
    }
  }
}
