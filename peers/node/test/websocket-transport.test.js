// The browser peer's WebSocketTransport (src/browser.js) in Node, over a fake WebSocket that records what is sent
// and when: the subprotocols it offers, and batches (SPEC 3.2, since 1.9) — what goes out together, in what order,
// within the bounds, and what a batch from the host becomes. The real thing runs in Chromium: peers/browser-tests.

import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BATCH_SUBPROTOCOL, SUBPROTOCOL, WebSocketTransport } from '../src/browser.js';
import {
  BATCH_BYTES, MAX_BATCH_MESSAGES, decodeWebSocketBatch, decodeWebSocketMessage, encodeWebSocketBatch, encodeWebSocketMessage,
} from '../src/websocket-frames.js';

/** A WebSocket that a test opens, feeds and reads: `sent` holds copies of what the transport sent. */
class FakeWebSocket {
  static made = [];

  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.protocol = '';
    this.bufferedAmount = 0;
    this.sent = [];
    this.closed = null;
    FakeWebSocket.made.push(this);
  }

  send(data) {
    this.sent.push(new Uint8Array(data));
  }

  close(code, reason) {
    this.closed ??= { code, reason };
  }

  /** The host's answer to the upgrade: it selected `protocol`. */
  open(protocol) {
    this.protocol = protocol;
    this.onopen();
  }

  receive(payload) {
    this.onmessage({ data: payload.buffer.slice(payload.byteOffset, payload.byteOffset + payload.byteLength) });
  }

  lost() {
    this.onclose({ code: 1006 });
  }
}

const text = (bytes) => new TextDecoder().decode(bytes);
const message = (body, signature = new Uint8Array(0)) => [signature, new TextEncoder().encode(body)];
const bodiesOf = (messages) => messages.map((frames) => text(frames[1]));
/** The bodies of each batch `socket` sent, batch by batch. */
const batchesOf = (socket) => socket.sent.map((payload) => bodiesOf(decodeWebSocketBatch(payload)));
/** Lets every microtask run, and the tasks already queued. */
const nextTask = () => new Promise((resolve) => { setImmediate(resolve); });

let transports = [];
let logged = [];

/** A transport connected to a fake host that selected `protocol`, and the socket under it. */
function connected(protocol) {
  const transport = new WebSocketTransport('ws://127.0.0.1:1/zerobridge', { log: (level, line) => logged.push([level, line]) });
  transports.push(transport);
  const received = [];
  transport.on('message', (frames) => received.push(frames));
  transport.connect();
  const socket = FakeWebSocket.made.at(-1);
  socket.open(protocol);
  return { transport, socket, received };
}

beforeEach(() => {
  globalThis.WebSocket = FakeWebSocket;
  FakeWebSocket.made = [];
  transports = [];
  logged = [];
});

afterEach(async () => {
  for (const transport of transports) await transport.close(0);
  delete globalThis.WebSocket;
});

describe('the subprotocol', () => {
  test('a connection offers batches first, then zerobridge.1, and says which the host selected', () => {
    const { transport, socket } = connected(BATCH_SUBPROTOCOL);
    assert.deepEqual(socket.protocols, ['zerobridge.1.batch', 'zerobridge.1']);
    assert.equal(transport.subprotocol, BATCH_SUBPROTOCOL);
    assert.equal(connected(SUBPROTOCOL).transport.subprotocol, 'zerobridge.1');
  });

  test('a server that selects neither is not a ZeroBridge host', () => {
    const transport = new WebSocketTransport('ws://127.0.0.1:1/zerobridge', { log: () => {} });
    transports.push(transport);
    const errors = [];
    transport.on('error', (error) => errors.push(error)).on('connect', () => assert.fail('connected'));
    transport.connect();
    FakeWebSocket.made[0].open('chat');
    assert.equal(errors[0].code, 'EPROTO');
    assert.deepEqual(FakeWebSocket.made[0].closed, { code: 1002, reason: 'subprotocol' });
    assert.equal(transport.connected, false);
    assert.equal(transport.subprotocol, null);
  });

  test('under zerobridge.1 (a 1.8 host) each message is one WebSocket message, sent at once', () => {
    const { transport, socket, received } = connected(SUBPROTOCOL);
    for (const body of ['a', 'b', 'c']) transport.send(message(body));
    assert.deepEqual(socket.sent.map((payload) => text(decodeWebSocketMessage(payload)[1])), ['a', 'b', 'c']);
    socket.receive(encodeWebSocketMessage(message('x')));
    socket.receive(encodeWebSocketBatch([message('y')])); // a batch is not a message here: refused
    assert.deepEqual(received.map((frames) => frames.length && text(frames[1])), ['x', 0]);
  });
});

