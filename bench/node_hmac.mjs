// What one HMAC-SHA256 costs the Node peer at each message size: the keyed channel's (src/signing.js channelMac:
// node:crypto's one-shot SHA-256 for the inner and the outer hash) against node:crypto's
// createHmac and against src/sha256.js alone (JavaScript, the key prepared once). All three MACs are checked equal.
// Prints one JSON line.
//   node bench/node_hmac.mjs [--repeat N]
// Microseconds per MAC, the best of N timed runs each; a size is the whole MAC input (header, lengths and frames).
import { createHmac, randomBytes } from 'node:crypto';
import { channelKey, channelMac } from '../peers/node/src/signing.js';
import { hmacSha256 } from '../peers/node/src/sha256.js';
import { timed as timedRuns } from '../peers/node/bench/timed.js';

const args = { repeat: 5 };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in args) || !(Number(process.argv[i + 1]) >= 1)) throw new Error(`bad option ${process.argv[i]}`);
  args[key] = Number(process.argv[i + 1]);
}

const SIZES = [128, 256, 320, 384, 448, 512, 640, 1024, 4096];
const key = randomBytes(32);
const channel = channelKey(key);
const { prepared } = channel;
const out = new Uint8Array(32);

// Runs of about 20 ms (the loop's own default is 50).
const timed = (run) => timedRuns(run, { repeat: args.repeat, runMs: 20 });

const result = {};
for (const size of SIZES) {
  const message = randomBytes(size);
  const parts = [message];
  const reference = createHmac('sha256', key).update(message).digest();
  if (!reference.equals(hmacSha256(prepared, parts, out)) || !reference.equals(channelMac(channel, parts))) {
    throw new Error(`the MACs of ${size} bytes differ`);
  }
  result[size] = {
    channel_us: timed(() => channelMac(channel, parts)),
    create_hmac_us: timed(() => createHmac('sha256', key).update(message).digest()),
    javascript_us: timed(() => hmacSha256(prepared, parts, out)),
  };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
