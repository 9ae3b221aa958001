#!/usr/bin/env node
// The conformance peer (protocol/SPEC.md section 14.3): serves a fixed set of actions so that peer conversations
// check this library against the same files as every other peer library.
//
//   node peers/node/bin/conformance-peer.js ENDPOINT [--evaluate]
//
// Connects as `conformance-peer`, serves echo, add, fail, sleep, count, emit and callback, answers the `relay`
// event with a `relayed` event carrying the same payload, and runs until SIGTERM or SIGINT (then says bye).
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

function actions(peer) {
  return {
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
      // Without timeout_ms the call has no deadline of its own (null), like the Python conformance peer's.
      return peer().call(payload.action, payload.payload ?? null, { timeout: timeoutMs ?? null }); // its error passes on
    },
  };
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
