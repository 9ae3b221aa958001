// Keyed connections (SPEC 3.1) in the Node peer, against a keyed host in this process (test-helpers/router-host.js
// with a key): what the peer signs, and what it refuses from the host; and batches (SPEC 3.3), with a key and without.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Peer, BridgeError } from '../index.js';
import { parseKey, parseSignature, signMessage } from '../src/signing.js';
import { encodeWebSocketBatch } from '../src/websocket-frames.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within } from '../test-helpers/processes.js';

const KEY = randomBytes(32).toString('hex');
const EMPTY = Buffer.alloc(0);

function connectionFile(endpoint, key = KEY) {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-keyed-')), 'host.json');
  writeFileSync(file, JSON.stringify({ protocol: 1, endpoint, host: 'fake', signature_scheme: 'hmac-sha256', key }));
  return file;
}

/**
 * A keyed host and a peer given its key (through a connection file, or as options.key); with `keyed` false, a host and
 * a peer without a key. Both closed after the test.
 */
async function start(t, { viaFile = true, keyed = true, peer: peerOptions = {}, transport = 'ipc' } = {}) {
  const host = await RouterHost.start(transports[transport](), { key: keyed ? KEY : undefined });
  t.after(() => host.stop());
  const logs = [];
  const log = (level, message) => logs.push(`${level}: ${message}`);
  const peer = !keyed ? new Peer(host.endpoint, { name: 'plain', log, ...peerOptions })
    : viaFile
      ? new Peer(connectionFile(host.endpoint), { name: 'keyed', log, ...peerOptions })
      : new Peer(host.endpoint, { name: 'keyed', key: KEY, log, ...peerOptions });
  t.after(() => peer.close());
  return { host, peer, logs };
}

/** start(), then the welcome taken (with `welcome`'s fields). */
async function setup(t, { welcome, ...options } = {}) {
  const started = await start(t, options);
  const connected = started.peer.connect();
  await started.host.welcome(welcome);
  await within(connected, 10_000, 'connect() to resolve');
  return started;
}

/** A signed ping answered shows that the peer has handled all that came before. */
async function roundTrip(host) {
  host.send({ v: 1, type: 'ping' });
  const pong = await host.nextOfType('pong');
  assert.equal(pong.refusal, null);
}

const counterOf = (message) => parseSignature(message.signature)?.counter;
const event = (action, payload) => ({ v: 1, type: 'event', action, payload });

