// The cryptography CurveZMQ (ZeroMQ RFC 26) needs, in plain JavaScript: Salsa20 / HSalsa20 / XSalsa20,
// Poly1305, NaCl's crypto_secretbox and crypto_box (curve25519-xsalsa20-poly1305), and Z85 (RFC 32).
// X25519 itself and randomness come from node:crypto. Written from the NaCl specification
// ("Cryptography in NaCl", D. J. Bernstein) and the Salsa20 / Poly1305 papers.
//
// Boxes here use the "easy" layout, which is also what CurveZMQ puts on the wire: a 16-byte
// Poly1305 tag followed by the ciphertext (NaCl's crypto_box output without its 16 zero bytes).

import { createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, timingSafeEqual } from 'node:crypto';

export const KEY_BYTES = 32;
export const NONCE_BYTES = 24;
export const TAG_BYTES = 16;

// --- Salsa20 ------------------------------------------------------------------------------

// "expand 32-byte k" as four little-endian words.
const SIGMA = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574];

const rotl = (v, n) => (v << n) | (v >>> (32 - n));

function readWord(bytes, at) {
  return bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
}

function writeWord(out, at, v) {
  out[at] = v & 0xff;
  out[at + 1] = (v >>> 8) & 0xff;
  out[at + 2] = (v >>> 16) & 0xff;
  out[at + 3] = (v >>> 24) & 0xff;
}

/** The Salsa20 core: twenty rounds over `input` (16 words), plus `input` again, into `out` (16 words). */
function salsaCore(input, out) {
  let x0 = input[0], x1 = input[1], x2 = input[2], x3 = input[3];
  let x4 = input[4], x5 = input[5], x6 = input[6], x7 = input[7];
  let x8 = input[8], x9 = input[9], x10 = input[10], x11 = input[11];
  let x12 = input[12], x13 = input[13], x14 = input[14], x15 = input[15];
  for (let i = 0; i < 20; i += 2) {
    // Column round.
    x4 ^= rotl((x0 + x12) | 0, 7); x8 ^= rotl((x4 + x0) | 0, 9);
    x12 ^= rotl((x8 + x4) | 0, 13); x0 ^= rotl((x12 + x8) | 0, 18);
    x9 ^= rotl((x5 + x1) | 0, 7); x13 ^= rotl((x9 + x5) | 0, 9);
    x1 ^= rotl((x13 + x9) | 0, 13); x5 ^= rotl((x1 + x13) | 0, 18);
    x14 ^= rotl((x10 + x6) | 0, 7); x2 ^= rotl((x14 + x10) | 0, 9);
    x6 ^= rotl((x2 + x14) | 0, 13); x10 ^= rotl((x6 + x2) | 0, 18);
    x3 ^= rotl((x15 + x11) | 0, 7); x7 ^= rotl((x3 + x15) | 0, 9);
    x11 ^= rotl((x7 + x3) | 0, 13); x15 ^= rotl((x11 + x7) | 0, 18);
    // Row round.
    x1 ^= rotl((x0 + x3) | 0, 7); x2 ^= rotl((x1 + x0) | 0, 9);
    x3 ^= rotl((x2 + x1) | 0, 13); x0 ^= rotl((x3 + x2) | 0, 18);
    x6 ^= rotl((x5 + x4) | 0, 7); x7 ^= rotl((x6 + x5) | 0, 9);
    x4 ^= rotl((x7 + x6) | 0, 13); x5 ^= rotl((x4 + x7) | 0, 18);
    x11 ^= rotl((x10 + x9) | 0, 7); x8 ^= rotl((x11 + x10) | 0, 9);
    x9 ^= rotl((x8 + x11) | 0, 13); x10 ^= rotl((x9 + x8) | 0, 18);
    x12 ^= rotl((x15 + x14) | 0, 7); x13 ^= rotl((x12 + x15) | 0, 9);
    x14 ^= rotl((x13 + x12) | 0, 13); x15 ^= rotl((x14 + x13) | 0, 18);
  }
  out[0] = x0 + input[0]; out[1] = x1 + input[1]; out[2] = x2 + input[2]; out[3] = x3 + input[3];
  out[4] = x4 + input[4]; out[5] = x5 + input[5]; out[6] = x6 + input[6]; out[7] = x7 + input[7];
  out[8] = x8 + input[8]; out[9] = x9 + input[9]; out[10] = x10 + input[10]; out[11] = x11 + input[11];
  out[12] = x12 + input[12]; out[13] = x13 + input[13]; out[14] = x14 + input[14]; out[15] = x15 + input[15];
}

