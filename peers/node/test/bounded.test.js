// SPEC revision 1.1 (bounded resources) in the Node peer, against a host in this process
// (test-helpers/router-host.js): deadlines, a cancel read before its handler starts, host loss on a fresh
// connection, flow control towards a host that stops reading, and events counted toward maxInFlight.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Peer, BridgeError } from '../index.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within } from '../test-helpers/processes.js';

const MiB = 1024 * 1024;

const expectCode = (code) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  return true;
};

const request = (id, action, payload, extra = {}) => ({ v: 1, type: 'request', id, action, payload, ...extra });

/** An in-process host and a peer connected to it (welcome taken); both closed after the test. */
async function setup(t, { peer: peerOptions = {}, welcome = {}, transport = 'ipc' } = {}) {
  const host = await RouterHost.start(transports[transport]());
  t.after(() => host.stop());
  const logs = [];
  const peer = new Peer(host.endpoint, { name: 'bounded', log: (level, message) => logs.push(`${level}: ${message}`), ...peerOptions });
  t.after(() => peer.close());
  const connected = peer.connect();
  await host.welcome(welcome);
  await within(connected, 10_000, 'connect() to resolve');
  return { host, peer, logs };
}

const responseTo = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, 30_000, `the response to ${id}`);

/** A ping answered shows that the peer has handled (and started whatever it starts for) all that came before. */
async function roundTrip(host) {
  host.send({ v: 1, type: 'ping' });
  await host.nextOfType('pong', 30_000);
  await new Promise((resolve) => setImmediate(resolve));
}

describe('deadlines (SPEC 7.3)', () => {
  test('every request the peer sends carries deadline = now + its timeout beside timeout_ms; none without a timeout', async (t) => {
    const { host, peer } = await setup(t);
    const before = Date.now();
    const timed = peer.call('echo', 1, { timeout: 1500 });
    const { body } = await host.nextOfType('request');
    const after = Date.now();
    assert.equal(body.timeout_ms, 1500);
    assert.ok(Number.isInteger(body.deadline), `deadline ${body.deadline}`);
    assert.ok(body.deadline >= before + 1500 && body.deadline <= after + 1500, `deadline ${body.deadline} for a call made in [${before}, ${after}]`);
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 1 });
    assert.equal(await timed, 1);

    const streamed = peer.stream('count', { n: 1 });
    const { body: streamBody } = await host.nextOfType('request');
    assert.equal(streamBody.timeout_ms, 30_000, 'the peer default');
    assert.ok(streamBody.deadline >= before + 30_000);
    host.send({ v: 1, type: 'response', id: streamBody.id, ok: true, result: null });
    await streamed.result;

    const untimed = peer.call('echo', 2, { timeout: null });
    const { body: bare } = await host.nextOfType('request');
    assert.equal('timeout_ms' in bare, false);
    assert.equal('deadline' in bare, false);
    host.send({ v: 1, type: 'response', id: bare.id, ok: true, result: 2 });
    assert.equal(await untimed, 2);
  });

  test('a request whose deadline has passed is answered timeout and its handler never runs; a likely clock skew is named', async (t) => {
    let runs = 0;
    const { host, logs } = await setup(t, { peer: { actions: { work: () => { runs += 1; return 'ran'; } } } });
    host.send(request('late', 'work', null, { timeout_ms: 30_000, deadline: Date.now() - 5 }));
    const { body } = await responseTo(host, 'late');
    assert.equal(body.ok, false);
    assert.equal(body.error.code, 'timeout');
    assert.equal(logs.some((line) => line.includes('clock skew')), false, 'late by less than its timeout: no skew suspected');

    host.send(request('skewed', 'work', null, { timeout_ms: 1000, deadline: Date.now() - 60_000 }));
    assert.equal((await responseTo(host, 'skewed')).body.error.code, 'timeout');
    assert.ok(logs.some((line) => line.startsWith('warn:') && line.includes('skewed') && line.includes('clock skew')), logs.join('\n'));

    host.send(request('epoch', 'work', null, { deadline: 1 }));
    assert.equal((await responseTo(host, 'epoch')).body.error.code, 'timeout');
    await roundTrip(host);
    assert.equal(runs, 0, 'no handler ran');
  });

  test('a future deadline runs; the handler\'s limit is the earlier of receipt + timeout_ms and deadline', async (t) => {
    const contexts = new Map();
    const { host } = await setup(t, {
      peer: {
        actions: {
          work: (payload, ctx) => { contexts.set(ctx.id, ctx); return 'ran'; },
          hang: (payload, ctx) => new Promise((resolve, reject) => {
            contexts.set(ctx.id, ctx);
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
          }),
        },
      },
    });
    const deadline = Date.now() + 20_000;
    host.send(request('soon', 'work', null, { timeout_ms: 60_000, deadline }));
    assert.equal((await responseTo(host, 'soon')).body.result, 'ran');
    assert.equal(contexts.get('soon').deadline, deadline, 'the deadline is earlier than receipt + 60 s');

    const before = Date.now();
    host.send(request('by-timeout', 'work', null, { timeout_ms: 5000, deadline: Date.now() + 3_600_000 }));
    assert.equal((await responseTo(host, 'by-timeout')).body.result, 'ran');
    const limit = contexts.get('by-timeout').deadline;
    assert.ok(limit >= before + 5000 && limit <= Date.now() + 5000, 'receipt + timeout_ms is earlier than the deadline');

    // Far beyond setTimeout's 24.8-day range: must not fire at once.
    host.send(request('far', 'work', null, { deadline: 4102444800000 }));
    assert.equal((await responseTo(host, 'far')).body.result, 'ran');

    const started = Date.now();
    host.send(request('cut', 'hang', null, { timeout_ms: 60_000, deadline: Date.now() + 200 }));
    const { body } = await responseTo(host, 'cut');
    assert.equal(body.error.code, 'timeout');
    assert.ok(Date.now() - started < 30_000, 'at the deadline, not at timeout_ms');
    assert.equal(contexts.get('cut').signal.reason.code, 'timeout');
  });

  test('a cancel read with its request means the handler never starts; the one response is cancelled', async (t) => {
    let runs = 0;
    const { host } = await setup(t, { peer: { actions: { work: () => { runs += 1; return 'ran'; } } } });
    host.sendTogether([request('k1', 'work', null, { timeout_ms: 30_000 }), { v: 1, type: 'cancel', id: 'k1' }]);
    const { body } = await responseTo(host, 'k1');
    assert.equal(body.error.code, 'cancelled');
    await roundTrip(host);
    assert.equal(runs, 0, 'the handler never began');
    assert.equal(host.messages.filter((m) => m.body?.type === 'response').length, 0, 'exactly one response');
  });
});

