#!/usr/bin/env node
// What SPEC 7.14's value check costs when encoding requests: 1000 requests whose payload is a 50-member object,
// encoded as before 1.3 (JSON.stringify with a replacer for bytes, no check) and as now (src/values.js: one walk that
// checks and writes the text), repeated to take the median. No host is needed.
// Usage: node peers/node/bench/values.js [--rounds N] [--calls N]
import { encode, bodies } from '../src/wire.js';
import { encodeRequest, serialize } from '../src/values.js';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const rounds = option('--rounds', 200);
const calls = option('--calls', 1000);

// A typical payload: 50 members of the usual kinds (short strings, integers, fractions, booleans, null, a small
// array and a small nested object now and then).
function payload(i) {
  const value = {};
  for (let k = 0; k < 50; k += 1) {
    const name = `field_${k}`;
    switch (k % 7) {
      case 0: value[name] = `text ${i} ${k}`; break;
      case 1: value[name] = i * 50 + k; break;
      case 2: value[name] = (i + k) / 7; break;
      case 3: value[name] = k % 2 === 0; break;
      case 4: value[name] = null; break;
      case 5: value[name] = [k, `${k}`, k / 3]; break;
      default: value[name] = { id: k, label: `item ${k}`, ok: true }; break;
    }
  }
  return value;
}

const payloads = Array.from({ length: calls }, (_, i) => payload(i));
const deadline = Date.now() + 30_000;

// The check alone, then JSON.stringify as before: what "a walk plus JSON.stringify" would cost.
function checkThenStringify(id, p) {
  serialize(p, 'payload');
  return encode(bodies.request(id, 'import', p, 30_000, false, deadline));
}

const variants = {
  'before (encode: JSON.stringify, no check)': (id, p) => encode(bodies.request(id, 'import', p, 30_000, false, deadline)),
  'now (encodeRequest: one checking walk)': (id, p) => encodeRequest(id, 'import', p, 30_000, false, deadline),
  'alternative (check walk, then JSON.stringify)': checkThenStringify,
};

// Same output, so the comparison is fair.
const a = JSON.parse(variants['before (encode: JSON.stringify, no check)']('x', payloads[0])[1]);
const b = JSON.parse(variants['now (encodeRequest: one checking walk)']('x', payloads[0])[1]);
if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error('the encoders disagree');

const timings = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
let sink = 0;
for (let round = 0; round < rounds; round += 1) {
  for (const [name, encodeOne] of Object.entries(variants)) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < calls; i += 1) sink += encodeOne(`r${i}`, payloads[i])[1].length;
    timings[name].push(Number(process.hrtime.bigint() - start) / 1e6);
  }
}
const median = (list) => [...list].sort((x, y) => x - y)[Math.floor(list.length / 2)];
const bodyBytes = encodeRequest('r0', 'import', payloads[0], 30_000, false, deadline)[1].length;
console.log(`${calls} requests, a 50-member payload each (~${bodyBytes} bytes of body), median of ${rounds} rounds (node ${process.version}):`);
const base = median(timings['before (encode: JSON.stringify, no check)']);
for (const [name, list] of Object.entries(timings)) {
  const ms = median(list);
  console.log(`  ${name.padEnd(48)} ${ms.toFixed(3)} ms  (${((ms / calls) * 1000).toFixed(2)} us per request, ${((ms / base - 1) * 100).toFixed(0).padStart(4)}% vs before)`);
}
if (sink === 0) console.log('');
