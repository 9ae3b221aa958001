// The Node peer's CURVE cryptography (peers/node/src/curve.js, pure JavaScript) against TweetNaCl-js (Debian's
// node-tweetnacl, the reference speed): sealing and opening XSalsa20-Poly1305 boxes under a precomputed key, which is
// what every CURVE MESSAGE command costs (crypto_box_afternm is crypto_secretbox). Prints one JSON line.
//   node bench/node_curve.mjs [--seconds S] [--repeat N]
// Small messages in microseconds per message, large ones in MB/s (10^6 bytes); the best of N timed runs each.
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { secretbox, secretboxOpen } from '../peers/node/src/curve.js';

const TWEETNACL = '/usr/share/nodejs/tweetnacl';
const nacl = createRequire(import.meta.url)(TWEETNACL);

function parse(argv) {
  const args = { seconds: 0.1, repeat: 3 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || Number.isNaN(Number(argv[i + 1]))) throw new Error(`bad option ${argv[i]}`);
    args[key] = Number(argv[i + 1]);
  }
  return args;
}

const SIZES = { small: 200, '64k': 64 * 1024, '1m': 1024 * 1024 };

// Both sides get the same inputs; tweetnacl's result is checked to open with ours and ours with tweetnacl, so the
// figures compare equal work.
const IMPLEMENTATIONS = {
  ours: { seal: secretbox, open: secretboxOpen },
  tweetnacl: { seal: (m, n, k) => nacl.box.after(m, n, k), open: (b, n, k) => nacl.box.open.after(b, n, k) },
};

/** Seconds per call of `fn` over calls in growing batches until `seconds` pass. */
function secondsPerCall(fn, seconds) {
  let calls = 0;
  let batch = 1;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds) {
    for (let i = 0; i < batch; i += 1) fn();
    calls += batch;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    if (batch < 1024) batch *= 2;
  }
  return elapsed / calls;
}

function main() {
  const args = parse(process.argv.slice(2));
  const key = randomBytes(32);
  const nonce = randomBytes(24);
  const result = { seconds_per_run: args.seconds, repeat: args.repeat };
  for (const [size, length] of Object.entries(SIZES)) {
    const message = randomBytes(length);
    const sealed = secretbox(message, nonce, key);
    if (Buffer.compare(Buffer.from(nacl.box.after(message, nonce, key)), sealed) !== 0) {
      throw new Error(`ours and tweetnacl's boxes of ${length} bytes differ`);
    }
    const timed = [];
    for (const [name, implementation] of Object.entries(IMPLEMENTATIONS)) {
      const opened = implementation.open(sealed, nonce, key);
      if (!opened || Buffer.compare(Buffer.from(opened), message) !== 0) throw new Error(`${name} does not open the box`);
      timed.push([`${name}_seal_${size}`, () => implementation.seal(message, nonce, key)]);
      timed.push([`${name}_open_${size}`, () => implementation.open(sealed, nonce, key)]);
    }
    // A first round warms the JIT up; then runs take turns, so that load on the machine and the garbage collector
    // (paying for the garbage of the run before) fall on every figure alike. The best run of each counts.
    for (const [, fn] of timed) secondsPerCall(fn, args.seconds / 4);
    const best = new Map();
    for (let run = 0; run < args.repeat; run += 1) {
      for (const [name, fn] of timed) best.set(name, Math.min(best.get(name) ?? Infinity, secondsPerCall(fn, args.seconds)));
    }
    for (const [name, perCall] of best) {
      result[name] = size === 'small'
        ? { bytes: length, us_per_message: perCall * 1e6 }
        : { bytes: length, mb_per_second: length / perCall / 1e6 };
    }
  }
  console.log(JSON.stringify(result));
}

main();
