// A fuzz loop for the Node peer's ZMTP frame decoder (peers/node/src/zmtp.js), with Node's own modules only (no
// npm here): a seeded mutation loop over a corpus, guided by behaviour (an input that makes the decoder end in a
// state, error or message shape not seen before joins the corpus), since Node has no coverage feedback built in.
//
//   node fuzz/node/fuzz-zmtp.mjs [--seconds 60] [--seed N] [--artifacts DIR] [--new DIR] CORPUS...
//   node fuzz/node/fuzz-zmtp.mjs --replay CORPUS...      (each input once, as peers/node/test/fuzz-corpus.test.js does)
//   node fuzz/node/fuzz-zmtp.mjs --minimize OUT SEEDS CORPUS... (the seeds, and the smallest other inputs that show a
//                                                          behaviour the seeds do not, into OUT)
//
// Each input is what the other side of a connection sends, fed to a DEALER (and, when it offers CURVE, to a CURVE
// client) in one to three chunks: the way a connection accepted by zmtp-router.js is driven, through a Duplex. A
// finding is an exception out of the decoder, an error that is not a ZmtpError or is EINTERNAL (our own bug caught
// by the socket), a message over the size limit, or bytes held past it. Printed like libFuzzer's final stats.

import { Duplex } from 'node:stream';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ZmtpDealer, ZmtpError } from '../../peers/node/src/zmtp.js';
import { generateKeyPair } from '../../peers/node/src/curve.js';

const MAX_MESSAGE_BYTES = 64 * 1024; // small, so that declared sizes past it are exercised
const CURVE_SERVER_KEY = generateKeyPair().publicKey;

/** A connection's other end: what the decoder writes is dropped, what the fuzzer sends arrives as 'data'. */
function connection() {
  return new Duplex({ read() {}, write(_chunk, _encoding, done) { done(); } });
}

/**
 * Feeds `input` (split at `cuts`) to a fresh socket and checks what came out. Returns the behaviour's signature;
 * throws an Error describing a finding.
 */
export function runOne(input, cuts = [], curve = false) {
  const socket = new ZmtpDealer('tcp://127.0.0.1:9', {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    handshakeTimeout: 3_600_000,
    ...(curve ? { curve: { serverKey: CURVE_SERVER_KEY } } : {}),
  });
  const errors = [];
  let messages = 0;
  let frames = 0;
  let largest = 0; // checked after the run: a throw in a listener would surface later, as an uncaught exception
  socket.on('error', (error) => errors.push(error));
  socket.on('message', (message) => {
    messages += 1;
    frames += message.length;
    largest = Math.max(largest, message.reduce((sum, frame) => sum + frame.length, 0));
  });
  const stream = connection();
  socket.adopt(stream);
  let at = 0;
  try {
    for (const cut of [...cuts, input.length]) {
      if (cut > at && !stream.destroyed) stream.emit('data', input.subarray(at, cut));
      at = Math.max(at, cut);
    }
  } finally {
    clearTimeout(socket.handshakeTimer);
    socket.close(0);
    stream.destroy();
  }
  for (const error of errors) {
    if (!(error instanceof ZmtpError)) throw new Error(`the decoder reported a ${error?.constructor?.name}: ${error?.stack ?? error}`);
    if (error.code === 'EINTERNAL') throw new Error(`the decoder failed inside: ${error.message}`);
  }
  if (largest > MAX_MESSAGE_BYTES) throw new Error(`a message of ${largest} bytes passed the ${MAX_MESSAGE_BYTES}-byte limit`);
  const held = socket.input.length + socket.partialBytes;
  if (held > MAX_MESSAGE_BYTES + 64) throw new Error(`the decoder holds ${held} bytes past the ${MAX_MESSAGE_BYTES}-byte limit`);
  const error = errors[0];
  // An error's first words name the check that failed; the rest (numbers, quoted bytes) says nothing new about the path.
  const reason = error ? `${error.code}:${error.message.split(socket.endpoint).join('E').split(' ').slice(0, 3).join(' ')}` : '';
  return `${curve}|${socket.state}|${reason}|${Math.min(messages, 3)}|${Math.min(frames, 4)}|${socket.frameSize < 0 ? socket.frameSize : 'body'}`;
}

