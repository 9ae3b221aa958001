// SPEC 7.14: every value this peer is asked to send (a call's or event's payload, a handler's result, a progress
// payload, an `$evaluate` result, a thrown BridgeError's data) is checked where it is made, and refused with the
// path of its first offending part, instead of being converted silently as JSON.stringify would (NaN -> null,
// Map -> {}, function-valued members dropped, Date -> its toJSON()).
//
// One walk does both: it checks the value and writes its JSON text, taking every Uint8Array/Buffer out as an
// attachment frame (`{"$attachment": i}`, SPEC 3). What is carried: null, booleans, well-formed strings, finite
// numbers, BigInts in the signed 64-bit range (written exactly, as integer literals), arrays, plain objects (whose
// prototype is Object.prototype or null) with string keys, and bytes. An object member whose value is `undefined`
// is left out, as JSON.stringify does; `undefined` as the whole value is null (a handler that returns nothing).

import { MAX_DEPTH } from './wire.js';
import { EMPTY, utf8Bytes, utf8Length } from './bytes.js';
import { traceMembers } from './trace.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
// What JSON.stringify would escape in a well-formed string; a string without any is written as is, between quotes
// (JSON.stringify of a short string costs several times the test).
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
// Member names seen lately, quoted (names repeat from one message to the next); emptied when full.
const QUOTED_NAMES = new Map();
const QUOTED_NAMES_MAX = 4096;

function quote(text) {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** A member name as JSON text, or null when it has an unpaired surrogate. */
function quoteName(name) {
  let quoted = QUOTED_NAMES.get(name);
  if (quoted !== undefined) return quoted;
  if (!name.isWellFormed()) return null;
  quoted = quote(name);
  if (QUOTED_NAMES.size >= QUOTED_NAMES_MAX) QUOTED_NAMES.clear();
  QUOTED_NAMES.set(name, quoted);
  return quoted;
}

/** A value that cannot be sent: `path` names its first offending part (`payload.items[3]`), `reason` what it is. */
export class ValueRefusal extends TypeError {
  constructor(path, reason) {
    super(`${path}: ${reason}`);
    this.name = 'ValueRefusal';
    this.path = path;
    this.reason = reason;
  }
}

/** `payload.items[3].price`, `result["a b"]`: the path of the value at `depth` of a walk. */
function pathTo(walk, depth) {
  let path = walk.root;
  for (let d = walk.base + 1; d <= depth; d += 1) {
    const key = walk.keys[d];
    if (typeof key === 'number') path += `[${key}]`;
    else if (IDENTIFIER.test(key)) path += `.${key}`;
    else path += `[${JSON.stringify(key.toWellFormed())}]`;
  }
  return path;
}

function nameOf(value) {
  try {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return typeof name === 'string' && name !== '' ? name : null;
  } catch {
    return null;
  }
}

/** Why an object that is neither an array, a plain object nor bytes cannot be carried. */
function notPlain(value) {
  if (value instanceof Map) return 'a Map cannot be carried in JSON (convert it first, e.g. Object.fromEntries(map))';
  if (value instanceof Set) return 'a Set cannot be carried in JSON (convert it first, e.g. [...set])';
  if (value instanceof WeakMap || value instanceof WeakSet) return `a ${nameOf(value)} cannot be carried in JSON`;
  if (value instanceof Date) return 'a Date cannot be carried in JSON (send an ISO-8601 string: date.toISOString())';
  if (value instanceof RegExp) return 'a RegExp cannot be carried in JSON (send its source as a string)';
  if (value instanceof Promise) return 'a Promise cannot be carried in JSON (await it first)';
  if (value instanceof Number || value instanceof String || value instanceof Boolean || value instanceof BigInt || value instanceof Symbol) {
    return `a boxed ${nameOf(value) ?? 'primitive'} (new ${nameOf(value) ?? 'Object'}(...)) cannot be carried in JSON (use the primitive value)`;
  }
  if (ArrayBuffer.isView(value)) {
    return `a ${nameOf(value) ?? 'typed array'} cannot be carried in JSON: only Uint8Array and Buffer are bytes (sent as attachments)`;
  }
  if (value instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && value instanceof SharedArrayBuffer)) {
    return `an ${nameOf(value)} cannot be carried in JSON (wrap it as bytes: new Uint8Array(buffer))`;
  }
  if (value instanceof Error) return `an ${nameOf(value) ?? 'Error'} cannot be carried in JSON (send its message as a string)`;
  const name = nameOf(value);
  return name === null
    ? 'an object that is not plain data cannot be carried in JSON (only plain objects and arrays are)'
    : `an instance of ${name} cannot be carried in JSON: it is not plain data (convert it to a plain object first)`;
}

