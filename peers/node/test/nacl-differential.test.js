// The hand-written NaCl of src/curve.js (XSalsa20, Poly1305, secretbox, box; X25519 comes from node:crypto) against
// TweetNaCl-js, the reference port of NaCl, as Debian packages it (node-tweetnacl, installed by `make deps-system`):
// byte-identical outputs on thousands of random inputs, lengths chosen to cross block boundaries (16 for Poly1305,
// 64 for Salsa20) and the 32-byte NaCl prefix, and the same verdict on boxes tampered with. Boxes are also made in
// place inside larger buffers at every offset modulo 8 (curve.js XORs by words only where the data is aligned), and
// one of 1 MiB.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import {
  hsalsa20, xsalsa20Xor, poly1305, secretbox, secretboxInPlace, secretboxOpen, box, boxOpen, boxBeforenm, x25519,
  publicKeyOf,
} from '../src/curve.js';

const TWEETNACL = '/usr/share/nodejs/tweetnacl';
assert.ok(existsSync(TWEETNACL), `${TWEETNACL} is missing: run \`make deps-system\` (Debian's node-tweetnacl)`);
const nacl = createRequire(import.meta.url)(TWEETNACL);

const CASES = 2000;
const hex = (bytes) => Buffer.from(bytes).toString('hex');

/** A message length: mostly short, around the block sizes, sometimes a few kilobytes. */
function length(i) {
  if (i % 50 === 0) return 1000 + randomBytes(2).readUInt16BE() % 5000;
  const near = [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129][i % 14];
  return i % 3 === 0 ? near : randomBytes(1)[0];
}

/** Runs `check` on `count` cases; a failure names the case's inputs in hex so that it can be replayed. */
function forCases(count, makeCase, check) {
  for (let i = 0; i < count; i += 1) {
    const inputs = makeCase(i);
    try {
      check(inputs);
    } catch (error) {
      const described = Object.entries(inputs).map(([name, value]) => `${name}=${hex(value)}`).join(' ');
      error.message = `case ${i} (${described}): ${error.message}`;
      throw error;
    }
  }
}

test('HSalsa20 equals crypto_core_hsalsa20', () => {
  const sigma = Buffer.from('expand 32-byte k', 'latin1');
  forCases(CASES, () => ({ key: randomBytes(32), input: randomBytes(16) }), ({ key, input }) => {
    const expected = new Uint8Array(32);
    nacl.lowlevel.crypto_core_hsalsa20(expected, input, key, sigma);
    assert.equal(hex(hsalsa20(key, input)), hex(expected));
  });
});

test('XSalsa20 equals crypto_stream_xor', () => {
  forCases(CASES, (i) => ({ key: randomBytes(32), nonce: randomBytes(24), data: randomBytes(length(i)) }), ({ key, nonce, data }) => {
    const expected = new Uint8Array(data.length);
    nacl.lowlevel.crypto_stream_xor(expected, 0, data, 0, data.length, nonce, key);
    assert.equal(hex(xsalsa20Xor(key, nonce, data)), hex(expected));
  });
});

test('Poly1305 equals crypto_onetimeauth, also with limbs at their extremes', () => {
  const extreme = (i) => (i % 4 === 0 ? Buffer.alloc(32, 0xff) : i % 4 === 1 ? Buffer.alloc(32, 0) : randomBytes(32));
  forCases(CASES, (i) => ({ key: extreme(i), message: i % 7 === 0 ? Buffer.alloc(length(i), 0xff) : randomBytes(length(i)) }),
    ({ key, message }) => {
      const expected = new Uint8Array(16);
      nacl.lowlevel.crypto_onetimeauth(expected, 0, message, 0, message.length, key);
      assert.equal(hex(poly1305(key, message)), hex(expected));
    });
});

test('secretbox equals nacl.secretbox, and both open each other\'s boxes and refuse a tampered one', () => {
  forCases(CASES, (i) => ({ key: randomBytes(32), nonce: randomBytes(24), message: randomBytes(length(i)) }), ({ key, nonce, message }) => {
    const sealed = secretbox(message, nonce, key);
    assert.equal(hex(sealed), hex(nacl.secretbox(message, nonce, key)));
    assert.equal(hex(secretboxOpen(sealed, nonce, key)), hex(message));
    assert.equal(hex(nacl.secretbox.open(sealed, nonce, key)), hex(message));
    const tampered = Buffer.from(sealed);
    tampered[randomBytes(4).readUInt32BE() % tampered.length] ^= 1 << (randomBytes(1)[0] % 8);
    assert.equal(secretboxOpen(tampered, nonce, key), null);
    assert.equal(nacl.secretbox.open(tampered, nonce, key), null);
  });
});

