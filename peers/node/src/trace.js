// W3C trace context on requests and events (SPEC 7.18): `traceparent` and `tracestate`. A malformed value is
// ignored, never refused. A handler runs with the context it received current, so the calls and events it sends
// carry the same trace; its context shows it as ctx.traceparent. Part of the platform-neutral core: the Node peer
// makes the context current through every await (AsyncLocalStorage, src/peer.js); a page has no such storage, so
// there it is current for the handler's synchronous part only (what it sends before its first await).
// Written out here: the peer has no dependencies. protocol/fixtures/messages/trace-context.json pins the rules in
// every language, and the Python peer's copy is checked against OpenTelemetry's parser.

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/;
const KEY = /^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})$/;
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const MAX_MEMBERS = 32;

/** The version-00 form of a valid `traceparent`, or null. */
export function readTraceparent(text) {
  if (typeof text !== 'string' || text.length < 55) return null;
  const match = TRACEPARENT.exec(text.slice(0, 55));
  if (match === null) return null;
  const [, version, traceId, parentId, flags] = match;
  if (version === 'ff' || /^0+$/.test(traceId) || /^0+$/.test(parentId)) return null;
  if (version === '00') return text.length === 55 ? text : null;
  if (text.length > 55 && text[55] !== '-') return null;
  return `00-${traceId}-${parentId}-${flags}`;
}

/** Whether `text` is a W3C `tracestate`: at most 32 `key=value` members, each key once. */
export function isValidTracestate(text) {
  if (typeof text !== 'string') return false;
  const keys = new Set();
  for (const raw of text.split(',')) {
    const member = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (member === '') continue;
    const equals = member.indexOf('=');
    if (equals < 0) return false;
    const key = member.slice(0, equals);
    if (!KEY.test(key) || !VALUE.test(member.slice(equals + 1)) || keys.has(key)) return false;
    keys.add(key);
    if (keys.size > MAX_MEMBERS) return false;
  }
  return true;
}

/**
 * Leaves on a received request or event body only the trace context a receiver uses: a valid `traceparent` (a
 * higher version read as 00) and, beside it, a valid non-empty `tracestate`; the rest is removed, never refused.
 */
export function keepValidTrace(body) {
  if (!('traceparent' in body) && !('tracestate' in body)) return;
  const traceparent = readTraceparent(body.traceparent);
  if (traceparent === null) {
    delete body.traceparent;
    delete body.tracestate;
    return;
  }
  body.traceparent = traceparent;
  if ('tracestate' in body && !(body.tracestate !== '' && isValidTracestate(body.tracestate))) delete body.tracestate;
}

/** `{traceparent, tracestate?}` of a body decoded by keepValidTrace, or null. */
export function traceOf(body) {
  if (body.traceparent === undefined) return null;
  return body.tracestate === undefined ? { traceparent: body.traceparent } : { traceparent: body.traceparent, tracestate: body.tracestate };
}

/** Until a platform gives better (useTraceStorage): current while `fn` runs synchronously. */
class SynchronousStorage {
  #current;
  run(store, fn) {
    const outer = this.#current;
    this.#current = store;
    try {
      return fn();
    } finally {
      this.#current = outer;
    }
  }
  getStore() {
    return this.#current;
  }
}

let received = new SynchronousStorage();

/** Makes `storage` (with AsyncLocalStorage's run and getStore) hold the current trace context: Node's, at load. */
export function useTraceStorage(storage) {
  received = storage;
}

/** Runs `fn` as a handler of a message that arrived with `trace` (or null): current for what it sends. */
export function runWithTrace(trace, fn) {
  return received.run(trace, fn);
}

/**
 * Runs `fn` with a W3C trace context current (SPEC 7.18), so the calls and events it sends, through every await,
 * carry it: for a front-end that continues a trace it received, say an HTTP request's `traceparent` header.
 * Throws a TypeError for a `traceparent` that is not valid; a `tracestate` that is not valid is left out.
 */
export function withTrace({ traceparent, tracestate } = {}, fn) {
  const parent = readTraceparent(traceparent);
  if (parent === null) throw new TypeError(`withTrace takes a valid W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), not ${JSON.stringify(traceparent)}`);
  const state = typeof tracestate === 'string' && tracestate !== '' && isValidTracestate(tracestate) ? tracestate : undefined;
  return received.run(state === undefined ? { traceparent: parent } : { traceparent: parent, tracestate: state }, fn);
}

/** The trace context a request or event sent now carries: the handler's received one, or null. */
export function currentTrace() {
  return received.getStore() ?? null;
}

/** The `,"traceparent":...,"tracestate":...` members of an outgoing body, or ''. */
export function traceMembers(trace) {
  if (trace === null) return '';
  let members = `,"traceparent":${JSON.stringify(trace.traceparent)}`;
  if (trace.tracestate !== undefined) members += `,"tracestate":${JSON.stringify(trace.tracestate)}`;
  return members;
}
