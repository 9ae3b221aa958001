// SPEC 3.2: the WebSocket mapping's codec (src/websocket-frames.js) against protocol/fixtures/websocket-frames.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { decodeWebSocketMessage, encodeWebSocketMessage, MAX_WEBSOCKET_FRAMES } from '../src/websocket-frames.js';

const fixtures = JSON.parse(readFileSync(new URL('../../../protocol/fixtures/websocket-frames.json', import.meta.url), 'utf8'));
const bytes = (hex) => new Uint8Array(Buffer.from(hex, 'hex'));

for (const fixture of fixtures) {
  test(`websocket-frames.json: ${fixture.name} (${fixture.why})`, () => {
    if (fixture.error !== undefined) {
      assert.throws(() => decodeWebSocketMessage(bytes(fixture.hex)), (error) => error.code === fixture.error);
      return;
    }
    const frames = fixture.frames.map(bytes);
    assert.deepEqual(decodeWebSocketMessage(bytes(fixture.hex)).map((frame) => Buffer.from(frame).toString('hex')), fixture.frames);
    assert.equal(Buffer.from(encodeWebSocketMessage(frames)).toString('hex'), fixture.hex);
  });
}

test('a payload of more frames than the bound is refused without reading them all', () => {
  assert.throws(() => decodeWebSocketMessage(new Uint8Array(4 * (MAX_WEBSOCKET_FRAMES + 1))),
    (error) => error.code === 'bad_message' && /at most 16386 frames/.test(error.message));
  assert.equal(decodeWebSocketMessage(new Uint8Array(4 * MAX_WEBSOCKET_FRAMES)).length, MAX_WEBSOCKET_FRAMES);
});

test('decoding a view reads only its own bytes', () => {
  const backing = new Uint8Array([9, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0x41, 9]);
  assert.deepEqual(decodeWebSocketMessage(backing.subarray(2, 11)).map((frame) => [...frame]), [[], [0x41]]);
});
