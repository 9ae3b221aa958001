// Message bodies <-> ZeroMQ frames, and the validation rules of PROTOCOL-OUTLINE.md and the team's
// decisions: what is a well-formed body of each type, and which error code a bad one earns.

import { BridgeError } from './errors.js';
import { EMPTY, utf8Bytes, utf8Length } from './bytes.js';
import { keepValidTrace } from './trace.js';

export const PROTOCOL_VERSION = 1;
export const MAX_DEPTH = 64;
const NAME_MAX = 128;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const TYPES = new Set(['hello', 'welcome', 'request', 'response', 'progress', 'event', 'cancel', 'ping', 'pong', 'bye']);

/** A string of 1..128 Unicode code points (ids, actions, names). */
export function isName(value) {
  if (typeof value !== 'string' || value.length === 0) return false;
  if (value.length <= NAME_MAX) return true;
  if (value.length > 2 * NAME_MAX) return false; // each code point is at most two UTF-16 units
  let count = 0;
  for (const _ of value) count += 1;
  return count <= NAME_MAX;
}

export const isPositiveInteger = (value) => Number.isInteger(value) && value >= 1;
export const isNonNegativeInteger = (value) => Number.isInteger(value) && value >= 0;
export const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const isNameList = (value) => Array.isArray(value) && value.every(isName);
const isResumeToken = (value) => typeof value === 'string' && /^[0-9a-f]{64}$/.test(value);
export const has = (body, field) => Object.prototype.hasOwnProperty.call(body, field);

/** Nesting depth of JSON text, scanned on the bytes (UTF-8 continuation bytes are never ASCII). */
function exceedsDepth(bytes, limit) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i += 1) {
    const byte = bytes[i];
    if (inString) {
      if (byte === 0x5c) i += 1; // backslash: skip the escaped byte
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x7b || byte === 0x5b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (byte === 0x7d || byte === 0x5d) {
      depth -= 1;
    }
  }
  return false;
}

