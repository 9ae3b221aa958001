// Keyed connections (SPEC 3.1), the platform-neutral part: frame 0 as `h.<nonce>.<ms>.<mac>` (the opening hello of a
// connection's channel), `m.<counter>.<mac>` (everything after it) or, since 1.10, `b.<counter>.<mac>` (a batch of
// messages under one signature, SPEC 3.3), the MAC an HMAC-SHA256 with the connection key.
// The HMAC itself is the platform's (`primitives`), synchronous: node:crypto's SHA-256 with src/sha256.js's outer block
// in Node (src/signing.js), src/sha256.js's in a page (src/browser.js); the channel's bookkeeping is the same for both.

import { fromHex, newBytes, randomBytes, toHex, utf8Bytes } from './bytes.js';

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

// The MAC input of a message is written into this one array when it fits (signing and checking are synchronous, so
// nothing else uses it meanwhile): the HMAC then runs over contiguous bytes in one call, nothing allocated per
// message. A larger message goes to the HMAC as parts, its frames not copied.
const SCRATCH = new Uint8Array(16_384);
const NEWLINE = 0x0a;

/**
 * What the MAC of frames 1..n (`frames`) covers, for `kind` (`hello`, `p2h`, `h2p`, `p2h-batch`, `h2p-batch`) on `channel` at `stamp` (the
 * opening's ms or the counter), as parts to feed the HMAC in order: each frame goes in after its length as 8 bytes
 * big-endian, so frame boundaries count. The parts may be a shared array's: feed them before the next call.
 */
export function macParts(kind, channel, stamp, frames) {
  return macInput(macHeader(kind, channel), DIGITS, 0, writeDigits(stamp), frames);
}

/** The part of a MAC's input that is the same for every message of `kind` on `channel`. */
const macHeader = (kind, channel) => textBytes(`zerobridge-1\n${kind}\n${channel}\n`);

// A stamp's decimal digits, written for the MAC input (a stamp is below 2^63: at most 19 digits).
const DIGITS = new Uint8Array(19);

/** Writes the decimal digits of `stamp` (a BigInt or an integer, 0..2^63-1) into DIGITS; returns how many. */
function writeDigits(stamp) {
  const text = String(stamp);
  if (text.length > DIGITS.length || !(stamp >= 0)) throw new RangeError(`a stamp is 0..2^63-1, not ${text}`);
  for (let i = 0; i < text.length; i += 1) DIGITS[i] = text.charCodeAt(i);
  return text.length;
}

