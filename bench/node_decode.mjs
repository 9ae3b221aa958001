// What decoding one answer costs the Node peer (src/wire.js decode: the JSON text, its checks, SPEC 4's check for
// numbers too large for a double) for answers whose text may or may not send that check the long way: an id whose
// random prefix holds `e` and three digits, and a payload of UUIDs. Prints one JSON line.
//   node bench/node_decode.mjs [--repeat N]
// Microseconds per decode, the best of N timed runs each (peers/node/bench/timed.js); every text is checked to decode.
import { decode } from '../peers/node/src/wire.js';
import { timed } from '../peers/node/bench/timed.js';

const args = { repeat: 5 };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in args) || !(Number(process.argv[i + 1]) >= 1)) throw new Error(`bad option ${process.argv[i]}`);
  args[key] = Number(process.argv[i + 1]);
}

const answer = (id, result) => JSON.stringify({ v: 1, type: 'response', id, ok: true, result });
const RESULT = { name: 'bench', seq: 42, text: 'x'.repeat(65) };
const TEXTS = {
  id_without_exponent: answer('42fad1af-1', RESULT),
  id_with_exponent: answer('42fae123-1', RESULT), // one random 8-hex-digit prefix in 13 has such a place
  twenty_uuids: answer('a-1', Array.from({ length: 20 }, (_, i) => ({
    id: `3f2e${100 + i}a-9e12-4e55-b1e0-0c8e9e7e123${i % 10}`, n: i,
  }))),
};

const encoder = new TextEncoder();
const result = {};
for (const [name, text] of Object.entries(TEXTS)) {
  const frames = [new Uint8Array(0), encoder.encode(text)];
  const decoded = decode(frames);
  if (decoded.error) throw new Error(`${name} did not decode: ${decoded.error.message}`);
  const decodeUs = timed(() => decode(frames), { repeat: args.repeat, runMs: 20 });
  result[name] = { bytes: frames[1].length, decode_us: decodeUs };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
