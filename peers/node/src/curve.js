// The cryptography CurveZMQ (ZeroMQ RFC 26) needs, in plain JavaScript: Salsa20 / HSalsa20 / XSalsa20,
// Poly1305, NaCl's crypto_secretbox and crypto_box (curve25519-xsalsa20-poly1305), and Z85 (RFC 32).
// X25519 itself and randomness come from node:crypto. Written from the NaCl specification
// ("Cryptography in NaCl", D. J. Bernstein) and the Salsa20 / Poly1305 papers.
//
// Boxes here use the "easy" layout, which is also what CurveZMQ puts on the wire: a 16-byte
// Poly1305 tag followed by the ciphertext (NaCl's crypto_box output without its 16 zero bytes).

import { createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync } from 'node:crypto';

export const KEY_BYTES = 32;
export const NONCE_BYTES = 24;
export const TAG_BYTES = 16;

// --- Salsa20 ------------------------------------------------------------------------------
//
// Every function below runs to completion synchronously, so one set of module-level scratch arrays serves every
// call: nothing is allocated per block, nor per message beyond its output. Key material is wiped from them after use.

// "expand 32-byte k" as four little-endian words.
const SIGMA = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574];

// Key stream blocks are XORed into data through their memory, which must hold the words little-endian.
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

const STATE = new Int32Array(16); // the Salsa20 input: constants, key, nonce, block counter (words 8-9)
const BLOCK = new Int32Array(16); // the current key stream block
const KEY_STREAM = new Uint8Array(BLOCK.buffer);
const POLY_KEY = new Uint8Array(32); // a secretbox's one-time Poly1305 key: its first 32 key stream bytes
const LAST_BLOCK = new Uint8Array(16); // Poly1305's padded final block
const TAG = new Uint8Array(TAG_BYTES); // the tag an opened box must carry

function readWord(bytes, at) {
  return bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
}

