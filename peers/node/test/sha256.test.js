// src/sha256.js (the browser peer's synchronous SHA-256 and HMAC-SHA256, issue 24) pinned to references: the RFC 4231
// and FIPS 180 vectors, and node:crypto over seeded random keys and messages split into random parts (a failure
// names its seed and case, so it replays). peers/browser-tests/test_sha256.py pins it to the page's WebCrypto too.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { hmacFromInner, hmacSha256, macsEqual, prepareHmacKey, sha256 } from '../src/sha256.js';
import { generator } from '../test-helpers/random.js';

const hex = (bytes) => Buffer.from(bytes).toString('hex');
const fromHex = (text) => new Uint8Array(Buffer.from(text, 'hex'));
const ascii = (text) => new Uint8Array(Buffer.from(text, 'latin1'));

// RFC 4231 section 4, test cases 1-7 (case 5's MAC is truncated to 128 bits there: compared on its first 16 bytes).
const RFC4231 = [
  { key: '0b'.repeat(20), data: ascii('Hi There'), mac: 'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7' },
  { key: hex(ascii('Jefe')), data: ascii('what do ya want for nothing?'), mac: '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843' },
  { key: 'aa'.repeat(20), data: fromHex('dd'.repeat(50)), mac: '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe' },
  {
    key: '0102030405060708090a0b0c0d0e0f10111213141516171819', data: fromHex('cd'.repeat(50)),
    mac: '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
  },
  { key: '0c'.repeat(20), data: ascii('Test With Truncation'), mac: 'a3b6167473100ee06e0c796c2955552b' },
  {
    key: 'aa'.repeat(131), data: ascii('Test Using Larger Than Block-Size Key - Hash Key First'),
    mac: '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
  },
  {
    key: 'aa'.repeat(131),
    data: ascii('This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.'),
    mac: '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
  },
];