// Per type: the reason a body is malformed, or null when it is fine.
const CHECKS = {
  request(body) {
    if (!isName(body.id)) return 'request.id must be a string of 1..128 characters';
    if (!isName(body.action)) return 'request.action must be a string of 1..128 characters';
    if (has(body, 'timeout_ms') && !isPositiveInteger(body.timeout_ms)) return 'request.timeout_ms must be a positive integer';
    if (has(body, 'deadline') && !isNonNegativeInteger(body.deadline)) return 'request.deadline must be a non-negative integer (Unix time in ms)';
    if (has(body, 'progress') && typeof body.progress !== 'boolean') return 'request.progress must be a boolean';
    // Since 1.4: names a job of a job action (SPEC 7.16); a key is counted in code points like every name.
    if (has(body, 'idempotency_key') && !isName(body.idempotency_key)) return 'request.idempotency_key must be a string of 1..128 characters';
    return null;
  },
  response(body) {
    if (!has(body, 'id')) return 'response.id is missing';
    if (typeof body.ok !== 'boolean') return 'response.ok must be a boolean';
    if (body.ok) {
      if (!isName(body.id)) return 'response.id must be a string of 1..128 characters';
      if (has(body, 'error')) return 'a response with ok true must not carry an error';
      return null;
    }
    if (body.id !== null && !isName(body.id)) return 'response.id must be null or a string of 1..128 characters';
    if (has(body, 'result')) return 'a response with ok false must not carry a result';
    const { error } = body;
    if (!isObject(error)) return 'response.error must be an object';
    if (!isName(error.code)) return 'response.error.code must be a string of 1..128 characters';
    if (typeof error.message !== 'string') return 'response.error.message must be a string';
    return null;
  },
  progress(body) {
    if (!isName(body.id)) return 'progress.id must be a string of 1..128 characters';
    if (!isPositiveInteger(body.seq)) return 'progress.seq must be a positive integer';
    if (has(body, 'skipped') && !isPositiveInteger(body.skipped)) return 'progress.skipped must be a positive integer';
    return null;
  },
  event(body) {
    if (!isName(body.action)) return 'event.action must be a string of 1..128 characters';
    // Since 1.3: the topic a host broadcast the event on (SPEC 7.15).
    if (has(body, 'topic') && !isName(body.topic)) return 'event.topic must be a string of 1..128 characters';
    return null;
  },
  cancel(body) {
    return isName(body.id) ? null : 'cancel.id must be a string of 1..128 characters';
  },
  hello(body) {
    if (!isName(body.peer)) return 'hello.peer must be a string of 1..128 characters';
    if (has(body, 'actions') && !isNameList(body.actions)) return 'hello.actions must be a list of names';
    if (has(body, 'features') && !isNameList(body.features)) return 'hello.features must be a list of names';
    if (has(body, 'session') && !isName(body.session)) return 'hello.session must be a string of 1..128 characters';
    if (has(body, 'resume_token') && !isResumeToken(body.resume_token)) return 'hello.resume_token must be 64 lowercase hex digits';
    if (has(body, 'heartbeat_ms') && !isPositiveInteger(body.heartbeat_ms)) return 'hello.heartbeat_ms must be a positive integer';
    if (has(body, 'topics') && !isNameList(body.topics)) return 'hello.topics must be a list of names'; // since 1.3 (SPEC 7.15)
    return null;
  },
  welcome(body) {
    if (!isName(body.host)) return 'welcome.host must be a string of 1..128 characters';
    if (!isName(body.session)) return 'welcome.session must be a string of 1..128 characters';
    // Optional: a 1.1 host sends none. The value is a secret, so no message names it.
    if (has(body, 'resume_token') && !isResumeToken(body.resume_token)) return 'welcome.resume_token must be 64 lowercase hex digits';
    if (!isNameList(body.actions)) return 'welcome.actions must be a list of names';
    if (!isPositiveInteger(body.heartbeat_ms)) return 'welcome.heartbeat_ms must be a positive integer';
    const { limits } = body;
    if (!isObject(limits)) return 'welcome.limits must be an object';
    if (!isPositiveInteger(limits.max_message_bytes)) return 'welcome.limits.max_message_bytes must be a positive integer';
    if (!isPositiveInteger(limits.max_in_flight)) return 'welcome.limits.max_in_flight must be a positive integer';
    // Since 1.3: context the host configures, opaque to the protocol, but an object when present (SPEC 5).
    if (has(body, 'info') && !isObject(body.info)) return 'welcome.info must be an object';
    // Decision 43: the version of the host's library, informative only.
    if (has(body, 'library_version') && !isName(body.library_version)) return 'welcome.library_version must be a string of 1..128 characters';
    // Since 1.10: the host reads batches on this connection (SPEC 3.3; on WebSocket connections since 1.11).
    if (has(body, 'batch') && typeof body.batch !== 'boolean') return 'welcome.batch must be a boolean';
    return null;
  },
  ping: () => null,
  pong: () => null,
  bye: () => null,
};

/** Replaces `{"$attachment": i}` references with the attachment frames; throws on a missing frame. */
function resolveAttachments(value, attachments) {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i += 1) value[i] = resolveAttachments(value[i], attachments);
    return value;
  }
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === '$attachment') {
    const index = value.$attachment;
    if (!Number.isInteger(index) || index < 0 || index >= attachments.length) {
      throw new BridgeError('bad_message', `attachment reference ${JSON.stringify(index)} but the message has ${attachments.length} attachment frame(s)`);
    }
    return attachments[index];
  }
  for (const key of keys) value[key] = resolveAttachments(value[key], attachments);
  return value;
}

