// The timing loop of the Node peer's micro-benchmarks (bench/keyed-batch.js here, and the repository's
// bench/node_hmac.mjs and bench/node_decode.mjs): enough calls to take about `runMs`, then the best of `repeat` such
// runs.

/** Microseconds per call of `run` (to the nanosecond), the best of `repeat` timed runs of about `runMs` each. */
export function timed(run, { repeat, runMs = 50 }) {
  const runNs = BigInt(runMs) * 1_000_000n;
  let calls = 1;
  for (let started = process.hrtime.bigint(); process.hrtime.bigint() - started < runNs; calls *= 2) {
    for (let i = 0; i < calls; i += 1) run();
  }
  let best = Infinity;
  for (let round = 0; round < repeat; round += 1) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < calls; i += 1) run();
    best = Math.min(best, Number(process.hrtime.bigint() - started) / 1000 / calls);
  }
  return Math.round(best * 1000) / 1000;
}
