// SPEC 7.15 (broadcast and topics) and `welcome.info` in the Node peer: `hello.topics`, `welcome.info` and
// `event.topic` in src/wire.js; subscribe()/unsubscribe()/topics and the `topics` option, announced by the same hello
// that announces handlers; `peer.hostInfo`; an event's topic in its listener's context. First against a host in this
// process (test-helpers/router-host.js), then against the real conformance host's `broadcast` action.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Peer, BridgeError, connect, version } from '../index.js';
import { decode, encode, bodies } from '../src/wire.js';
import { RouterHost, welcomedPeer } from '../test-helpers/router-host.js';
import { ConformanceHost, transports, within, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

const frames = (text) => [Buffer.alloc(0), Buffer.from(text, 'utf8')];
const decodeBody = (body) => decode(frames(JSON.stringify(body)));
const WELCOME = { v: 1, type: 'welcome', host: 'h', session: 's1', actions: [], heartbeat_ms: 5000, limits: { max_message_bytes: 1, max_in_flight: 1 } };
const HELLO = { v: 1, type: 'hello', peer: 'p' };
const EVENT = { v: 1, type: 'event', action: 'note', payload: 1 };
const NOT_NAMES = ['', 'x'.repeat(129), 5, null, true, ['a'], { a: 1 }];

const expectCode = (code) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  return true;
};

/** Resolves once `condition()` holds (checked every 5 ms), failing after `ms`. */
const until = (condition, ms, what) => within((async () => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
})(), ms, what);

/** Events a listener received, `{ payload, topic, action }` each, taken in arrival order. */
class Received {
  items = [];

  listener = (payload, ctx) => {
    this.items.push({ payload, topic: ctx.topic, action: ctx.action });
  };

  async next(ms = 10_000, what = 'an event') {
    await until(() => this.items.length > 0, ms, what);
    return this.items.shift();
  }
}

describe('wire: hello.topics, welcome.info, event.topic', () => {
  test('hello.topics: a list of names, kept as decoded; anything else is bad_message naming the field', () => {
    assert.deepEqual(decodeBody({ ...HELLO, topics: ['news', 'théme', '😀'] }).body.topics, ['news', 'théme', '😀']);
    assert.deepEqual(decodeBody({ ...HELLO, topics: [] }).body.topics, []);
    assert.equal('topics' in decodeBody(HELLO).body, false, 'absent stays absent (the default is [])');
    for (const bad of ['news', null, {}, 3, ...NOT_NAMES.filter((n) => typeof n !== 'object' || n === null).map((n) => [n]), ['ok', '']]) {
      const { error } = decodeBody({ ...HELLO, topics: bad });
      assert.equal(error?.code, 'bad_message', JSON.stringify(bad));
      assert.match(error.message, /hello\.topics/);
    }
  });

  test('welcome.info: any object when present; anything else is bad_message naming the field', () => {
    const info = { protocol_revision: '1.3', platform: { os: 'macOS', version: [15, 1] }, features: [] };
    assert.deepEqual(decodeBody({ ...WELCOME, info }).body.info, info);
    assert.deepEqual(decodeBody({ ...WELCOME, info: {} }).body.info, {});
    assert.equal('info' in decodeBody(WELCOME).body, false);
    for (const bad of [null, [], ['a'], 'x', 0, true]) {
      const { error } = decodeBody({ ...WELCOME, info: bad });
      assert.equal(error?.code, 'bad_message', JSON.stringify(bad));
      assert.equal(error.message, 'welcome.info must be an object');
    }
  });

  test('event.topic: a name when present; anything else is bad_message naming the field', () => {
    assert.equal(decodeBody({ ...EVENT, topic: 'news' }).body.topic, 'news');
    assert.equal(decodeBody({ ...EVENT, topic: 'x'.repeat(128) }).body.topic.length, 128);
    assert.equal('topic' in decodeBody(EVENT).body, false);
    for (const bad of NOT_NAMES) {
      const { error } = decodeBody({ ...EVENT, topic: bad });
      assert.equal(error?.code, 'bad_message', JSON.stringify(bad));
      assert.equal(error.message, 'event.topic must be a string of 1..128 characters');
    }
  });

  test('encoding: hello.topics and event.topic when given, left out when not', () => {
    const hello = JSON.parse(encode(bodies.hello('p', [], [], 1000, undefined, undefined, ['a', 'b']))[1]);
    assert.deepEqual(hello, { v: 1, type: 'hello', peer: 'p', actions: [], features: [], heartbeat_ms: 1000, topics: ['a', 'b'] });
    assert.equal('topics' in JSON.parse(encode(bodies.hello('p', [], [], 1000))[1]), false);
    const event = JSON.parse(encode(bodies.event('note', { x: 1 }, 'news'))[1]);
    assert.deepEqual(event, { v: 1, type: 'event', action: 'note', payload: { x: 1 }, topic: 'news' });
    assert.equal('topic' in JSON.parse(encode(bodies.event('note', null))[1]), false);
    assert.deepEqual(decode(encode(event)).body, event);
  });
});

