// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) in plain JavaScript, synchronous, for the browser peer: a page has
// only WebCrypto's, whose every call is a promise that wakes the browser's crypto thread and then the page again,
// which costs a round trip more than the hashing itself (issue 24). Nothing here uses node:* or Buffer.
// test/sha256.test.js pins it to RFC 4231, FIPS 180 and node:crypto; peers/browser-tests to the page's WebCrypto.

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4 4.2.2).
const K = Int32Array.of(
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
);

// The initial hash value (FIPS 180-4 5.3.3).
const INITIAL_STATE = Int32Array.of(0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19);

const BLOCK_BYTES = 64;

// Scratch shared by every call: all of it is synchronous, so no two calls ever use it at once, and hashing allocates
// nothing per block. The message schedule (a window of 16 words); the state being hashed; a partial block a part
// ended in, then the padding.
const schedule = new Int32Array(16);
const state = new Int32Array(8);
const tail = new Uint8Array(BLOCK_BYTES);

/**
 * Runs the compression function over every whole 64-byte block of `bytes[from..to)`, updating `h` (8 words). The
 * message schedule is a window of 16 words, each next word computed in the round that takes it (about an eighth
 * faster in V8 than the 64-word table); choice and majority are FIPS 180-4's Ch and Maj with one operation less.
 */
function compress(h, bytes, from, to) {
  const w = schedule;
  let h0 = h[0]; let h1 = h[1]; let h2 = h[2]; let h3 = h[3]; let h4 = h[4]; let h5 = h[5]; let h6 = h[6]; let h7 = h[7];
  for (let at = from; at + BLOCK_BYTES <= to; at += BLOCK_BYTES) {
    for (let i = 0, j = at; i < 16; i += 1, j += 4) {
      w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
    }
    let a = h0; let b = h1; let c = h2; let d = h3; let e = h4; let f = h5; let g = h6; let k = h7;
    for (let i = 0; i < 64; i += 1) {
      let word = w[i & 15];
      if (i >= 16) {
        // W[i] from W[i-15], W[i-2], W[i-7] and W[i-16], the last in the slot it replaces.
        const x = w[(i + 1) & 15];
        const y = w[(i + 14) & 15];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        word = (s1 + w[(i + 9) & 15] + s0 + word) | 0;
        w[i & 15] = word;
      }
      const sigma1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (k + sigma1 + (g ^ (e & (f ^ g))) + K[i] + word) | 0;
      const sigma0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (sigma0 + ((a & b) | (c & (a | b)))) | 0;
      k = g; g = f; f = e; e = (d + t1) | 0;
      d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + k) | 0;
  }
  h[0] = h0; h[1] = h1; h[2] = h2; h[3] = h3; h[4] = h4; h[5] = h5; h[6] = h6; h[7] = h7;
}

/**
 * Hashes `parts` (Uint8Arrays, one after the other, never concatenated) into `state`, which holds the hash of
 * `before` bytes already (0, or one block for HMAC's prepared key), and pads the end (FIPS 180-4 5.1.1).
 */
function absorb(parts, before) {
  let filled = 0; // bytes of `tail` holding the start of a block
  let total = before;
  for (const part of parts) {
    const length = part.length;
    total += length;
    let at = 0;
    if (filled > 0) {
      const take = Math.min(BLOCK_BYTES - filled, length);
      for (let i = 0; i < take; i += 1) tail[filled + i] = part[i];
      filled += take;
      at = take;
      if (filled < BLOCK_BYTES) continue;
      compress(state, tail, 0, BLOCK_BYTES);
      filled = 0;
    }
    const whole = at + ((length - at) & ~(BLOCK_BYTES - 1));
    compress(state, part, at, whole);
    for (let i = whole; i < length; i += 1) tail[filled++] = part[i];
  }
  tail[filled++] = 0x80;
  if (filled > BLOCK_BYTES - 8) {
    tail.fill(0, filled);
    compress(state, tail, 0, BLOCK_BYTES);
    filled = 0;
  }
  tail.fill(0, filled, BLOCK_BYTES - 8);
  const bits = total * 8; // exact below 2^53: far beyond any message
  writeWord(tail, BLOCK_BYTES - 8, Math.floor(bits / 0x100000000));
  writeWord(tail, BLOCK_BYTES - 4, bits >>> 0);
  compress(state, tail, 0, BLOCK_BYTES);
}