/** The Salsa20 input block: constants, 32-byte key, 16 bytes of nonce/counter words. */
function salsaInput(key, sixteen) {
  const input = new Int32Array(16);
  input[0] = SIGMA[0]; input[5] = SIGMA[1]; input[10] = SIGMA[2]; input[15] = SIGMA[3];
  for (let i = 0; i < 4; i++) {
    input[1 + i] = readWord(key, 4 * i);
    input[11 + i] = readWord(key, 16 + 4 * i);
    input[6 + i] = readWord(sixteen, 4 * i);
  }
  return input;
}

/** HSalsa20: 32-byte key and 16-byte input to a 32-byte derived key (XSalsa20 subkeys, crypto_box_beforenm). */
export function hsalsa20(key, input16) {
  checkLength(key, KEY_BYTES, 'hsalsa20 key');
  checkLength(input16, 16, 'hsalsa20 input');
  const input = salsaInput(key, input16);
  const state = new Int32Array(16);
  salsaCore(input, state);
  // HSalsa20 is the core without the final addition: take the input back out of the words it keeps.
  const out = Buffer.alloc(32);
  [0, 5, 10, 15, 6, 7, 8, 9].forEach((word, i) => writeWord(out, 4 * i, state[word] - input[word]));
  return out;
}

/** XORs `input` with the XSalsa20 key stream for (key, 24-byte nonce) into `out` (which may be `input`). */
function xsalsa20XorInto(key, nonce, input, out) {
  const subkey = hsalsa20(key, nonce.subarray(0, 16));
  const counterBlock = Buffer.alloc(16);
  counterBlock.set(nonce.subarray(16, 24)); // words 6-7: the nonce's last 8 bytes; words 8-9: the block counter
  const state = salsaInput(subkey, counterBlock);
  subkey.fill(0);
  const block = new Int32Array(16);
  let at = 0;
  while (at < input.length) {
    salsaCore(state, block);
    if (input.length - at >= 64) {
      for (let w = 0; w < 16; w++, at += 4) {
        const v = block[w];
        out[at] = input[at] ^ v;
        out[at + 1] = input[at + 1] ^ (v >>> 8);
        out[at + 2] = input[at + 2] ^ (v >>> 16);
        out[at + 3] = input[at + 3] ^ (v >>> 24);
      }
    } else {
      for (let i = 0; at < input.length; i++, at++) out[at] = input[at] ^ (block[i >>> 2] >>> ((i & 3) << 3));
    }
    // 64-bit little-endian block counter in words 8 and 9.
    state[8] = (state[8] + 1) | 0;
    if (state[8] === 0) state[9] = (state[9] + 1) | 0;
  }
  state.fill(0);
  block.fill(0);
  return out;
}

/** XSalsa20 (crypto_stream_xsalsa20_xor): `data` XOR the key stream for a 32-byte key and 24-byte nonce. */
export function xsalsa20Xor(key, nonce, data) {
  checkLength(key, KEY_BYTES, 'xsalsa20 key');
  checkLength(nonce, NONCE_BYTES, 'xsalsa20 nonce');
  data = toBytes(data);
  return xsalsa20XorInto(key, nonce, data, Buffer.allocUnsafe(data.length));
}

// --- Poly1305 -----------------------------------------------------------------------------

// Numbers mod 2^130 - 5 are held as ten 13-bit limbs in plain JS numbers: a product of two limbs
// with the 5x fold stays far below 2^53, so the arithmetic is exact without BigInt.