describe('keyed peer: what it sends', () => {
  for (const transport of ['tcp', 'ipc']) {
    test(`opens its connection with a signed hello, then signs every message with counters from 1 (${transport})`, async (t) => {
      const { host, peer } = await start(t, { transport, peer: { actions: { work: async (n) => n * 2 } } });
      const before = Date.now();
      const connected = peer.connect();
      const hello = await host.nextOfType('hello');
      assert.equal(hello.refusal, null, 'the host accepts the opening');
      const opening = parseSignature(hello.signature);
      assert.match(opening.nonce, /^[0-9a-f]{32}$/);
      assert.ok(opening.ms >= BigInt(before) && opening.ms <= BigInt(Date.now()), `ms ${opening.ms} is the wall clock`);
      host.send(host.welcomeBody());
      await within(connected, 10_000, 'connect() to resolve');

      const result = peer.call('echo', 'hi');
      const request = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: request.body.id, ok: true, result: 'hi' });
      assert.equal(await result, 'hi');
      peer.post('blob', Buffer.from([0, 255, 16]));
      const posted = await host.nextOfType('event');
      assert.equal(posted.frames.length, 3, 'the attachment is a frame, under the MAC');
      host.send({ v: 1, type: 'request', id: 'h1', action: 'work', payload: 21 });
      const answer = await host.next((b) => b?.type === 'response' && b.id === 'h1');
      assert.equal(answer.body.result, 42);
      await peer.close();
      const bye = await host.nextOfType('bye');

      const sent = [request, posted, answer, bye];
      assert.deepEqual(sent.map((m) => m.refusal), [null, null, null, null], 'the host accepts each');
      assert.deepEqual(sent.map(counterOf), [1n, 2n, 3n, 4n]);
    });
  }

  test('with an endpoint and options.key too; what is sent before the connection is up follows the hello, signed', async (t) => {
    const { host, peer } = await start(t, { viaFile: false });
    const connected = peer.connect();
    peer.post('early', 1); // no connection yet: held until the channel is open
    const first = await host.next();
    assert.equal(first.body.type, 'hello', 'nothing goes before the opening hello');
    assert.equal(first.refusal, null);
    assert.ok(parseSignature(first.signature).nonce);
    const early = await host.nextOfType('event');
    assert.equal(early.refusal, null);
    assert.equal(counterOf(early), 1n);
    host.send(host.welcomeBody());
    await within(connected, 10_000, 'connect() to resolve');
  });

  test('a new connection after a loss opens a new channel: a fresh nonce, counters from 1 again', async (t) => {
    const { host, peer } = await start(t);
    const connected = peer.connect();
    const firstHello = await host.nextOfType('hello');
    host.send(host.welcomeBody({ session: 's1', resume_token: 'a'.repeat(64) }));
    await within(connected, 10_000, 'connect() to resolve');
    peer.post('one', 1);
    assert.equal(counterOf(await host.nextOfType('event')), 1n);

    host.send({ v: 1, type: 'bye' }); // the peer drops this connection and dials a fresh one
    const secondHello = await host.nextOfType('hello');
    assert.equal(secondHello.refusal, null);
    assert.notEqual(secondHello.routingId.toString('hex'), firstHello.routingId.toString('hex'));
    assert.notEqual(parseSignature(secondHello.signature).nonce, parseSignature(firstHello.signature).nonce);
    assert.equal(secondHello.body.session, 's1', 'it resumes over the new channel');
    host.send(host.welcomeBody({ session: 's1', resume_token: 'a'.repeat(64) }));
    host.send({ v: 1, type: 'ping' });
    const pong = await host.nextOfType('pong');
    assert.equal(pong.refusal, null);
    assert.equal(counterOf(pong), 1n);
  });

  test('a peer with another key is refused by the host; its unsigned unauthorized answer is logged and fails the connect at once', async (t) => {
    const host = await RouterHost.start(transports.ipc(), { key: KEY });
    t.after(() => host.stop());
    const logs = [];
    const peer = new Peer(host.endpoint, { name: 'intruder', key: randomBytes(32).toString('hex'), timeout: 600, log: (l, m) => logs.push(`${l}: ${m}`) });
    t.after(() => peer.close());
    const connecting = peer.connect();
    const hello = await host.nextOfType('hello');
    assert.equal(hello.refusal, 'wrong signature');
    host.sendFrames([EMPTY, Buffer.from(JSON.stringify({ v: 1, type: 'response', id: null, ok: false, error: { code: 'unauthorized', message: 'wrong signature' } }))]);
    await assert.rejects(connecting, (error) => error instanceof BridgeError && error.code === 'unauthorized'
      && /unauthorized \(wrong signature\): is the key the host's\?/.test(error.message));
    assert.equal(peer.rejectedMessages, 1);
    assert.ok(logs.some((l) => l.startsWith('warn: ') && l.includes('unauthorized (wrong signature)')), logs.join('\n'));
  });

  test('a peer without a key is refused by a keyed host, and its error says the host requires one', async (t) => {
    const host = await RouterHost.start(transports.ipc(), { key: KEY });
    t.after(() => host.stop());
    const peer = new Peer(host.endpoint, { name: 'plain', timeout: 600, log: () => {} });
    t.after(() => peer.close());
    const connecting = peer.connect();
    const hello = await host.nextOfType('hello');
    assert.equal(hello.signature.length, 0);
    assert.match(hello.refusal, /must be a signed hello/);
    host.sendFrames([EMPTY, Buffer.from(JSON.stringify({ v: 1, type: 'response', id: null, ok: false, error: { code: 'unauthorized', message: 'no signature' } }))]);
    await assert.rejects(connecting, (error) => error instanceof BridgeError && error.code === 'unauthorized'
      && /unauthorized \(no signature\): it requires a key/.test(error.message));
  });
});