/**
 * A container found at a depth past the limit: a cycle when one of the containers the walk is inside repeats (the
 * first repetition is where the value first contains itself), else simply too deep.
 */
function tooDeep(walk, depth) {
  for (let j = walk.base + 1; j < depth; j += 1) {
    for (let i = walk.base; i < j; i += 1) {
      if (walk.stack[i] === walk.stack[j]) {
        return new ValueRefusal(pathTo(walk, j), `a cycle: this is ${pathTo(walk, i)} again, which contains it (JSON cannot carry a value that contains itself)`);
      }
    }
  }
  return new ValueRefusal(pathTo(walk, depth), `nested deeper than ${MAX_DEPTH} levels (the message body is level 1, and no side reads deeper)`);
}

function write(value, walk, depth) {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw new ValueRefusal(pathTo(walk, depth), 'a string with an unpaired UTF-16 surrogate cannot be carried in JSON (it has no UTF-8 form)');
      return quote(value);
    case 'number':
      if (Number.isFinite(value)) return `${value}`;
      throw new ValueRefusal(pathTo(walk, depth), `${value} cannot be carried in JSON`);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return value === null ? 'null' : writeObject(value, walk, depth);
    case 'bigint':
      if (value >= INT64_MIN && value <= INT64_MAX) return value.toString();
      throw new ValueRefusal(pathTo(walk, depth), `the BigInt ${value} is outside the signed 64-bit range (-2^63 .. 2^63-1) and cannot be carried`);
    case 'undefined':
      throw new ValueRefusal(pathTo(walk, depth), 'undefined cannot be an array item in JSON (use null)');
    case 'function':
      throw new ValueRefusal(pathTo(walk, depth), 'a function cannot be carried in JSON');
    case 'symbol':
      throw new ValueRefusal(pathTo(walk, depth), 'a symbol cannot be carried in JSON');
    default:
      throw new ValueRefusal(pathTo(walk, depth), `a ${typeof value} cannot be carried in JSON`);
  }
}

function writeObject(value, walk, depth) {
  if (depth > MAX_DEPTH) throw tooDeep(walk, depth);
  walk.stack[depth] = value;
  const next = depth + 1;
  if (Array.isArray(value)) {
    const { length } = value;
    if (length === 0) return '[]';
    let out = '[';
    for (let i = 0; i < length; i += 1) {
      walk.keys[next] = i;
      if (i > 0) out += ',';
      out += write(value[i], walk, next); // undefined, and a hole (which reads as undefined), are refused there
    }
    return `${out}]`;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    if (value instanceof Uint8Array) {
      walk.attachments.push(value);
      return `{"$attachment":${walk.attachments.length - 1}}`;
    }
    throw new ValueRefusal(pathTo(walk, depth), notPlain(value));
  }
  if (typeof value.toJSON === 'function') {
    throw new ValueRefusal(pathTo(walk, depth), 'an object with a toJSON method cannot be carried as it is: JSON.stringify would send what toJSON returns instead (call it yourself and send that)');
  }
  let out = '{';
  let written = 0;
  let lastName = null;
  const names = Object.keys(value);
  for (let k = 0; k < names.length; k += 1) {
    const key = names[k];
    const member = value[key];
    if (member === undefined) continue; // left out, as JSON.stringify does (SPEC 7.14)
    walk.keys[next] = key;
    const name = quoteName(key);
    if (name === null) throw new ValueRefusal(pathTo(walk, next), 'a member name with an unpaired UTF-16 surrogate cannot be carried in JSON (it has no UTF-8 form)');
    if (written > 0) out += ',';
    out += `${name}:${write(member, walk, next)}`;
    written += 1;
    lastName = key;
  }
  if (written === 1 && lastName === '$attachment') {
    // SPEC 3: an object whose only member is $attachment is always read as an attachment reference, never as data.
    throw new ValueRefusal(pathTo(walk, depth), 'an object whose only member is "$attachment" cannot be carried as data: every receiver reads it as an '
      + 'attachment reference (SPEC 3); add another member or wrap it (bytes are sent as attachments by themselves)');
  }
  if (Object.getOwnPropertySymbols(value).length > 0) {
    for (const symbol of Object.getOwnPropertySymbols(value)) {
      if (Object.prototype.propertyIsEnumerable.call(value, symbol)) {
        throw new ValueRefusal(pathTo(walk, depth), `a member keyed by a symbol (${symbol.toString()}) cannot be carried in JSON (keys are strings)`);
      }
    }
  }
  return `${out}}`;
}