/** The Salsa20 core: twenty rounds over `input` (16 words), plus `input` again, into `out` (16 words). */
function salsaCore(input, out) {
  const j0 = input[0], j1 = input[1], j2 = input[2], j3 = input[3], j4 = input[4], j5 = input[5];
  const j6 = input[6], j7 = input[7], j8 = input[8], j9 = input[9], j10 = input[10], j11 = input[11];
  const j12 = input[12], j13 = input[13], j14 = input[14], j15 = input[15];
  let x0 = j0, x1 = j1, x2 = j2, x3 = j3, x4 = j4, x5 = j5, x6 = j6, x7 = j7;
  let x8 = j8, x9 = j9, x10 = j10, x11 = j11, x12 = j12, x13 = j13, x14 = j14, x15 = j15;
  let t;
  // Each rotation is written out (t << n | t >>> 32 - n): the hot loop then calls nothing.
  for (let i = 0; i < 20; i += 2) {
    // Column round.
    t = (x0 + x12) | 0; x4 ^= (t << 7) | (t >>> 25);
    t = (x4 + x0) | 0; x8 ^= (t << 9) | (t >>> 23);
    t = (x8 + x4) | 0; x12 ^= (t << 13) | (t >>> 19);
    t = (x12 + x8) | 0; x0 ^= (t << 18) | (t >>> 14);
    t = (x5 + x1) | 0; x9 ^= (t << 7) | (t >>> 25);
    t = (x9 + x5) | 0; x13 ^= (t << 9) | (t >>> 23);
    t = (x13 + x9) | 0; x1 ^= (t << 13) | (t >>> 19);
    t = (x1 + x13) | 0; x5 ^= (t << 18) | (t >>> 14);
    t = (x10 + x6) | 0; x14 ^= (t << 7) | (t >>> 25);
    t = (x14 + x10) | 0; x2 ^= (t << 9) | (t >>> 23);
    t = (x2 + x14) | 0; x6 ^= (t << 13) | (t >>> 19);
    t = (x6 + x2) | 0; x10 ^= (t << 18) | (t >>> 14);
    t = (x15 + x11) | 0; x3 ^= (t << 7) | (t >>> 25);
    t = (x3 + x15) | 0; x7 ^= (t << 9) | (t >>> 23);
    t = (x7 + x3) | 0; x11 ^= (t << 13) | (t >>> 19);
    t = (x11 + x7) | 0; x15 ^= (t << 18) | (t >>> 14);
    // Row round.
    t = (x0 + x3) | 0; x1 ^= (t << 7) | (t >>> 25);
    t = (x1 + x0) | 0; x2 ^= (t << 9) | (t >>> 23);
    t = (x2 + x1) | 0; x3 ^= (t << 13) | (t >>> 19);
    t = (x3 + x2) | 0; x0 ^= (t << 18) | (t >>> 14);
    t = (x5 + x4) | 0; x6 ^= (t << 7) | (t >>> 25);
    t = (x6 + x5) | 0; x7 ^= (t << 9) | (t >>> 23);
    t = (x7 + x6) | 0; x4 ^= (t << 13) | (t >>> 19);
    t = (x4 + x7) | 0; x5 ^= (t << 18) | (t >>> 14);
    t = (x10 + x9) | 0; x11 ^= (t << 7) | (t >>> 25);
    t = (x11 + x10) | 0; x8 ^= (t << 9) | (t >>> 23);
    t = (x8 + x11) | 0; x9 ^= (t << 13) | (t >>> 19);
    t = (x9 + x8) | 0; x10 ^= (t << 18) | (t >>> 14);
    t = (x15 + x14) | 0; x12 ^= (t << 7) | (t >>> 25);
    t = (x12 + x15) | 0; x13 ^= (t << 9) | (t >>> 23);
    t = (x13 + x12) | 0; x14 ^= (t << 13) | (t >>> 19);
    t = (x14 + x13) | 0; x15 ^= (t << 18) | (t >>> 14);
  }
  out[0] = x0 + j0; out[1] = x1 + j1; out[2] = x2 + j2; out[3] = x3 + j3;
  out[4] = x4 + j4; out[5] = x5 + j5; out[6] = x6 + j6; out[7] = x7 + j7;
  out[8] = x8 + j8; out[9] = x9 + j9; out[10] = x10 + j10; out[11] = x11 + j11;
  out[12] = x12 + j12; out[13] = x13 + j13; out[14] = x14 + j14; out[15] = x15 + j15;
}

/** Fills STATE: the constants, a 32-byte key, and words 6-9 from the first 16 bytes of `nonce`. */
function loadState(key, nonce) {
  STATE[0] = SIGMA[0]; STATE[5] = SIGMA[1]; STATE[10] = SIGMA[2]; STATE[15] = SIGMA[3];
  for (let i = 0; i < 4; i++) {
    STATE[1 + i] = readWord(key, 4 * i);
    STATE[11 + i] = readWord(key, 16 + 4 * i);
    STATE[6 + i] = readWord(nonce, 4 * i);
  }
}

// HSalsa20's output: these words of the rounds' result, in this order.
const HSALSA_WORDS = [0, 5, 10, 15, 6, 7, 8, 9];

/** HSalsa20 of STATE, which then holds the derived key as its key (the other words unchanged). */
function hsalsaIntoState() {
  salsaCore(STATE, BLOCK);
  // HSalsa20 is the rounds without the final addition: take the input back out of the words it keeps.
  for (let i = 0; i < 8; i++) BLOCK[i] = BLOCK[HSALSA_WORDS[i]] - STATE[HSALSA_WORDS[i]];
  for (let i = 0; i < 4; i++) {
    STATE[1 + i] = BLOCK[i];
    STATE[11 + i] = BLOCK[4 + i];
  }
}

/** Zeroes the scratch arrays that held key material. */
function wipe() {
  STATE.fill(0);
  BLOCK.fill(0);
  POLY_KEY.fill(0);
  LAST_BLOCK.fill(0);
}