describe('keyed peer: what it accepts', () => {
  test('forged, replayed, unsigned, misdirected and garbled host messages are not processed, not answered, and counted', async (t) => {
    let worked = 0;
    const { host, peer, logs } = await setup(t, { peer: { actions: { work: async () => { worked += 1; } } } });
    const ticks = [];
    peer.on('tick', (payload) => { ticks.push(payload); });
    const nonce = host.keyed.channel(host.routingId.toString('hex')).nonce;
    const body = (payload) => Buffer.from(JSON.stringify(event('tick', payload)));
    const key = parseKey(KEY);

    const good = host.framesOf(event('tick', 1));
    host.sendFrames(good);
    const forged = [
      good, // replayed
      [EMPTY, body('unsigned')],
      [Buffer.from('not-a-signature'), body('garbled')],
      [signMessage(key, 'h2p', nonce, 100, [body('other-frames')]), body('swapped')],
      [signMessage(key, 'h2p', 'f'.repeat(32), 101, [body('other-channel')]), body('other-channel')],
      [signMessage(key, 'p2h', nonce, 102, [body('as-peer')]), body('as-peer')],
      [signMessage(parseKey('00'.repeat(32)), 'h2p', nonce, 103, [body('other-key')]), body('other-key')],
      [Buffer.from(signMessage(key, 'h2p', nonce, 104, [body('upper')]).toString('latin1').toUpperCase().replace('M.', 'm.')), body('upper')],
      [signMessage(key, 'h2p', nonce, 105, [])], // one frame: nothing to process
    ];
    const request = Buffer.from(JSON.stringify({ v: 1, type: 'request', id: 'r1', action: 'work', payload: null }));
    forged.push([Buffer.from(`m.106.${'0'.repeat(64)}`), request]); // a forged request: never run, never answered
    for (const frames of forged) host.sendFrames(frames);
    host.send(event('tick', 2)); // signed after all that: accepted (counters may skip)
    await roundTrip(host);

    assert.deepEqual(ticks, [1, 2]);
    assert.equal(worked, 0);
    assert.equal(peer.rejectedMessages, forged.length);
    assert.deepEqual(host.messages.filter((m) => m.body?.type !== 'ping'), [], 'nothing was answered');
    const dropped = logs.filter((l) => l.includes('dropped a message from the host'));
    assert.equal(dropped.length, forged.length);
    assert.ok(dropped[0].startsWith('warn: '), 'the first is a warning; a burst after it goes to debug');
    assert.equal(peer.connected, true, 'the session carries on');
  });

  test('nothing before the channel\'s first welcome, even well signed; the welcome after it is taken', async (t) => {
    const { host, peer } = await start(t);
    const ticks = [];
    peer.on('tick', (payload) => { ticks.push(payload); });
    const connected = peer.connect();
    await host.nextOfType('hello');
    host.send(event('tick', 'early'));
    host.send(host.welcomeBody());
    await within(connected, 10_000, 'connect() to resolve');
    await roundTrip(host);
    assert.deepEqual(ticks, []);
    assert.equal(peer.rejectedMessages, 1);
  });

  test('a signed name_taken before the welcome is read: hello is said again on the same channel, and the welcome taken', async (t) => {
    const { host, peer } = await start(t, { peer: { waitForName: true } });  // else name_taken fails the connect at once
    const connected = peer.connect();
    const first = await host.nextOfType('hello');
    host.send({ v: 1, type: 'response', id: null, ok: false, error: { code: 'name_taken', message: 'held by a live session' } });
    const again = await host.nextOfType('hello');
    assert.equal(first.refusal, null);
    assert.equal(again.refusal, null, 'signed for the channel its first hello opened');
    assert.equal(counterOf(again), 1n);
    host.send(host.welcomeBody());
    await within(connected, 10_000, 'connect() to resolve');
    assert.equal(peer.rejectedMessages, 0);
  });

  test('an unsigned unauthorized answer is logged as such and counted, and changes nothing', async (t) => {
    const { host, peer, logs } = await setup(t);
    host.sendFrames([EMPTY, Buffer.from(JSON.stringify({ v: 1, type: 'response', id: null, ok: false, error: { code: 'unauthorized', message: 'counter not increasing' } }))]);
    await roundTrip(host);
    assert.equal(peer.rejectedMessages, 1);
    assert.ok(logs.some((l) => l === 'warn: the host refused a message of this peer as unauthorized (counter not increasing): is the key the host\'s?'), logs.join('\n'));
    assert.equal(peer.connected, true);
    assert.equal(await (async () => {
      const result = peer.call('echo', 'still');
      const request = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: request.body.id, ok: true, result: 'still' });
      return result;
    })(), 'still');
  });
});