/** macParts() from a prepared `header` and the stamp's digits at `digits[from..to)`. */
function macInput(header, digits, from, to, frames) {
  let total = header.length + (to - from) + 1;
  for (const frame of frames) total += 8 + frame.length;
  if (total > SCRATCH.length) {
    const parts = [header, digits.slice(from, to), Uint8Array.of(NEWLINE)];
    for (const frame of frames) parts.push(writeLength(new Uint8Array(8), 0, frame.length), frame);
    return parts;
  }
  SCRATCH.set(header);
  let at = header.length;
  for (let i = from; i < to; i += 1) SCRATCH[at++] = digits[i];
  SCRATCH[at++] = NEWLINE;
  for (const frame of frames) {
    writeLength(SCRATCH, at, frame.length);
    SCRATCH.set(frame, at + 8);
    at += 8 + frame.length;
  }
  return [SCRATCH.subarray(0, at)];
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

/** `length` as 8 bytes big-endian at `bytes[at]` (a frame is far below 2^53 bytes); returns `bytes`. */
function writeLength(bytes, at, length) {
  const high = Math.floor(length / 0x100000000);
  const low = length >>> 0;
  bytes[at] = high >>> 24; bytes[at + 1] = high >>> 16; bytes[at + 2] = high >>> 8; bytes[at + 3] = high;
  bytes[at + 4] = low >>> 24; bytes[at + 5] = low >>> 16; bytes[at + 6] = low >>> 8; bytes[at + 7] = low;
  return bytes;
}

const HEX_DIGITS = Uint8Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const [DOT, DIGIT_0, LETTER_B, LETTER_H, LETTER_M] = ['.', '0', 'b', 'h', 'm'].map((c) => c.charCodeAt(0));

/** `prefix` (ASCII), a decimal stamp, `.`, then the MAC in lowercase hex, written into one new array. */
function signatureBytes(prefix, stamp, mac) {
  const middle = `${prefix}${stamp}.`;
  const bytes = newBytes(middle.length + 64);
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

/** Frame 0 of a batch (SPEC 3.3), from its MAC: `counter` from the same sequence as messages'. */
export const batchSignature = (counter, mac) => signatureBytes('b.', counter, mac);

/** Whether frame 0 has a batch's form (`b.`): what follows says whether it is a well-formed one. */
export const isBatchSignature = (frame0) => frame0.length > 2 && frame0[0] === LETTER_B && frame0[1] === DOT;

// A lowercase hex digit's value, or -1 (the strict form has no upper case): one lookup per digit.
const LOWER_HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i += 1) LOWER_HEX['0123456789abcdef'.charCodeAt(i)] = i;

/**
 * Where a decimal of 1 to 19 digits without a leading zero, at `start` and ending at a `.`, ends (the index of the
 * dot), or -1.
 */
function decimalEnd(frame, start) {
  let end = start;
  while (end < frame.length && end - start < 20 && frame[end] >= DIGIT_0 && frame[end] <= DIGIT_0 + 9) end += 1;
  const digits = end - start;
  if (digits < 1 || digits > 19 || (digits > 1 && frame[start] === DIGIT_0) || frame[end] !== DOT) return -1;
  return end;
}

/**
 * The decimal at `frame[start..end)` (digits only, from decimalEnd): a number when it has at most 15 digits (exact,
 * and what every counter in practice has), a BigInt above. Numbers and BigInts compare by value.
 */
function decimalValue(frame, start, end) {
  if (end - start > 15) {
    let text = '';
    for (let i = start; i < end; i += 1) text += String.fromCharCode(frame[i]);
    return BigInt(text);
  }
  let value = 0;
  for (let i = start; i < end; i += 1) value = value * 10 + (frame[i] - DIGIT_0);
  return value;
}

/** The 32 bytes of exactly 64 lowercase hex digits from `frame[start]` to its end, into `out`; null for anything else. */
function macAtEnd(frame, start, out) {
  if (frame.length - start !== 64) return null;
  for (let i = 0, at = start; i < 32; i += 1, at += 2) {
    const high = LOWER_HEX[frame[at]];
    const low = LOWER_HEX[frame[at + 1]];
    if ((high | low) < 0) return null;
    out[i] = (high << 4) | low;
  }
  return out;
}

/**
 * For a well-formed `m.<counter>.<mac>` or `b.<counter>.<mac>` frame 0: the index of the dot after the counter, with
 * the MAC's bytes written into `mac`; -1 for anything else.
 */
function messageCounterEnd(frame0, mac) {
  if (frame0.length < 4 || frame0.length > 120 || (frame0[0] !== LETTER_M && frame0[0] !== LETTER_B) || frame0[1] !== DOT) return -1;
  const end = decimalEnd(frame0, 2);
  return end >= 0 && macAtEnd(frame0, end + 1, mac) !== null ? end : -1;
}

/**
 * Frame 0 read by the rules: `{ nonce, ms, mac }` for an opening, `{ counter, mac }` for a message, `{ batch: true,
 * counter, mac }` for a batch (ms and counter as BigInts, mac as 32 bytes), or null for anything else (empty, garbled,
 * upper-case, out of range). Read byte by byte in one pass.
 */
export function parseSignature(frame0) {
  const mac = new Uint8Array(32);
  const counterEnd = messageCounterEnd(frame0, mac);
  if (counterEnd >= 0) {
    const counter = BigInt(decimalValue(frame0, 2, counterEnd));
    if (counter < 1n || counter > MAX_COUNTER) return null;
    return frame0[0] === LETTER_B ? { batch: true, counter, mac } : { counter, mac };
  }
  if (frame0.length < 2 + 32 + 1 || frame0.length > 120 || frame0[0] !== LETTER_H || frame0[1] !== DOT) return null;
  let nonce = '';
  for (let i = 2; i < 34; i += 1) {
    if (LOWER_HEX[frame0[i]] < 0) return null;
    nonce += String.fromCharCode(frame0[i]);
  }
  if (frame0[34] !== DOT) return null;
  const msEnd = decimalEnd(frame0, 35);
  if (msEnd < 0 || macAtEnd(frame0, msEnd + 1, mac) === null) return null;
  const ms = BigInt(decimalValue(frame0, 35, msEnd));
  return ms <= MAX_COUNTER ? { nonce, ms, mac } : null;
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
 * the connection's hello); it then signs `p2h` messages and `p2h-batch` batches with counters 1, 2, ... (one sequence)
 * and accepts the host's `h2p` messages and `h2p-batch` batches with increasing counters: before the first welcome
 * only the answers to the hello, the welcome or a `response` with `"id": null` (a `name_taken`: SPEC 3.1 has it signed
 * for the channel like anything else), each message of a batch held to that on its own (beforeWelcome()).
 *
 * `primitives` are the platform's HMAC-SHA256 over macParts(), synchronous: `mac(key, parts)` gives the 32 bytes
 * (possibly an array it reuses: read before its next call), `equal(a, b)` whether two MACs are the same in time that
 * does not depend on where they differ. `key` is whatever `mac` takes: the connection key's bytes, or a form of it
 * prepared once (src/sha256.js).
 */
export class PeerChannel {
  constructor(key, primitives, nonce = newNonce()) {
    this.key = key;
    this.primitives = primitives;
    this.nonce = nonce;
    this.opened = false;
    // Counters: the last one signed after the opening, and the greatest accepted from the host. Numbers (a BigInt only
    // for a received counter past 15 digits): a number counts exactly to 2^53, centuries of messages at any rate.
    this.sent = 0;
    this.received = 0;
    this.welcomed = false;
    // What every MAC's input starts with, per direction: built once per channel, not per message.
    this.sendHeader = macHeader('p2h', nonce);
    this.receiveHeader = macHeader('h2p', nonce);
    this.sendBatchHeader = macHeader('p2h-batch', nonce);
    this.receiveBatchHeader = macHeader('h2p-batch', nonce);
    this.receivedMac = new Uint8Array(32);
  }

  /** Frame 0 for the next message, `frames` its frames 1..n; `now` the opening's clock (the wall clock's unless given). */
  sign(frames, now) {
    if (!this.opened) {
      this.opened = true;
      const ms = now ?? Date.now(); // read for the opening alone: no clock call per message
      return openingSignature(this.nonce, ms, this.primitives.mac(this.key, macParts('hello', this.nonce, ms, frames)));
    }
    this.sent += 1;
    const parts = macInput(this.sendHeader, DIGITS, 0, writeDigits(this.sent), frames);
    return messageSignature(this.sent, this.primitives.mac(this.key, parts));
  }

  /** Frame 0 for the next batch (SPEC 3.3), `batch` its frame 1; the channel is open (a batch never opens one). */
  signBatch(batch) {
    if (!this.opened) throw new Error('a batch cannot open a channel: its first message is the hello (SPEC 3.3)');
    this.sent += 1;
    const parts = macInput(this.sendBatchHeader, DIGITS, 0, writeDigits(this.sent), [batch]);
    return batchSignature(this.sent, this.primitives.mac(this.key, parts));
  }

  /**
   * Why a message or a batch (frame 0 `b.`) from the host is refused, or null when it is accepted (and its counter
   * recorded). An accepted batch's messages are then each held to beforeWelcome().
   */
  refusal(frame0, frames) {
    const counterEnd = messageCounterEnd(frame0, this.receivedMac);
    if (counterEnd < 0) {
      if (frame0.length === 0) return 'no signature';
      return parseSignature(frame0) === null ? 'not a signature' : 'an opening signature (only a peer opens a channel)';
    }
    const counter = decimalValue(frame0, 2, counterEnd);
    if (counter < 1 || counter > MAX_COUNTER) return 'not a signature';
    if (counter <= this.received) return `counter ${counter} replayed or out of order (last accepted ${this.received})`;
    const batch = frame0[0] === LETTER_B;
    const header = batch ? this.receiveBatchHeader : this.receiveHeader;
    const expected = this.primitives.mac(this.key, macInput(header, frame0, 2, counterEnd, frames));
    if (!this.primitives.equal(this.receivedMac, expected)) return 'wrong signature';
    if (!batch) {
      const early = this.beforeWelcome(frames[0]);
      if (early !== null) return early;
    }
    this.received = counter;
    return null;
  }

  /**
   * Why a message (its body frame) signed for the channel is still refused, or null: before the channel's first
   * welcome only the welcome and a `response` with `"id": null` are taken.
   */
  beforeWelcome(body) {
    if (this.welcomed) return null;
    const parsed = bodyOf(body);
    if (parsed?.type === 'welcome') this.welcomed = true;
    else if (!(parsed?.type === 'response' && parsed.id === null)) return 'a message before the channel\'s first welcome';
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