/** HSalsa20: 32-byte key and 16-byte input to a 32-byte derived key (XSalsa20 subkeys, crypto_box_beforenm). */
export function hsalsa20(key, input16) {
  checkLength(key, KEY_BYTES, 'hsalsa20 key');
  checkLength(input16, 16, 'hsalsa20 input');
  loadState(key, input16);
  hsalsaIntoState();
  const out = Buffer.allocUnsafe(32);
  for (let i = 0; i < 4; i++) {
    out.writeInt32LE(STATE[1 + i], 4 * i);
    out.writeInt32LE(STATE[11 + i], 16 + 4 * i);
  }
  wipe();
  return out;
}

/** STATE for XSalsa20 under (key, 24-byte nonce) at block 0: the HSalsa20 subkey of the nonce's first 16 bytes. */
function startXsalsa20(key, nonce) {
  loadState(key, nonce);
  hsalsaIntoState();
  STATE[6] = readWord(nonce, 16);
  STATE[7] = readWord(nonce, 20);
  STATE[8] = 0;
  STATE[9] = 0;
}

/** The next key stream block into BLOCK (its words little-endian in memory); the 64-bit block counter moves on. */
function nextBlock() {
  salsaCore(STATE, BLOCK);
  if (!LITTLE_ENDIAN) {
    for (let w = 0; w < 16; w++) {
      const v = BLOCK[w];
      BLOCK[w] = (v << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24);
    }
  }
  STATE[8] = (STATE[8] + 1) | 0;
  if (STATE[8] === 0) STATE[9] = (STATE[9] + 1) | 0;
}

/**
 * XORs `length` bytes of `input` from `inAt` into `out` from `outAt` (in place is fine) with the key stream: from
 * byte `from` of the block in BLOCK (64: none left), then the blocks after it. Whole blocks go a word at a time where
 * `out` is 4-byte aligned (the input copied over natively first, when it is elsewhere), and byte by byte otherwise.
 */
function xorKeyStream(input, inAt, out, outAt, length, from) {
  let done = 0;
  for (; from < 64 && done < length; from++, done++) out[outAt + done] = input[inAt + done] ^ KEY_STREAM[from];
  const whole = (length - done) >>> 6;
  if (whole > 0 && ((out.byteOffset + outAt + done) & 3) === 0) {
    if (input !== out || inAt !== outAt) {
      // A plain view (not input.subarray: for a Buffer that builds another Buffer) for one native copy.
      out.set(new Uint8Array(input.buffer, input.byteOffset + inAt + done, 64 * whole), outAt + done);
    }
    const words = new Int32Array(out.buffer, out.byteOffset + outAt + done, 16 * whole);
    for (let w = 0; w < words.length; w += 16) {
      nextBlock();
      words[w] ^= BLOCK[0]; words[w + 1] ^= BLOCK[1]; words[w + 2] ^= BLOCK[2]; words[w + 3] ^= BLOCK[3];
      words[w + 4] ^= BLOCK[4]; words[w + 5] ^= BLOCK[5]; words[w + 6] ^= BLOCK[6]; words[w + 7] ^= BLOCK[7];
      words[w + 8] ^= BLOCK[8]; words[w + 9] ^= BLOCK[9]; words[w + 10] ^= BLOCK[10]; words[w + 11] ^= BLOCK[11];
      words[w + 12] ^= BLOCK[12]; words[w + 13] ^= BLOCK[13]; words[w + 14] ^= BLOCK[14]; words[w + 15] ^= BLOCK[15];
    }
    done += 64 * whole;
  }
  while (done < length) {
    nextBlock();
    const count = Math.min(64, length - done);
    for (let i = 0; i < count; i++, done++) out[outAt + done] = input[inAt + done] ^ KEY_STREAM[i];
  }
}