describe('losing the host (SPEC 6, 7.3 given up as lost)', () => {
  for (const transport of ['ipc', 'tcp']) {
    test(`after the host's bye: calls fail peer_lost, new ones fail at once, queued sends are dropped, hello comes on a new connection (${transport})`, async (t) => {
      const { host, peer } = await setup(t, { transport });
      const first = host.routingId;
      const pending = peer.call('sleep', { ms: 60_000 });
      await host.nextOfType('request');
      // Fill what the peer has queued for the host: the host stops reading, the peer posts 6 x 1 MB.
      host.stopReading(first);
      for (let i = 0; i < 6; i += 1) peer.post('bulk', { i, data: 'x'.repeat(1_000_000) });
      assert.ok(peer.dealer.queuedBytes > 1_000_000, `queued ${peer.dealer.queuedBytes} bytes`);
      host.send({ v: 1, type: 'bye' });
      await assert.rejects(within(pending, 30_000, 'the pending call to fail'), expectCode('peer_lost'));
      assert.equal(peer.connected, false);

      await assert.rejects(peer.call('echo', 'while lost'), expectCode('peer_lost'));
      const stream = peer.stream('count', { n: 1 });
      await assert.rejects(stream.result, expectCode('peer_lost'));
      assert.throws(() => peer.post('while-lost', null), expectCode('peer_lost'));

      const hello = await host.nextOfType('hello', 30_000);
      assert.notEqual(hello.routingId.toString('hex'), first.toString('hex'), 'a fresh connection');
      assert.equal(hello.body.session, undefined);
      host.resumeReading(first); // the host reads what reached it before the peer dropped the connection, then its end
      await host.waitFor(() => host.disconnected.has(first.toString('hex')), 30_000, 'the old connection to close');
      host.send(host.welcomeBody(), { routingId: hello.routingId });
      await host.waitFor(() => peer.connected, 30_000, 'the peer to be welcomed again');
      const again = peer.call('echo', 'again');
      const { body } = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: body.id, ok: true, result: body.payload });
      assert.equal(await again, 'again');
      const bulk = host.messages.filter((m) => m.body?.action === 'bulk').length;
      assert.ok(bulk < 6, `what was queued for the lost host was dropped (${bulk} of 6 arrived)`);
      assert.equal(host.messages.some((m) => ['while lost', 'while-lost'].includes(m.body?.payload) || m.body?.action === 'while-lost'), false);
    });
  }

  test('after 3 x heartbeat of silence: the old connection is dropped, a call fails at once, and hello comes on a new connection', async (t) => {
    const { host, peer } = await setup(t, { peer: { heartbeatMs: 100 }, welcome: { heartbeat_ms: 100 } });
    const first = host.routingId.toString('hex');
    await host.waitFor(() => !peer.connected, 30_000, 'the host to be considered lost');
    await assert.rejects(peer.call('echo', 1), expectCode('peer_lost'));
    const hello = await host.next((b, m) => b?.type === 'hello' && m.routingId.toString('hex') !== first, 30_000, 'a hello on a new connection');
    assert.equal(hello.body.peer, 'bounded');
    await host.waitFor(() => host.disconnected.has(first), 30_000, 'the old connection to close');
  });

  test('running event listeners are aborted with the session', async (t) => {
    const { host, peer } = await setup(t);
    let signal;
    peer.on('long', (payload, context) => {
      signal = context.signal;
      assert.equal(context.action, 'long');
      return new Promise((resolve) => context.signal.addEventListener('abort', resolve));
    });
    host.send({ v: 1, type: 'event', action: 'long', payload: null });
    await host.waitFor(() => signal, 30_000, 'the listener to run');
    host.send({ v: 1, type: 'bye' });
    await host.waitFor(() => signal.aborted, 30_000, 'the listener to be aborted');
    assert.equal(signal.reason.code, 'peer_lost');
  });
});

