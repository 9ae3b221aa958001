// The Node peer (peers/node) against a ZeroBridge host; prints one JSON line.
//   node bench/node_peer.mjs echo ENDPOINT [--window 1|N] [--seconds S] [--max N]
//   node bench/node_peer.mjs progress ENDPOINT [--events N]
// `echo`: window 1 measures sequential round trips, a larger window keeps that many calls in flight.
// `progress`: one `count` call streaming N progress events; checks they arrive complete and in order.
// ENDPOINT may be a host's connection file (keyed, and CURVE when it says so). `warmup` in the result is the requests
// (events) before the measured phase; `cpu_us_per_request` is this process's CPU time over it, per request.
import { connect } from '../peers/node/index.js';

// The ~100-byte payload every driver echoes (bench/common.py and zerobridge-bench build the same one).
const PAYLOAD = { name: 'bench', seq: 42, text: 'x'.repeat(65) };
const PAYLOAD_JSON = JSON.stringify(PAYLOAD);

function parse(argv) {
  const args = { what: argv[0], endpoint: argv[1], window: 1, seconds: 1, max: 1e6, warmup: 500, events: 100000 };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || Number.isNaN(Number(argv[i + 1]))) throw new Error(`bad option ${argv[i]}`);
    args[key] = Number(argv[i + 1]);
  }
  if (!['echo', 'progress'].includes(args.what) || !args.endpoint) {
    throw new Error('usage: node_peer.mjs echo|progress ENDPOINT [options]');
  }
  return args;
}

function percentiles(latenciesNs) {
  const sorted = Float64Array.from(latenciesNs).sort();
  const at = (fraction) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] / 100) / 10;
  return { p50_us: at(0.5), p99_us: at(0.99), p999_us: at(0.999), max_us: Math.round(sorted[sorted.length - 1] / 100) / 10, samples: sorted.length };
}

async function checkedEcho(peer) {
  const answer = await peer.call('echo', PAYLOAD);
  if (JSON.stringify(answer) !== PAYLOAD_JSON) throw new Error(`echo returned ${JSON.stringify(answer)}`);
}

const now = () => Number(process.hrtime.bigint());

function measured(completed, start, startCpu, warmup) {
  const seconds = (now() - start) / 1e9;
  const cpu = process.cpuUsage(startCpu);
  return { requests: completed, seconds, per_second: completed / seconds, warmup,
    cpu_us_per_request: (cpu.user + cpu.system) / Math.max(completed, 1) };
}

async function echo(args) {
  const peer = await connect(args.endpoint, { name: 'bench-node' });
  try {
    for (let i = 0; i < args.warmup; i += 1) await checkedEcho(peer);
    const result = { window: args.window };
    const startCpu = process.cpuUsage();
    const start = now();
    const end = start + args.seconds * 1e9;
    let completed = 0;
    if (args.window === 1) {
      const latencies = [];
      while (latencies.length < args.max) {
        const before = now();
        await checkedEcho(peer);
        const after = now();
        latencies.push(after - before);
        if (after >= end) break;
      }
      completed = latencies.length;
      Object.assign(result, percentiles(latencies));
    } else {
      let issued = 0;
      const caller = async () => {
        let mine = 0;
        while (issued < args.max) {
          issued += 1;
          await checkedEcho(peer);
          mine += 1;
          if (mine % 16 === 0 && now() >= end) break;
        }
        return mine;
      };
      const counts = await Promise.all(Array.from({ length: args.window }, caller));
      completed = counts.reduce((a, b) => a + b, 0);
    }
    return Object.assign(result, measured(completed, start, startCpu, args.warmup));
  } finally {
    await peer.close();
  }
}

async function progress(args) {
  const peer = await connect(args.endpoint, { name: 'bench-node-progress' });
  try {
    const warmup = 1000;
    const warm = peer.stream('count', { n: warmup });
    for await (const _ of warm.progress) { /* warm up */ }
    await warm.result;
    const n = args.events;
    let expected = 1;
    let outOfOrder = 0;
    const startCpu = process.cpuUsage();
    const start = now();
    const call = peer.stream('count', { n }, { timeout: 120000 });
    for await (const event of call.progress) {
      if (event.i !== expected) outOfOrder += 1;
      expected += 1;
    }
    const answer = await call.result;
    const received = expected - 1;
    return { ...measured(received, start, startCpu, warmup), events: n, received, out_of_order: outOfOrder,
      result_ok: answer?.n === n, in_order_and_complete: received === n && outOfOrder === 0 };
  } finally {
    await peer.close();
  }
}

const args = parse(process.argv.slice(2));
const result = args.what === 'echo' ? await echo(args) : await progress(args);
process.stdout.write(`${JSON.stringify(result)}\n`);