describe('keyed peer: options', () => {
  test('connection files with a key are accepted; options.key is for endpoints only; a key must be hex', async () => {
    const keyed = new Peer(connectionFile('tcp://127.0.0.1:5555'), { name: 'n' });
    await keyed.close();
    assert.throws(() => new Peer(connectionFile('tcp://127.0.0.1:5555'), { name: 'n', key: KEY }), /options.key is for an endpoint/);
    assert.throws(() => new Peer('tcp://127.0.0.1:5555', { name: 'n', key: 'xyz' }), TypeError);
    assert.throws(() => new Peer('tcp://127.0.0.1:5555', { name: 'n', key: 42 }), TypeError);
    const plain = new Peer('tcp://127.0.0.1:5555', { name: 'n', key: '' }); // no key: unkeyed
    await plain.close();
    assert.equal(plain.rejectedMessages, 0);
  });
});

// The same tests with a key and without: batches differ only in their frame 0 (SPEC 3.3).
for (const keyed of [true, false]) describe(`${keyed ? 'keyed' : 'unkeyed'} peer: batches (SPEC 3.3)`, () => {
  const request = (id, action, payload) => ({ v: 1, type: 'request', id, action, payload });
  const answered = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, 10_000, `the answer to ${id}`);

  test('its hello offers "batch"', async (t) => {
    const { host, peer } = await start(t, { keyed });
    const connected = peer.connect();
    assert.deepEqual((await host.welcome()).features, ['batch']);
    await within(connected, 10_000, 'connect() to resolve');
  });

  test('the host\'s batches are read in order, each message as if alone; answers to what one batch brought go back in batches of 16', async (t) => {
    const { host, peer } = await setup(t, { keyed, welcome: { batch: true }, peer: { actions: { double: async (n) => n * 2 } } });
    const ticks = [];
    peer.on('tick', (payload) => { ticks.push(payload); });
    const requests = Array.from({ length: 20 }, (_, i) => request(`r${i}`, 'double', i));
    host.sendBatch([event('tick', 1), ...requests, event('tick', 2)]);
    const answers = await Promise.all(requests.map((r) => answered(host, r.id)));
    assert.deepEqual(answers.map((a) => a.body.result), requests.map((r) => r.payload * 2));
    assert.deepEqual(ticks, [1, 2]);
    assert.ok(answers.every((a) => a.batch && a.refusal === null), 'the answers came in batches the host accepted');
    assert.deepEqual(host.batches.map((b) => b.messages), [16, 4], 'the first 16 went while the turn made the rest');
    assert.deepEqual(peer.batches, { read: 1, sent: 2 });
    assert.equal(peer.rejectedMessages, 0);
  });

  test('calls made together go in batches of 16, a call alone as a message; counters are one sequence', async (t) => {
    const { host, peer } = await setup(t, { keyed, welcome: { batch: true } });
    const calls = Array.from({ length: 64 }, (_, i) => peer.call('echo', i));
    const sent = [];
    for (let i = 0; i < 64; i += 1) sent.push(await host.nextOfType('request'));
    assert.ok(sent.every((m) => m.batch && m.refusal === null));
    assert.deepEqual(host.batches.map((b) => b.messages), [16, 16, 16, 16]);
    if (!keyed) assert.ok(sent.every((m) => m.signature.equals(Buffer.from('b'))), 'frame 0 the byte b');
    assert.deepEqual(sent.map((m) => m.body.payload), Array.from({ length: 64 }, (_, i) => i), 'in the order they were made');
    host.sendTogether(sent.map((m) => ({ v: 1, type: 'response', id: m.body.id, ok: true, result: m.body.payload })));
    assert.deepEqual(await Promise.all(calls), Array.from({ length: 64 }, (_, i) => i));

    const alone = peer.call('echo', 'alone');
    const single = await host.nextOfType('request');
    assert.equal(single.batch, undefined, 'a message alone goes as today');
    assert.equal(single.refusal, null);
    if (keyed) assert.equal(counterOf(single), counterOf(sent[63]) + 1n, 'the next after the last batch\'s: one counter sequence');
    else assert.equal(single.signature.length, 0, 'frame 0 empty, as without batches');
    host.send({ v: 1, type: 'response', id: single.body.id, ok: true, result: 'alone' });
    assert.equal(await alone, 'alone');
  });

  test('a batch holds at most 16 messages of a turn and 65,536 bytes; a larger message goes alone, in order', async (t) => {
    const { host, peer } = await setup(t, { keyed, welcome: { batch: true } });
    for (let i = 0; i < 1500; i += 1) peer.post('many', i);
    const large = 'y'.repeat(9000); // 8 of them pass 65,536 bytes: a batch is cut before that
    for (let i = 0; i < 16; i += 1) peer.post('large', large);
    const big = 'x'.repeat(70_000);
    peer.post('big', big);
    peer.post('after', 1);
    peer.post('after', 2);
    const events = [];
    for (let i = 0; i < 1519; i += 1) events.push(await host.nextOfType('event'));
    assert.deepEqual(events.slice(0, 1500).map((m) => m.body.payload), Array.from({ length: 1500 }, (_, i) => i));
    assert.ok(events.slice(1500, 1516).every((m) => m.body.payload === large && m.batch));
    assert.equal(events[1516].body.payload, big);
    assert.equal(events[1516].batch, undefined, 'over 64 KiB: sent alone (signed m. when keyed)');
    assert.deepEqual(events.slice(1517).map((m) => [m.body.payload, m.batch]), [[1, true], [2, true]]);
    assert.ok(events.every((m) => m.refusal === null));
    assert.ok(host.batches.every((b) => b.messages <= 16 && b.bytes <= 65_536), JSON.stringify(host.batches));
    const counts = host.batches.map((b) => b.messages);
    // 1,500 small ones: 93 batches of 16, the 12 left with 4 large ones; 7 large ones (8 pass 65,536 bytes), the 5 left
    // (sent before the big one goes alone), and the 2 after it.
    assert.deepEqual(counts, [...Array(94).fill(16), 7, 5, 2]);
  });

  test('no batch before a welcome says batch: true; a new connection forgets it until its own welcome', async (t) => {
    const { host, peer } = await setup(t, { keyed, welcome: { session: 's1', resume_token: 'a'.repeat(64) } });
    for (let i = 0; i < 3; i += 1) peer.post('plain', i);
    for (let i = 0; i < 3; i += 1) assert.equal((await host.nextOfType('event')).batch, undefined, 'the welcome did not say batch');
    host.send(host.welcomeBody({ session: 's1', resume_token: 'a'.repeat(64), batch: true })); // a later welcome says it
    await roundTrip(host);
    for (let i = 0; i < 3; i += 1) peer.post('batched', i);
    for (let i = 0; i < 3; i += 1) assert.equal((await host.nextOfType('event')).batch, true);

    host.send({ v: 1, type: 'bye' }); // a new connection (when keyed, a new channel)
    const hello = await host.nextOfType('hello');
    assert.deepEqual(hello.body.features, ['batch']);
    host.send(host.welcomeBody({ session: 's1', resume_token: 'a'.repeat(64) }));
    await roundTrip(host);
    for (let i = 0; i < 3; i += 1) peer.post('new-channel', i);
    for (let i = 0; i < 3; i += 1) assert.equal((await host.nextOfType('event')).batch, undefined, 'this channel\'s welcome did not say batch');
  });

  test('a bad message in a batch is answered bad_message with id null on its own; the others are read', async (t) => {
    const { host, peer } = await setup(t, { keyed, peer: { actions: { double: async (n) => n * 2 } } });
    const messages = [[EMPTY, Buffer.from(JSON.stringify(request('r1', 'double', 1)))], [EMPTY, Buffer.from('{not json')],
      [Buffer.from('m.1.x'), Buffer.from(JSON.stringify(request('r2', 'double', 2)))], [EMPTY], [EMPTY, Buffer.from(JSON.stringify(request('r3', 'double', 3)))]];
    host.sendBatch(encodeWebSocketBatch(messages));
    assert.equal((await answered(host, 'r1')).body.result, 2);
    assert.equal((await answered(host, 'r3')).body.result, 6);
    const refused = [];
    for (let i = 0; i < 3; i += 1) refused.push((await host.next((b) => b?.type === 'response' && b.id === null)).body.error);
    assert.deepEqual(refused.map((e) => e.code), ['bad_message', 'bad_message', 'bad_message']);
    assert.match(refused[1].message, /frame 0 of message 2 of a batch is not empty/);
    await roundTrip(host);
    assert.deepEqual(host.messages.filter((m) => m.body?.type === 'response'), [], 'r2 (frame 0 not empty) was not run');
    assert.equal(peer.rejectedMessages, 0, 'a batch of the connection: answered, not dropped');
  });

  for (const [what, frame1] of [['empty', Buffer.alloc(0)], ['a length cut short', Buffer.from([0, 0, 0, 9, 0, 0])],
    ['a length past the end', encodeWebSocketBatch([[EMPTY, Buffer.from('{"v":1,"type":"ping"}')]]).subarray(0, 20)]]) {
    test(`a batch refused whole (${what}) is answered bad_message with id null once, none of it read`, async (t) => {
      const { host, peer } = await setup(t, { keyed });
      host.sendBatch(frame1);
      const answer = await host.next((b) => b?.type === 'response' && b.id === null);
      assert.equal(answer.body.error.code, 'bad_message');
      await roundTrip(host);
      assert.deepEqual(host.messages.filter((m) => m.body?.type !== 'ping'), [], 'answered once');
      assert.equal(peer.batches.read, 1);
    });
  }

  test('a batch with frames after frame 1 is answered bad_message once', async (t) => {
    const { host } = await setup(t, { keyed });
    const batch = encodeWebSocketBatch([[EMPTY, Buffer.from('{"v":1,"type":"ping"}')]]);
    const extra = Buffer.from('x');
    const frame0 = keyed ? host.keyed.sign(host.routingId.toString('hex'), [batch, extra], { batch: true }) : Buffer.from('b');
    host.sendFrames([frame0, batch, extra]);
    const answer = await host.next((b) => b?.type === 'response' && b.id === null);
    assert.match(answer.body.error.message, /one frame after its frame 0, not 2/);
    await roundTrip(host);
    assert.deepEqual(host.messages.filter((m) => m.body?.type !== 'ping'), [], 'its ping was not answered');
  });

  if (keyed) test('batches wrongly signed, replayed, signed as a message or from before the welcome are dropped and counted, never answered', async (t) => {
    const { host, peer } = await start(t, { keyed });
    const ticks = [];
    peer.on('tick', (payload) => { ticks.push(payload); });
    const connected = peer.connect();
    await host.nextOfType('hello');
    host.sendBatch([event('tick', 'before the welcome'), host.welcomeBody()]); // the welcome in it is taken, the tick is not
    await within(connected, 10_000, 'connect() to resolve');
    const routing = host.routingId.toString('hex');
    const nonce = host.keyed.channel(routing).nonce;
    const key = parseKey(KEY);
    const batch = encodeWebSocketBatch([[EMPTY, Buffer.from(JSON.stringify(event('tick', 'signed')))]]);
    const good = [host.keyed.sign(routing, [batch], { batch: true }), batch];
    host.sendFrames(good);
    const tick = Buffer.from(JSON.stringify(event('tick', 'as a message')));
    const form = (prefix, frame0) => Buffer.from(`${prefix}${frame0.toString('latin1').slice(1)}`, 'latin1');
    const forged = [
      good, // replayed
      [form('m', signMessage(key, 'h2p-batch', nonce, 50, [tick])), tick], // a message signed with a batch's kind
      [form('b', signMessage(key, 'h2p', nonce, 51, [batch])), batch], // a batch signed with a message's kind
      [signMessage(key, 'p2h-batch', nonce, 52, [batch]), batch], // the peer's own kind
      [signMessage(parseKey('00'.repeat(32)), 'h2p-batch', nonce, 53, [batch]), batch],
      [signMessage(key, 'h2p-batch', nonce, 54, [batch]), Buffer.concat([batch, Buffer.from([0, 0, 0, 0])])], // cut or stretched
    ];
    for (const frames of forged) host.sendFrames(frames);
    host.keyed.channel(routing).sent = 60n; // the host's own messages carry on past the counters forged above
    await roundTrip(host);
    assert.deepEqual(ticks, ['signed']);
    assert.equal(peer.rejectedMessages, 1 + forged.length, 'the early tick and every forgery');
    assert.deepEqual(host.messages.filter((m) => m.body?.type !== 'pong'), [], 'nothing answered');
    assert.equal(peer.connected, true);
  });

  if (!keyed) test('without a key, only a frame 0 of exactly the byte b is a batch: any other is ignored, its message read alone', async (t) => {
    const { host, peer } = await setup(t, { keyed });
    const ticks = [];
    peer.on('tick', (payload) => { ticks.push(payload); });
    const batch = encodeWebSocketBatch([[EMPTY, Buffer.from(JSON.stringify(event('tick', 'in a batch')))]]);
    for (const frame0 of ['bb', 'B', 'b.1.x', 'x']) host.sendFrames([Buffer.from(frame0), batch]); // not JSON as a message
    host.sendFrames([Buffer.from('b'), batch]);
    host.sendFrames([Buffer.from('x'), Buffer.from(JSON.stringify(event('tick', 'alone')))]);
    await roundTrip(host);
    assert.deepEqual(ticks, ['in a batch', 'alone']);
    const refused = host.messages.filter((m) => m.body?.type === 'response');
    assert.deepEqual(refused.map((m) => [m.body.id, m.body.error.code]), Array.from({ length: 4 }, () => [null, 'bad_message']));
    assert.deepEqual(peer.batches.read, 1);
  });

  test('progress a handler reports in one turn goes in batches, in order, then its response', async (t) => {
    const { host } = await setup(t, { keyed, welcome: { batch: true }, peer: { actions: {
      count: async (n, ctx) => { for (let i = 1; i <= n; i += 1) ctx.progress({ i }); return n; },
    } } });
    host.send({ v: 1, type: 'request', id: 'c1', action: 'count', payload: 3000, progress: true });
    const answer = await answered(host, 'c1');
    assert.equal(answer.body.result, 3000);
    const progress = host.messages.filter((m) => m.body?.type === 'progress');
    assert.deepEqual(progress.map((m) => m.body.seq), Array.from({ length: 3000 }, (_, i) => i + 1));
    assert.deepEqual(progress.map((m) => m.body.payload.i), Array.from({ length: 3000 }, (_, i) => i + 1));
    assert.ok(progress.every((m) => m.batch && m.refusal === null));
    assert.ok(host.batches.length >= 3 && host.batches.every((b) => b.messages <= 1000));
  });
});