/**
 * The JSON text of `value` and its attachments (the bytes inside it, in order), or a ValueRefusal naming the path of
 * its first offending part from `root` (`payload`, `result`, ...). `depth` is the level `value` has in its message
 * body (the body is level 1, so a payload is level 2): containers past level 64 are refused (SPEC 4).
 */
export function serialize(value, root = 'payload', depth = 2) {
  const walk = { root, base: depth, keys: [], stack: [], attachments: [] };
  const json = value === undefined ? 'null' : write(value, walk, depth);
  return { json, attachments: walk.attachments };
}

/** Like serialize(), plus `bytes`: the weight of the text and the attachments (held progress counts it). */
export function serializePayload(value, root = 'payload', depth = 2) {
  const { json, attachments } = serialize(value, root, depth);
  let bytes = utf8Length(json);
  for (const attachment of attachments) bytes += attachment.length;
  return { json, attachments, bytes };
}

// --- the messages that carry such values ------------------------------------------------------------------------
// Written as text around the checked value's JSON (the body's own fields are the peer's, so they need no check):
// one walk per message, where encode(body) would walk the value once more inside JSON.stringify.

const frames = (json, attachments) => (attachments.length === 0 ? [EMPTY, utf8Bytes(json)] : [EMPTY, utf8Bytes(json), ...attachments]);

/** The frames of a request; throws a ValueRefusal (path from `payload`) for a payload that cannot be carried. */
export function encodeRequest(id, action, payload, timeoutMs, progress, deadline, idempotencyKey, trace = null) {
  const { json, attachments } = serialize(payload ?? null, 'payload');
  let body = `{"v":1,"type":"request","id":${JSON.stringify(id)},"action":${JSON.stringify(action)},"payload":${json}`;
  if (timeoutMs !== undefined) body += `,"timeout_ms":${timeoutMs}`;
  if (deadline !== undefined) body += `,"deadline":${deadline}`;
  if (progress) body += ',"progress":true';
  if (idempotencyKey !== undefined) body += `,"idempotency_key":${JSON.stringify(idempotencyKey)}`;
  return frames(`${body}${traceMembers(trace)}}`, attachments);
}

/** The frames of an event; throws a ValueRefusal (path from `payload`). */
export function encodeEvent(action, payload, trace = null) {
  const { json, attachments } = serialize(payload ?? null, 'payload');
  return frames(`{"v":1,"type":"event","action":${JSON.stringify(action)},"payload":${json}${traceMembers(trace)}}`, attachments);
}

/** The frames of a successful response; throws a ValueRefusal (path from `result`). */
export function encodeResult(id, result) {
  const { json, attachments } = serialize(result ?? null, 'result');
  return frames(`{"v":1,"type":"response","id":${JSON.stringify(id)},"ok":true,"result":${json}}`, attachments);
}

/**
 * The frames of an error response from `{code, message, data?}`; throws a ValueRefusal (path from `error.data`) for
 * data that cannot be carried. The message is human text this runtime passes on: an unpaired surrogate in it (an
 * exception quoting broken input) is replaced by U+FFFD rather than making the whole answer unreadable.
 */
export function encodeFailure(id, error) {
  const code = String(error.code).toWellFormed();
  const message = String(error.message ?? '').toWellFormed();
  let body = `{"v":1,"type":"response","id":${id === null ? 'null' : JSON.stringify(id)},"ok":false,"error":{"code":${JSON.stringify(code)},"message":${JSON.stringify(message)}`;
  let attachments = [];
  if (error.data !== undefined) {
    const data = serialize(error.data, 'error.data', 3);
    body += `,"data":${data.json}`;
    attachments = data.attachments;
  }
  return frames(`${body}}}`, attachments);
}
