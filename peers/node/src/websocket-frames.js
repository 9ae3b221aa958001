// SPEC 3.2 (since 1.7): one protocol message as ONE binary WebSocket message, each frame (0 signature, 1 body,
// 2..n attachments) written as a 4-byte unsigned big-endian length and its bytes, back to back.
// protocol/fixtures/websocket-frames.json pins it down (test/websocket-frames.test.js, and the browser tests).

import { BridgeError } from './errors.js';

/** SPEC 3.2: frame 0, the body and 16,384 attachments; a payload of more is not read past this bound. */
export const MAX_WEBSOCKET_FRAMES = 16_386;

/** The payload of the WebSocket message that carries `frames` (Uint8Arrays). */
export function encodeWebSocketMessage(frames) {
  let total = 0;
  for (const frame of frames) total += 4 + frame.length;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  for (const frame of frames) {
    view.setUint32(at, frame.length);
    out.set(frame, at + 4);
    at += 4 + frame.length;
  }
  return out;
}

/**
 * The frames of a WebSocket message's payload (views into it, no copies). Throws a BridgeError (`bad_message`) for a
 * length cut short, one past the end, fewer than 2 frames or more than MAX_WEBSOCKET_FRAMES.
 */
export function decodeWebSocketMessage(payload) {
  const bytes = payload instanceof Uint8Array ? payload : new Uint8Array(payload);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frames = [];
  let at = 0;
  while (at < bytes.length) {
    if (frames.length === MAX_WEBSOCKET_FRAMES) {
      throw new BridgeError('bad_message', `a WebSocket message holds at most ${MAX_WEBSOCKET_FRAMES} frames (SPEC 3.2)`);
    }
    if (bytes.length - at < 4) throw new BridgeError('bad_message', `a frame length is cut short at byte ${at} of the WebSocket message`);
    const length = view.getUint32(at);
    at += 4;
    if (length > bytes.length - at) {
      throw new BridgeError('bad_message', `frame ${frames.length} says ${length} bytes but ${bytes.length - at} follow in the WebSocket message`);
    }
    frames.push(bytes.subarray(at, at + length));
    at += length;
  }
  if (frames.length < 2) throw new BridgeError('bad_message', `a message needs at least 2 frames (signature, body), got ${frames.length}`);
  return frames;
}
