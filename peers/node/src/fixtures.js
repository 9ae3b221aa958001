// Protocol fixtures (protocol/SPEC.md, section 14) for Node: load them, run them, and say exactly what differed.
//
//   import { loadConversations, runConversation, loadMessageCases, checkMessageCase, runPeerConversation } from 'zerobridge/fixtures';
//
//   for (const conversation of loadConversations(['protocol/fixtures/conversations'])) {
//     await runConversation(conversation, 'tcp://127.0.0.1:5555');        // rejects with a FixtureFailure
//   }
//   // A conversation with a restart_host step (restartsHost(conversation)) needs a host the caller can kill and start
//   // again on the same journal and endpoint: runConversation(conversation, endpoint, { restartHost: async () => endpoint })
//   for (const c of loadMessageCases(['protocol/fixtures/messages'])) checkMessageCase(c);   // the Node wire decoder
//   const peer = { language: 'node', command: ['node', 'peers/node/bin/conformance-peer.js'] };
//   for (const conversation of loadConversations(['protocol/fixtures/peer-conversations'], { plays: 'host' })) {
//     await runPeerConversation(conversation, peer);                       // binds a ROUTER, starts the peer
//   }
//
// Conversations (14.2) play peers against a live host over this package's own ZMTP DEALER; peer conversations
// (`"plays": "host"`, 14.3) bind a ZMTP ROUTER, start a peer under test pointed at it and play the host; message
// cases (14.1) run through src/wire.js. A failure is a FixtureFailure whose message names the step and the JSON
// path where the received body differs; a file that does not follow the format is a FixtureFormatError naming the
// file and the JSON path. Nothing here is loaded by `import 'zerobridge'`.

import { readFileSync, readdirSync, statSync } from 'node:fs';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ZmtpDealer } from './zmtp.js';
import { ZmtpRouter } from './zmtp-router.js';
import { decode, encode, isName } from './wire.js';
import { traceOf } from './trace.js';

export const DEFAULT_WITHIN_MS = 30000;
const CLIENT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MATCHERS = new Set(['$any', '$absent', '$oneOf', '$not', '$capture', '$var', '$exact', '$unordered', '$literal']);
const ANY_TYPES = new Set(['value', 'string', 'number', 'integer', 'boolean', 'null', 'array', 'object']);
const STEP_OPTIONS = {
  send: ['client', 'repeat', 'attachments', 'deliberately_invalid', 'note'],
  send_frames: ['client', 'note'],
  expect: ['client', 'within_ms', 'skip', 'repeat', 'note'],
  expect_unordered: ['client', 'within_ms', 'skip', 'note'],
  expect_nothing_ms: ['client', 'skip', 'note'],
  restart_host: ['note'], // since 1.4 (SPEC 14.2): conversations with a host only
};
const STEP_KINDS = Object.keys(STEP_OPTIONS);
const PONG = Buffer.from('{"v":1,"type":"pong"}');
const EMPTY = Buffer.alloc(0);
const now = () => performance.now(); // monotonic milliseconds, for deadlines

/** A fixture that did not pass: the message says which step, and what was expected and received. */
export class FixtureFailure extends Error {
  constructor(message) {
    super(message);
    this.name = 'FixtureFailure';
  }
}

/** A fixture file that does not follow the format (or uses a variable it never captured). */
export class FixtureFormatError extends Error {
  constructor(file, jsonPath, reason) {
    super(`${file ? `${file}: ` : ''}${jsonPath}: ${reason}`);
    this.name = 'FixtureFormatError';
    this.file = file;
    this.path = jsonPath;
    this.reason = reason;
  }
}

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const has = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

// --- loading -----------------------------------------------------------------------------------------------------

function jsonFiles(paths) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.json')) found.push({ file: full, named: false });
    }
  };
  for (const entry of paths) {
    let stat;
    try {
      stat = statSync(entry);
    } catch {
      throw new FixtureFormatError(String(entry), '', 'no such file or folder');
    }
    if (stat.isDirectory()) walk(String(entry));
    else found.push({ file: String(entry), named: true });
  }
  return found;
}

function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new FixtureFormatError(file, '$', `cannot read it as JSON: ${error.message}`);
  }
}

/** The conversation in one file, checked against the format. */
export function loadConversation(file) {
  return conversationFrom(readJson(file), String(file));
}

/**
 * The conversations in these files and folders, in path order. A folder contributes every .json file under it
 * that holds a conversation (case files are passed over). `plays`: `'peers'` (default: conversations with a
 * host), `'host'` (peer conversations) or `null` (both).
 */
export function loadConversations(paths, { plays = 'peers' } = {}) {
  const conversations = [];
  for (const { file, named } of jsonFiles(paths)) {
    const value = readJson(file);
    if (!isObject(value) || !has(value, 'steps')) {
      if (named) throw new FixtureFormatError(file, '$', 'a conversation is a JSON object with steps');
      continue;
    }
    const conversation = conversationFrom(value, file);
    if (plays === null || conversation.plays === plays) conversations.push(conversation);
  }
  return conversations;
}

