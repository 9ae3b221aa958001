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
import {
  Checker, ConversationTransport, FixtureFailure, FixtureFormatError, Run, conversationFrom, match, restartsHost, short,
} from './conversation.js';

export {
  DEFAULT_WITHIN_MS, FixtureFailure, FixtureFormatError, MISSING, conversationFrom, frameBytes, jsonEqual, match, restartsHost,
} from './conversation.js';
import { traceOf } from './trace.js';

const EMPTY = Buffer.alloc(0);
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

class Dealers extends ConversationTransport {
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

class PeerUnderTest extends ConversationTransport {
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