// --- through a peer, against a host in this process -------------------------------------------------------------------

const TOKEN = '0123456789abcdef'.repeat(4);

const setup = (t, options) => welcomedPeer(t, 'subscriber', options);

describe('topics: the option, subscribe() and unsubscribe(), announced in hello', () => {
  test('the first hello carries the topics option, sorted and without repeats; without it, topics is []', async (t) => {
    const { hello, peer } = await setup(t, { peer: { topics: ['theme', 'catalogue', 'theme'] } });
    assert.deepEqual(hello.topics, ['catalogue', 'theme']);
    assert.deepEqual(peer.topics, ['catalogue', 'theme']);
    const { hello: plain, peer: other } = await setup(t);
    assert.deepEqual(plain.topics, [], 'said explicitly: each hello replaces the set');
    assert.deepEqual(other.topics, []);
  });

  test('subscribe() before connect() is in the first hello', async (t) => {
    const { hello } = await setup(t, { peer: { topics: ['b'] }, before: (peer) => peer.subscribe('a', 'c') });
    assert.deepEqual(hello.topics, ['a', 'b', 'c']);
  });

  test('subscribe and unsubscribe send a hello with the full set, in the same session; one hello per turn', async (t) => {
    const { host, peer } = await setup(t, { peer: { topics: ['theme'], actions: { render: () => 1 } }, welcome: { session: 'keep', resume_token: TOKEN } });
    assert.equal(peer.subscribe('news'), peer, 'chains, as on() does');
    const { body: first } = await host.nextOfType('hello');
    assert.deepEqual(first.topics, ['news', 'theme'], 'the whole set, not the change');
    assert.deepEqual(first.actions, ['render'], 'the rest of the hello as before');
    assert.equal(first.session, 'keep');
    assert.equal(first.resume_token, TOKEN);
    host.send(host.welcomeBody({ session: 'keep', resume_token: TOKEN }));

    peer.subscribe('alerts');
    peer.subscribe('zeta', 'alerts');
    peer.unsubscribe('theme');
    const { body: second } = await host.nextOfType('hello');
    assert.deepEqual(second.topics, ['alerts', 'news', 'zeta'], 'three changes in one turn: one hello');
    host.send(host.welcomeBody({ session: 'keep', resume_token: TOKEN }));

    peer.unsubscribe('alerts', 'news', 'zeta');
    const { body: third } = await host.nextOfType('hello');
    assert.deepEqual(third.topics, [], 'unsubscribing from everything says so');
    assert.deepEqual(peer.topics, []);
    host.send(host.welcomeBody({ session: 'keep', resume_token: TOKEN }));

    // No change, no hello: the next message the host gets is the ping's answer.
    peer.subscribe();
    peer.unsubscribe('never-subscribed');
    host.send({ v: 1, type: 'ping' });
    assert.equal((await host.next((b) => b?.type === 'hello' || b?.type === 'pong', 10_000, 'a pong')).body.type, 'pong');
    assert.equal(peer.connected, true);
  });

  test('the same hello as handlers: handle() and subscribe() in one turn make one hello, sent before what follows', async (t) => {
    const { host, peer } = await setup(t);
    peer.handle('render', () => 1);
    peer.subscribe('theme');
    peer.post('clicked', null); // goes after the hello announcing both
    const first = await host.next((b) => b?.type === 'hello' || b?.type === 'event', 10_000, 'the hello');
    assert.equal(first.body.type, 'hello');
    assert.deepEqual(first.body.actions, ['render']);
    assert.deepEqual(first.body.topics, ['theme']);
    assert.equal((await host.nextOfType('event')).body.action, 'clicked');
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(host.messages.filter((m) => m.body?.type === 'hello').length, 0, 'no second hello');
  });

  test('topics survive a reconnect: the hello on the new connection carries them, with the session to resume', async (t) => {
    const { host, peer } = await setup(t, { peer: { topics: ['theme'] }, welcome: { session: 'keep', resume_token: TOKEN } });
    peer.subscribe('news');
    assert.deepEqual((await host.nextOfType('hello')).body.topics, ['news', 'theme']);
    host.send(host.welcomeBody({ session: 'keep', resume_token: TOKEN }));
    const firstConnection = host.routingId;

    host.send({ v: 1, type: 'bye' }); // the host is lost; the peer dials afresh and says hello there
    const hello = await host.welcome({ session: 'keep', resume_token: TOKEN });
    assert.notDeepEqual(host.routingId, firstConnection, 'a new connection');
    assert.deepEqual(hello.topics, ['news', 'theme']);
    assert.equal(hello.session, 'keep');
    assert.deepEqual(peer.topics, ['news', 'theme']);

    host.send({ v: 1, type: 'bye' });
    const fresh = await host.welcome({ session: 'new-one', resume_token: TOKEN.split('').reverse().join('') }); // not resumed
    assert.deepEqual(fresh.topics, ['news', 'theme'], 'also into a new session');
    assert.equal(peer.session, 'new-one');
  });

  test('what is not a topic is a TypeError, changing nothing and sending nothing', async (t) => {
    const { host, peer } = await setup(t, { peer: { topics: ['theme'] } });
    for (const bad of ['', 'x'.repeat(129), 'a\ud800', 3, null, undefined, ['theme']]) {
      assert.throws(() => peer.subscribe('ok', bad), TypeError, String(bad));
      assert.throws(() => peer.unsubscribe('theme', bad), TypeError, String(bad));
    }
    assert.deepEqual(peer.topics, ['theme'], 'all or nothing: "ok" was not added, "theme" not removed');
    host.send({ v: 1, type: 'ping' });
    assert.equal((await host.next((b) => b?.type === 'hello' || b?.type === 'pong', 10_000, 'a pong')).body.type, 'pong');
    for (const topics of ['theme', [''], [7], { theme: true }, null]) {
      assert.throws(() => new Peer(host.endpoint, { name: 'x', topics }), TypeError, JSON.stringify(topics));
    }
    assert.deepEqual(new Peer(host.endpoint, { name: 'x', topics: new Set(['b', 'a']) }).topics, ['a', 'b'], 'any iterable of names');
  });

  test('peer.topics is a copy: changing it changes nothing', async () => {
    const peer = new Peer('tcp://127.0.0.1:9', { name: 'x', topics: ['a'] });
    peer.topics.push('b');
    assert.deepEqual(peer.topics, ['a']);
  });
});