/** Every case of the case files (JSON arrays of groups) in these files and folders; `name` is "<file>: <group>: <case>". */
export function loadMessageCases(paths) {
  const cases = [];
  for (const { file, named } of jsonFiles(paths)) {
    const value = readJson(file);
    if (!Array.isArray(value)) {
      if (named) throw new FixtureFormatError(file, '$', 'a case file is a JSON array of groups');
      continue;
    }
    const check = new Checker(file);
    const stem = path.basename(file, '.json');
    value.forEach((group, g) => {
      const where = `$[${g}]`;
      check.keys(group, where, ['description', 'tests'], ['description', 'tests']);
      check.text(group.description, `${where}.description`);
      if (!Array.isArray(group.tests) || group.tests.length === 0) throw check.fail(`${where}.tests`, 'must be a non-empty array of cases');
      group.tests.forEach((test, c) => {
        const at = `${where}.tests[${c}]`;
        check.keys(test, at, ['description', 'data', 'valid'], ['description', 'data', 'valid', 'error', 'trace']);
        if (has(test, 'trace') && (!test.valid || !(test.trace === null || isObject(test.trace)))) {
          throw check.fail(`${at}.trace`, 'must be an object or null, on a valid case only');
        }
        check.text(test.description, `${at}.description`);
        if (typeof test.valid !== 'boolean') throw check.fail(`${at}.valid`, 'must be a boolean');
        if (has(test, 'error') && (test.valid || !['bad_message', 'unsupported_version'].includes(test.error))) {
          throw check.fail(`${at}.error`, 'must be bad_message or unsupported_version, on an invalid case only');
        }
        cases.push({
          file: stem, group: group.description, description: test.description, data: test.data, valid: test.valid,
          error: test.error ?? null, name: `${stem}: ${group.description}: ${test.description}`,
          ...(has(test, 'trace') ? { trace: test.trace } : {}),
        });
      });
    });
  }
  return cases;
}

class Checker {
  constructor(file) {
    this.file = file;
  }

  fail(jsonPath, reason) {
    return new FixtureFormatError(this.file, jsonPath, reason);
  }

  keys(value, at, required, allowed) {
    if (!isObject(value)) throw this.fail(at, 'must be an object');
    const missing = required.filter((key) => !has(value, key)).sort();
    if (missing.length > 0) throw this.fail(at, `needs ${missing.join(', ')}`);
    const extra = Object.keys(value).filter((key) => !allowed.includes(key)).sort();
    if (extra.length > 0) throw this.fail(pathTo(at, extra[0]), `is not a field here (allowed: ${[...allowed].sort().join(', ')})`);
  }

  text(value, at) {
    if (typeof value !== 'string' || value === '') throw this.fail(at, 'must be a non-empty string');
  }

  integer(value, at, low, high) {
    if (!Number.isInteger(value) || value < low || value > high) throw this.fail(at, `must be an integer in ${low}..${high}`);
  }

  frame(value, at) {
    const keys = isObject(value) ? Object.keys(value).sort().join(',') : '';
    if (keys === 'text') {
      if (typeof value.text !== 'string') throw this.fail(`${at}.text`, 'must be a string');
    } else if (keys === 'base64') {
      if (typeof value.base64 !== 'string' || !BASE64.test(value.base64) || value.base64.length % 4 !== 0) {
        throw this.fail(`${at}.base64`, 'must be standard base64 with padding');
      }
    } else if (keys === 'json') {
      // any JSON
    } else if (keys === 'byte,count') {
      this.integer(value.byte, `${at}.byte`, 0, 255);
      this.integer(value.count, `${at}.count`, 0, 67108864);
    } else if (keys === 'concat') {
      if (!Array.isArray(value.concat)) throw this.fail(`${at}.concat`, 'must be an array of frames');
      value.concat.forEach((part, i) => this.frame(part, `${at}.concat[${i}]`));
    } else {
      throw this.fail(at, 'a frame is {text}, {base64}, {json}, {byte, count} or {concat}');
    }
  }
}

