// The page's byte arrays (src/bytes.js bytePool): in a page, newBytes and utf8Bytes carve small arrays out of shared
// slabs instead of giving each its own buffer. Node keeps its Buffers; the pool is checked here directly, and in
// Chromium by every browser test (peers/browser-tests), whose messages are all made with it.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bytePool } from '../src/bytes.js';

/** Whether two views share any byte of their buffer. */
const overlap = (a, b) => a.buffer === b.buffer
  && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;

describe('bytePool', () => {
  test('hands out zeroed arrays that never overlap, a new slab when one is full', () => {
    const pool = bytePool(256);
    const arrays = [];
    for (let i = 0; i < 200; i += 1) {
      const length = (i * 37) % 129; // 0..128: at most half a slab, so all of them pooled
      const bytes = pool.bytes(length);
      assert.equal(bytes.length, length);
      assert.ok(bytes.every((byte) => byte === 0), 'a new array holds zeros');
      assert.ok(bytes.byteOffset + bytes.length <= 256);
      bytes.fill(0xff); // written by its holder: must show in no other array
      arrays.push(bytes);
    }
    assert.ok(new Set(arrays.map((bytes) => bytes.buffer)).size > 1, 'the slab was replaced when full');
    for (let i = 0; i < arrays.length; i += 1) {
      for (let j = i + 1; j < arrays.length; j += 1) assert.ok(!overlap(arrays[i], arrays[j]), `arrays ${i} and ${j} overlap`);
    }
  });

  test('gives an array of more than half a slab a buffer of its own', () => {
    const pool = bytePool(256);
    const small = pool.bytes(10);
    const large = pool.bytes(129);
    assert.equal(large.byteLength, 129);
    assert.equal(large.buffer.byteLength, 129);
    assert.notEqual(large.buffer, small.buffer);
    assert.equal(pool.bytes(10).buffer, small.buffer, 'the slab goes on after a large array');
  });

  test('encodes UTF-8 exactly as TextEncoder does, straight into the slab', () => {
    const pool = bytePool(256);
    const encoder = new TextEncoder();
    const texts = ['', 'a', '{"v":1,"type":"ping"}', 'é', '€uro', '😀 and 🎉', 'lone \ud800 surrogate', 'end \udc00',
      'x'.repeat(42), 'x'.repeat(43), 'é'.repeat(50), 'ü'.repeat(200)];
    const made = [];
    for (let round = 0; round < 5; round += 1) {
      for (const text of texts) {
        const bytes = pool.utf8(text);
        assert.deepEqual(Array.from(bytes), Array.from(encoder.encode(text)), JSON.stringify(text));
        made.push(bytes);
      }
    }
    for (let i = 0; i < made.length; i += 1) {
      for (let j = i + 1; j < made.length; j += 1) assert.ok(!overlap(made[i], made[j]), `texts ${i} and ${j} overlap`);
    }
    // 43 UTF-16 units may need 129 bytes: more than half of this slab, so its own buffer even though it is ASCII.
    assert.equal(pool.utf8('x'.repeat(43)).buffer.byteLength, 43);
    assert.equal(pool.utf8('x'.repeat(42)).buffer.byteLength, 256);
  });
});