/** Splits 16 little-endian bytes (plus `top` as bit 128) into ten 13-bit limbs. */
function limbs(bytes, at, top, out) {
  const t0 = bytes[at] | (bytes[at + 1] << 8), t1 = bytes[at + 2] | (bytes[at + 3] << 8);
  const t2 = bytes[at + 4] | (bytes[at + 5] << 8), t3 = bytes[at + 6] | (bytes[at + 7] << 8);
  const t4 = bytes[at + 8] | (bytes[at + 9] << 8), t5 = bytes[at + 10] | (bytes[at + 11] << 8);
  const t6 = bytes[at + 12] | (bytes[at + 13] << 8), t7 = bytes[at + 14] | (bytes[at + 15] << 8);
  out[0] = t0 & 0x1fff;
  out[1] = ((t0 >>> 13) | (t1 << 3)) & 0x1fff;
  out[2] = ((t1 >>> 10) | (t2 << 6)) & 0x1fff;
  out[3] = ((t2 >>> 7) | (t3 << 9)) & 0x1fff;
  out[4] = ((t3 >>> 4) | (t4 << 12)) & 0x1fff;
  out[5] = (t4 >>> 1) & 0x1fff;
  out[6] = ((t4 >>> 14) | (t5 << 2)) & 0x1fff;
  out[7] = ((t5 >>> 11) | (t6 << 5)) & 0x1fff;
  out[8] = ((t6 >>> 8) | (t7 << 8)) & 0x1fff;
  out[9] = (t7 >>> 5) | top;
}

