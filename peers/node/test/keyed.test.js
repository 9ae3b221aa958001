// Keyed connections (SPEC 3.1) in the Node peer, against a keyed host in this process (test-helpers/router-host.js
// with a key): what the peer signs, and what it refuses from the host.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Peer, BridgeError } from '../index.js';
import { parseKey, parseSignature, signMessage } from '../src/signing.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within } from '../test-helpers/processes.js';

const KEY = randomBytes(32).toString('hex');
const EMPTY = Buffer.alloc(0);

function connectionFile(endpoint, key = KEY) {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-keyed-')), 'host.json');
  writeFileSync(file, JSON.stringify({ protocol: 1, endpoint, host: 'fake', signature_scheme: 'hmac-sha256', key }));
  return file;
}

/** A keyed host and a peer given its key (through a connection file, or as options.key); both closed after the test. */
async function start(t, { viaFile = true, peer: peerOptions = {}, transport = 'ipc' } = {}) {
  const host = await RouterHost.start(transports[transport](), { key: KEY });
  t.after(() => host.stop());
  const logs = [];
  const log = (level, message) => logs.push(`${level}: ${message}`);
  const peer = viaFile
    ? new Peer(connectionFile(host.endpoint), { name: 'keyed', log, ...peerOptions })
    : new Peer(host.endpoint, { name: 'keyed', key: KEY, log, ...peerOptions });
  t.after(() => peer.close());
  return { host, peer, logs };
}

/** start(), then the welcome taken. */
async function setup(t, options) {
  const started = await start(t, options);
  const connected = started.peer.connect();
  await started.host.welcome();
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
