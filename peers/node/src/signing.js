// Keyed connections (SPEC 3.1) in Node: the channel of src/channel.js over a synchronous HMAC-SHA256 (node:crypto's
// one-shot SHA-256 for the inner and the outer hash, the key's padded blocks from src/sha256.js), and the primitives
// the tests' host signs with (node:crypto's createHmac).

import nodeCrypto, { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { PeerChannel as Channel, batchSignature, macParts, messageSignature, newNonce, openingSignature } from './channel.js';
import { prepareHmacKey } from './sha256.js';

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

// A channel's MAC is RFC 2104 over a key prepared once (src/sha256.js): the inner hash, of the key's inner padded
// block then the MAC input, by node:crypto's one-shot `hash` (SHA extensions, ~0.5 ns a byte), and the outer one, of
// the outer padded block then the inner digest, the same way. At 100 / 448 / 2,900 / 16,000 bytes the channel's MAC
// took 0.75 / 0.91 / 2.05 / 8.4 us with the outer block in JavaScript, against 1.38 / 1.52 / 2.68 / 9.2 for a
// `createHmac` (the digest looked up by name, a native object with a weak handle for the GC, three calls into C++)
// and 0.82 / 2.16 / 10.8 / 58 for src/sha256.js alone (bench/node_hmac.mjs). In a loop a second `hash` call costs
// what the JavaScript block does; between sequential calls, where the process sleeps and its code goes cold, the
// JavaScript block took 1.1 us a MAC and the signing code 4.0-4.4 us a call, 2.3-3.1 with both hashes native
// (`perf record` of the peer, bench/RESULTS.md, fifteenth sitting). A larger input comes in parts and goes to
// createHmac.
const BLOCK_BYTES = 64;
const INNER_INPUT = new Uint8Array(BLOCK_BYTES + 16_384); // the channel's one piece is at most 16 KiB (src/channel.js)
const MAC_OUT = new Uint8Array(32);
// node:crypto's one-shot SHA-256 since Node 20.12 (looked up, not imported by name: an older Node has no such export);
// before, a Hash object per call. The digest comes as a latin1 string, one character a byte: a string on V8's heap
// costs ~0.3 us less than a Buffer (no backing store to make and free).
const { hash } = nodeCrypto;
const sha256Latin1 = typeof hash === 'function'
  ? (bytes) => hash('sha256', bytes, 'latin1')
  : (bytes) => createHash('sha256').update(bytes).digest('latin1');
const OUTER_INPUT = new Uint8Array(BLOCK_BYTES + 32);

/**
 * The channel's HMAC (see above) of `parts` under `key`: `{bytes, prepared}`, the connection key and prepareHmacKey()'s
 * form of it. The 32 bytes are an array it reuses: read them before its next call.
 */
export function channelMac(key, parts) {
  const input = parts[0];
  if (parts.length !== 1 || input.length > INNER_INPUT.length - BLOCK_BYTES) return hmac(key.bytes, parts);
  INNER_INPUT.set(key.prepared.innerBlock);
  INNER_INPUT.set(input, BLOCK_BYTES);
  const inner = sha256Latin1(INNER_INPUT.subarray(0, BLOCK_BYTES + input.length));
  OUTER_INPUT.set(key.prepared.outerBlock);
  for (let i = 0; i < 32; i += 1) OUTER_INPUT[BLOCK_BYTES + i] = inner.charCodeAt(i);
  const outer = sha256Latin1(OUTER_INPUT);
  for (let i = 0; i < 32; i += 1) MAC_OUT[i] = outer.charCodeAt(i);
  return MAC_OUT;
}

const NODE_HMAC = { mac: channelMac, equal: macMatches };

/** The connection key (bytes) as channelMac() takes it. */
export const channelKey = (key) => ({ bytes: key, prepared: prepareHmacKey(key) });

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
    super(channelKey(key), NODE_HMAC, nonce);
  }
}