function conversationFrom(value, file) {
  const check = new Checker(file);
  if (!isObject(value)) throw check.fail('$', 'a conversation is a JSON object');
  if (has(value, 'plays') && value.plays !== 'host') {
    throw check.fail('$.plays', 'must be "host" (a peer conversation); leave it out for a conversation with a host');
  }
  const plays = has(value, 'plays') ? 'host' : 'peers';
  if (plays === 'host') {
    check.keys(value, '$', ['format', 'description', 'plays', 'steps'], ['format', 'description', 'plays', 'evaluate', 'pings', 'steps']);
  } else {
    check.keys(value, '$', ['format', 'description', 'clients', 'steps'], ['format', 'description', 'clients', 'pings', 'limits', 'steps']);
  }
  if (value.format !== 1) throw check.fail('$.format', "must be 1 (the conversation format's version)");
  check.text(value.description, '$.description');
  let clients = ['peer'];
  if (plays === 'peers') {
    if (!Array.isArray(value.clients) || value.clients.length === 0) throw check.fail('$.clients', 'must be a non-empty array of client names');
    value.clients.forEach((name, i) => {
      if (typeof name !== 'string' || !CLIENT_NAME.test(name)) throw check.fail(`$.clients[${i}]`, 'must match ^[a-z][a-z0-9_-]{0,31}$');
      if (value.clients.indexOf(name) !== i) throw check.fail(`$.clients[${i}]`, `"${name}" is listed twice`);
    });
    clients = [...value.clients];
  }
  const pings = value.pings ?? 'auto';
  if (pings !== 'auto' && pings !== 'manual') throw check.fail('$.pings', 'must be "auto" or "manual"');
  const limits = value.limits ?? {};
  check.keys(limits, '$.limits', [], ['max_message_bytes', 'max_in_flight']);
  for (const [key, limit] of Object.entries(limits)) check.integer(limit, `$.limits.${key}`, 1, Number.MAX_SAFE_INTEGER);
  const evaluate = value.evaluate ?? false;
  if (typeof evaluate !== 'boolean') throw check.fail('$.evaluate', 'must be a boolean');
  if (!Array.isArray(value.steps) || value.steps.length === 0) throw check.fail('$.steps', 'must be a non-empty array of steps');
  value.steps.forEach((step, n) => checkStep(check, step, `$.steps[${n}]`, clients, plays));
  return { description: value.description, file, plays, clients, pings, limits: { ...limits }, evaluate, steps: value.steps };
}

function checkStep(check, step, at, clients, plays) {
  if (!isObject(step)) throw check.fail(at, 'a step is an object');
  const kinds = STEP_KINDS.filter((kind) => has(step, kind));
  if (kinds.length !== 1) throw check.fail(at, `a step has exactly one of ${STEP_KINDS.join(', ')}`);
  const [kind] = kinds;
  const allowed = [kind, ...STEP_OPTIONS[kind]].filter((key) => plays === 'peers' || key !== 'client');
  check.keys(step, at, [kind], allowed);
  if (has(step, 'client') && !clients.includes(step.client)) {
    throw check.fail(`${at}.client`, `"${step.client}" is not one of the clients ${JSON.stringify(clients)}`);
  }
  if (has(step, 'within_ms')) check.integer(step.within_ms, `${at}.within_ms`, 1, 600000);
  if (has(step, 'repeat')) check.integer(step.repeat, `${at}.repeat`, 1, 100000);
  if (has(step, 'skip') && (!Array.isArray(step.skip) || step.skip.length === 0)) throw check.fail(`${at}.skip`, 'must be a non-empty array of patterns');
  if (kind === 'send') {
    if (!isObject(step.send)) throw check.fail(`${at}.send`, 'must be a body (an object)');
    (step.attachments ?? []).forEach((frame, i) => check.frame(frame, `${at}.attachments[${i}]`));
    if (has(step, 'deliberately_invalid')) check.text(step.deliberately_invalid, `${at}.deliberately_invalid`);
  } else if (kind === 'send_frames') {
    if (!Array.isArray(step.send_frames) || step.send_frames.length === 0) throw check.fail(`${at}.send_frames`, 'must be a non-empty array of frames');
    step.send_frames.forEach((frame, i) => check.frame(frame, `${at}.send_frames[${i}]`));
  } else if (kind === 'expect') {
    if (!isObject(step.expect)) throw check.fail(`${at}.expect`, 'must be a pattern for a body (an object)');
  } else if (kind === 'restart_host') {
    if (plays === 'host') throw check.fail(`${at}.restart_host`, 'is for conversations with a host: a peer conversation has no host to restart');
    if (step.restart_host !== 'kill') throw check.fail(`${at}.restart_host`, 'must be "kill" (SIGKILL, then start again on the same journal)');
  } else if (kind === 'expect_unordered') {
    if (!Array.isArray(step.expect_unordered) || step.expect_unordered.length === 0) {
      throw check.fail(`${at}.expect_unordered`, 'must be a non-empty array of {body, repeat?}');
    }
    step.expect_unordered.forEach((item, i) => {
      check.keys(item, `${at}.expect_unordered[${i}]`, ['body'], ['body', 'repeat']);
      if (has(item, 'repeat')) check.integer(item.repeat, `${at}.expect_unordered[${i}].repeat`, 1, 100000);
    });
  } else {
    check.integer(step.expect_nothing_ms, `${at}.expect_nothing_ms`, 1, 600000);
  }
}

// --- matching ----------------------------------------------------------------------------------------------------

/** A member that is not there (only $absent, $oneOf and $not can match it). */
export const MISSING = Symbol('missing');

function pathTo(at, key) {
  if (typeof key === 'number') return `${at}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${at}.${key}` : `${at}[${JSON.stringify(key)}]`;
}

// Like Python's json.dumps (", " and ": "), so reports read the same from both runners.
function pretty(value) {
  if (Array.isArray(value)) return `[${value.map(pretty).join(', ')}]`;
  if (isObject(value)) return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pretty(v)}`).join(', ')}}`;
  if (Buffer.isBuffer(value)) return `<${value.length} bytes>`;
  return JSON.stringify(value) ?? String(value);
}

