// Bytes without Node's Buffer, for the modules both transports share (the Node peer and the browser peer): UTF-8 and
// hex through the platform's TextEncoder/TextDecoder, randomness from the Web Crypto API (global in Node 20 and in
// browsers). Frames are Uint8Arrays; the Node transport's own Buffers are Uint8Arrays too.

const encoder = new TextEncoder();
// In Node, frames stay Buffers (a Uint8Array that its users read with toString()); a page has TextEncoder only.
const NodeBuffer = globalThis.Buffer;

export const EMPTY = NodeBuffer ? NodeBuffer.alloc(0) : new Uint8Array(0);

/**
 * Small byte arrays carved out of shared slabs, as Node's Buffer.allocUnsafe does: V8 gives an array of more than 64
 * bytes a buffer of its own outside its heap, which costs about ten times a view into one that exists (314 against
 * 24 ns for 70 bytes in Node 20), and a page makes two such arrays a message (its signature and its body). An array
 * of more than half a slab gets its own buffer. A slab lives as long as any array carved from it, so an array kept
 * (a message queued while the connection is down) keeps its slab, `slabBytes`, alive. Views share their slab's
 * `buffer`: read one through its byteOffset and length, never its whole buffer.
 */
export function bytePool(slabBytes = 8192) {
  const largest = slabBytes >>> 1;
  let slab = new ArrayBuffer(slabBytes);
  let used = 0;
  /** Room for `length` bytes in the current slab (a new one when it has too little left). */
  const room = (length) => {
    if (used + length > slabBytes) {
      slab = new ArrayBuffer(slabBytes);
      used = 0;
    }
  };
  /** `length` zeroed bytes (never handed out before). */
  const bytes = (length) => {
    if (length > largest) return new Uint8Array(length);
    room(length);
    const out = new Uint8Array(slab, used, length);
    used = (used + length + 7) & ~7; // the next array starts 8-byte aligned
    return out;
  };
  /** The UTF-8 bytes of `text`, encoded straight into the slab (at most 3 bytes per UTF-16 unit). */
  const utf8 = (text) => {
    if (text.length * 3 > largest) return encoder.encode(text);
    room(text.length * 3);
    const { written } = encoder.encodeInto(text, new Uint8Array(slab, used, text.length * 3));
    const out = new Uint8Array(slab, used, written);
    used = (used + written + 7) & ~7;
    return out;
  };
  return { bytes, utf8 };
}

const pagePool = NodeBuffer ? null : bytePool();

/** `length` uninitialized bytes for the caller to fill: in Node a Buffer from its pool (what its sockets take as is). */
export const newBytes = NodeBuffer ? (length) => NodeBuffer.allocUnsafe(length) : pagePool.bytes;

/** The UTF-8 bytes of `text`. */
export const utf8Bytes = NodeBuffer ? (text) => NodeBuffer.from(text, 'utf8') : pagePool.utf8;

/** How many bytes `text` takes in UTF-8, without encoding it. */
export function utf8Length(text) {
  let bytes = text.length;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) continue;
    if (unit < 0x800) bytes += 1;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // a surrogate pair: two units, four bytes
      i += 1;
    } else bytes += 2; // three bytes (a lone surrogate is written as U+FFFD, three bytes too)
  }
  return bytes;
}

const decoder = new TextDecoder();

/** The text of UTF-8 bytes (invalid sequences as U+FFFD). */
export const utf8Text = (bytes) => decoder.decode(bytes);

/** The bytes of standard base64 text. */
export const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

/** `parts` (Uint8Arrays) one after the other, in one new array. */
export function concatBytes(parts) {
  let total = 0;
  for (const part of parts) total += part.length;
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** The bytes of text made of characters U+0000..U+00FF (one byte each). */
export function latin1Bytes(text) {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i += 1) bytes[i] = text.charCodeAt(i);
  return bytes;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Lowercase hex of `bytes`. */
export function toHex(bytes) {
  let out = '';
  for (const byte of bytes) out += HEX[byte];
  return out;
}

// Each byte's value as a hex digit (either case), or -1: one lookup per digit instead of a parse.
const HEX_VALUE = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i += 1) {
  HEX_VALUE['0123456789abcdef'.charCodeAt(i)] = i;
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(i)] = i;
}

/** The bytes of hex text (an even number of digits, either case); throws a TypeError otherwise. */
export function fromHex(hex) {
  if (typeof hex !== 'string' || hex.length % 2 !== 0) throw new TypeError('not hex: an even number of hex digits');
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i += 1) {
    const high = HEX_VALUE[hex.charCodeAt(2 * i) & 0xffff] ?? -1;
    const low = HEX_VALUE[hex.charCodeAt(2 * i + 1) & 0xffff] ?? -1;
    if (high < 0 || low < 0) throw new TypeError('not hex: an even number of hex digits');
    bytes[i] = (high << 4) | low;
  }
  return bytes;
}

/** `count` bytes from the platform's CSPRNG. */
export const randomBytes = (count) => globalThis.crypto.getRandomValues(new Uint8Array(count));

/** Whether two byte arrays hold the same bytes. */
export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}
