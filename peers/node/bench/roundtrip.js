#!/usr/bin/env node
// Sequential call('echo') round trips per second against a host.
// Usage: node peers/node/bench/roundtrip.js ENDPOINT [--seconds N] [--payload-bytes N]
import { connect } from '../index.js';

function parseArgs(argv) {
  const args = { endpoint: null, seconds: 5, payloadBytes: 16 };
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--seconds') args.seconds = Number(argv[++i]);
    else if (argv[i] === '--payload-bytes') args.payloadBytes = Number(argv[++i]);
    else if (!args.endpoint) args.endpoint = argv[i];
    else throw new Error(`unexpected argument ${argv[i]}`);
  }
  if (!args.endpoint || !(args.seconds > 0) || !(args.payloadBytes >= 0)) {
    throw new Error('usage: roundtrip.js ENDPOINT [--seconds N] [--payload-bytes N]');
  }
  return args;
}

const { endpoint, seconds, payloadBytes } = parseArgs(process.argv.slice(2));
const peer = await connect(endpoint, { name: 'bench-roundtrip' });
const payload = 'x'.repeat(payloadBytes);
try {
  for (let i = 0; i < 500; i += 1) await peer.call('echo', payload); // warm up the JIT and the host
  const latencies = [];
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(seconds * 1e9));
  let now = start;
  while (now < end) {
    const before = now;
    await peer.call('echo', payload);
    now = process.hrtime.bigint();
    latencies.push(Number(now - before) / 1000);
  }
  const elapsed = Number(now - start) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(1);
  console.log(`${endpoint}: ${latencies.length} sequential echo calls (${payloadBytes}-byte payload) in ${elapsed.toFixed(2)} s`);
  console.log(`round trips/s: ${Math.round(latencies.length / elapsed)}`);
  console.log(`latency us: p50 ${pct(0.5)}  p90 ${pct(0.9)}  p99 ${pct(0.99)}  max ${latencies[latencies.length - 1].toFixed(1)}`);
} finally {
  await peer.close();
}