// What JSON can write but a side cannot carry (SPEC 4) is looked for on the text, not on the parsed value, so that a
// member a later duplicate replaced is checked too (SPEC 4: the whole text counts), and only where it may be:
// - A number rounds to infinity only with a positive exponent of three digits or more, or with a run of 209 digits or
//   more (with neither, it is below 10^208 * 10^99). Only texts that have one have their numbers read again.
// - A lone surrogate needs a \u escape of one. A high one not followed by a low one, or a low one not preceded by a
//   high one, is lone, once escaped backslashes are out of the way ("\\ud800" is an escaped backslash, then text):
//   they are replaced by two characters that are not backslashes, so that what they separated stays apart.
const POSITIVE_EXPONENT = /[eE]\+?\d{3}/;
// The strings of a JSON text that parsed (matched only to step over them), and the places that may make a number huge.
const STRING_OR_HUGE = /"[^"\\]*(?:\\[^][^"\\]*)*"|[eE]\+?\d{3}|(?<!\d)\d{209}/g;
const MAYBE_SURROGATE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}/;
// An escape of a character of "$attachment" ($ is U+0024, its letters U+0061..U+0074): member names count as decoded.
const MAYBE_ESCAPED_ATTACHMENT = /\\u00[267]/;

const isDigit = (c) => c >= 0x30 && c <= 0x39;
const isNumberChar = (c) => isDigit(c) || c === 0x2e || c === 0x2b || c === 0x2d || c === 0x45 || c === 0x65;

/** Whether `text` has `length` ASCII digits in a row. Every such run covers one of the places looked at, one in `length`. */
function hasDigitRun(text, length) {
  for (let i = length - 1; i < text.length; i += length) {
    if (!isDigit(text.charCodeAt(i))) continue;
    let start = i;
    while (start > 0 && i - start < length && isDigit(text.charCodeAt(start - 1))) start -= 1;
    let end = i + 1;
    while (end < text.length && end - start < length && isDigit(text.charCodeAt(end))) end += 1;
    if (end - start >= length) return true;
  }
  return false;
}

/** Where the run of number characters that reaches `index` (the character before it included) starts. */
function numberRunStart(text, index) {
  while (index > 0 && isNumberChar(text.charCodeAt(index - 1))) index -= 1;
  return index;
}

/** Where the run of number characters from `index` ends. */
function numberRunEnd(text, index) {
  while (index < text.length && isNumberChar(text.charCodeAt(index))) index += 1;
  return index;
}

// The places that may make a number huge, strings not stepped over: a hex id's "e123" is one. A number outside strings
// is a whole run of number characters, so where no run around a place reads as infinite, none is; only where one does
// (a number, or a string's "x1e999") are the strings stepped over, by the regex above, slower by the strings' length.
const HUGE_PLACE = /[eE]\+?\d{3}|(?<!\d)\d{209}/g;

/** Whether a run of number characters around a place that may make a number huge reads as an infinite number. */
function mayHaveHugeNumber(text) {
  HUGE_PLACE.lastIndex = 0;
  for (let found; (found = HUGE_PLACE.exec(text)) !== null;) {
    const end = numberRunEnd(text, HUGE_PLACE.lastIndex);
    if (Math.abs(Number(text.slice(numberRunStart(text, found.index), end))) === Infinity) return true;
    HUGE_PLACE.lastIndex = end;
  }
  return false;
}

/** Whether the JSON text `text` (which parsed) holds a number that rounds to an infinite double. */
function hasHugeNumber(text) {
  STRING_OR_HUGE.lastIndex = 0;
  for (let found; (found = STRING_OR_HUGE.exec(text)) !== null;) {
    if (found[0].charCodeAt(0) === 0x22) continue; // a string
    const end = numberRunEnd(text, STRING_OR_HUGE.lastIndex);
    if (!Number.isFinite(Number(text.slice(numberRunStart(text, found.index), end)))) return true;
    STRING_OR_HUGE.lastIndex = end;
  }
  return false;
}

/** Why the JSON text `text` (which parsed) cannot be carried: a number past a double's range, a lone surrogate; or null. */
function uncarriable(text) {
  if ((POSITIVE_EXPONENT.test(text) || hasDigitRun(text, 209)) && mayHaveHugeNumber(text) && hasHugeNumber(text)) {
    return 'a number is outside the range of a double';
  }
  if (MAYBE_SURROGATE.test(text) && LONE_SURROGATE.test(text.includes('\\\\') ? text.replaceAll('\\\\', '__') : text)) {
    return 'a \\u escape leaves a surrogate unpaired';
  }
  return null;
}

/**
 * Decodes the frames a DEALER received: `[signature, body, ...attachments]`.
 * Returns `{ body }` (attachment references replaced by their frames) or, for a message that cannot be
 * understood, `{ error: BridgeError, id, type }` where `id` is the message's readable id (else null)
 * and `error.code` is `bad_message` or `unsupported_version`.
 */
export function decode(frames) {
  const fail = (code, message, id = null, type = null) => ({ error: new BridgeError(code, message), id, type });
  if (!Array.isArray(frames) || frames.length < 2) {
    return fail('bad_message', `a message needs at least 2 frames (signature, body), got ${frames?.length ?? 0}`);
  }
  const bytes = frames[1];
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    return fail('bad_message', 'the body is not valid UTF-8');
  }
  if (exceedsDepth(bytes, MAX_DEPTH)) return fail('bad_message', `the body nests deeper than ${MAX_DEPTH} levels`);
  let body;
  try {
    body = JSON.parse(text);
  } catch (error) {
    return fail('bad_message', `the body is not JSON: ${error.message}`);
  }
  const notCarriable = uncarriable(text);
  if (notCarriable) return fail('bad_message', `the body is not JSON a peer can carry: ${notCarriable}`);
  if (!isObject(body)) return fail('bad_message', 'the body is not a JSON object');
  const id = isName(body.id) ? body.id : null;
  const type = typeof body.type === 'string' ? body.type : null;
  if (!has(body, 'v') || !Number.isInteger(body.v)) return fail('bad_message', 'v must be the integer 1', id, type);
  if (body.v !== PROTOCOL_VERSION) return fail('unsupported_version', `protocol version ${body.v} is not supported (this peer speaks 1)`, id, type);
  if (!TYPES.has(type)) return fail('bad_message', `unknown message type ${JSON.stringify(body.type)}`, id, type);
  const problem = CHECKS[type](body);
  if (problem) return fail('bad_message', problem, id, type);
  // Trace context is never a reason to refuse: what is not valid is dropped (SPEC 7.18).
  if (type === 'request' || type === 'event') keepValidTrace(body);
  // Member names count as decoded: "\u0024attachment" is "$attachment" too (SPEC 3).
  if (frames.length > 2 || text.includes('"$attachment"') || MAYBE_ESCAPED_ATTACHMENT.test(text)) {
    try {
      resolveAttachments(body, frames.slice(2));
    } catch (error) {
      return fail(error.code, error.message, id, type);
    }
  }
  return { body };
}