function short(value, limit = 160) {
  if (value === MISSING) return 'nothing (the member is missing)';
  const text = pretty(value);
  return text.length <= limit ? text : `${text.slice(0, limit - 3)}...`;
}

function matcherKey(value) {
  if (!isObject(value)) return null;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0].startsWith('$') ? keys[0] : null;
}

function jsonType(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') return 'object';
  return typeof value; // 'string', 'number', 'boolean'
}

/** Equality of JSON values (numbers by value; a boolean never equals a number). */
export function jsonEqual(a, b) {
  const type = jsonType(a);
  if (type !== jsonType(b)) return false;
  if (type === 'array') return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  if (type === 'object') {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => has(b, key) && jsonEqual(a[key], b[key]));
  }
  return a === b;
}

const mismatch = (at, expected, received) => ({ path: at, expected, received, toString: () => `${at}: expected ${expected}, received ${received}` });

/**
 * null when `value` matches `pattern` (SPEC 14.2, Patterns), else `{path, expected, received}` saying where and how
 * it differs (its toString() is "<path>: expected ..., received ..."). Captures go into `variables` only on a match.
 */
export function match(pattern, value, variables = {}, at = '$') {
  const trial = { ...variables };
  const found = matchInto(pattern, value, trial, at);
  if (found === null) Object.assign(variables, trial);
  return found;
}

function matchInto(pattern, value, variables, at) {
  const key = matcherKey(pattern);
  if (key !== null) return matchMatcher(key, pattern[key], pattern, value, variables, at);
  if (value === MISSING) return mismatch(at, short(pattern), short(value));
  if (isObject(pattern)) {
    if (!isObject(value)) return mismatch(at, 'an object', short(value));
    for (const [member, item] of Object.entries(pattern)) {
      const found = matchInto(item, has(value, member) ? value[member] : MISSING, variables, pathTo(at, member));
      if (found !== null) return found;
    }
    return null;
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(value) || value.length !== pattern.length) return mismatch(at, `an array of ${pattern.length}: ${short(pattern, 80)}`, short(value));
    for (let i = 0; i < pattern.length; i += 1) {
      const found = matchInto(pattern[i], value[i], variables, pathTo(at, i));
      if (found !== null) return found;
    }
    return null;
  }
  return jsonEqual(pattern, value) ? null : mismatch(at, short(pattern), short(value));
}

function matchMatcher(key, argument, pattern, value, variables, at) {
  const missing = () => mismatch(at, short(pattern), short(MISSING));
  switch (key) {
    case '$absent':
      return value === MISSING ? null : mismatch(at, 'no such member', short(value));
    case '$oneOf': {
      const reasons = [];
      for (const alternative of argument) {
        const trial = { ...variables };
        const found = matchInto(alternative, value, trial, at);
        if (found === null) {
          Object.assign(variables, trial);
          return null;
        }
        reasons.push(String(found));
      }
      return mismatch(at, `one of ${reasons.length} alternatives [${reasons.join('; ')}]`, short(value));
    }
    case '$not':
      return matchInto(argument, value, { ...variables }, at) === null ? mismatch(at, `anything but ${short(argument)}`, short(value)) : null;
    case '$var': {
      if (!has(variables, argument)) throw new FixtureFormatError('', at, `$var "${argument}" is used before any $capture of that name`);
      if (value === MISSING) return missing();
      const captured = variables[argument];
      return jsonEqual(captured, value) ? null : mismatch(at, `${short(captured)} (the value of $var "${argument}")`, short(value));
    }
    default:
      break;
  }
  if (!MATCHERS.has(key)) throw new FixtureFormatError('', at, `${key} is not a matcher (object keys starting with $ are matchers)`);
  if (value === MISSING) return missing();
  switch (key) {
    case '$any': {
      if (!ANY_TYPES.has(argument)) throw new FixtureFormatError('', at, `$any takes one of ${[...ANY_TYPES].join(', ')}, not ${JSON.stringify(argument)}`);
      const type = jsonType(value);
      if (argument === 'value' || type === argument) return null;
      if (argument === 'integer' && type === 'number' && Number.isInteger(value)) return null;
      return mismatch(at, argument === 'value' ? 'any value' : `any ${argument}`, short(value));
    }
    case '$capture':
      variables[argument] = value;
      return null;
    case '$literal':
      return jsonEqual(argument, value) ? null : mismatch(at, short(argument), short(value));
    case '$exact': {
      if (!isObject(value)) return mismatch(at, 'an object', short(value));
      const listed = new Set(Object.keys(argument).filter((k) => matcherKey(argument[k]) !== '$absent'));
      const extra = Object.keys(value).filter((k) => !listed.has(k)).sort();
      if (extra.length > 0) return mismatch(pathTo(at, extra[0]), 'no such member ($exact)', short(value[extra[0]]));
      return matchInto(argument, value, variables, at);
    }
    default: { // $unordered
      if (!Array.isArray(value) || value.length !== argument.length) {
        return mismatch(at, `an array of ${argument.length} in any order: ${short(argument, 80)}`, short(value));
      }
      const left = [...argument];
      for (let i = 0; i < value.length; i += 1) {
        const position = left.findIndex((candidate) => {
          const trial = { ...variables };
          if (matchInto(candidate, value[i], trial, pathTo(at, i)) !== null) return false;
          Object.assign(variables, trial);
          return true;
        });
        if (position < 0) return mismatch(pathTo(at, i), `one of the items left: ${short(left, 100)}`, short(value[i]));
        left.splice(position, 1);
      }
      return null;
    }
  }
}