/** Runs an input as the fuzzer and the replay do: as a NULL socket, and as a CURVE client when it offers CURVE. */
export function runInput(input, cuts = []) {
  const signatures = [runOne(input, cuts, false)];
  if (input.subarray(12, 17).toString('latin1') === 'CURVE') signatures.push(runOne(input, cuts, true));
  return signatures;
}

// --- the mutation loop ------------------------------------------------------------------------------------------

/** xorshift128+, so that a run is reproducible from its seed. */
function randomSource(seed) {
  let s0 = BigInt(seed) | 1n;
  let s1 = 0x9e3779b97f4a7c15n;
  const mask = (1n << 64n) - 1n;
  return (limit) => {
    let x = s0;
    const y = s1;
    s0 = y;
    x = (x ^ (x << 23n)) & mask;
    s1 = x ^ y ^ (x >> 17n) ^ (y >> 26n);
    return Number(((s1 + y) & mask) % BigInt(limit));
  };
}

const INTERESTING = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07, 0x7f, 0x80, 0xfe, 0xff];

function mutate(input, corpus, random) {
  let data = Buffer.from(input);
  const rounds = 1 + random(4);
  for (let round = 0; round < rounds; round += 1) {
    const at = data.length > 0 ? random(data.length) : 0;
    switch (random(9)) {
      case 0: if (data.length) data[at] ^= 1 << random(8); break;
      case 1: if (data.length) data[at] = random(256); break;
      case 2: if (data.length) data[at] = INTERESTING[random(INTERESTING.length)]; break;
      case 3: { // insert random bytes
        const extra = Buffer.alloc(1 + random(16)).map(() => random(256));
        data = Buffer.concat([data.subarray(0, at), extra, data.subarray(at)]);
        break;
      }
      case 4: data = Buffer.concat([data.subarray(0, at), data.subarray(Math.min(data.length, at + 1 + random(32)))]); break;
      case 5: { // repeat a slice (frames after frames)
        const end = Math.min(data.length, at + 1 + random(64));
        data = Buffer.concat([data.subarray(0, end), data.subarray(at, end), data.subarray(end)]);
        break;
      }
      case 6: { // a big-endian size somewhere: 1, 4 or 8 bytes
        const width = [1, 4, 8][random(3)];
        const size = Buffer.alloc(8);
        size.writeBigUInt64BE([0n, 1n, 255n, 256n, 65535n, 1n << 32n, (1n << 63n) + 5n, (1n << 64n) - 1n][random(8)]);
        data = Buffer.concat([data.subarray(0, at), size.subarray(8 - width), data.subarray(Math.min(data.length, at + width))]);
        break;
      }
      case 7: { // splice with another input
        const other = corpus[random(corpus.length)];
        const from = other.length ? random(other.length) : 0;
        data = Buffer.concat([data.subarray(0, at), other.subarray(from, from + 1 + random(128))]);
        break;
      }
      default: data = data.subarray(0, at); // truncate
    }
  }
  return data.length > 1 << 20 ? data.subarray(0, 1 << 20) : data;
}

function cutsFor(length, random) {
  const count = random(3);
  return Array.from({ length: count }, () => random(length + 1)).sort((a, b) => a - b);
}

function readCorpus(folders) {
  const inputs = [];
  for (const folder of folders) {
    for (const name of readdirSync(folder).sort()) inputs.push(readFileSync(path.join(folder, name)));
  }
  return inputs;
}

const sha1 = (data) => createHash('sha1').update(data).digest('hex');

