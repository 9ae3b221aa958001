// SPEC 3.2: the WebSocket mapping's codec (src/websocket-frames.js) against protocol/fixtures/websocket-frames.json,
// batches (since 1.9) included, and beyond them: random batches round trip, and the bounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import {
  MAX_BATCH_MESSAGES, MAX_WEBSOCKET_FRAMES, batchEntryLength, decodeWebSocketBatch, decodeWebSocketMessage,
  encodeWebSocketBatch, encodeWebSocketMessage,
} from '../src/websocket-frames.js';
import { checkWebSocketFrameCase } from '../src/websocket-frame-cases.js';
import { BridgeError } from '../src/errors.js';

const fixtures = JSON.parse(readFileSync(new URL('../../../protocol/fixtures/websocket-frames.json', import.meta.url), 'utf8'));

for (const fixture of fixtures) {
  test(`websocket-frames.json: ${fixture.name} (${fixture.why})`, () => checkWebSocketFrameCase(fixture));
}

test('a payload of more frames than the bound is refused without reading them all', () => {
  assert.throws(() => decodeWebSocketMessage(new Uint8Array(4 * (MAX_WEBSOCKET_FRAMES + 1))),
    (error) => error.code === 'bad_message' && /at most 16386 frames/.test(error.message));
  assert.equal(decodeWebSocketMessage(new Uint8Array(4 * MAX_WEBSOCKET_FRAMES)).length, MAX_WEBSOCKET_FRAMES);
});

test('decoding a view reads only its own bytes', () => {
  const backing = new Uint8Array([9, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0x41, 9]);
  assert.deepEqual(decodeWebSocketMessage(backing.subarray(2, 11)).map((frame) => [...frame]), [[], [0x41]]);
  const batch = encodeWebSocketBatch([[new Uint8Array(0), new Uint8Array([0x42])]]);
  const padded = new Uint8Array(batch.length + 4).fill(7);
  padded.set(batch, 2);
  assert.deepEqual(decodeWebSocketBatch(padded.subarray(2, 2 + batch.length)).map((frames) => frames.map((frame) => [...frame])), [[[], [0x42]]]);
});

// A seeded generator, so a failure names the seed that shows it again.
function generator(seed) {
  let state = seed >>> 0;
  return (below) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state % below;
  };
}

test('random batches round trip: each message decodes to its frames, as views into the one payload', () => {
  for (let seed = 1; seed <= 200; seed += 1) {
    const next = generator(seed);
    const messages = Array.from({ length: 1 + next(40) }, () => Array.from({ length: 2 + next(5) }, () => randomBytes(next(300))));
    const payload = encodeWebSocketBatch(messages);
    assert.equal(payload.length, messages.reduce((sum, frames) => sum + batchEntryLength(frames), 0), `seed ${seed}`);
    const decoded = decodeWebSocketBatch(payload);
    assert.equal(decoded.length, messages.length, `seed ${seed}`);
    decoded.forEach((frames, i) => {
      assert.deepEqual(frames.map((frame) => Buffer.from(frame).toString('hex')), messages[i].map((frame) => frame.toString('hex')), `seed ${seed}`);
      for (const frame of frames) assert.equal(frame.buffer, payload.buffer, 'a frame is a view, not a copy');
    });
    // Each entry is the message's own payload: the batch is the messages' payloads written as frames.
    assert.deepEqual(Buffer.from(payload), Buffer.from(encodeWebSocketMessage(messages.map(encodeWebSocketMessage))), `seed ${seed}`);
  }
});

test('a batch of 1,000 messages is read; one more is refused whole before any message is read', () => {
  const ping = [new Uint8Array(0), new TextEncoder().encode('{"v":1,"type":"ping"}')];
  assert.equal(decodeWebSocketBatch(encodeWebSocketBatch(Array(MAX_BATCH_MESSAGES).fill(ping))).length, MAX_BATCH_MESSAGES);
  assert.throws(() => decodeWebSocketBatch(encodeWebSocketBatch(Array(MAX_BATCH_MESSAGES + 1).fill(ping))),
    (error) => error instanceof BridgeError && error.code === 'bad_message' && /at most 1000 messages/.test(error.message));
  // Empty entries are refused one by one, but 1,001 of them (4,004 bytes) are still the batch's bound, not 1,001 refusals.
  assert.throws(() => decodeWebSocketBatch(new Uint8Array(4 * (MAX_BATCH_MESSAGES + 1))), (error) => error.code === 'bad_message');
  const refused = decodeWebSocketBatch(new Uint8Array(4 * MAX_BATCH_MESSAGES));
  assert.equal(refused.length, MAX_BATCH_MESSAGES);
  assert.ok(refused.every((entry) => entry instanceof BridgeError && entry.code === 'bad_message'));
});

test('a batch whose lengths are wrong anywhere is refused whole, even when its first messages are good', () => {
  const good = encodeWebSocketBatch([[new Uint8Array(0), new Uint8Array([0x7b, 0x7d])]]);
  for (const tail of [[0], [0, 0, 0], [0, 0, 0, 9, 1, 2]]) {
    const payload = new Uint8Array([...good, ...tail]);
    assert.throws(() => decodeWebSocketBatch(payload), (error) => error.code === 'bad_message', `tail ${tail}`);
  }
  assert.throws(() => decodeWebSocketBatch(new ArrayBuffer(0)), (error) => error.code === 'bad_message' && /empty batch/.test(error.message));
});
