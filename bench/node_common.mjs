// What the Node bench drivers share: the payload, the clock, percentiles and a measured phase's figures.

// The ~100-byte payload every driver echoes (bench/common.py and zerobridge-bench build the same one).
export const PAYLOAD = { name: 'bench', seq: 42, text: 'x'.repeat(65) };
export const PAYLOAD_JSON = JSON.stringify(PAYLOAD);
/** Calls before an echo row's measured phase: the same in every driver (bench/common.py says why). */
export const WARMUP_CALLS = 2000;

/** Nanoseconds on the monotonic clock. */
export const now = () => Number(process.hrtime.bigint());

/** p50/p99/p99.9/max in microseconds, exact (from the sorted samples). */
export function percentiles(latenciesNs) {
  const sorted = Float64Array.from(latenciesNs).sort();
  const at = (fraction) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] / 100) / 10;
  return { p50_us: at(0.5), p99_us: at(0.99), p999_us: at(0.999), max_us: Math.round(sorted[sorted.length - 1] / 100) / 10, samples: sorted.length };
}

/** A measured phase's rate, and this process's CPU time per request over it; `warmup`: requests before it. */
export function measured(completed, start, startCpu, warmup) {
  const seconds = (now() - start) / 1e9;
  const cpu = process.cpuUsage(startCpu);
  return { requests: completed, seconds, per_second: completed / seconds, warmup,
    cpu_us_per_request: (cpu.user + cpu.system) / Math.max(completed, 1) };
}

/** `--name value` options over `defaults` (numbers only), after two positional arguments: what and where. */
export function parseArgs(argv, defaults, usage) {
  const args = { what: argv[0], endpoint: argv[1], ...defaults };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in defaults) || Number.isNaN(Number(argv[i + 1]))) throw new Error(`bad option ${argv[i]}`);
    args[key] = Number(argv[i + 1]);
  }
  if (!['echo', 'progress'].includes(args.what) || !args.endpoint) throw new Error(usage);
  return args;
}

/**
 * The echo rows: `warmup` calls, then for `seconds` (or `max` calls) one at a time with latency percentiles
 * (window 1), or `window` callers each calling again as soon as its last call returned.
 */
export async function measureEcho(args, call) {
  for (let i = 0; i < args.warmup; i += 1) await call();
  const result = { window: args.window };
  const startCpu = process.cpuUsage();
  const start = now();
  const end = start + args.seconds * 1e9;
  let completed = 0;
  if (args.window === 1) {
    const latencies = [];
    while (latencies.length < args.max) {
      const before = now();
      await call();
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
        await call();
        mine += 1;
        if (mine % 16 === 0 && now() >= end) break;
      }
      return mine;
    };
    const counts = await Promise.all(Array.from({ length: args.window }, caller));
    completed = counts.reduce((a, b) => a + b, 0);
  }
  return Object.assign(result, measured(completed, start, startCpu, args.warmup));
}