// FIPS 180-2 appendix B (and the NIST examples): the one-block, two-block and long messages.
const FIPS180 = [
  { data: ascii(''), digest: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' },
  { data: ascii('abc'), digest: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
  { data: ascii('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'), digest: '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1' },
  {
    data: ascii('abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu'),
    digest: 'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1',
  },
  { data: new Uint8Array(1_000_000).fill(0x61), digest: 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0' },
];

describe('the reference vectors', () => {
  RFC4231.forEach(({ key, data, mac }, index) => {
    test(`RFC 4231 test case ${index + 1}`, () => {
      const prepared = prepareHmacKey(fromHex(key));
      const computed = hmacSha256(prepared, [data]);
      assert.equal(hex(computed).slice(0, mac.length), mac);
      assert.equal(computed.length, 32);
      assert.equal(hex(hmacFromInner(prepared, innerDigest(prepared, data))).slice(0, mac.length), mac, 'from the inner digest');
    });
  });
  for (const { data, digest } of FIPS180) {
    test(`FIPS 180 SHA-256 of ${data.length} bytes`, () => assert.equal(hex(sha256(data)), digest));
  }
  test('the 896-bit message split in two at every offset has the MAC of it whole', () => {
    const { data } = FIPS180[3];
    const key = prepareHmacKey(ascii('key'));
    const whole = hex(hmacSha256(key, [data]));
    assert.equal(whole, createHmac('sha256', 'key').update(data).digest('hex'));
    for (let cut = 0; cut <= data.length; cut += 1) assert.equal(hex(hmacSha256(key, [data.subarray(0, cut), data.subarray(cut)])), whole, `cut at ${cut}`);
  });
});

/** The inner hash of an HMAC as src/signing.js has node:crypto compute it: SHA-256 of the key's inner block, then `data`. */
const innerDigest = (prepared, data) => createHash('sha256').update(prepared.innerBlock).update(data).digest();

/** `data` cut at random places into 1..6 parts (empty parts included): what hmacSha256 must hash as one message. */
function randomParts(random, data) {
  const cuts = Array.from({ length: Math.floor(random() * 6) }, () => Math.floor(random() * (data.length + 1))).sort((a, b) => a - b);
  const parts = [];
  let from = 0;
  for (const cut of [...cuts, data.length]) {
    parts.push(data.subarray(from, cut));
    from = cut;
  }
  return parts;
}

const randomBytes = (random, length) => Uint8Array.from({ length }, () => Math.floor(random() * 256));

// Every length 0-130, then lengths around block boundaries up to ~20 KiB, then random ones up to 20 KiB.
const BOUNDARY_LENGTHS = [];
for (let blocks = 2; blocks <= 320; blocks = blocks < 8 ? blocks + 1 : blocks * 2) {
  for (const offset of [-9, -8, -1, 0, 1, 55, 56, 57]) BOUNDARY_LENGTHS.push(blocks * 64 + offset);
}
const MESSAGE_LENGTHS = [...Array.from({ length: 131 }, (_, i) => i), ...BOUNDARY_LENGTHS];

describe('against node:crypto', () => {
  for (const seed of [1, 2, 3]) {
    test(`HMAC-SHA256 and SHA-256 of 1000 random keys and messages in random parts (seed ${seed})`, () => {
      const random = generator(seed);
      for (let i = 0; i < 1000; i += 1) {
        // Key lengths 0-200 (past the 64-byte block: hashed first); every listed message length, then random ones.
        const key = randomBytes(random, i < 201 ? i : Math.floor(random() * 201));
        const length = i < MESSAGE_LENGTHS.length ? MESSAGE_LENGTHS[i] : Math.floor(random() * 20_481);
        const data = randomBytes(random, length);
        const parts = randomParts(random, data);
        const expected = createHmac('sha256', key).update(data).digest('hex');
        const prepared = prepareHmacKey(key);
        assert.equal(hex(hmacSha256(prepared, parts)), expected, `seed ${seed} case ${i}: key ${key.length} bytes, message ${length} in ${parts.length} parts`);
        assert.equal(hex(hmacFromInner(prepared, innerDigest(prepared, data))), expected, `seed ${seed} case ${i}: from the inner digest`);
        assert.equal(hex(sha256(data)), createHash('sha256').update(data).digest('hex'), `seed ${seed} case ${i}: SHA-256 of ${length} bytes`);
      }
    });
  }

  test('a prepared key signs many messages, and interleaves with other keys and with sha256()', () => {
    const random = generator(4);
    const keys = [randomBytes(random, 32), randomBytes(random, 100)];
    const prepared = keys.map((key) => prepareHmacKey(key));
    for (let i = 0; i < 300; i += 1) {
      const which = i % 2;
      const data = randomBytes(random, Math.floor(random() * 400));
      sha256(randomBytes(random, 70)); // shares the scratch state: must leave nothing behind
      assert.equal(hex(hmacSha256(prepared[which], randomParts(random, data))), createHmac('sha256', keys[which]).update(data).digest('hex'));
    }
  });

  test('the outer hash takes an inner digest of 32 bytes only', () => {
    const prepared = prepareHmacKey(ascii('k'));
    for (const length of [0, 31, 33]) assert.throws(() => hmacFromInner(prepared, new Uint8Array(length)), RangeError, `${length} bytes`);
  });

  test('a key that is not a Uint8Array is refused', () => {
    assert.throws(() => prepareHmacKey('secret'), TypeError);
    assert.throws(() => prepareHmacKey(null), TypeError);
  });
});

describe('macsEqual', () => {
  test('equal only for the same bytes at the same length', () => {
    const mac = hmacSha256(prepareHmacKey(ascii('k')), [ascii('m')]);
    assert.equal(macsEqual(mac, Uint8Array.from(mac)), true);
    for (const at of [0, 15, 31]) {
      const flipped = Uint8Array.from(mac);
      flipped[at] ^= 0x01;
      assert.equal(macsEqual(mac, flipped), false, `differs at byte ${at}`);
      assert.equal(macsEqual(flipped, mac), false);
    }
    assert.equal(macsEqual(mac, mac.subarray(0, 31)), false, 'a shorter MAC');
    assert.equal(macsEqual(mac, new Uint8Array(33)), false, 'a longer MAC');
    assert.equal(macsEqual(new Uint8Array(0), new Uint8Array(0)), true);
  });
});