/** Poly1305 one-time authenticator (crypto_onetimeauth): a 16-byte tag of `message` under a 32-byte key. */
export function poly1305(key, message) {
  checkLength(key, KEY_BYTES, 'poly1305 key');
  message = toBytes(message);
  const rBytes = Buffer.from(key.subarray(0, 16));
  // Clamp r as the specification requires.
  rBytes[3] &= 15; rBytes[7] &= 15; rBytes[11] &= 15; rBytes[15] &= 15;
  rBytes[4] &= 252; rBytes[8] &= 252; rBytes[12] &= 252;
  const r = new Array(10);
  limbs(rBytes, 0, 0, r);
  const [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9] = r;
  // 2^130 = 5 (mod p): limbs of a product that wrap past 2^130 come back times 5.
  const s1 = 5 * r1, s2 = 5 * r2, s3 = 5 * r3, s4 = 5 * r4, s5 = 5 * r5, s6 = 5 * r6, s7 = 5 * r7, s8 = 5 * r8, s9 = 5 * r9;
  let h0 = 0, h1 = 0, h2 = 0, h3 = 0, h4 = 0, h5 = 0, h6 = 0, h7 = 0, h8 = 0, h9 = 0;
  const m = new Array(10);
  const last = Buffer.alloc(16);
  for (let at = 0; at < message.length; at += 16) {
    if (message.length - at >= 16) {
      limbs(message, at, 1 << 11, m);
    } else {
      // A short final block gets a 1 byte after its end instead of bit 128.
      last.fill(0);
      message.copy(last, 0, at);
      last[message.length - at] = 1;
      limbs(last, 0, 0, m);
    }
    h0 += m[0]; h1 += m[1]; h2 += m[2]; h3 += m[3]; h4 += m[4];
    h5 += m[5]; h6 += m[6]; h7 += m[7]; h8 += m[8]; h9 += m[9];
    // h * r mod p, one column per limb, each carried into the next (sums stay below 2^36, exact).
    let c, d;
    d = h0 * r0 + h1 * s9 + h2 * s8 + h3 * s7 + h4 * s6
      + h5 * s5 + h6 * s4 + h7 * s3 + h8 * s2 + h9 * s1;
    c = (d / 8192) | 0;
    const d0 = d & 0x1fff;
    d = c + h0 * r1 + h1 * r0 + h2 * s9 + h3 * s8 + h4 * s7
      + h5 * s6 + h6 * s5 + h7 * s4 + h8 * s3 + h9 * s2;
    c = (d / 8192) | 0;
    const d1 = d & 0x1fff;
    d = c + h0 * r2 + h1 * r1 + h2 * r0 + h3 * s9 + h4 * s8
      + h5 * s7 + h6 * s6 + h7 * s5 + h8 * s4 + h9 * s3;
    c = (d / 8192) | 0;
    const d2 = d & 0x1fff;
    d = c + h0 * r3 + h1 * r2 + h2 * r1 + h3 * r0 + h4 * s9
      + h5 * s8 + h6 * s7 + h7 * s6 + h8 * s5 + h9 * s4;
    c = (d / 8192) | 0;
    const d3 = d & 0x1fff;
    d = c + h0 * r4 + h1 * r3 + h2 * r2 + h3 * r1 + h4 * r0
      + h5 * s9 + h6 * s8 + h7 * s7 + h8 * s6 + h9 * s5;
    c = (d / 8192) | 0;
    const d4 = d & 0x1fff;
    d = c + h0 * r5 + h1 * r4 + h2 * r3 + h3 * r2 + h4 * r1
      + h5 * r0 + h6 * s9 + h7 * s8 + h8 * s7 + h9 * s6;
    c = (d / 8192) | 0;
    const d5 = d & 0x1fff;
    d = c + h0 * r6 + h1 * r5 + h2 * r4 + h3 * r3 + h4 * r2
      + h5 * r1 + h6 * r0 + h7 * s9 + h8 * s8 + h9 * s7;
    c = (d / 8192) | 0;
    const d6 = d & 0x1fff;
    d = c + h0 * r7 + h1 * r6 + h2 * r5 + h3 * r4 + h4 * r3
      + h5 * r2 + h6 * r1 + h7 * r0 + h8 * s9 + h9 * s8;
    c = (d / 8192) | 0;
    const d7 = d & 0x1fff;
    d = c + h0 * r8 + h1 * r7 + h2 * r6 + h3 * r5 + h4 * r4
      + h5 * r3 + h6 * r2 + h7 * r1 + h8 * r0 + h9 * s9;
    c = (d / 8192) | 0;
    const d8 = d & 0x1fff;
    d = c + h0 * r9 + h1 * r8 + h2 * r7 + h3 * r6 + h4 * r5
      + h5 * r4 + h6 * r3 + h7 * r2 + h8 * r1 + h9 * r0;
    c = (d / 8192) | 0;
    const d9 = d & 0x1fff;
    h0 = d0 + c * 5;
    c = h0 >>> 13;
    h0 &= 0x1fff;
    h1 = d1 + c;
    h2 = d2; h3 = d3; h4 = d4; h5 = d5; h6 = d6; h7 = d7; h8 = d8; h9 = d9;
  }
  const h = [h0, h1, h2, h3, h4, h5, h6, h7, h8, h9];
  // Carry to canonical 13-bit limbs (two passes: the 5x fold of the first can ripple once more),
  // then subtract p once if h >= p, in constant time.
  let carry;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < 9; i++) {
      carry = h[i] >>> 13;
      h[i] &= 0x1fff;
      h[i + 1] += carry;
    }
    carry = h[9] >>> 13;
    h[9] &= 0x1fff;
    h[0] += carry * 5;
  }
  carry = h[0] >>> 13;
  h[0] &= 0x1fff;
  h[1] += carry;
  const g = new Array(10);
  carry = 5;
  for (let i = 0; i < 10; i++) {
    g[i] = h[i] + carry;
    carry = g[i] >>> 13;
    g[i] &= 0x1fff;
  }
  const useG = -carry; // h + 5 reached 2^130, i.e. h >= p: all ones selects g = h - p
  for (let i = 0; i < 10; i++) h[i] = (h[i] & ~useG) | (g[i] & useG);
  // h mod 2^128 as eight 16-bit words, plus s, little-endian.
  const words = [
    h[0] | (h[1] << 13),
    (h[1] >>> 3) | (h[2] << 10),
    (h[2] >>> 6) | (h[3] << 7),
    (h[3] >>> 9) | (h[4] << 4),
    (h[4] >>> 12) | (h[5] << 1) | (h[6] << 14),
    (h[6] >>> 2) | (h[7] << 11),
    (h[7] >>> 5) | (h[8] << 8),
    (h[8] >>> 8) | (h[9] << 5),
  ];
  const tag = Buffer.alloc(16);
  carry = 0;
  for (let i = 0; i < 8; i++) {
    const sum = (words[i] & 0xffff) + (key[16 + 2 * i] | (key[17 + 2 * i] << 8)) + carry;
    tag[2 * i] = sum & 0xff;
    tag[2 * i + 1] = (sum >>> 8) & 0xff;
    carry = sum >>> 16;
  }
  return tag;
}

