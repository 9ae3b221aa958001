// SPEC 3.2 (since 1.7): one protocol message as ONE binary WebSocket message, each frame (0 signature, 1 body,
// 2..n attachments) written as a 4-byte unsigned big-endian length and its bytes, back to back. Since 1.9 (decision
// 51), under the subprotocol zerobridge.1.batch, a WebSocket message is a batch: each message's payload behind one
// more length, the same way. protocol/fixtures/websocket-frames.json pins both down (test/websocket-frames.test.js,
// and the browser tests).

import { BridgeError } from './errors.js';

/** The subprotocol a bridge connection offers (SPEC 2.2); a host that selects no other is not a ZeroBridge host. */
export const SUBPROTOCOL = 'zerobridge.1';
/** The subprotocol whose WebSocket messages are batches (SPEC 2.2, since 1.9), offered before SUBPROTOCOL. */
export const BATCH_SUBPROTOCOL = 'zerobridge.1.batch';
/** SPEC 3.2: frame 0, the body and 16,384 attachments; a payload of more is not read past this bound. */
export const MAX_WEBSOCKET_FRAMES = 16_386;
/** SPEC 3.2, Batches: the most messages one batch may hold (a host's bound on messages read from one connection). */
export const MAX_BATCH_MESSAGES = 1000;
/** SPEC 3.2, Batches: a sender starts a new batch before one would pass this many bytes. */
export const BATCH_BYTES = 65_536;

/** The length of `parts` written as 4-byte lengths and their bytes. */
function prefixedLength(parts) {
  let total = 0;
  for (const part of parts) total += 4 + part.length;
  return total;
}

/** Writes `parts` as 4-byte lengths and their bytes into `out` at `at`; returns where it stopped. */
function writePrefixed(out, view, at, parts) {
  for (const part of parts) {
    view.setUint32(at, part.length);
    out.set(part, at + 4);
    at += 4 + part.length;
  }
  return at;
}

/**
 * Splits `bytes` into the parts behind their 4-byte lengths (views into it, no copies): at most `max` of them,
 * the lengths checked as they are read. Throws a BridgeError (`bad_message`) that says which rule, naming the parts `what`
 * and what holds them `where`.
 */
function readPrefixed(bytes, max, what, where) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const parts = [];
  let at = 0;
  while (at < bytes.length) {
    if (parts.length === max) throw new BridgeError('bad_message', `a ${where} holds at most ${max} ${what}s (SPEC 3.2)`);
    if (bytes.length - at < 4) throw new BridgeError('bad_message', `a ${what} length is cut short at byte ${at} of the ${where}`);
    const length = view.getUint32(at);
    at += 4;
    if (length > bytes.length - at) {
      throw new BridgeError('bad_message', `${what} ${parts.length} says ${length} bytes but ${bytes.length - at} follow in the ${where}`);
    }
    parts.push(bytes.subarray(at, at + length));
    at += length;
  }
  return parts;
}

const asBytes = (payload) => (payload instanceof Uint8Array ? payload : new Uint8Array(payload));

/** The payload of the WebSocket message that carries `frames` (Uint8Arrays). */
export function encodeWebSocketMessage(frames) {
  const out = new Uint8Array(prefixedLength(frames));
  writePrefixed(out, new DataView(out.buffer), 0, frames);
  return out;
}

/** The bytes one message (its `frames`) takes in a batch: its payload and the length before it. */
export const batchEntryLength = (frames) => 4 + prefixedLength(frames);

/** The payload of the batch (SPEC 3.2, since 1.9) that carries `messages`, each a list of frames, in order. */
export function encodeWebSocketBatch(messages) {
  let total = 0;
  for (const frames of messages) total += batchEntryLength(frames);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const frames of messages) {
    view.setUint32(at, batchEntryLength(frames) - 4);
    at = writePrefixed(out, view, at + 4, frames);
  }
  return out;
}

/**
 * The frames of a WebSocket message's payload (views into it, no copies). Throws a BridgeError (`bad_message`) for a
 * length cut short, one past the end, fewer than 2 frames or more than MAX_WEBSOCKET_FRAMES. `where` names the
 * payload in the error's message.
 */
export function decodeWebSocketMessage(payload, where = 'WebSocket message') {
  const frames = readPrefixed(asBytes(payload), MAX_WEBSOCKET_FRAMES, 'frame', where);
  if (frames.length < 2) throw new BridgeError('bad_message', `a message needs at least 2 frames (signature, body), got ${frames.length}`);
  return frames;
}

/**
 * The messages of a batch's payload (SPEC 3.2, since 1.9; frame 1 of a keyed ZeroMQ batch, SPEC 3.3, since 1.10), in
 * order: each its frames (views, no copies), or the BridgeError (`bad_message`) that refuses that message alone. Throws
 * a BridgeError (`bad_message`) for a batch refused whole (empty, a length cut short or past the end, more than
 * MAX_BATCH_MESSAGES), its lengths checked before any message is read. `where` names the batch in errors' messages.
 */
export function decodeWebSocketBatch(payload, where = 'WebSocket message') {
  const entries = readPrefixed(asBytes(payload), MAX_BATCH_MESSAGES, 'message', where);
  if (entries.length === 0) throw new BridgeError('bad_message', 'an empty batch holds no message (SPEC 3.2)');
  return entries.map((entry) => {
    try {
      return decodeWebSocketMessage(entry, `message of the ${where}`);
    } catch (error) {
      if (error instanceof BridgeError) return error;
      throw error;
    }
  });
}

/** Frame 0 of a batch on a ZeroMQ connection without a key (SPEC 3.3, since 1.10): the one byte `b`. */
export const UNKEYED_BATCH = Uint8Array.of(0x62);

/** Whether frame 0 on a connection without a key marks a batch: exactly the byte `b` (any other frame 0 is ignored). */
export const isUnkeyedBatch = (frame0) => frame0.length === 1 && frame0[0] === 0x62;

/**
 * The messages of a ZeroMQ batch's frame 1 (SPEC 3.3, since 1.10; keyed or not), as decodeWebSocketBatch() reads them,
 * with a message whose frame 0 is not empty refused alone (the batch's frame 0 stands for them all). Throws likewise.
 */
export function decodeZeroMQBatch(frame1) {
  const messages = decodeWebSocketBatch(frame1, 'batch');
  for (let i = 0; i < messages.length; i += 1) {
    const frames = messages[i];
    if (!(frames instanceof BridgeError) && frames[0].length !== 0) {
      messages[i] = new BridgeError('bad_message', `frame 0 of message ${i} of a batch is not empty: the batch's frame 0 stands for them all (SPEC 3.3)`);
    }
  }
  return messages;
}