// --- templates and frames ----------------------------------------------------------------------------------------

function withIndex(value, index) {
  if (index === null) return value;
  if (typeof value === 'string') return value.replaceAll('{{i}}', String(index));
  if (Array.isArray(value)) return value.map((item) => withIndex(item, index));
  if (isObject(value)) {
    if (matcherKey(value) === '$literal') return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withIndex(v, index)]));
  }
  return value;
}

function fill(template, variables, language, at = '$') {
  const key = matcherKey(template);
  if (key === '$literal') return template[key];
  if (key === '$var') {
    const name = template[key];
    if (!has(variables, name)) throw new FixtureFormatError('', at, `$var "${name}" is used before any $capture of that name`);
    return variables[name];
  }
  if (key === '$per_language') {
    const choices = template[key];
    if (language === null) throw new FixtureFormatError('', at, '$per_language is only for peer conversations (plays: host)');
    if (!isObject(choices) || !has(choices, language)) throw new FixtureFormatError('', at, `$per_language has no value for "${language}"`);
    return fill(choices[language], variables, language, at);
  }
  if (key !== null) throw new FixtureFormatError('', at, `${key} cannot be sent; wrap it in {"$literal": ...}`);
  if (Array.isArray(template)) return template.map((item, i) => fill(item, variables, language, pathTo(at, i)));
  if (isObject(template)) return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, fill(v, variables, language, pathTo(at, k))]));
  return template;
}

/** The bytes of one frame description ({text}, {base64}, {json}, {byte, count}, {concat}). */
export function frameBytes(frame) {
  if (has(frame, 'text')) return Buffer.from(frame.text, 'utf8');
  if (has(frame, 'base64')) return Buffer.from(frame.base64, 'base64');
  if (has(frame, 'json')) return Buffer.from(JSON.stringify(frame.json), 'utf8');
  if (has(frame, 'byte')) return Buffer.alloc(frame.count, frame.byte);
  return Buffer.concat(frame.concat.map(frameBytes));
}

// --- message cases -----------------------------------------------------------------------------------------------

const NO_DEFAULT = Symbol('no default');
const FIELDS = {
  request: { id: NO_DEFAULT, action: NO_DEFAULT, payload: null, timeout_ms: NO_DEFAULT, deadline: NO_DEFAULT, progress: false, idempotency_key: NO_DEFAULT },
  response: { id: NO_DEFAULT, ok: NO_DEFAULT, result: NO_DEFAULT, error: NO_DEFAULT },
  progress: { id: NO_DEFAULT, seq: NO_DEFAULT, skipped: NO_DEFAULT, payload: null },
  event: { action: NO_DEFAULT, payload: null, topic: NO_DEFAULT },
  cancel: { id: NO_DEFAULT },
  hello: { peer: NO_DEFAULT, actions: [], features: [], session: NO_DEFAULT, heartbeat_ms: NO_DEFAULT, topics: [] },
  welcome: { host: NO_DEFAULT, session: NO_DEFAULT, actions: NO_DEFAULT, heartbeat_ms: NO_DEFAULT, limits: NO_DEFAULT, info: NO_DEFAULT, library_version: NO_DEFAULT },
  ping: {},
  pong: {},
  bye: {},
};
const NESTED = {
  error: { code: NO_DEFAULT, message: NO_DEFAULT, data: null },
  limits: { max_message_bytes: NO_DEFAULT, max_in_flight: NO_DEFAULT },
};

/** What a body says in protocol terms: the fields its type defines, defaults filled in, unknown ones gone. */
function protocolView(body) {
  const fields = { ...FIELDS[body.type] };
  if (body.type === 'response' && body.ok === true) fields.result = null;
  const view = { v: body.v, type: body.type };
  for (const [name, fallback] of Object.entries(fields)) {
    let value = has(body, name) ? body[name] : fallback;
    if (value === NO_DEFAULT) continue;
    if (has(NESTED, name) && isObject(value)) {
      const nested = {};
      for (const [inner, innerFallback] of Object.entries(NESTED[name])) {
        const innerValue = has(value, inner) ? value[inner] : innerFallback;
        if (innerValue !== NO_DEFAULT) nested[inner] = innerValue;
      }
      value = nested;
    }
    view[name] = value;
  }
  return view;
}

/**
 * Runs one message case through src/wire.js and throws a FixtureFailure if the decoder disagrees: a valid body
 * must decode and re-encode to an equal body (same fields, defaults filled in, unknown fields dropped); an invalid
 * one must be refused with the case's code (bad_message when it names none), keeping a readable id.
 */