describe('sending batches', () => {
  test('messages sent in one task go out together at its end, and one alone at the same point', async () => {
    const { transport, socket } = connected(BATCH_SUBPROTOCOL);
    for (const body of ['a', 'bb', 'ccc']) transport.send(message(body));
    assert.equal(socket.sent.length, 0);
    assert.equal(transport.queuedBytes, 6, 'what is collected and not yet sent counts toward back-pressure');
    let checkpoint = null;
    queueMicrotask(() => { checkpoint = socket.sent.length; }); // a microtask queued after the sends
    await nextTask();
    assert.equal(checkpoint, 1, 'sent at the microtask checkpoint, before the next task');
    assert.deepEqual(batchesOf(socket), [['a', 'bb', 'ccc']]);
    assert.equal(transport.queuedBytes, 0);
    transport.send(message('d'));
    await Promise.resolve();
    assert.deepEqual(batchesOf(socket), [['a', 'bb', 'ccc'], ['d']], 'a message alone is not held for others');
  });

  test('the hello and what waited for the connection go out as one batch, the hello first', async () => {
    const transport = new WebSocketTransport('ws://127.0.0.1:1/zerobridge', { log: () => {} });
    transports.push(transport);
    transport.on('connect', () => transport.send(message('hello')));
    transport.send(message('queued-1'));
    transport.send(message('queued-2'));
    transport.connect();
    FakeWebSocket.made[0].open(BATCH_SUBPROTOCOL);
    await nextTask();
    assert.deepEqual(batchesOf(FakeWebSocket.made[0]), [['hello', 'queued-1', 'queued-2']]);
  });

  test('a batch holds at most 1,000 messages and 64 KiB; a larger message goes alone; order is kept', async () => {
    const { transport, socket } = connected(BATCH_SUBPROTOCOL);
    for (let i = 0; i < MAX_BATCH_MESSAGES + 1; i += 1) transport.send(message(String(i)));
    const big = 'x'.repeat(BATCH_BYTES);
    const tenK = 'y'.repeat(10_000);
    for (const body of [tenK, tenK, big, tenK, tenK, tenK, tenK, tenK, tenK, tenK]) transport.send(message(body));
    await nextTask();
    const sizes = socket.sent.map((payload) => payload.length);
    assert.ok(sizes.every((size, i) => size <= BATCH_BYTES || batchesOf(socket)[i].length === 1), `batch sizes ${sizes}`);
    const batches = batchesOf(socket).map((bodies) => bodies.map((body) => (body.length > 100 ? `${body[0]}${body.length}` : body)));
    assert.equal(batches[0].length, MAX_BATCH_MESSAGES);
    assert.deepEqual(batches.slice(1), [['1000', 'y10000', 'y10000'], [`x${BATCH_BYTES}`], Array(6).fill('y10000'), ['y10000']]);
    assert.deepEqual(batches.flat().slice(0, MAX_BATCH_MESSAGES + 1), Array.from({ length: MAX_BATCH_MESSAGES + 1 }, (_, i) => String(i)));
  });

  test('a redial drops what the old connection had collected, and the new one negotiates again', async () => {
    const { transport, socket } = connected(BATCH_SUBPROTOCOL);
    transport.send(message('lost'));
    transport.reconnect(0);
    assert.equal(transport.subprotocol, null);
    assert.equal(transport.queuedBytes, 0);
    await nextTask();
    assert.deepEqual(socket.sent, [], 'the old socket writes nothing after the redial');
    while (FakeWebSocket.made.length < 2) await nextTask(); // the redial's timer (0 ms)
    const again = FakeWebSocket.made.at(-1);
    assert.notEqual(again, socket);
    again.open(SUBPROTOCOL);
    transport.send(message('plain'));
    assert.deepEqual(again.sent.map((payload) => text(decodeWebSocketMessage(payload)[1])), ['plain']);
  });

  test('close() sends what was collected (a bye) before the close frame', async () => {
    const { transport, socket } = connected(BATCH_SUBPROTOCOL);
    transport.send(message('bye'));
    const closing = transport.close(50);
    assert.deepEqual(batchesOf(socket), [['bye']]);
    assert.deepEqual(socket.closed, { code: 1000, reason: 'bye' });
    socket.lost();
    await closing;
  });
});

describe('receiving batches', () => {
  test('each message of a batch is a message event, in order; a refused one is a message without frames', () => {
    const { socket, received } = connected(BATCH_SUBPROTOCOL);
    const good = encodeWebSocketMessage(message('one'));
    const payload = encodeWebSocketMessage([good, new Uint8Array([0, 0, 0, 1]), encodeWebSocketMessage(message('three'))]);
    socket.receive(payload);
    assert.deepEqual(received.map((frames) => frames.length && text(frames[1])), ['one', 0, 'three']);
    assert.equal(logged.filter(([level]) => level === 'warn').length, 1);
  });

  test('a batch refused whole is one message without frames, with a warning', () => {
    const { socket, received } = connected(BATCH_SUBPROTOCOL);
    const good = encodeWebSocketBatch([message('one'), message('two')]);
    socket.receive(new Uint8Array([...good, 0, 0])); // the last length cut short: none of it is read
    socket.receive(new Uint8Array(0));
    assert.deepEqual(received, [[], []]);
    assert.ok(logged.every(([level, line]) => level === 'warn' && /refused whole/.test(line)));
    assert.equal(logged.length, 2);
  });

  test('a listener that redials mid-batch: the rest of the old connection\'s batch is not read', () => {
    const { transport, socket, received } = connected(BATCH_SUBPROTOCOL);
    transport.on('message', () => transport.reconnect(1000));
    socket.receive(encodeWebSocketBatch([message('one'), message('two')]));
    assert.equal(received.length, 1);
  });
});