/** JSON text of a value, with every Uint8Array/Buffer inside taken out as an attachment (`{"$attachment": i}`). */
function toJson(value) {
  let attachments = null;
  const json = JSON.stringify(value, function replace(key, member) {
    const raw = this[key];
    if (raw instanceof Uint8Array) {
      attachments ??= [];
      attachments.push(raw);
      return { $attachment: attachments.length - 1 };
    }
    return member;
  });
  return { json, attachments: attachments ?? [] };
}

/**
 * Encodes a body as frames `[signature (empty), JSON, ...attachments]`. Any Uint8Array/Buffer inside
 * the body travels as an attachment frame, referenced as `{"$attachment": i}`. Throws a TypeError
 * when the body cannot be written as JSON (cycles, BigInt).
 */
export function encode(body) {
  const { json, attachments } = toJson(body);
  return [EMPTY, utf8Bytes(json), ...attachments];
}

/**
 * Encodes a progress payload once, when a handler reports it, so that progress held back for a slow
 * reader (SPEC 7.13) keeps the value it had then. `bytes` is what it weighs against the held-progress
 * bound. Throws a TypeError when the payload cannot be written as JSON.
 */
export function encodePayload(payload) {
  const { json = 'null', attachments } = toJson(payload ?? null);
  let bytes = utf8Length(json);
  for (const attachment of attachments) bytes += attachment.length;
  return { json, attachments, bytes };
}

/** The frames of a progress message around a payload from encodePayload(); `skipped` is left out when 0. */
export function encodeProgress(id, seq, payload, skipped = 0) {
  const extra = skipped > 0 ? `,"skipped":${skipped}` : '';
  const json = `{"v":1,"type":"progress","id":${JSON.stringify(id)},"seq":${seq}${extra},"payload":${payload.json}}`;
  return [EMPTY, utf8Bytes(json), ...payload.attachments];
}