test('secretboxInPlace at any offset in a larger buffer equals nacl.secretbox and leaves the bytes around alone', () => {
  forCases(CASES / 2, (i) => ({ key: randomBytes(32), nonce: randomBytes(24), message: randomBytes(length(i)), around: randomBytes(16) }),
    ({ key, nonce, message, around }) => {
      const offset = around[0] % 8; // every alignment of the box, and so of its 64-byte blocks
      const buffer = Buffer.concat([around.subarray(0, offset), Buffer.alloc(16), message, around]);
      secretboxInPlace(buffer, offset, message.length, nonce, key);
      assert.equal(hex(buffer.subarray(offset, offset + 16 + message.length)), hex(nacl.secretbox(message, nonce, key)));
      assert.equal(hex(buffer.subarray(0, offset)), hex(around.subarray(0, offset)));
      assert.equal(hex(buffer.subarray(offset + 16 + message.length)), hex(around));
      // Opened from a view at the same odd offset: the input unaligned, the output not.
      assert.equal(hex(secretboxOpen(buffer.subarray(offset, offset + 16 + message.length), nonce, key)), hex(message));
    });
  const key = randomBytes(32);
  const nonce = randomBytes(24);
  assert.throws(() => secretboxInPlace(Buffer.alloc(20), 0, 5, nonce, key), RangeError); // 16 + 5 > 20
  assert.throws(() => secretboxInPlace(Buffer.alloc(20), -1, 0, nonce, key), RangeError);
  assert.throws(() => secretboxInPlace(Buffer.alloc(40), 0.5, 4, nonce, key), RangeError);
});

test('a 1 MiB secretbox equals nacl.secretbox, opens both ways, and a flipped bit anywhere is refused by both', () => {
  const key = randomBytes(32);
  const nonce = randomBytes(24);
  const message = randomBytes(1024 * 1024);
  const sealed = secretbox(message, nonce, key);
  assert.equal(hex(sealed), hex(nacl.secretbox(message, nonce, key)));
  assert.equal(hex(secretboxOpen(sealed, nonce, key)), hex(message));
  assert.equal(hex(nacl.secretbox.open(sealed, nonce, key)), hex(message));
  for (const at of [0, 15, 16, 17, 47, 48, sealed.length - 1]) { // in the tag, the first blocks and the last byte
    const tampered = Buffer.from(sealed);
    tampered[at] ^= 0x80;
    assert.equal(secretboxOpen(tampered, nonce, key), null, `bit flipped at ${at}`);
    assert.equal(nacl.secretbox.open(tampered, nonce, key), null, `bit flipped at ${at}`);
  }
});

test('X25519 (scalar multiplication) equals nacl.scalarMult, public keys equal nacl\'s', () => {
  forCases(CASES / 2, () => ({ scalar: randomBytes(32), point: randomBytes(32) }), ({ scalar, point }) => {
    assert.equal(hex(x25519(scalar, point)), hex(nacl.scalarMult(scalar, point)));
    assert.equal(hex(publicKeyOf(scalar)), hex(nacl.scalarMult.base(scalar)));
  });
});

test('X25519 refuses the small-order points for which NaCl computes the all-zero secret', () => {
  const p = (1n << 255n) - 19n;
  const le = (n) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex').reverse();
  // u = 0, 1, p - 1 (order 2), p and p + 1 (0 and 1 again, not reduced), and the order-8 point of RFC 7748's errata.
  const smallOrder = [0n, 1n, p - 1n, p, p + 1n, 39382357235489614581723060781553021112529911719440698176882885853963445705823n];
  for (const u of smallOrder) {
    const scalar = randomBytes(32);
    assert.equal(hex(nacl.scalarMult(scalar, le(u))), hex(Buffer.alloc(32)), `NaCl's secret for u = ${u}`);
    assert.throws(() => x25519(scalar, le(u)), RangeError, `u = ${u}`);
  }
});

test('box equals nacl.box, box keys equal nacl.box.before, and each opens the other\'s boxes', () => {
  forCases(CASES / 4, (i) => ({ ours: randomBytes(32), theirs: randomBytes(32), nonce: randomBytes(24), message: randomBytes(length(i)) }),
    ({ ours, theirs, nonce, message }) => {
      const theirPublic = nacl.box.keyPair.fromSecretKey(theirs).publicKey;
      const ourPublic = nacl.box.keyPair.fromSecretKey(ours).publicKey;
      assert.equal(hex(boxBeforenm(theirPublic, ours)), hex(nacl.box.before(theirPublic, ours)));
      const sealed = box(message, nonce, theirPublic, ours);
      assert.equal(hex(sealed), hex(nacl.box(message, nonce, theirPublic, ours)));
      assert.equal(hex(nacl.box.open(sealed, nonce, ourPublic, theirs)), hex(message));
      assert.equal(hex(boxOpen(nacl.box(message, nonce, ourPublic, theirs), nonce, theirPublic, ours)), hex(message));
      assert.equal(boxOpen(sealed, nonce, theirPublic, theirs), null); // the wrong key pair
    });
});