describe('flow control (SPEC 7.13)', () => {
  test('a host that stops reading: 200,000 progress reports never block, the queue stays bounded, the host gets gapless seq, skipped and the last payload', async (t) => {
    const total = 200_000;
    let peerRef;
    let finished = false;
    let maxQueued = 0;
    let maxHeld = 0;
    const { host, peer } = await setup(t, {
      welcome: { heartbeat_ms: 60_000 },
      peer: {
        actions: {
          report: async (payload, ctx) => {
            for (let i = 1; i <= total; i += 1) {
              assert.equal(ctx.progress({ i, pad: 'p'.repeat(64) }), true);
              if (i % 500 === 0) {
                maxQueued = Math.max(maxQueued, peerRef.dealer.queuedBytes);
                maxHeld = Math.max(maxHeld, peerRef.link.heldProgressBytes);
              }
              if (i % 20_000 === 0) await new Promise((resolve) => setImmediate(resolve)); // let the event loop run
            }
            finished = true;
            return { n: total };
          },
        },
      },
    });
    peerRef = peer;
    host.stopReading();
    host.send(request('p1', 'report', null, { progress: true, timeout_ms: 120_000 }));
    await host.waitFor(() => finished, 60_000, 'the handler to finish while the host reads nothing');
    maxQueued = Math.max(maxQueued, peer.dealer.queuedBytes);
    assert.ok(maxQueued >= 4 * MiB, `the host really stopped reading (queued up to ${maxQueued} bytes)`);
    assert.ok(maxQueued <= 9 * MiB, `queued bytes stay within 8 MiB + 1 MiB of held progress (max ${maxQueued})`);
    assert.ok(maxHeld <= MiB, `held progress stays within 1 MiB (max ${maxHeld})`);

    host.resumeReading();
    await responseTo(host, 'p1');
    const progress = host.messages.filter((m) => m.body?.type === 'progress' && m.body.id === 'p1').map((m) => m.body);
    assert.deepEqual(progress.map((p) => p.seq), Array.from({ length: progress.length }, (_, k) => k + 1), 'gapless seq');
    assert.ok(progress.length < total, `coalesced: ${progress.length} messages for ${total} reports`);
    assert.ok(progress.some((p) => p.skipped > 0), 'some carry skipped');
    assert.ok(progress.every((p) => p.skipped === undefined || (Number.isInteger(p.skipped) && p.skipped >= 1)));
    assert.equal(progress.reduce((sum, p) => sum + 1 + (p.skipped ?? 0), 0), total, 'every report is sent or counted');
    assert.equal(progress.at(-1).payload.i, total, 'the last progress is the newest the handler reported');
    assert.ok(progress.map((p) => p.payload.i).every((i, k, all) => k === 0 || i > all[k - 1]), 'in order');
  });

  test('a caller takes progress with skipped like any other and adds the counts up in stream().skipped', async (t) => {
    const { host, peer } = await setup(t);
    const call = peer.stream('count', { n: 10 });
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'progress', id: body.id, seq: 1, payload: 1 });
    host.send({ v: 1, type: 'progress', id: body.id, seq: 2, skipped: 5, payload: 7 });
    host.send({ v: 1, type: 'progress', id: body.id, seq: 3, skipped: 2, payload: 10 });
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { n: 10 } });
    const seen = [];
    for await (const p of call.progress) seen.push(p);
    assert.deepEqual(seen, [1, 7, 10]);
    assert.deepEqual(await call.result, { n: 10 });
    assert.equal(call.skipped, 7);
  });

  test('post while over the bound is refused overloaded; a call waits for room up to its deadline', async (t) => {
    const { host, peer } = await setup(t, { welcome: { heartbeat_ms: 60_000 } });
    host.stopReading();
    let refused = null;
    for (let i = 0; i < 200 && refused === null; i += 1) {
      try {
        peer.post('bulk', { i, data: 'b'.repeat(256 * 1024) });
      } catch (error) {
        refused = error;
      }
    }
    assert.ok(refused, `a post was refused (queued ${peer.dealer.queuedBytes} bytes)`);
    expectCode('overloaded')(refused);
    assert.ok(peer.dealer.queuedBytes <= 8 * MiB + 512 * 1024, `queued ${peer.dealer.queuedBytes} bytes`);

    const waiting = peer.call('echo', 'waited', { timeout: 60_000 });
    await assert.rejects(peer.call('never-sent', null, { timeout: 200 }), expectCode('timeout'));
    const controller = new AbortController();
    const aborted = peer.call('never-sent', null, { signal: controller.signal });
    controller.abort();
    await assert.rejects(aborted, expectCode('cancelled'));

    host.resumeReading();
    const { body } = await host.next((b) => b?.type === 'request', 60_000, 'the waiting request');
    assert.equal(body.action, 'echo');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: body.payload });
    assert.equal(await within(waiting, 30_000, 'the waiting call'), 'waited');
    await roundTrip(host);
    assert.equal(host.messages.some((m) => m.body?.action === 'never-sent' || m.body?.type === 'cancel'), false,
      'a call given up before it could be sent is never sent, and needs no cancel');
    peer.post('after', null); // room again
    await host.next((b) => b?.type === 'event' && b.action === 'after');
  });

  test('events count toward maxInFlight with requests; one over it is answered overloaded with id null, naming its action', async (t) => {
    const release = [];
    const { host, peer } = await setup(t, {
      peer: {
        maxInFlight: 2,
        actions: { hold: () => new Promise((resolve) => release.push(resolve)) },
      },
    });
    let ran = 0;
    peer.on('note', () => { ran += 1; });
    peer.on('slow', (payload, { signal }) => new Promise((resolve) => {
      release.push(resolve);
      signal.addEventListener('abort', resolve);
    }));
    host.send(request('h1', 'hold', null));
    host.send({ v: 1, type: 'event', action: 'slow', payload: null }); // a listener still running counts
    await host.waitFor(() => release.length === 2, 30_000, 'the handler and the listener to run');
    host.send({ v: 1, type: 'event', action: 'note', payload: 1 });
    const { body } = await host.next((b) => b?.type === 'response', 30_000, 'the overloaded answer');
    assert.deepEqual({ ...body, error: { ...body.error, message: '' } },
      { v: 1, type: 'response', id: null, ok: false, error: { code: 'overloaded', message: '' } });
    assert.match(body.error.message, /note/);
    host.send(request('h2', 'hold', null));
    assert.equal((await responseTo(host, 'h2')).body.error.code, 'overloaded');
    assert.equal(ran, 0, 'the event over the limit did not run');

    for (const resolve of release.splice(0)) resolve('done');
    assert.equal((await responseTo(host, 'h1')).body.result, 'done');
    await roundTrip(host);
    host.send({ v: 1, type: 'event', action: 'note', payload: 2 });
    await host.waitFor(() => ran === 1, 30_000, 'the event to run once there is room');
  });
});