/** XSalsa20 (crypto_stream_xsalsa20_xor): `data` XOR the key stream for a 32-byte key and 24-byte nonce. */
export function xsalsa20Xor(key, nonce, data) {
  checkLength(key, KEY_BYTES, 'xsalsa20 key');
  checkLength(nonce, NONCE_BYTES, 'xsalsa20 nonce');
  data = toBytes(data);
  const out = Buffer.allocUnsafe(data.length);
  startXsalsa20(key, nonce);
  xorKeyStream(data, 0, out, 0, data.length, 64);
  wipe();
  return out;
}

// --- Poly1305 -----------------------------------------------------------------------------

// Numbers mod p = 2^130 - 5 are held as ten 13-bit limbs. 2^130 = 5 (mod p): a product's columns past the tenth limb
// come back times 5. A column is ten products summed in two halves, carried after each: h's limbs are below
// 2^14 + 2^9 once a block is added, r's below 2^13 (5 r's below 5 * 2^13), so five products and a carry stay below
// 25 * (2^27 + 2^22) + 2^20 < 2^32. Every intermediate is then an integer that >>> and & take exactly, which the
// JIT computes in integer registers: faster than fewer, wider limbs in floating point (tried: 22-bit limbs).

/** The Poly1305 tag of `message[at..end)` under the 32-byte one-time key `key` (r, then s) into `out[outAt..+16)`. */
function poly1305Into(key, message, at, end, out, outAt) {
  // r, clamped as the specification requires: the top 4 bits of bytes 3, 7, 11, 15, the low 2 of bytes 4, 8, 12.
  let t0 = key[0] | (key[1] << 8), t1 = (key[2] | (key[3] << 8)) & 0x0fff, t2 = (key[4] | (key[5] << 8)) & 0xfffc;
  let t3 = (key[6] | (key[7] << 8)) & 0x0fff, t4 = (key[8] | (key[9] << 8)) & 0xfffc;
  let t5 = (key[10] | (key[11] << 8)) & 0x0fff, t6 = (key[12] | (key[13] << 8)) & 0xfffc;
  let t7 = (key[14] | (key[15] << 8)) & 0x0fff;
  const r0 = t0 & 0x1fff, r1 = ((t0 >>> 13) | (t1 << 3)) & 0x1fff, r2 = ((t1 >>> 10) | (t2 << 6)) & 0x1fff;
  const r3 = ((t2 >>> 7) | (t3 << 9)) & 0x1fff, r4 = ((t3 >>> 4) | (t4 << 12)) & 0x1fff, r5 = (t4 >>> 1) & 0x1fff;
  const r6 = ((t4 >>> 14) | (t5 << 2)) & 0x1fff, r7 = ((t5 >>> 11) | (t6 << 5)) & 0x1fff;
  const r8 = ((t6 >>> 8) | (t7 << 8)) & 0x1fff, r9 = t7 >>> 5;
  const s1 = 5 * r1, s2 = 5 * r2, s3 = 5 * r3, s4 = 5 * r4, s5 = 5 * r5, s6 = 5 * r6, s7 = 5 * r7, s8 = 5 * r8;
  const s9 = 5 * r9;
  let h0 = 0, h1 = 0, h2 = 0, h3 = 0, h4 = 0, h5 = 0, h6 = 0, h7 = 0, h8 = 0, h9 = 0;
  let block = message, from = at, top = 1 << 11; // bit 128, in the tenth limb (which starts at bit 117)
  while (at < end) {
    if (end - at >= 16) {
      from = at;
      at += 16;
    } else {
      // A short final block gets a 1 byte after its end instead of bit 128.
      LAST_BLOCK.fill(0);
      LAST_BLOCK.set(message.subarray(at, end));
      LAST_BLOCK[end - at] = 1;
      block = LAST_BLOCK;
      from = 0;
      top = 0;
      at = end;
    }
    t0 = block[from] | (block[from + 1] << 8); t1 = block[from + 2] | (block[from + 3] << 8);
    t2 = block[from + 4] | (block[from + 5] << 8); t3 = block[from + 6] | (block[from + 7] << 8);
    t4 = block[from + 8] | (block[from + 9] << 8); t5 = block[from + 10] | (block[from + 11] << 8);
    t6 = block[from + 12] | (block[from + 13] << 8); t7 = block[from + 14] | (block[from + 15] << 8);
    h0 += t0 & 0x1fff; h1 += ((t0 >>> 13) | (t1 << 3)) & 0x1fff; h2 += ((t1 >>> 10) | (t2 << 6)) & 0x1fff;
    h3 += ((t2 >>> 7) | (t3 << 9)) & 0x1fff; h4 += ((t3 >>> 4) | (t4 << 12)) & 0x1fff; h5 += (t4 >>> 1) & 0x1fff;
    h6 += ((t4 >>> 14) | (t5 << 2)) & 0x1fff; h7 += ((t5 >>> 11) | (t6 << 5)) & 0x1fff;
    h8 += ((t6 >>> 8) | (t7 << 8)) & 0x1fff; h9 += (t7 >>> 5) | top;
    // h * r mod p, one column per limb, each column's carry into the next (the last one's times 5 into the first),
    // written out column by column: this is the hot loop, and locals are what the JIT keeps in registers.
    let c = 0, d;
    d = c + h0 * r0 + h1 * s9 + h2 * s8 + h3 * s7 + h4 * s6;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * s5 + h6 * s4 + h7 * s3 + h8 * s2 + h9 * s1;
    c += d >>> 13; const d0 = d & 0x1fff;
    d = c + h0 * r1 + h1 * r0 + h2 * s9 + h3 * s8 + h4 * s7;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * s6 + h6 * s5 + h7 * s4 + h8 * s3 + h9 * s2;
    c += d >>> 13; const d1 = d & 0x1fff;
    d = c + h0 * r2 + h1 * r1 + h2 * r0 + h3 * s9 + h4 * s8;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * s7 + h6 * s6 + h7 * s5 + h8 * s4 + h9 * s3;
    c += d >>> 13; const d2 = d & 0x1fff;
    d = c + h0 * r3 + h1 * r2 + h2 * r1 + h3 * r0 + h4 * s9;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * s8 + h6 * s7 + h7 * s6 + h8 * s5 + h9 * s4;
    c += d >>> 13; const d3 = d & 0x1fff;
    d = c + h0 * r4 + h1 * r3 + h2 * r2 + h3 * r1 + h4 * r0;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * s9 + h6 * s8 + h7 * s7 + h8 * s6 + h9 * s5;
    c += d >>> 13; const d4 = d & 0x1fff;
    d = c + h0 * r5 + h1 * r4 + h2 * r3 + h3 * r2 + h4 * r1;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * r0 + h6 * s9 + h7 * s8 + h8 * s7 + h9 * s6;
    c += d >>> 13; const d5 = d & 0x1fff;
    d = c + h0 * r6 + h1 * r5 + h2 * r4 + h3 * r3 + h4 * r2;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * r1 + h6 * r0 + h7 * s9 + h8 * s8 + h9 * s7;
    c += d >>> 13; const d6 = d & 0x1fff;
    d = c + h0 * r7 + h1 * r6 + h2 * r5 + h3 * r4 + h4 * r3;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * r2 + h6 * r1 + h7 * r0 + h8 * s9 + h9 * s8;
    c += d >>> 13; const d7 = d & 0x1fff;
    d = c + h0 * r8 + h1 * r7 + h2 * r6 + h3 * r5 + h4 * r4;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * r3 + h6 * r2 + h7 * r1 + h8 * r0 + h9 * s9;
    c += d >>> 13; const d8 = d & 0x1fff;
    d = c + h0 * r9 + h1 * r8 + h2 * r7 + h3 * r6 + h4 * r5;
    c = d >>> 13; d &= 0x1fff;
    d += h5 * r4 + h6 * r3 + h7 * r2 + h8 * r1 + h9 * r0;
    c += d >>> 13; const d9 = d & 0x1fff;
    c = ((c << 2) + c) + d0; // the carry out of the tenth limb, times 5
    h0 = c & 0x1fff;
    h1 = d1 + (c >>> 13);
    h2 = d2; h3 = d3; h4 = d4; h5 = d5; h6 = d6; h7 = d7; h8 = d8; h9 = d9;
  }
  // Canonical limbs, twice, as the 5x fold of the first pass can carry once more.
  let c;
  for (let pass = 0; pass < 2; pass++) {
    c = h0 >>> 13; h0 &= 0x1fff; h1 += c; c = h1 >>> 13; h1 &= 0x1fff; h2 += c;
    c = h2 >>> 13; h2 &= 0x1fff; h3 += c; c = h3 >>> 13; h3 &= 0x1fff; h4 += c;
    c = h4 >>> 13; h4 &= 0x1fff; h5 += c; c = h5 >>> 13; h5 &= 0x1fff; h6 += c;
    c = h6 >>> 13; h6 &= 0x1fff; h7 += c; c = h7 >>> 13; h7 &= 0x1fff; h8 += c;
    c = h8 >>> 13; h8 &= 0x1fff; h9 += c; c = h9 >>> 13; h9 &= 0x1fff; h0 += 5 * c;
  }
  c = h0 >>> 13; h0 &= 0x1fff; h1 += c;
  // h - p = h + 5 - 2^130: taken, in constant time, when h + 5 reaches 2^130.
  let g0 = h0 + 5; c = g0 >>> 13; g0 &= 0x1fff;
  let g1 = h1 + c; c = g1 >>> 13; g1 &= 0x1fff;
  let g2 = h2 + c; c = g2 >>> 13; g2 &= 0x1fff;
  let g3 = h3 + c; c = g3 >>> 13; g3 &= 0x1fff;
  let g4 = h4 + c; c = g4 >>> 13; g4 &= 0x1fff;
  let g5 = h5 + c; c = g5 >>> 13; g5 &= 0x1fff;
  let g6 = h6 + c; c = g6 >>> 13; g6 &= 0x1fff;
  let g7 = h7 + c; c = g7 >>> 13; g7 &= 0x1fff;
  let g8 = h8 + c; c = g8 >>> 13; g8 &= 0x1fff;
  let g9 = h9 + c; c = g9 >>> 13; g9 &= 0x1fff;
  const useG = -c, useH = ~useG;
  h0 = (h0 & useH) | (g0 & useG); h1 = (h1 & useH) | (g1 & useG); h2 = (h2 & useH) | (g2 & useG);
  h3 = (h3 & useH) | (g3 & useG); h4 = (h4 & useH) | (g4 & useG); h5 = (h5 & useH) | (g5 & useG);
  h6 = (h6 & useH) | (g6 & useG); h7 = (h7 & useH) | (g7 & useG); h8 = (h8 & useH) | (g8 & useG);
  h9 = (h9 & useH) | (g9 & useG);
  // (h + s) mod 2^128, sixteen bits at a time, little-endian.
  c = addSixteen(out, outAt, 0, h0 | (h1 << 13), key, 0);
  c = addSixteen(out, outAt, 1, (h1 >>> 3) | (h2 << 10), key, c);
  c = addSixteen(out, outAt, 2, (h2 >>> 6) | (h3 << 7), key, c);
  c = addSixteen(out, outAt, 3, (h3 >>> 9) | (h4 << 4), key, c);
  c = addSixteen(out, outAt, 4, (h4 >>> 12) | (h5 << 1) | (h6 << 14), key, c);
  c = addSixteen(out, outAt, 5, (h6 >>> 2) | (h7 << 11), key, c);
  c = addSixteen(out, outAt, 6, (h7 >>> 5) | (h8 << 8), key, c);
  addSixteen(out, outAt, 7, (h8 >>> 8) | (h9 << 5), key, c);
}