describe('welcome.info: peer.hostInfo', () => {
  test('the last welcome\'s info; null before a welcome and when the welcome has none', async (t) => {
    assert.equal(new Peer('tcp://127.0.0.1:9', { name: 'x' }).hostInfo, null);
    const info = { protocol_revision: '1.3', platform: 'test', features: ['broadcast'] };
    const { host, peer } = await setup(t, { welcome: { session: 's', info } });
    assert.deepEqual(peer.hostInfo, info);
    peer.subscribe('x');
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ session: 's', info: { protocol_revision: '1.5' } }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.deepEqual(peer.hostInfo, { protocol_revision: '1.5' });
    peer.subscribe('y');
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ session: 's' }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(peer.hostInfo, null, 'a welcome without info: null');
    const { peer: older } = await setup(t);
    assert.equal(older.hostInfo, null, 'a host older than 1.3');
  });

  for (const bad of [null, ['a'], 'v1.3']) {
    test(`a welcome whose info is ${JSON.stringify(bad)} is a bad message: answered, and connect() fails`, async (t) => {
      const host = await RouterHost.start(transports.ipc());
      t.after(() => host.stop());
      const peer = new Peer(host.endpoint, { name: 'strict', log: () => {} });
      t.after(() => peer.close());
      const connected = peer.connect();
      connected.catch(() => {});
      await host.nextOfType('hello');
      host.send(host.welcomeBody({ info: bad }));
      const { body } = await host.next((b) => b?.type === 'response', 10_000, 'the bad_message answer');
      assert.deepEqual(body, { v: 1, type: 'response', id: null, ok: false, error: { code: 'bad_message', message: 'welcome.info must be an object' } });
      await assert.rejects(within(connected, 10_000, 'connect() to fail'), expectCode('bad_message'));
      assert.equal(peer.hostInfo, null);
      assert.equal(peer.session, null, 'the bad welcome was not taken');
    });
  }
});

