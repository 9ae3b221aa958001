#!/usr/bin/env node
// The conformance peer (protocol/SPEC.md section 14.3): serves a fixed set of actions so that peer conversations
// check this library against the same files as every other peer library.
//
//   node peers/node/bin/conformance-peer.js ENDPOINT [--evaluate]
//
// Connects as `conformance-peer`, serves echo, add, fail, sleep, count, emit and callback, each described with the
// JSON Schemas of its payload, result and (count) progress (served as `$describe`, hashed in `hello.catalogue`),
// answers the `relay` event with a `relayed` event carrying the same payload, and runs until SIGTERM or SIGINT (then
// says bye).
// --evaluate turns $evaluate on: only ever point it at a host you trust.

import { Peer, BridgeError } from '../index.js';

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const isCount = (value) => Number.isInteger(value) && value >= 0;
const invalid = (expected) => new BridgeError('invalid_payload', `expected ${expected}`);

/** Resolves after `ms`, or rejects as soon as `signal` aborts (cancel, timeout_ms, host lost). */
function wait(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const integer = (minimum) => ({ type: 'integer', minimum });
const object = (properties, required, title) => ({ type: 'object', title, properties, required });

// SPEC 7.8: what each action takes, returns and reports, in the keyword subset code generators understand. The
// handlers below check exactly this.
const DESCRIPTIONS = {
  echo: { doc: 'Returns the payload unchanged (null when absent).', payload: {}, result: {} },
  add: {
    doc: 'Adds two numbers: an integer when both are.',
    payload: object({ a: { type: 'number' }, b: { type: 'number' } }, ['a', 'b'], 'AddPayload'),
    result: { type: 'number' },
  },
  fail: {
    doc: 'Always fails: throws an Error with the message, answered handler_error.',
    payload: object({ message: { type: 'string' } }, ['message'], 'FailPayload'),
    result: {},
  },
  sleep: {
    doc: 'Waits ms milliseconds, honouring cancel and timeout_ms.',
    payload: object({ ms: integer(0) }, ['ms'], 'SleepPayload'),
    result: object({ slept_ms: integer(0) }, ['slept_ms'], 'SleepResult'),
  },
  count: {
    doc: 'Reports progress {i, n} for i = 1..n, waiting delay_ms before each, then returns {n}.',
    payload: object({ n: integer(0), delay_ms: integer(0) }, ['n'], 'CountPayload'),
    result: object({ n: integer(0) }, ['n'], 'CountResult'),
    progress: object({ i: integer(1), n: integer(0) }, ['i', 'n'], 'CountProgress'),
  },
  emit: {
    doc: 'Posts the event {action, payload} to the host, then returns null.',
    payload: object({ action: { type: 'string', minLength: 1 }, payload: {} }, ['action'], 'EmitPayload'),
    result: { type: 'null' },
  },
  callback: {
    doc: 'Calls action on the host with payload (and timeout_ms, else no limit) and returns its result or error.',
    payload: object({ action: { type: 'string', minLength: 1 }, payload: {}, timeout_ms: integer(1) }, ['action'], 'CallbackPayload'),
    result: {},
  },
};

function actions(peer) {
  const handlers = {
    echo: (payload) => payload,
    add: (payload) => {
      if (!isObject(payload) || typeof payload.a !== 'number' || typeof payload.b !== 'number') throw invalid('{"a": number, "b": number}');
      return payload.a + payload.b;
    },
    fail: (payload) => {
      if (!isObject(payload) || typeof payload.message !== 'string') throw invalid('{"message": string}');
      throw new Error(payload.message); // an ordinary exception: the library makes it handler_error
    },
    sleep: async (payload, context) => {
      if (!isObject(payload) || !isCount(payload.ms)) throw invalid('{"ms": integer >= 0}');
      await wait(payload.ms, context.signal);
      return { slept_ms: payload.ms };
    },
    count: async (payload, context) => {
      const delayMs = isObject(payload) ? (payload.delay_ms ?? 0) : 0;
      if (!isObject(payload) || !isCount(payload.n) || !isCount(delayMs)) throw invalid('{"n": integer >= 0, "delay_ms"?: integer >= 0}');
      for (let i = 1; i <= payload.n; i += 1) {
        await wait(delayMs, context.signal);
        context.progress({ i, n: payload.n });
      }
      return { n: payload.n };
    },
    emit: (payload) => {
      if (!isObject(payload) || typeof payload.action !== 'string' || payload.action === '') throw invalid('{"action": string, "payload"?: any}');
      peer().post(payload.action, payload.payload ?? null);
      return null;
    },
    callback: (payload) => {
      const expected = '{"action": string, "payload"?: any, "timeout_ms"?: integer >= 1}';
      if (!isObject(payload) || typeof payload.action !== 'string' || payload.action === '') throw invalid(expected);
      const timeoutMs = payload.timeout_ms;
      if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs >= 1)) throw invalid(expected);
      // Without timeout_ms the call has no deadline of its own (Infinity: no limit), like the Python conformance peer's.
      return peer().call(payload.action, payload.payload ?? null, { timeout: timeoutMs ?? Infinity }); // its error passes on
    },
  };
  // Each handler with its description: { handler, doc, payload, result, progress? }.
  return Object.fromEntries(Object.entries(handlers).map(([name, handler]) => [name, { handler, ...DESCRIPTIONS[name] }]));
}

async function main(argv) {
  const endpoint = argv.find((arg) => !arg.startsWith('--'));
  const unknown = argv.filter((arg) => arg.startsWith('--') && arg !== '--evaluate');
  if (endpoint === undefined || unknown.length > 0) {
    process.stderr.write('usage: conformance-peer.js ENDPOINT [--evaluate]\n');
    return 2;
  }
  // The handlers reach the peer through a function: a request may arrive in the same turn as the welcome.
  const peer = new Peer(endpoint, {
    name: 'conformance-peer',
    actions: actions(() => peer),
    evaluate: argv.includes('--evaluate'),
    timeout: 10_000,
  });
  peer.on('relay', (payload) => peer.post('relayed', payload));
  await peer.connect();
  const stop = async () => {
    await peer.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return null;
}

main(process.argv.slice(2)).then((code) => {
  if (code !== null) process.exitCode = code;
}, (error) => {
  process.stderr.write(`conformance peer: ${error?.message ?? error}\n`);
  process.exitCode = 1;
});