export function checkMessageCase(fixtureCase) {
  const decoded = decode([EMPTY, Buffer.from(JSON.stringify(fixtureCase.data), 'utf8')]);
  if (decoded.error) {
    if (fixtureCase.valid) throw new FixtureFailure(`${fixtureCase.name}: a valid body was refused with ${decoded.error.code}: ${decoded.error.message}`);
    const expected = fixtureCase.error ?? 'bad_message';
    if (decoded.error.code !== expected) {
      throw new FixtureFailure(`${fixtureCase.name}: refused with ${decoded.error.code} (${decoded.error.message}), the case says ${expected}`);
    }
    const readable = isObject(fixtureCase.data) && isName(fixtureCase.data.id) ? fixtureCase.data.id : null;
    if (readable !== null && decoded.id !== readable) {
      throw new FixtureFailure(`${fixtureCase.name}: the refusal carries id ${JSON.stringify(decoded.id)}, not the readable id ${JSON.stringify(readable)}`);
    }
    return;
  }
  if (!fixtureCase.valid) throw new FixtureFailure(`${fixtureCase.name}: an invalid body was accepted as a ${decoded.body.type}`);
  if (fixtureCase.trace !== undefined) {
    const got = traceOf(decoded.body);
    if (JSON.stringify(got) !== JSON.stringify(fixtureCase.trace)) {
      throw new FixtureFailure(`${fixtureCase.name}: decoded the trace context as ${JSON.stringify(got)}, the case says ${JSON.stringify(fixtureCase.trace)}`);
    }
  }
  const reencoded = JSON.parse(encode(decoded.body)[1].toString('utf8'));
  const expected = protocolView(fixtureCase.data);
  const literal = Object.fromEntries(Object.entries(expected).map(([k, v]) => [k, { $literal: v }]));
  const found = match({ $exact: literal }, protocolView(reencoded));
  if (found !== null) {
    throw new FixtureFailure(`${fixtureCase.name}: the re-encoded body differs at ${found}\n  fixture:    ${short(fixtureCase.data, 400)}\n  re-encoded: ${short(reencoded, 400)}`);
  }
}

// --- running -----------------------------------------------------------------------------------------------------

/** Queues what each client receives, checks it is a valid message, answers pings in auto mode. */
class Transport {
  constructor(label, autoPong) {
    this.label = label;
    this.autoPong = autoPong;
    this.queues = new Map();
    this.waiters = new Set();
    this.failure = null;
  }

  fail(failure) {
    this.failure ??= failure;
    this.wake();
  }

  wake() {
    for (const waiter of [...this.waiters]) waiter();
  }

  queue(client, frames) {
    if (frames.length < 2) {
      return this.fail(new FixtureFailure(`the ${this.label} sent a message of ${frames.length} frame(s); every message has a signature frame and a body`));
    }
    if (frames[0].length > 0) return this.fail(new FixtureFailure(`the ${this.label} sent a non-empty signature frame without a key`));
    const decoded = decode(frames);
    if (decoded.error) {
      return this.fail(new FixtureFailure(`the ${this.label} sent a body that is not a valid message (${decoded.error.message}): ${frames[1].toString('utf8').slice(0, 300)}`));
    }
    const body = JSON.parse(frames[1].toString('utf8'));
    if (this.autoPong && body.type === 'ping') {
      this.send(client, [EMPTY, PONG]);
      return undefined;
    }
    if (!this.queues.has(client)) this.queues.set(client, []);
    this.queues.get(client).push(body);
    this.wake();
    return undefined;
  }

  /** The client's next body, or null when none came before `deadline` (a performance.now() time). */
  next(client, deadline) {
    return new Promise((resolve, reject) => {
      let timer = null;
      const check = () => {
        const queue = this.queues.get(client);
        let outcome = null;
        if (this.failure) outcome = () => reject(this.failure);
        else if (queue?.length) outcome = () => resolve(queue.shift());
        else if (now() >= deadline) outcome = () => resolve(null);
        clearTimeout(timer);
        if (outcome === null) {
          // Re-armed on every wake-up: a timer may fire a little before the deadline it was set for.
          timer = setTimeout(check, Math.max(1, Math.ceil(deadline - now())));
          return;
        }
        this.waiters.delete(check);
        outcome();
      };
      this.waiters.add(check);
      check();
    });
  }
}

class Dealers extends Transport {
  constructor(endpoint, clients, autoPong, restartHost) {
    super('host', autoPong);
    this.clients = clients;
    this.restartHost = restartHost;
    this.dealers = new Map();
    this.open(endpoint);
  }

  /** One fresh DEALER per client; what a replaced one still delivers is ignored. */
  open(endpoint) {
    for (const client of this.clients) {
      const dealer = new ZmtpDealer(endpoint, { sendQueueLimit: Number.MAX_SAFE_INTEGER });
      const current = () => this.dealers.get(client) === dealer;
      dealer.on('message', (frames) => {
        if (current()) this.queue(client, frames);
      });
      dealer.on('error', (error) => {
        if (current()) this.fail(new FixtureFailure(`ZMTP error talking to the host at ${endpoint}: ${error.message}`));
      });
      dealer.connect();
      this.dealers.set(client, dealer);
    }
  }