describe('event.topic reaches the listener as ctx.topic', () => {
  test('a broadcast event carries its topic, a plain one null; both run the action\'s listeners', async (t) => {
    const { host, peer } = await setup(t, { peer: { topics: ['news'] } });
    const received = new Received();
    peer.on('note', received.listener);
    host.send({ v: 1, type: 'event', action: 'note', payload: { n: 1 }, topic: 'news' });
    host.send({ v: 1, type: 'event', action: 'note', payload: { n: 2 } });
    assert.deepEqual(await received.next(), { payload: { n: 1 }, topic: 'news', action: 'note' });
    assert.deepEqual(await received.next(), { payload: { n: 2 }, topic: null, action: 'note' });
    // The host decides who gets what: an event on a topic this peer does not (or no longer) subscribe to is delivered.
    host.send({ v: 1, type: 'event', action: 'note', payload: { n: 3 }, topic: 'other' });
    assert.deepEqual(await received.next(), { payload: { n: 3 }, topic: 'other', action: 'note' });
  });

  test('an event whose topic is not a name is a bad message: answered, its listener not run', async (t) => {
    const { host, peer } = await setup(t);
    const received = new Received();
    peer.on('note', received.listener);
    host.send({ v: 1, type: 'event', action: 'note', payload: 'bad', topic: '' });
    const { body } = await host.next((b) => b?.type === 'response', 10_000, 'the bad_message answer');
    assert.deepEqual(body, { v: 1, type: 'response', id: null, ok: false, error: { code: 'bad_message', message: 'event.topic must be a string of 1..128 characters' } });
    host.send({ v: 1, type: 'event', action: 'note', payload: 'good', topic: 't' });
    assert.deepEqual(await received.next(), { payload: 'good', topic: 't', action: 'note' }, 'the bad one never ran');
    assert.equal(peer.connected, true, 'the session carries on');
  });
});

// --- against the conformance host (zerobridge serve --conformance) ---------------------------------------------------