describe('answers with id null past the queue bound (SPEC 7.13, decision 54)', () => {
  test('an event over maxInFlight is answered while the queue has room, and dropped (not queued) while it is full', async () => {
    const { Link } = await import('../src/link.js');
    const { decode } = await import('../src/wire.js');
    const sent = [];
    let full = false;
    const logged = [];
    const link = new Link({
      send: (frames) => sent.push(frames),
      isFull: () => full,
      handlers: new Map(),
      maxInFlight: 0, // every event is over the limit
      onEvent: () => null,
      onSession: () => {},
      maxMessageBytes: () => Infinity,
      log: (level, message) => logged.push(`${level}: ${message}`),
    });
    link.serveEvent({ action: 'note', payload: 1 });
    assert.equal(sent.length, 1, 'answered while there is room');
    assert.deepEqual({ ...decode(sent[0]).body, error: undefined }, { v: 1, type: 'response', id: null, ok: false, error: undefined });
    full = true;
    link.serveEvent({ action: 'note', payload: 2 });
    link.refuse(new BridgeError('bad_message', 'not JSON'));
    assert.equal(sent.length, 1, 'nothing more queued while the queue is at its bound');
    assert.equal(logged.filter((l) => l.startsWith('debug: answer not queued')).length, 2, logged.join('\n'));
    assert.equal(logged.filter((l) => l.startsWith('warn: event note not run')).length, 1, 'a flood is warned about once a second');
  });
});