  send(client, frames) {
    this.dealers.get(client).send(frames);
  }

  /**
   * The restart_host step (SPEC 14.2): closes every client's socket (what it received and no step took is dropped),
   * has the caller's restartHost() kill the host and start it again, and opens a fresh socket per client to the
   * endpoint it resolves to.
   */
  async restart() {
    await this.close();
    this.dealers.clear();
    this.queues.clear();
    let endpoint;
    try {
      endpoint = await this.restartHost();
    } catch (error) {
      throw new FixtureFailure(`restartHost() failed to kill the host and start it again: ${error?.message ?? error}`);
    }
    if (typeof endpoint !== 'string' || !endpoint.includes('://')) {
      throw new FixtureFailure(`restartHost() must resolve to the restarted host's endpoint, not ${short(endpoint)}`);
    }
    this.open(endpoint);
  }

  async close() {
    await Promise.all([...this.dealers.values()].map((dealer) => dealer.close(0)));
  }
}

class PeerUnderTest extends Transport {
  static async start(program, evaluate, autoPong, bind) {
    const transport = new PeerUnderTest(autoPong);
    const endpoint = await transport.router.bind(bind);
    const [command, ...args] = program.command;
    transport.child = spawn(command, [...args, endpoint, ...(evaluate ? ['--evaluate'] : [])], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: program.env ? { ...process.env, ...program.env } : process.env,
    });
    transport.child.stderr.on('data', (chunk) => {
      transport.stderr = (transport.stderr + chunk.toString()).slice(-3000);
    });
    transport.exited = new Promise((resolve) => {
      transport.child.on('error', (error) => {
        transport.stderr += `\n(${error.message})`;
        transport.exitCode = error.code;
        resolve();
      });
      transport.child.on('close', (code, signal) => {
        transport.exitCode = code ?? signal;
        resolve();
      });
    });
    transport.exited.then(() => {
      if (!transport.closing) transport.fail(transport.exitFailure());
    });
    return transport;
  }

  constructor(autoPong) {
    super('peer under test', autoPong);
    this.router = new ZmtpRouter();
    this.routingId = null;
    this.stderr = '';
    this.exitCode = null;
    this.closing = false;
    this.router.on('message', (routingId, frames) => {
      this.routingId = routingId; // replies go where the peer last spoke from
      this.queue('peer', frames);
    });
  }

  exitFailure() {
    return new FixtureFailure(`the peer under test exited with code ${this.exitCode}; its stderr:\n${this.stderr}`);
  }

  send(client, frames) {
    if (this.routingId === null) throw new FixtureFailure('a step sends to the peer before it has sent anything (expect its hello first)');
    this.router.send(this.routingId, frames);
  }

  async close() {
    this.closing = true;
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await this.exited;
      clearTimeout(timer);
    }
    await this.router.close();
  }
}

/** Whether the conversation has a restart_host step, and so needs a host of its own that its runner can restart. */
export function restartsHost(conversation) {
  return conversation.steps.some((step) => has(step, 'restart_host'));
}

/**
 * Plays the conversation's peers against the host at `endpoint`; rejects with a FixtureFailure at the first failing step.
 * `restartHost`, an async function, is what a restart_host step calls between closing the clients' sockets and opening
 * fresh ones: it kills the host with SIGKILL, starts it again with the same flags on the same journal and endpoint,
 * and resolves to the endpoint. A conversation with such a step is not run without it (rejected, saying why).
 */
export async function runConversation(conversation, endpoint, { restartHost } = {}) {
  if (conversation.plays !== 'peers') throw new TypeError(`"${conversation.description}" plays the host: run it with runPeerConversation`);
  if (restartsHost(conversation) && typeof restartHost !== 'function') {
    const n = conversation.steps.findIndex((step) => has(step, 'restart_host'));
    throw new FixtureFailure(`conversation "${conversation.description}" was not run: step ${n + 1} restarts the host (restart_host), `
      + 'which needs a host of its own that the runner can kill and start again on the same journal: pass runConversation '
      + '{ restartHost }, an async function that does so and resolves to the endpoint');
  }
  const transport = new Dealers(endpoint, conversation.clients, conversation.pings === 'auto', restartHost);
  try {
    await new Run(conversation, transport, null).run();
  } finally {
    await transport.close();
  }
}

/**
 * Binds a ROUTER at `bind` (default tcp://127.0.0.1:*), starts `program.command` + [endpoint] (+ --evaluate when
 * the conversation says so) and plays the host. `program.language` picks `$per_language` values.
 */