/** Bytes that count against `max_message_bytes`: the body and the attachments (frames 1..n). */
export function messageBytes(frames) {
  let total = 0;
  for (let i = 1; i < frames.length; i += 1) total += frames[i].length;
  return total;
}

// Body builders. `undefined` fields are left out by JSON.stringify, which is what the protocol's
// defaults expect (payload/result default to null).
export const bodies = {
  request: (id, action, payload, timeoutMs, progress, deadline, idempotencyKey) => ({
    v: 1, type: 'request', id, action, payload: payload ?? null, timeout_ms: timeoutMs, deadline, progress: progress || undefined,
    idempotency_key: idempotencyKey ?? undefined,
  }),
  result: (id, result) => ({ v: 1, type: 'response', id, ok: true, result: result ?? null }),
  failure: (id, error) => ({ v: 1, type: 'response', id, ok: false, error }),
  progress: (id, seq, payload, skipped) => ({ v: 1, type: 'progress', id, seq, skipped: skipped || undefined, payload: payload ?? null }),
  // `topic` (host -> peer only, SPEC 7.15) is left out when not given: a peer never sends one.
  event: (action, payload, topic) => ({ v: 1, type: 'event', action, payload: payload ?? null, topic: topic ?? undefined }),
  cancel: (id) => ({ v: 1, type: 'cancel', id }),
  hello: (peer, actions, features, heartbeatMs, session, resumeToken, topics) => ({
    v: 1, type: 'hello', peer, actions, features, heartbeat_ms: heartbeatMs, session: session ?? undefined, resume_token: resumeToken ?? undefined,
    topics: topics ?? undefined,
  }),
  ping: () => ({ v: 1, type: 'ping' }),
  pong: () => ({ v: 1, type: 'pong' }),
  bye: () => ({ v: 1, type: 'bye' }),
};

/** How much of a body that will not be processed (too large) is read to find its id (SPEC 7.10). */
export const ID_PREFIX_BYTES = 4096;
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * The `id` of a body that will not be processed, when it is a top-level string member that ends within the body's
 * first 4096 bytes (SPEC 7.10): the rest is never read, so refusing a message costs the same whatever its size.
 * Member names count as decoded (`"\u0069d"` is `id`). Null otherwise.
 */
export function readableId(body) {
  const bytes = body.subarray(0, ID_PREFIX_BYTES);
  let index = 0;
  const skipSpace = () => { while (index < bytes.length && SPACE.has(bytes[index])) index += 1; };
  const take = (byte) => {
    skipSpace();
    if (bytes[index] !== byte) return false;
    index += 1;
    return true;
  };
  /** The next string token (quotes included), decoded; undefined when there is none whole in the prefix. */
  const string = () => {
    skipSpace();
    if (bytes[index] !== 0x22) return undefined;
    const start = index;
    for (index += 1; index < bytes.length; index += 1) {
      if (bytes[index] === 0x5c) index += 1;
      else if (bytes[index] === 0x22) {
        index += 1;
        try {
          return JSON.parse(utf8.decode(bytes.subarray(start, index)));
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  };
  /** Steps over one value without building it; false when it does not end within the prefix. */
  const skipValue = () => {
    skipSpace();
    if (bytes[index] === 0x22) return string() !== undefined;
    let depth = 0;
    while (index < bytes.length) {
      const byte = bytes[index];
      if (byte === 0x22) {
        if (string() === undefined) return false;
        continue;
      }
      if (byte === 0x7b || byte === 0x5b) depth += 1;
      else if (byte === 0x7d || byte === 0x5d) {
        if (depth === 0) return true; // the end of the object this value is in
        depth -= 1;
      } else if (byte === 0x2c && depth === 0) return true;
      index += 1;
      if (depth === 0 && (byte === 0x7d || byte === 0x5d)) return true;
    }
    return false;
  };
  if (!take(0x7b)) return null;
  for (;;) {
    const key = string();
    if (key === undefined || !take(0x3a)) return null;
    if (key === 'id') {
      const id = string();
      return isName(id) ? id : null;
    }
    if (!skipValue() || !take(0x2c)) return null;
  }
}
