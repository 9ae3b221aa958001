// What one HMAC-SHA256 costs the Node peer at each message size: src/sha256.js (JavaScript, the channel's key
// prepared once) against node:crypto's createHmac, the two the keyed channel chooses between (src/signing.js,
// JS_HMAC_LIMIT: JavaScript up to the size where they meet). Both MACs are checked equal. Prints one JSON line.
//   node bench/node_hmac.mjs [--repeat N]
// Microseconds per MAC, the best of N timed runs each; a size is the whole MAC input (header, lengths and frames).
import { createHmac, randomBytes } from 'node:crypto';
import { hmacSha256, prepareHmacKey } from '../peers/node/src/sha256.js';
import { timed as timedRuns } from '../peers/node/bench/timed.js';

const args = { repeat: 5 };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in args) || !(Number(process.argv[i + 1]) >= 1)) throw new Error(`bad option ${process.argv[i]}`);
  args[key] = Number(process.argv[i + 1]);
}

const SIZES = [128, 256, 320, 384, 448, 512, 640, 1024, 4096];
const key = randomBytes(32);
const prepared = prepareHmacKey(key);
const out = new Uint8Array(32);

// Runs of about 20 ms (the loop's own default is 50).
const timed = (run) => timedRuns(run, { repeat: args.repeat, runMs: 20 });

const result = {};
for (const size of SIZES) {
  const message = randomBytes(size);
  const parts = [message];
  if (Buffer.compare(Buffer.from(hmacSha256(prepared, parts, out)), createHmac('sha256', key).update(message).digest()) !== 0) {
    throw new Error(`the two MACs of ${size} bytes differ`);
  }
  result[size] = {
    javascript_us: timed(() => hmacSha256(prepared, parts, out)),
    create_hmac_us: timed(() => createHmac('sha256', key).update(message).digest()),
  };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