describe('broadcast on the conformance host', () => {
  let host;
  const peers = [];
  const getHost = async () => {
    host ??= ConformanceHost.start('tcp://127.0.0.1:*');
    return host;
  };
  after(async () => {
    for (const peer of peers) await peer.close().catch(() => {});
    await (await host?.catch(() => null))?.stop();
  });

  /** A peer named `name` collecting the `note` events it gets. */
  async function subscriber(name, options = {}) {
    const received = new Received();
    const peer = await connect((await getHost()).endpoint, { name, timeout: 10_000, log: () => {}, ...options });
    peers.push(peer);
    peer.on('note', received.listener);
    return { peer, received };
  }

  test('welcome.info is {protocol_revision: "1.6"}', async () => {
    const { peer } = await subscriber('info-reader');
    assert.deepEqual(peer.hostInfo, { protocol_revision: '1.6' });
  });

  test('welcome.library_version is this package\'s version (decision 44)', async () => {
    const { peer } = await subscriber('version-reader');
    assert.equal(peer.hostLibraryVersion, version);
  });

  test('to every named peer, and on a topic to its subscribers only; delivered counts them', async () => {
    const { peer: a, received: toA } = await subscriber('broadcast-a', { topics: ['news'] });
    const { peer: b, received: toB } = await subscriber('broadcast-b');
    const everyone = peers.length; // the peers of earlier tests here are named sessions of this host too

    // Without a topic: every named session, the requester included; no topic on the events.
    assert.deepEqual(await a.call('broadcast', { action: 'note', payload: { n: 1 } }), { delivered: everyone, skipped: 0 });
    assert.deepEqual(await toA.next(), { payload: { n: 1 }, topic: null, action: 'note' });
    assert.deepEqual(await toB.next(), { payload: { n: 1 }, topic: null, action: 'note' });

    // On a topic: a's subscription only, whoever asks.
    assert.deepEqual(await a.call('broadcast', { action: 'note', payload: { n: 2 }, topic: 'news' }), { delivered: 1, skipped: 0 });
    assert.deepEqual(await b.call('broadcast', { action: 'note', payload: { n: 3 }, topic: 'news' }), { delivered: 1, skipped: 0 },
      'the requester is not counted when it does not subscribe');
    assert.deepEqual(await toA.next(), { payload: { n: 2 }, topic: 'news', action: 'note' });
    assert.deepEqual(await toA.next(), { payload: { n: 3 }, topic: 'news', action: 'note' });
    assert.deepEqual(await b.call('broadcast', { action: 'note', payload: { n: 4 }, topic: 'nobody' }), { delivered: 0, skipped: 0 });

    // b subscribes (a new hello); once the host has it (an answered call after it), b gets the topic too.
    b.subscribe('news');
    await b.call('echo', null);
    assert.deepEqual(await a.call('broadcast', { action: 'note', payload: { n: 5 }, topic: 'news' }), { delivered: 2, skipped: 0 });
    assert.deepEqual(await toA.next(), { payload: { n: 5 }, topic: 'news', action: 'note' });
    assert.deepEqual(await toB.next(), { payload: { n: 5 }, topic: 'news', action: 'note' },
      'b got nothing from the topic broadcasts before it subscribed (events to one session keep their order)');

    // a unsubscribes: the topic reaches b alone.
    a.unsubscribe('news');
    await a.call('echo', null);
    assert.deepEqual(await a.call('broadcast', { action: 'note', payload: { n: 6 }, topic: 'news' }), { delivered: 1, skipped: 0 });
    assert.deepEqual(await toB.next(), { payload: { n: 6 }, topic: 'news', action: 'note' });

    // A last broadcast to everyone shows what a did not get in between: it is the next thing a receives.
    assert.deepEqual(await b.call('broadcast', { action: 'note', payload: { n: 7 } }), { delivered: everyone, skipped: 0 });
    assert.deepEqual(await toA.next(), { payload: { n: 7 }, topic: null, action: 'note' }, 'a got nothing after it unsubscribed');
    assert.deepEqual(await toB.next(), { payload: { n: 7 }, topic: null, action: 'note' });
    assert.deepEqual([toA.items, toB.items], [[], []], 'nothing else');
  });

  test('a broadcast payload that is not {action, payload?, topic?} is invalid_payload', async () => {
    const { peer } = await subscriber('broadcast-bad');
    const bad = [null, 'note', {}, { payload: 1 }, { action: 3 }, { action: '' }, { action: 'note', topic: 5 }, { action: 'note', topic: '' },
      { action: 'note', topic: ['news'] }];
    for (const payload of bad) {
      await assert.rejects(peer.call('broadcast', payload), expectCode('invalid_payload'), JSON.stringify(payload));
    }
  });
});