// --- secretbox and box ----------------------------------------------------------------------

/** crypto_secretbox (XSalsa20-Poly1305): tag + ciphertext of `message` under a 32-byte key and 24-byte nonce. */
export function secretbox(message, nonce, key) {
  checkLength(key, KEY_BYTES, 'secretbox key');
  checkLength(nonce, NONCE_BYTES, 'secretbox nonce');
  message = toBytes(message);
  // NaCl's layout: 32 zero bytes, then the message, all XORed with the key stream. The first 32 bytes
  // become the one-time Poly1305 key; its tag then takes the place of the last 16 of them.
  const work = Buffer.alloc(32 + message.length);
  message.copy(work, 32);
  xsalsa20XorInto(key, nonce, work, work);
  const tag = poly1305(work.subarray(0, 32), work.subarray(32));
  work.fill(0, 0, 16);
  tag.copy(work, 16);
  return work.subarray(16);
}

/** Opens a secretbox: the message, or null when the box was not made with this key and nonce (or was altered). */
export function secretboxOpen(sealed, nonce, key) {
  checkLength(key, KEY_BYTES, 'secretbox key');
  checkLength(nonce, NONCE_BYTES, 'secretbox nonce');
  sealed = toBytes(sealed);
  if (sealed.length < TAG_BYTES) return null;
  const ciphertext = sealed.subarray(TAG_BYTES);
  const work = Buffer.alloc(32 + ciphertext.length);
  ciphertext.copy(work, 32);
  xsalsa20XorInto(key, nonce, work, work);
  // The tag is over the ciphertext as received; nothing decrypted leaves unless it matches.
  const expected = poly1305(work.subarray(0, 32), ciphertext);
  if (!timingSafeEqual(expected, sealed.subarray(0, TAG_BYTES))) {
    work.fill(0);
    return null;
  }
  work.fill(0, 0, 32);
  return work.subarray(32);
}

const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const SPKI_X25519 = Buffer.from('302a300506032b656e032100', 'hex');

function privateKeyObject(secretKey) {
  checkLength(secretKey, KEY_BYTES, 'X25519 secret key');
  return createPrivateKey({ key: Buffer.concat([PKCS8_X25519, secretKey]), format: 'der', type: 'pkcs8' });
}

function publicKeyObject(publicKey) {
  checkLength(publicKey, KEY_BYTES, 'X25519 public key');
  return createPublicKey({ key: Buffer.concat([SPKI_X25519, publicKey]), format: 'der', type: 'spki' });
}

/** X25519(secret, public): the 32-byte shared point. Throws for a public key of small order (an all-zero result). */
export function x25519(secretKey, publicKey) {
  const privateKey = privateKeyObject(secretKey);
  const theirs = publicKeyObject(publicKey);
  let shared;
  try {
    shared = diffieHellman({ privateKey, publicKey: theirs });
  } catch {
    shared = null; // OpenSSL refuses to derive an all-zero secret
  }
  if (!shared || shared.every((b) => b === 0)) throw new RangeError('X25519 with a small-order public key');
  return shared;
}

/** The public key of a 32-byte X25519 secret key. */
export function publicKeyOf(secretKey) {
  return createPublicKey(privateKeyObject(secretKey)).export({ format: 'der', type: 'spki' }).subarray(SPKI_X25519.length);
}

/** A fresh X25519 key pair as 32-byte Buffers. */
export function generateKeyPair() {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  return {
    publicKey: publicKey.export({ format: 'der', type: 'spki' }).subarray(SPKI_X25519.length),
    secretKey: privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_X25519.length),
  };
}

