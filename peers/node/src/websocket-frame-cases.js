// protocol/fixtures/websocket-frames.json (SPEC 14.1c) against src/websocket-frames.js, one check for both of its
// runners: Node's (test/websocket-frames.test.js) and the page's (peers/browser-tests). Nothing here imports node:*.

import { FixtureFailure } from './conversation.js';
import { fromHex, toHex } from './bytes.js';
import {
  BATCH_SUBPROTOCOL, decodeWebSocketBatch, decodeWebSocketMessage, encodeWebSocketBatch, encodeWebSocketMessage,
} from './websocket-frames.js';

const hexOf = (frames) => frames.map((frame) => toHex(frame));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Runs one case and throws a FixtureFailure naming it when the codec disagrees: a refused payload must be refused
 * `bad_message`; a valid one must decode to the case's frames (or messages) and encode back to its hex.
 */
export function checkWebSocketFrameCase(fixtureCase) {
  const { name, hex, why } = fixtureCase;
  const fail = (what) => { throw new FixtureFailure(`${name} (${why}): ${what}`); };
  const batch = fixtureCase.subprotocol === BATCH_SUBPROTOCOL;
  const decode = batch ? decodeWebSocketBatch : decodeWebSocketMessage;
  let decoded;
  try {
    decoded = decode(fromHex(hex));
  } catch (error) {
    if (fixtureCase.error === undefined) fail(`refused (${error.message}), the case is valid`);
    if (error.code !== fixtureCase.error) fail(`refused with ${error.code}, the case says ${fixtureCase.error}`);
    return;
  }
  if (fixtureCase.error !== undefined) fail('accepted, the case says it is refused');
  if (!batch) {
    if (!same(hexOf(decoded), fixtureCase.frames)) fail(`decoded ${JSON.stringify(hexOf(decoded))}`);
    if (toHex(encodeWebSocketMessage(fixtureCase.frames.map(fromHex))) !== hex) fail('the encoder wrote other bytes');
    return;
  }
  const got = decoded.map((entry) => (Array.isArray(entry) ? hexOf(entry) : { error: entry.code }));
  if (!same(got, fixtureCase.messages)) fail(`decoded ${JSON.stringify(got)}`);
  if (fixtureCase.messages.every(Array.isArray)
    && toHex(encodeWebSocketBatch(fixtureCase.messages.map((frames) => frames.map(fromHex)))) !== hex) fail('the encoder wrote other bytes');
}
