// Keyed connections (SPEC 3.1), the platform-neutral part: frame 0 as `h.<nonce>.<ms>.<mac>` (the opening hello of a
// connection's channel) or `m.<counter>.<mac>` (everything after it), the MAC an HMAC-SHA256 with the connection key.
// The HMAC itself is the platform's (`primitives`), synchronous: node:crypto's in Node (src/signing.js), src/sha256.js
// in a page (src/browser.js); the channel's bookkeeping is the same for both.

import { fromHex, randomBytes, toHex, utf8Bytes } from './bytes.js';

const MAX_COUNTER = 2n ** 63n - 1n;

/** The connection key from its hex form (an even, non-zero number of digits, either case); throws a TypeError otherwise. */
export function parseKey(hex) {
  if (typeof hex !== 'string' || !/^(?:[0-9a-fA-F]{2})+$/.test(hex)) {
    throw new TypeError('a connection key is hex: a non-zero, even number of hex digits');
  }
  return fromHex(hex);
}

/** 128 bits from the CSPRNG, as 32 lowercase hex digits: the name of a new channel. */
export const newNonce = () => toHex(randomBytes(16));

/**
 * What the MAC of frames 1..n (`frames`) covers, for `kind` (`hello`, `p2h`, `h2p`) on `channel` at `stamp` (the
 * opening's ms or the counter), as parts to feed the HMAC in order: each frame goes in after its length as 8 bytes
 * big-endian, so frame boundaries count.
 */
export function macParts(kind, channel, stamp, frames) {
  const parts = [textBytes(`zerobridge-1\n${kind}\n${channel}\n${stamp}\n`)];
  for (const frame of frames) parts.push(lengthBytes(frame.length), frame);
  return parts;
}

/** The bytes of a MAC's header: one byte per character when it is ASCII (always, but for a garbled channel). */
function textBytes(text) {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code > 0x7f) return utf8Bytes(text);
    bytes[i] = code;
  }
  return bytes;
}

/** `length` as 8 bytes big-endian (a frame is far below 2^53 bytes). */
function lengthBytes(length) {
  const bytes = new Uint8Array(8);
  const high = Math.floor(length / 0x100000000);
  const low = length >>> 0;
  bytes[0] = high >>> 24; bytes[1] = high >>> 16; bytes[2] = high >>> 8; bytes[3] = high;
  bytes[4] = low >>> 24; bytes[5] = low >>> 16; bytes[6] = low >>> 8; bytes[7] = low;
  return bytes;
}

const HEX_DIGITS = Uint8Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const [DOT, DIGIT_0, LETTER_A, LETTER_H, LETTER_M] = ['.', '0', 'a', 'h', 'm'].map((c) => c.charCodeAt(0));

/** `prefix` (ASCII), a decimal stamp, `.`, then the MAC in lowercase hex, written into one new array. */
function signatureBytes(prefix, stamp, mac) {
  const middle = `${prefix}${stamp}.`;
  const bytes = new Uint8Array(middle.length + 64);
  for (let i = 0; i < middle.length; i += 1) bytes[i] = middle.charCodeAt(i);
  for (let i = 0, at = middle.length; i < 32; i += 1, at += 2) {
    bytes[at] = HEX_DIGITS[mac[i] >>> 4];
    bytes[at + 1] = HEX_DIGITS[mac[i] & 15];
  }
  return bytes;
}

/** Frame 0 of a channel's opening hello, from its MAC. */
export const openingSignature = (channel, ms, mac) => signatureBytes(`h.${channel}.`, ms, mac);

/** Frame 0 of any later message, from its MAC: `counter` (a BigInt or an integer) 1..2^63-1. */
export const messageSignature = (counter, mac) => signatureBytes('m.', counter, mac);

// A lowercase hex digit's value, or -1 (the strict form has no upper case): one lookup per digit.
const LOWER_HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i += 1) LOWER_HEX['0123456789abcdef'.charCodeAt(i)] = i;
const lowerHexValue = (byte) => LOWER_HEX[byte] ?? -1;

/**
 * A decimal of 1 to 19 digits without a leading zero, at `start` and ending at a `.`: `[value as a BigInt, index of
 * the dot]`, or null (nothing huge is ever turned into a BigInt; the range check follows).
 */
function decimalAt(frame, start) {
  let end = start;
  while (end < frame.length && end - start < 20 && frame[end] >= DIGIT_0 && frame[end] <= DIGIT_0 + 9) end += 1;
  const digits = end - start;
  if (digits < 1 || digits > 19 || (digits > 1 && frame[start] === DIGIT_0) || frame[end] !== DOT) return null;
  let text = '';
  for (let i = start; i < end; i += 1) text += String.fromCharCode(frame[i]);
  return [BigInt(text), end];
}

/** Exactly 64 lowercase hex digits from `start` to the frame's end, as 32 bytes; null otherwise. */
function macAtEnd(frame, start) {
  if (frame.length - start !== 64) return null;
  const mac = new Uint8Array(32);
  for (let i = 0; i < 32; i += 1) {
    const high = lowerHexValue(frame[start + 2 * i]);
    const low = lowerHexValue(frame[start + 2 * i + 1]);
    if (high < 0 || low < 0) return null;
    mac[i] = (high << 4) | low;
  }
  return mac;
}