/** Writes 16-bit word `i` of the tag: that word of h plus that of s (key bytes 16-31) plus `carry`; returns the carry. */
function addSixteen(out, outAt, i, word, key, carry) {
  const sum = (word & 0xffff) + (key[16 + 2 * i] | (key[17 + 2 * i] << 8)) + carry;
  out[outAt + 2 * i] = sum & 0xff;
  out[outAt + 2 * i + 1] = (sum >>> 8) & 0xff;
  return sum >>> 16;
}

/** Poly1305 one-time authenticator (crypto_onetimeauth): a 16-byte tag of `message` under a 32-byte key. */
export function poly1305(key, message) {
  checkLength(key, KEY_BYTES, 'poly1305 key');
  message = toBytes(message);
  const tag = Buffer.allocUnsafe(TAG_BYTES);
  poly1305Into(key, message, 0, message.length, tag, 0);
  LAST_BLOCK.fill(0);
  return tag;
}

// --- secretbox and box ----------------------------------------------------------------------

// NaCl encrypts 32 zero bytes ahead of the message: their key stream is the one-time Poly1305 key, and the message
// starts at byte 32 of the first block. Here the key stream's first 32 bytes are kept aside instead, so that a box
// is made in one buffer without those 32 bytes and without copying the message twice.

/**
 * Seals in place (crypto_secretbox, "easy" layout): `buffer[at..at + 16)` receives the tag and the `length` message
 * bytes after it are encrypted where they are. For callers that build a box inside a larger frame.
 */