function writeWord(bytes, at, word) {
  bytes[at] = word >>> 24; bytes[at + 1] = word >>> 16; bytes[at + 2] = word >>> 8; bytes[at + 3] = word;
}

/** `state` as the 32-byte digest, written into `digest`. */
function digestOfState(digest = new Uint8Array(32)) {
  for (let i = 0; i < 8; i += 1) writeWord(digest, 4 * i, state[i]);
  return digest;
}

/** The SHA-256 digest (32 bytes) of `bytes` (a Uint8Array). */
export function sha256(bytes) {
  state.set(INITIAL_STATE);
  absorb([bytes], 0);
  return digestOfState();
}

/**
 * An HMAC-SHA256 key made ready for many messages, for hmacSha256() and hmacFromInner(): the states after its inner
 * and outer padded blocks, computed once here instead of twice per message (a session signs every message with the
 * same key), and the inner padded block itself (`innerBlock`, 64 bytes) for a caller that hashes the inner hash
 * elsewhere. `key`: a Uint8Array of any length (longer than a block, it is hashed first: RFC 2104).
 */
export function prepareHmacKey(key) {
  if (!(key instanceof Uint8Array)) throw new TypeError('an HMAC key is a Uint8Array');
  const block = new Uint8Array(BLOCK_BYTES);
  block.set(key.length > BLOCK_BYTES ? sha256(key) : key);
  const innerBlock = block.map((byte) => byte ^ 0x36);
  const stateAfter = (padded) => {
    const h = Int32Array.from(INITIAL_STATE);
    compress(h, padded, 0, BLOCK_BYTES);
    return h;
  };
  const outerBlock = block.map((byte) => byte ^ 0x5c);
  return Object.freeze({ inner: stateAfter(innerBlock), outer: stateAfter(outerBlock), innerBlock, outerBlock });
}

/**
 * The HMAC-SHA256 (32 bytes) of `parts` (Uint8Arrays, taken one after the other) under a key from prepareHmacKey(),
 * written into `out` (a new array unless given one to reuse).
 */
export function hmacSha256(preparedKey, parts, out = new Uint8Array(32)) {
  state.set(preparedKey.inner);
  absorb(parts, BLOCK_BYTES);
  for (let i = 0; i < 8; i += 1) writeWord(tail, 4 * i, state[i]);
  return outerHash(preparedKey, out);
}

/**
 * The HMAC-SHA256 (32 bytes) under a key from prepareHmacKey() whose inner hash, SHA-256 of `innerBlock` and then the
 * message, was computed elsewhere (`innerDigest`, 32 bytes): the outer hash, written into `out`.
 */
export function hmacFromInner(preparedKey, innerDigest, out = new Uint8Array(32)) {
  if (innerDigest.length !== 32) throw new RangeError('an inner digest is 32 bytes');
  tail.set(innerDigest);
  return outerHash(preparedKey, out);
}

/** The outer hash of an HMAC whose inner digest is in `tail[0..32)`: one block with its padding, from the outer state. */
function outerHash(preparedKey, out) {
  tail[32] = 0x80;
  tail.fill(0, 33, BLOCK_BYTES - 4);
  writeWord(tail, BLOCK_BYTES - 4, (BLOCK_BYTES + 32) * 8);
  state.set(preparedKey.outer);
  compress(state, tail, 0, BLOCK_BYTES);
  return digestOfState(out);
}

/** Whether two MACs hold the same bytes, in time that depends on their length only, not on where they differ. */
export function macsEqual(a, b) {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i += 1) difference |= a[i] ^ b[i];
  return difference === 0;
}