/** crypto_box_beforenm: the shared XSalsa20-Poly1305 key of (their public key, our secret key). */
export function boxBeforenm(theirPublicKey, ourSecretKey) {
  const shared = x25519(ourSecretKey, theirPublicKey);
  const key = hsalsa20(shared, Buffer.alloc(16));
  shared.fill(0);
  return key;
}

/** crypto_box: `message` encrypted and authenticated from our secret key to their public key. */
export function box(message, nonce, theirPublicKey, ourSecretKey) {
  return secretbox(message, nonce, boxBeforenm(theirPublicKey, ourSecretKey));
}

/** crypto_box_open: the message, or null when the box fails to open (wrong keys, nonce, or tampered). */
export function boxOpen(sealed, nonce, theirPublicKey, ourSecretKey) {
  let key;
  try {
    key = boxBeforenm(theirPublicKey, ourSecretKey);
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
  return secretboxOpen(sealed, nonce, key);
}

// --- Z85 (ZeroMQ RFC 32) --------------------------------------------------------------------

const Z85_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#';
const Z85_VALUES = new Int8Array(128).fill(-1);
for (let i = 0; i < 85; i++) Z85_VALUES[Z85_ALPHABET.charCodeAt(i)] = i;

/** Z85-encodes bytes whose length is a multiple of 4. */
export function z85Encode(data) {
  data = toBytes(data);
  if (data.length % 4 !== 0) throw new RangeError(`Z85 encodes a multiple of 4 bytes, not ${data.length}`);
  let out = '';
  for (let at = 0; at < data.length; at += 4) {
    let value = data.readUInt32BE(at);
    const chunk = new Array(5);
    for (let i = 4; i >= 0; i--) {
      chunk[i] = Z85_ALPHABET[value % 85];
      value = Math.floor(value / 85);
    }
    out += chunk.join('');
  }
  return out;
}

/** Decodes a Z85 string (length a multiple of 5). Throws a RangeError on any other character or an overflowing group. */
export function z85Decode(text) {
  if (typeof text !== 'string') throw new TypeError('Z85 text must be a string');
  if (text.length % 5 !== 0) throw new RangeError(`Z85 text has a multiple of 5 characters, not ${text.length}`);
  const out = Buffer.alloc((text.length / 5) * 4);
  for (let at = 0; at < text.length; at += 5) {
    let value = 0;
    for (let i = 0; i < 5; i++) {
      const code = text.charCodeAt(at + i);
      const digit = code < 128 ? Z85_VALUES[code] : -1;
      if (digit < 0) throw new RangeError(`not a Z85 character: ${JSON.stringify(text[at + i])}`);
      value = value * 85 + digit;
    }
    if (value > 0xffffffff) throw new RangeError(`Z85 group ${JSON.stringify(text.slice(at, at + 5))} exceeds 32 bits`);
    out.writeUInt32BE(value, (at / 5) * 4);
  }
  return out;
}

/** A CURVE key as 32 bytes, from a 40-character Z85 string or 32 bytes. */
export function curveKey(key, what = 'key') {
  if (typeof key === 'string') {
    if (key.length !== 40) throw new TypeError(`${what} must be 40 Z85 characters, got ${key.length}`);
    try {
      return z85Decode(key);
    } catch {
      // Not z85Decode's message: it quotes the offending characters, and this may be a secret key.
      throw new TypeError(`${what} must be 40 Z85 characters (ZeroMQ RFC 32), and is not Z85`);
    }
  }
  if (key instanceof Uint8Array && key.length === KEY_BYTES) return Buffer.from(key);
  throw new TypeError(`${what} must be a 40-character Z85 string or 32 bytes`);
}

/** A fresh CURVE key pair in Z85, like zmq_curve_keypair(). */
export function curveKeyPair() {
  const { publicKey, secretKey } = generateKeyPair();
  return { publicKey: z85Encode(publicKey), secretKey: z85Encode(secretKey) };
}

// --- helpers --------------------------------------------------------------------------------

function toBytes(data) {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('expected a Buffer or Uint8Array');
}

function checkLength(bytes, length, what) {
  if (!(bytes instanceof Uint8Array) || bytes.length !== length) {
    throw new TypeError(`${what} must be ${length} bytes`);
  }
}