export async function runPeerConversation(conversation, program, { bind = 'tcp://127.0.0.1:*' } = {}) {
  if (conversation.plays !== 'host') throw new TypeError(`"${conversation.description}" plays peers: run it with runConversation`);
  const transport = await PeerUnderTest.start(program, conversation.evaluate, conversation.pings === 'auto', bind);
  try {
    await new Run(conversation, transport, program.language).run();
    if (transport.failure) throw transport.failure; // a peer that crashed on the last step fails too
  } catch (error) {
    if (error instanceof FixtureFailure && transport.exitCode !== null && !error.message.includes('its stderr')) {
      throw new FixtureFailure(`${error.message}\n(the peer under test exited with code ${transport.exitCode}; its stderr:\n${transport.stderr})`);
    }
    throw error;
  } finally {
    await transport.close();
  }
}

class Run {
  constructor(conversation, transport, language) {
    this.conversation = conversation;
    this.transport = transport;
    this.language = language;
    this.variables = {};
  }

  async run() {
    const { steps } = this.conversation;
    for (let n = 0; n < steps.length; n += 1) {
      try {
        await this.step(steps[n]);
      } catch (error) {
        if (error instanceof FixtureFailure) throw new FixtureFailure(`${this.where(n, steps[n])}: ${error.message}`);
        if (error instanceof FixtureFormatError) {
          throw new FixtureFormatError(this.conversation.file, `$.steps[${n}]${error.path.startsWith('$') ? error.path.slice(1) : error.path}`, error.reason);
        }
        throw error;
      }
    }
  }

  where(n, step) {
    const kind = STEP_KINDS.find((k) => has(step, k));
    const client = has(step, 'client') ? `, client "${step.client}"` : '';
    const name = this.conversation.file ? path.basename(this.conversation.file) : '(no file)';
    return `conversation "${this.conversation.description}" (${name}) failed at step ${n + 1} of ${this.conversation.steps.length} (${kind}${client}; $.steps[${n}])`;
  }

  async step(step) {
    const client = step.client ?? this.conversation.clients[0];
    const indexes = has(step, 'repeat') ? Array.from({ length: step.repeat }, (_, i) => i + 1) : [null];
    if (has(step, 'send')) {
      const attachments = (step.attachments ?? []).map(frameBytes);
      for (const index of indexes) {
        const body = fill(withIndex(step.send, index), this.variables, this.language, '$.send');
        this.transport.send(client, [EMPTY, Buffer.from(JSON.stringify(body), 'utf8'), ...attachments]);
      }
    } else if (has(step, 'send_frames')) {
      this.transport.send(client, step.send_frames.map(frameBytes));
    } else if (has(step, 'expect')) {
      for (const index of indexes) await this.expect(client, withIndex(step.expect, index), step);
    } else if (has(step, 'expect_unordered')) {
      await this.expectUnordered(client, step);
    } else if (has(step, 'restart_host')) {
      await this.transport.restart();
    } else {
      await this.expectNothing(client, step);
    }
  }

  skipped(step, body) {
    return (step.skip ?? []).some((pattern) => match(pattern, body, { ...this.variables }) === null);
  }

  async receive(client, step, deadline) {
    for (;;) {
      const body = await this.transport.next(client, deadline);
      if (body === null || !this.skipped(step, body)) return body;
    }
  }

  async expect(client, pattern, step) {
    const within = step.within_ms ?? DEFAULT_WITHIN_MS;
    const body = await this.receive(client, step, now() + within);
    if (body === null) throw new FixtureFailure(`nothing came within ${within} ms\n  expected: ${short(pattern, 600)}`);
    const found = match(pattern, body, this.variables);
    if (found !== null) {
      throw new FixtureFailure(`the received body does not match\n  at ${found}\n  expected: ${short(pattern, 600)}\n  received: ${short(body, 600)}`);
    }
  }

  async expectUnordered(client, step) {
    const items = [];
    for (const item of step.expect_unordered) {
      if (has(item, 'repeat')) for (let i = 1; i <= item.repeat; i += 1) items.push(withIndex(item.body, i));
      else items.push(item.body);
    }
    const total = items.length;
    const within = step.within_ms ?? DEFAULT_WITHIN_MS;
    const deadline = now() + within;
    while (items.length > 0) {
      const body = await this.receive(client, step, deadline);
      if (body === null) {
        throw new FixtureFailure(`${items.length} of ${total} expected messages did not come within ${within} ms; the first still missing: ${short(items[0], 600)}`);
      }
      const mismatches = [];
      const position = items.findIndex((pattern) => {
        const found = match(pattern, body, this.variables);
        if (found !== null) mismatches.push(found);
        return found === null;
      });
      if (position < 0) {
        const closest = mismatches.slice(0, 3).map((m) => `    ${m}`).join('\n');
        throw new FixtureFailure(`a received body matches none of the ${items.length} expected messages left\n  received: ${short(body, 600)}\n  against the first of them:\n${closest}`);
      }
      items.splice(position, 1);
    }
  }

  async expectNothing(client, step) {
    const ms = step.expect_nothing_ms;
    const body = await this.receive(client, step, now() + ms);
    if (body !== null) throw new FixtureFailure(`expected nothing for ${ms} ms, received: ${short(body, 600)}`);
  }
}
