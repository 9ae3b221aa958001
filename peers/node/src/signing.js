// Keyed connections (SPEC 3.1) in Node: the channel of src/channel.js over a synchronous HMAC-SHA256 (src/sha256.js
// for a small message, node:crypto's for a large one), and the primitives the tests' host signs with (node:crypto's).

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { PeerChannel as Channel, batchSignature, macParts, messageSignature, newNonce, openingSignature } from './channel.js';
import { hmacSha256, prepareHmacKey } from './sha256.js';

export { CLOCK_WINDOW_MS, bodyType, clockSkewDiagnosis, isBatchSignature, newNonce, parseKey, parseSignature } from './channel.js';

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text` (the catalogue hash, SPEC 7.8). */
export const sha256Hex = (text) => createHash('sha256').update(text, 'utf8').digest('hex');

/** HMAC-SHA256 of `parts` under `key` (bytes) with node:crypto: the reference, and what a large message is signed with. */
function hmac(key, parts) {
  const h = createHmac('sha256', key);
  for (const part of parts) h.update(part);
  return h.digest();
}

/** Whether a received MAC is the expected one, in time that does not depend on where they differ. */
export const macMatches = (received, expected) => received.length === expected.length && timingSafeEqual(received, expected);

// A MAC input up to this size (a channel's header, the frames and their lengths: src/channel.js hands it over in one
// piece up to 16 KiB) is hashed by src/sha256.js, larger ones by node:crypto. Each createHmac costs ~1.5 us before it
// hashes a byte (the digest looked up by name, locks, a native object with a weak handle for the GC, mallocs), and
// ~0.5 us more in a running peer than in a loop of it alone (the GC and malloc work it leaves: 64 calls in flight
// with ~260-byte messages cost the peer 1.3 us less a call in JavaScript, where bench/node_hmac.mjs shows 0.2 for
// two MACs); the JavaScript SHA-256 costs ~0.6 us plus ~3.7 ns a byte, node:crypto's ~0.5 ns a byte (SHA
// extensions). In a running peer the two meet near 450 bytes (alone, near 320).
const JS_HMAC_LIMIT = 448;
const MAC_OUT = new Uint8Array(32);

/** The channel's HMAC: the connection key as bytes and prepared for src/sha256.js (its padded blocks hashed once). */
const NODE_HMAC = {
  mac: (key, parts) => (parts.length === 1 && parts[0].length <= JS_HMAC_LIMIT ? hmacSha256(key.prepared, parts, MAC_OUT) : hmac(key.bytes, parts)),
  equal: macMatches,
};

/** The MAC (32 bytes) of frames 1..n for `kind` on `channel` at `stamp` (src/channel.js macParts). */
export const mac = (key, kind, channel, stamp, frames) => hmac(key, macParts(kind, channel, stamp, frames));

/** Frame 0 of a channel's opening hello. */
export const signOpening = (key, channel, ms, frames) => Buffer.from(openingSignature(channel, ms, mac(key, 'hello', channel, ms, frames)));

/**
 * Frame 0 of any later message: `counter` (a BigInt or an integer) 1..2^63-1; `b.` for a batch's kinds (`p2h-batch`,
 * `h2p-batch`, SPEC 3.3, `frames` then the batch's one frame), `m.` for the others.
 */
export function signMessage(key, kind, channel, counter, frames) {
  const form = kind.endsWith('-batch') ? batchSignature : messageSignature;
  return Buffer.from(form(counter, mac(key, kind, channel, counter, frames)));
}

/** The peer's side of one keyed connection, signing and checking at once (src/channel.js). */
export class PeerChannel extends Channel {
  constructor(key, nonce = newNonce()) {
    super({ bytes: key, prepared: prepareHmacKey(key) }, NODE_HMAC, nonce);
  }
}