/**
 * Frame 0 read by the rules: `{ nonce, ms, mac }` for an opening, `{ counter, mac }` for a message (ms and counter
 * as BigInts, mac as 32 bytes), or null for anything else (empty, garbled, upper-case, out of range). Read byte by
 * byte in one pass: it runs for every message received.
 */
export function parseSignature(frame0) {
  if (frame0.length < 4 || frame0.length > 120 || frame0[1] !== DOT) return null;
  if (frame0[0] === LETTER_M) {
    const counter = decimalAt(frame0, 2);
    const mac = counter && macAtEnd(frame0, counter[1] + 1);
    return mac && counter[0] >= 1n && counter[0] <= MAX_COUNTER ? { counter: counter[0], mac } : null;
  }
  if (frame0[0] !== LETTER_H || frame0.length < 2 + 32 + 1) return null;
  let nonce = '';
  for (let i = 2; i < 34; i += 1) {
    if (lowerHexValue(frame0[i]) < 0) return null;
    nonce += String.fromCharCode(frame0[i]);
  }
  if (frame0[34] !== DOT) return null;
  const ms = decimalAt(frame0, 35);
  const mac = ms && macAtEnd(frame0, ms[1] + 1);
  return mac && ms[0] <= MAX_COUNTER ? { nonce, ms: ms[0], mac } : null;
}

/** The `type` of a body frame, or null when it is not a JSON object with a string type. */
export function bodyType(frame) {
  return bodyOf(frame)?.type ?? null;
}

const utf8 = new TextDecoder();

function bodyOf(frame) {
  try {
    const body = JSON.parse(utf8.decode(frame));
    return typeof body?.type === 'string' ? body : null;
  } catch {
    return null;
  }
}

/**
 * The peer's side of one keyed connection: a fresh channel, opened by the first message it signs (which must be
 * the connection's hello); it then signs `p2h` with counters 1, 2, ... and accepts the host's `h2p` messages with
 * increasing counters: before the first welcome only the answers to the hello, the welcome or a `response` with
 * `"id": null` (a `name_taken`: SPEC 3.1 has it signed for the channel like anything else).
 *
 * `primitives` are the platform's HMAC-SHA256 over macParts(), synchronous: `mac(key, parts)` gives the 32 bytes and
 * `verify(key, parts, mac)` whether a received MAC is right (in time that does not depend on where it differs).
 * `key` is whatever they take: the connection key's bytes, or a form of it prepared once (src/sha256.js).
 */
export class PeerChannel {
  constructor(key, primitives, nonce = newNonce()) {
    this.key = key;
    this.primitives = primitives;
    this.nonce = nonce;
    this.opened = false;
    this.sent = 0n; // the counter of the last message signed after the opening
    this.received = 0n; // the greatest counter accepted from the host
    this.welcomed = false;
  }

  /** Frame 0 for the next message, `frames` its frames 1..n. */
  sign(frames, now = Date.now()) {
    if (!this.opened) {
      this.opened = true;
      return openingSignature(this.nonce, now, this.primitives.mac(this.key, macParts('hello', this.nonce, now, frames)));
    }
    this.sent += 1n;
    return messageSignature(this.sent, this.primitives.mac(this.key, macParts('p2h', this.nonce, this.sent, frames)));
  }

  /** Why a message from the host is refused, or null when it is accepted (and its counter recorded). */
  refusal(frame0, frames) {
    const parsed = parseSignature(frame0);
    if (parsed === null) return frame0.length === 0 ? 'no signature' : 'not a signature';
    if (parsed.counter === undefined) return 'an opening signature (only a peer opens a channel)';
    if (parsed.counter <= this.received) return `counter ${parsed.counter} replayed or out of order (last accepted ${this.received})`;
    if (!this.primitives.verify(this.key, macParts('h2p', this.nonce, parsed.counter, frames), parsed.mac)) return 'wrong signature';
    if (!this.welcomed) {
      const body = bodyOf(frames[0]);
      if (body?.type === 'welcome') this.welcomed = true;
      else if (!(body?.type === 'response' && body.id === null)) return 'a message before the channel\'s first welcome';
    }
    this.received = parsed.counter;
    return null;
  }
}

/** How far an opening's ms may be from the host's clock (SPEC 3.1). */
export const CLOCK_WINDOW_MS = 300_000;

/**
 * What to tell the user about an `unauthorized` answer whose `error.data` carries `clock_skew_ms` (the opening's clock
 * minus the host's, SPEC 3.1): the clocks differ, not the key. Null for any other answer.
 */
export function clockSkewDiagnosis(data) {
  const skew = data?.clock_skew_ms;
  if (!Number.isInteger(skew)) return null;
  const window = Number.isInteger(data.window_ms) ? data.window_ms : CLOCK_WINDOW_MS;
  return `the host's clock and this peer's differ by ${skewAmount(skew)} (this peer's is ${skew > 0 ? 'ahead' : 'behind'}), `
    + `more than the ${Math.floor(window / 1000)} s window for an opening hello: set both clocks right (NTP)`;
}

/** Whole seconds, or milliseconds when whole seconds would hide that it is past the window. */
function skewAmount(skew) {
  const seconds = Math.floor((Math.abs(skew) + 500) / 1000);
  return seconds * 1000 <= CLOCK_WINDOW_MS ? `${Math.abs(skew)} ms` : `${seconds} s`;
}