describe('the peer\'s own size bound on what it receives (SPEC 7.10)', () => {
  test('readableId reads a too-large body\'s id from its first 4096 bytes only', async () => {
    const { readableId } = await import('../src/wire.js');
    const cases = [
      [`{"v":1,"type":"request","id":"big1","action":"echo","payload":"${'a'.repeat(100_000)}"}`, 'big1'],
      ['x'.repeat(5000), null], // not JSON: no id to read
      [`{"v":1,"type":"request","action":"echo","payload":"${'a'.repeat(5000)}","id":"late"}`, null], // past 4096 bytes
      [' { "a" : [1, {"b": "}"}], "\\u0069d" : "escaped" }', 'escaped'], // names count as decoded
      ['{"n": 12.5e3, "t": true, "o": {"x": [1, 2, {}]}, "id": "after"}', 'after'],
      ['{"id": 5}', null],
      ['{"id": ""}', null],
      [`{"id": "${'i'.repeat(129)}"}`, null],
      ['[1]', null],
      [`{"a":${'['.repeat(3000)}`, null], // nested past the prefix
      [`{"x":"${'é'.repeat(2047)}","id":"cut"}`, null], // a character cut at byte 4096
    ];
    for (const [text, expected] of cases) assert.equal(readableId(Buffer.from(text)), expected, text.slice(0, 80));
    assert.equal(readableId(Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])), null, 'not UTF-8');
  });

  test('a message over 64 MiB is answered too_large with its id, unread; one at the limit is processed', async (t) => {
    const { MAX_MESSAGE_BYTES } = await import('../src/core.js');
    const { host, peer, logs } = await setup(t);
    const body = Buffer.from(JSON.stringify({ v: 1, type: 'request', id: 'big', action: 'no-such-action', payload: 'x' }));
    host.sendFrames([Buffer.alloc(0), body, Buffer.alloc(MAX_MESSAGE_BYTES + 1 - body.length)]);
    const refused = (await responseTo(host, 'big')).body;
    assert.equal(refused.error.code, 'too_large');
    assert.match(refused.error.message, new RegExp(`${MAX_MESSAGE_BYTES}`));
    host.sendFrames([Buffer.alloc(0), body, Buffer.alloc(MAX_MESSAGE_BYTES - body.length)]);
    assert.equal((await responseTo(host, 'big')).body.error.code, 'unknown_action', 'at the limit it is read');
    await roundTrip(host); // the peer goes on
    assert.equal(peer.connected, true, logs.join('\n'));
  });
});
