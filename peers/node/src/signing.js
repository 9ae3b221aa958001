// Keyed connections (SPEC 3.1) in Node: the channel of src/channel.js over node:crypto's HMAC-SHA256, which answers
// at once, and the primitives the tests' host signs with.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { PeerChannel as Channel, macParts, messageSignature, newNonce, openingSignature } from './channel.js';

export { CLOCK_WINDOW_MS, bodyType, clockSkewDiagnosis, newNonce, parseKey, parseSignature } from './channel.js';

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text` (the catalogue hash, SPEC 7.8). */
export const sha256Hex = (text) => createHash('sha256').update(text, 'utf8').digest('hex');

// Every call into node:crypto costs far more than hashing a small message: the parts of one up to this size are
// copied into one reusable buffer and fed with one update (synchronous, so nothing else uses the buffer meanwhile);
// larger ones are fed part by part, not copied.
const SCRATCH = Buffer.allocUnsafeSlow(16_384);

function hmac(key, parts) {
  const h = createHmac('sha256', key);
  let total = 0;
  for (const part of parts) total += part.length;
  if (total <= SCRATCH.length) {
    let at = 0;
    for (const part of parts) {
      SCRATCH.set(part, at);
      at += part.length;
    }
    h.update(SCRATCH.subarray(0, at));
  } else {
    for (const part of parts) h.update(part);
  }
  return h.digest();
}

/** Whether a received MAC is the expected one, in time that does not depend on where they differ. */
export const macMatches = (received, expected) => received.length === expected.length && timingSafeEqual(received, expected);

const NODE_HMAC = {
  mac: hmac,
  verify: (key, parts, received) => macMatches(received, hmac(key, parts)),
};

/** The MAC (32 bytes) of frames 1..n for `kind` on `channel` at `stamp` (src/channel.js macParts). */
export const mac = (key, kind, channel, stamp, frames) => hmac(key, macParts(kind, channel, stamp, frames));

/** Frame 0 of a channel's opening hello. */
export const signOpening = (key, channel, ms, frames) => Buffer.from(openingSignature(channel, ms, mac(key, 'hello', channel, ms, frames)));

/** Frame 0 of any later message: `counter` (a BigInt or an integer) 1..2^63-1. */
export const signMessage = (key, kind, channel, counter, frames) => Buffer.from(messageSignature(counter, mac(key, kind, channel, counter, frames)));

/** The peer's side of one keyed connection, signing and checking at once (src/channel.js). */
export class PeerChannel extends Channel {
  constructor(key, nonce = newNonce()) {
    super(key, NODE_HMAC, nonce);
  }
}