async function main(argv) {
  const options = { seconds: 60, seed: Date.now() % 1_000_000_007, artifacts: '.', newDir: null, replay: false, minimize: null, folders: [] };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--seconds') options.seconds = Number(argv[++i]);
    else if (arg === '--seed') options.seed = Number(argv[++i]);
    else if (arg === '--artifacts') options.artifacts = argv[++i];
    else if (arg === '--new') options.newDir = argv[++i];
    else if (arg === '--replay') options.replay = true;
    else if (arg === '--minimize') options.minimize = argv[++i];
    else options.folders.push(arg);
  }
  const corpus = readCorpus(options.folders);
  if (corpus.length === 0) throw new Error('no corpus: name one or more folders of inputs');
  const report = (input, error) => {
    mkdirSync(options.artifacts, { recursive: true });
    const file = path.join(options.artifacts, `crash-${sha1(input)}`);
    writeFileSync(file, input);
    console.error(`==ERROR: ${error.message}\nTest unit written to ${file}`);
    process.exitCode = 1;
  };
  if (options.minimize) {
    minimize(readCorpus(options.folders.slice(0, 1)), readCorpus(options.folders.slice(1)), options.minimize);
    return;
  }
  const signatures = new Set();
  for (const input of corpus) {
    try {
      for (const signature of runInput(input)) signatures.add(signature);
    } catch (error) {
      report(input, error);
      return;
    }
  }
  if (options.replay) {
    console.log(`replayed ${corpus.length} inputs: ${signatures.size} behaviours, no finding`);
    return;
  }
  console.log(`#0 INITED corpus: ${corpus.length} behaviours: ${signatures.size} seed: ${options.seed}`);
  const random = randomSource(options.seed);
  const started = performance.now();
  const deadline = started + options.seconds * 1000;
  let runs = 0;
  let added = 0;
  while (performance.now() < deadline) {
    for (let batch = 0; batch < 256; batch += 1) {
      const input = mutate(corpus[random(corpus.length)], corpus, random);
      runs += 1;
      let found;
      try {
        found = runInput(input, cutsFor(input.length, random));
      } catch (error) {
        report(input, error);
        return;
      }
      const fresh = found.filter((signature) => !signatures.has(signature));
      if (fresh.length > 0) {
        for (const signature of fresh) signatures.add(signature);
        corpus.push(input);
        added += 1;
        if (options.newDir) {
          mkdirSync(options.newDir, { recursive: true });
          writeFileSync(path.join(options.newDir, sha1(input)), input);
        }
      }
    }
    await new Promise(setImmediate); // let closed sockets finish closing
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`Done ${runs} runs in ${Math.round(seconds)} second(s)`);
  console.log(`stat::number_of_executed_units: ${runs}`);
  console.log(`stat::average_exec_per_sec:     ${Math.round(runs / seconds)}`);
  console.log(`stat::new_units_added:          ${added}`);
  console.log(`stat::behaviours:               ${signatures.size}`);
  console.log(`stat::peak_rss_mb:              ${Math.round(process.resourceUsage().maxRSS / 1024)}`);
}

/**
 * Keeps the seeds (the protocol's shapes, which the mutations start from), and of the other inputs, smallest first,
 * each one that shows a behaviour nothing kept before it did.
 */
function minimize(seeds, others, folder) {
  const seen = new Set();
  let kept = 0;
  mkdirSync(folder, { recursive: true });
  for (const seed of seeds) {
    for (const signature of runInput(seed)) seen.add(signature);
    writeFileSync(path.join(folder, sha1(seed)), seed);
    kept += 1;
  }
  const corpus = [...seeds, ...others];
  for (const input of others.sort((a, b) => a.length - b.length || Buffer.compare(a, b))) {
    const fresh = runInput(input).filter((signature) => !seen.has(signature));
    if (fresh.length === 0) continue;
    for (const signature of fresh) seen.add(signature);
    writeFileSync(path.join(folder, sha1(input)), input);
    kept += 1;
  }
  console.log(`kept ${kept} of ${corpus.length} inputs (${seen.size} behaviours) in ${folder}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main(process.argv.slice(2));
}
