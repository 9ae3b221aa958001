#!/usr/bin/env node
// What reading the host's keyed messages costs the Node peer, one by one against one batch (SPEC 3.3): 16 small
// messages signed `m.` each, against the same 16 in one `b.` batch; each checked by the peer's channel (src/channel.js,
// with src/signing.js's HMAC) and decoded as src/core.js does (src/wire.js decode() per message, and
// decodeZeroMQBatch() for the batch), and the same 16 unkeyed (decoded alone: the floor). Then what a batch's MAC
// costs with the channel's HMAC, node:crypto's createHmac and src/sha256.js alone.
// Prints one JSON line.
//   node peers/node/bench/keyed-batch.js [--repeat N]
// Microseconds, the best of N timed runs each (a run is about 50 ms).
import { createHmac, randomBytes } from 'node:crypto';
import { PeerChannel, channelKey, channelMac, signMessage } from '../src/signing.js';
import { macParts } from '../src/channel.js';
import { hmacSha256 } from '../src/sha256.js';
import { decode } from '../src/wire.js';
import { decodeZeroMQBatch, encodeWebSocketBatch } from '../src/websocket-frames.js';
import { timed as timedRuns } from './timed.js';

const args = { repeat: 5 };
for (let i = 2; i < process.argv.length; i += 2) {
  const key = process.argv[i].replace(/^--/, '');
  if (!(key in args) || !(Number(process.argv[i + 1]) >= 1)) throw new Error(`bad option ${process.argv[i]}`);
  args[key] = Number(process.argv[i + 1]);
}

const timed = (run) => timedRuns(run, { repeat: args.repeat });

const key = randomBytes(32);
const nonce = '0123456789abcdef0123456789abcdef';
const EMPTY = Buffer.alloc(0);
// What the host sends most: the answers to 64 calls in flight (bench/node_peer.mjs's ~100-byte payload echoed), and
// progress events.
const PAYLOAD = { name: 'bench', seq: 42, text: 'x'.repeat(65) };
const KINDS = {
  responses: (i) => ({ v: 1, type: 'response', id: `0a1b2c3d-${1000 + i}`, ok: true, result: PAYLOAD }),
  progress: (i) => ({ v: 1, type: 'progress', id: '0a1b2c3d-7', seq: 1000 + i, payload: { i: 1000 + i } }),
};

/** A channel past its welcome; the counters it accepted are forgotten before each run, so the same messages pass again. */
function welcomedChannel() {
  const channel = new PeerChannel(key, nonce);
  channel.opened = true;
  channel.welcomed = true;
  return channel;
}

const result = { messages: 16 };
for (const [kind, body] of Object.entries(KINDS)) {
  const bodies = Array.from({ length: 16 }, (_, i) => Buffer.from(JSON.stringify(body(i))));
  const singles = bodies.map((frame, i) => [signMessage(key, 'h2p', nonce, i + 1, [frame]), frame]);
  const batch = encodeWebSocketBatch(bodies.map((frame) => [EMPTY, frame]));
  const batchFrame0 = signMessage(key, 'h2p-batch', nonce, 1, [batch]);
  const channel = welcomedChannel();

  const readSingles = () => {
    channel.received = 0;
    let read = 0;
    for (const frames of singles) {
      if (channel.refusal(frames[0], [frames[1]]) !== null) throw new Error('a single message was refused');
      if (decode(frames).body) read += 1;
    }
    return read;
  };
  const readBatch = () => {
    channel.received = 0;
    if (channel.refusal(batchFrame0, [batch]) !== null) throw new Error('the batch was refused');
    let read = 0;
    for (const frames of decodeZeroMQBatch(batch)) if (decode(frames).body) read += 1;
    return read;
  };
  // The floor: the same 16 unkeyed, decoded alone (what src/core.js does without a key).
  const unkeyed = bodies.map((frame) => [EMPTY, frame]);
  const readUnkeyed = () => {
    let read = 0;
    for (const frames of unkeyed) if (decode(frames).body) read += 1;
    return read;
  };
  if (readSingles() !== 16 || readBatch() !== 16 || readUnkeyed() !== 16) throw new Error('not every message was read');
  const singlesUs = timed(readSingles);
  const batchUs = timed(readBatch);
  const unkeyedUs = timed(readUnkeyed);
  const ratio = (a, b) => Math.round((a / b) * 1000) / 1000;
  result[kind] = {
    body_bytes: bodies[0].length,
    batch_bytes: batch.length,
    singles_us: singlesUs,
    batch_us: batchUs,
    unkeyed_us: unkeyedUs,
    batch_over_singles: ratio(batchUs, singlesUs),
    unkeyed_over_singles: ratio(unkeyedUs, singlesUs),
    unkeyed_over_batch: ratio(unkeyedUs, batchUs),
  };
}

// A batch's MAC input is its header and frame 1 (src/channel.js macParts): the channel's HMAC (src/signing.js) against
// createHmac and src/sha256.js alone, at the sizes a batch of 16 small messages, 64 answers and a full batch have.
const channel = channelKey(key);
const out = new Uint8Array(32);
result.batch_mac_us = {};
for (const size of [1_800, 10_000, 65_536]) {
  const parts = macParts('h2p-batch', nonce, 1, [randomBytes(size)]).map((part) => Buffer.from(part));
  const javascript = () => hmacSha256(channel.prepared, parts, out);
  const ofChannel = () => channelMac(channel, parts);
  const nodeCrypto = () => {
    const h = createHmac('sha256', key);
    for (const part of parts) h.update(part);
    return h.digest();
  };
  const reference = nodeCrypto();
  if (!reference.equals(javascript()) || !reference.equals(ofChannel())) throw new Error(`the MACs of ${size} bytes differ`);
  result.batch_mac_us[size] = { channel_us: timed(ofChannel), create_hmac_us: timed(nodeCrypto), javascript_us: timed(javascript) };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
