// The Node peer (peers/node) against a ZeroBridge host; prints one JSON line.
//   node bench/node_peer.mjs echo ENDPOINT [--window 1|N] [--seconds S] [--max N]
//   node bench/node_peer.mjs progress ENDPOINT [--events N]
// `echo`: window 1 measures sequential round trips, a larger window keeps that many calls in flight.
// `progress`: one `count` call streaming N progress events; checks they arrive complete and in order.
// ENDPOINT may be a host's connection file (keyed, and CURVE when it says so). `warmup` in the result is the requests
// (events) before the measured phase; `cpu_us_per_request` is this process's CPU time over it, per request.
import { connect } from '../peers/node/index.js';
import { PAYLOAD, PAYLOAD_JSON, WARMUP_CALLS, measureEcho, measured, now, parseArgs } from './node_common.mjs';

async function checkedEcho(peer) {
  const answer = await peer.call('echo', PAYLOAD);
  if (JSON.stringify(answer) !== PAYLOAD_JSON) throw new Error(`echo returned ${JSON.stringify(answer)}`);
}

async function echo(args) {
  const peer = await connect(args.endpoint, { name: 'bench-node' });
  try {
    return await measureEcho(args, () => checkedEcho(peer));
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

const args = parseArgs(process.argv.slice(2), { window: 1, seconds: 1, max: 1e6, warmup: WARMUP_CALLS, events: 100000 },
  'usage: node_peer.mjs echo|progress ENDPOINT [options]');
const result = args.what === 'echo' ? await echo(args) : await progress(args);
process.stdout.write(`${JSON.stringify(result)}\n`);