export function secretboxInPlace(buffer, at, length, nonce, key) {
  checkLength(key, KEY_BYTES, 'secretbox key');
  checkLength(nonce, NONCE_BYTES, 'secretbox nonce');
  if (!(buffer instanceof Uint8Array) || !Number.isInteger(at) || !Number.isInteger(length) || at < 0 || length < 0
    || at + TAG_BYTES + length > buffer.length) {
    throw new RangeError('secretboxInPlace: the tag and message must lie inside the buffer');
  }
  startXsalsa20(key, nonce);
  nextBlock();
  POLY_KEY.set(KEY_STREAM.subarray(0, 32));
  xorKeyStream(buffer, at + TAG_BYTES, buffer, at + TAG_BYTES, length, 32);
  poly1305Into(POLY_KEY, buffer, at + TAG_BYTES, at + TAG_BYTES + length, buffer, at);
  wipe();
}

/** crypto_secretbox (XSalsa20-Poly1305): tag + ciphertext of `message` under a 32-byte key and 24-byte nonce. */
export function secretbox(message, nonce, key) {
  message = toBytes(message);
  const sealed = Buffer.allocUnsafe(TAG_BYTES + message.length);
  sealed.set(message, TAG_BYTES);
  secretboxInPlace(sealed, 0, message.length, nonce, key);
  return sealed;
}

/** Opens a secretbox: the message, or null when the box was not made with this key and nonce (or was altered). */
export function secretboxOpen(sealed, nonce, key) {
  checkLength(key, KEY_BYTES, 'secretbox key');
  checkLength(nonce, NONCE_BYTES, 'secretbox nonce');
  sealed = toBytes(sealed);
  if (sealed.length < TAG_BYTES) return null;
  startXsalsa20(key, nonce);
  nextBlock();
  POLY_KEY.set(KEY_STREAM.subarray(0, 32));
  // The tag is over the ciphertext as received; nothing is decrypted unless it matches.
  poly1305Into(POLY_KEY, sealed, TAG_BYTES, sealed.length, TAG, 0);
  let difference = 0; // every byte compared, whatever the first difference: the time says nothing of the tag
  for (let i = 0; i < TAG_BYTES; i++) difference |= TAG[i] ^ sealed[i];
  if (difference !== 0) {
    wipe();
    return null;
  }
  const message = Buffer.allocUnsafe(sealed.length - TAG_BYTES);
  xorKeyStream(sealed, TAG_BYTES, message, 0, message.length, 32);
  wipe();
  return message;
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
