// The peer (wire + link + peer) against a scripted host: a pyzmq ROUTER whose replies each test
// writes by hand, to play hosts that are silent, slow, cancelled, lost or broken.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { inspect } from 'node:util';
import { createHash } from 'node:crypto';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, Peer, BridgeError } from '../index.js';
import { FakeHost } from '../test-helpers/fake-host.js';
import { transports, within, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses); // a failed test must not leave a child process keeping the run alive

function collectLog() {
  const lines = [];
  const log = (level, message) => lines.push(`${level}: ${message}`);
  return { lines, log };
}

/** A fake host and a peer connected to it (welcome sent); both closed after the test. */
async function setup(t, { peer: peerOptions = {}, welcome = {}, transport = 'tcp', before } = {}) {
  const host = await FakeHost.start(transports[transport]());
  t.after(() => host.stop());
  const { lines, log } = collectLog();
  const peer = new Peer(host.endpoint, { name: 'node-test', log, ...peerOptions });
  before?.(peer);
  t.after(() => peer.close());
  const connected = peer.connect();
  const hello = await host.welcome(welcome);
  await within(connected, 10_000, 'connect() to resolve');
  return { host, peer, hello, logs: lines };
}

const expectCode = (code) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  return true;
};

describe('peer: session', () => {
  for (const transport of ['tcp', 'ipc']) {
    test(`says hello with its name, handlers, features and heartbeat, and takes the welcome (${transport})`, async (t) => {
      const { host, peer, hello } = await setup(t, {
        transport,
        peer: { actions: { render: async () => 'ok' }, heartbeatMs: 2000 },
        welcome: { session: 'sess-1', actions: ['echo', 'add'], heartbeat_ms: 3000 },
        before: (p) => p.handle('early', async () => 1),
      });
      // SPEC 7.8: the hash of the catalogue, its descriptions sorted by name, written here in RFC 8785 form by hand.
      const catalogue = createHash('sha256')
        .update('[{"doc":"","name":"early","payload":{},"result":{}},{"doc":"","name":"render","payload":{},"result":{}}]').digest('hex');
      assert.deepEqual(hello, { v: 1, type: 'hello', peer: 'node-test', actions: ['render', 'early'], features: ['batch'], heartbeat_ms: 2000, topics: [], catalogue });
      assert.equal(peer.session, 'sess-1');
      assert.deepEqual(peer.hostActions, ['echo', 'add']);
      assert.equal(peer.heartbeatMs, 3000, 'the value in force is the welcome\'s');
      assert.equal(peer.connected, true);
      const { signature, frames } = await (async () => {
        peer.post('note', { x: 1 });
        return host.nextOfType('event');
      })();
      assert.equal(signature.length, 0, 'frame 0 (signature) is empty without a key');
      assert.equal(frames.length, 2);
    });
  }

  test('lists evaluate in features when evaluation is on', async (t) => {
    const { hello } = await setup(t, { peer: { evaluate: true } });
    assert.deepEqual(hello.features, ['evaluate', 'batch']);
  });

  test('sends hello again, keeping the session, when handlers change after connect', async (t) => {
    const { host, peer } = await setup(t, { welcome: { session: 'keep-me' } });
    const remove = peer.handle('late', async () => 'late');
    peer.handle('later', async () => 'later'); // same turn: one hello for both
    const { body: first } = await host.nextOfType('hello');
    assert.deepEqual(first.actions, ['late', 'later']);
    assert.equal(first.session, 'keep-me');
    remove();
    const { body: second } = await host.nextOfType('hello');
    assert.deepEqual(second.actions, ['later']);
  });

  test('connect() fails with timeout when no welcome comes', async (t) => {
    const host = await FakeHost.start(transports.tcp());
    t.after(() => host.stop());
    const started = Date.now();
    await assert.rejects(connect(host.endpoint, { name: 'n', timeout: 300, log: () => {} }), expectCode('timeout'));
    assert.ok(Date.now() - started >= 290);
    await host.nextOfType('hello'); // it did say hello
  });

  test('connect() fails fast with the ZMTP error when the endpoint is not a ZeroMQ peer', async (t) => {
    const server = net.createServer((socket) => socket.end('SSH-2.0-OpenSSH_9.2\r\n'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => server.close());
    await assert.rejects(
      within(connect(`tcp://127.0.0.1:${server.address().port}`, { name: 'n', log: () => {} }), 5000, 'connect to fail'),
      (error) => expectCode('bad_message')(error) && /invalid greeting/.test(error.message));
  });

  test('connect() fails fast when the welcome is malformed', async (t) => {
    const host = await FakeHost.start(transports.tcp());
    t.after(() => host.stop());
    const connecting = connect(host.endpoint, { name: 'n', log: () => {} });
    await host.nextOfType('hello');
    host.send({ v: 1, type: 'welcome', host: 'h', session: '', actions: [], heartbeat_ms: 5000, limits: { max_message_bytes: 1, max_in_flight: 1 } });
    await assert.rejects(within(connecting, 5000, 'connect to fail'), (e) => expectCode('bad_message')(e) && /welcome/.test(e.message));
    const { body } = await host.nextOfType('response');
    assert.equal(body.error.code, 'bad_message', 'the bad welcome was also answered bad_message');
  });

  test('refuses bad arguments and unreadable connection files clearly', async () => {
    await assert.rejects(connect('tcp://127.0.0.1', { name: 'n' }), TypeError);
    await assert.rejects(connect('tcp://127.0.0.1:5555', {}), /options.name/);
    await assert.rejects(connect('tcp://127.0.0.1:5555', { name: 'n', heartbeatMs: 0 }), TypeError);
    const dir = mkdtempSync(path.join(tmpdir(), 'zb-node-peer-'));
    await assert.rejects(connect(path.join(dir, 'none.json'), { name: 'n' }), expectCode('bad_message'));
    assert.throws(() => new Peer('tcp://127.0.0.1:5555', { name: 'n' }).handle('$evaluate', async () => 1), /reserved/);
  });

  test('connects through a connection file', async (t) => {
    const host = await FakeHost.start(transports.ipc());
    t.after(() => host.stop());
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-cf-')), 'conn.json');
    writeFileSync(file, JSON.stringify({ protocol: 1, endpoint: host.endpoint, host: 'fake', signature_scheme: 'hmac-sha256', key: '' }));
    const connecting = connect(file, { name: 'via-file', log: () => {} });
    const hello = await host.welcome();
    const peer = await connecting;
    t.after(() => peer.close());
    assert.equal(hello.peer, 'via-file');
  });

  test('close() says bye and fails what is pending with cancelled', async (t) => {
    const { host, peer } = await setup(t);
    const pending = assert.rejects(peer.call('echo', 1), expectCode('cancelled'));
    await host.nextOfType('request');
    await peer.close();
    await pending;
    await host.nextOfType('bye');
    await assert.rejects(peer.call('echo', 2), expectCode('cancelled'));
  });
});

describe('peer: calling the host', () => {
  test('sends a request and resolves with the result; integers stay integers', async (t) => {
    const { host, peer } = await setup(t);
    const result = peer.call('add', { a: 1, b: 2 }, { timeout: 1500 });
    const { body } = await host.nextOfType('request');
    assert.equal(body.action, 'add');
    assert.deepEqual(body.payload, { a: 1, b: 2 });
    assert.equal(body.timeout_ms, 1500);
    assert.equal(body.progress, undefined);
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 3 });
    assert.equal(await result, 3);
  });

  test('an error response rejects with its code, message and data', async (t) => {
    const { host, peer } = await setup(t);
    const result = peer.call('add', { a: 'x' });
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'response', id: body.id, ok: false, error: { code: 'invalid_payload', message: 'a is not a number', data: { field: 'a' } } });
    await assert.rejects(result, (error) => expectCode('invalid_payload')(error) && error.data.field === 'a' && error.message === 'a is not a number');
  });

  test('times out at its deadline when the host never answers, and drops the late response', async (t) => {
    const { host, peer, logs } = await setup(t);
    const started = Date.now();
    const result = peer.call('sleep', { ms: 10_000 }, { timeout: 250 });
    const { body } = await host.nextOfType('request');
    assert.equal(body.timeout_ms, 250);
    await assert.rejects(result, expectCode('timeout'));
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 240 && elapsed < 5000, `failed after ${elapsed} ms`);
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 'late' });
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong'); // the late response came before the ping and was dropped quietly
    assert.ok(logs.some((l) => l.includes(`unknown or finished request ${body.id}`)), logs.join('\n'));
  });

  test('an AbortSignal cancels: the call rejects with cancelled and the host gets a cancel', async (t) => {
    const { host, peer } = await setup(t);
    const controller = new AbortController();
    const result = peer.call('sleep', { ms: 10_000 }, { signal: controller.signal });
    const { body } = await host.nextOfType('request');
    controller.abort();
    await assert.rejects(result, expectCode('cancelled'));
    const { body: cancel } = await host.nextOfType('cancel');
    assert.deepEqual(cancel, { v: 1, type: 'cancel', id: body.id });
  });

  test('an already aborted signal rejects at once and sends nothing', async (t) => {
    const { host, peer } = await setup(t);
    await assert.rejects(peer.call('echo', 1, { signal: AbortSignal.abort() }), expectCode('cancelled'));
    peer.post('marker', null);
    const { body } = await host.next((b) => b?.type === 'request' || b?.type === 'event');
    assert.equal(body.type, 'event', 'no request went out before the marker');
  });

  test('streams progress in seq order, drops repeats, then the result', async (t) => {
    const { host, peer, logs } = await setup(t);
    const call = peer.stream('count', { n: 3 });
    const { body } = await host.nextOfType('request');
    assert.equal(body.progress, true);
    const progress = (seq, i) => ({ v: 1, type: 'progress', id: body.id, seq, payload: { i, n: 3 } });
    host.send(progress(1, 1));
    host.send(progress(2, 2));
    host.send(progress(2, 2)); // a repeat: dropped
    host.send(progress(3, 3));
    host.send({ v: 1, type: 'progress', id: 'unknown-id', seq: 1, payload: 'x' }); // dropped
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { n: 3 } });
    const seen = [];
    for await (const p of call.progress) seen.push(p.i);
    assert.deepEqual(seen, [1, 2, 3]);
    assert.deepEqual(await call.result, { n: 3 });
    assert.ok(logs.some((l) => l.includes('dropped progress 2')), logs.join('\n'));
  });

  test('a stream whose call fails ends its progress and rejects its result', async (t) => {
    const { host, peer } = await setup(t);
    const call = peer.stream('count', { n: 3 }, { timeout: 200 });
    await host.nextOfType('request');
    const seen = [];
    for await (const p of call.progress) seen.push(p);
    assert.deepEqual(seen, []);
    await assert.rejects(call.result, expectCode('timeout'));
  });

  test('post sends an event; bytes travel as attachment frames', async (t) => {
    const { host, peer } = await setup(t);
    peer.post('upload', { name: 'a.bin', data: Buffer.from([1, 2, 3]) });
    const { body, frames } = await host.nextOfType('event');
    assert.deepEqual(body, { v: 1, type: 'event', action: 'upload', payload: { name: 'a.bin', data: { $attachment: 0 } } });
    assert.deepEqual([...frames[2]], [1, 2, 3]);
  });

  test('a request over the host\'s max_message_bytes fails with too_large without being sent', async (t) => {
    const { host, peer } = await setup(t, { welcome: { limits: { max_message_bytes: 200, max_in_flight: 8 } } });
    await assert.rejects(peer.call('echo', 'x'.repeat(500)), expectCode('too_large'));
    peer.post('marker', null);
    const { body } = await host.next((b) => b?.type === 'request' || b?.type === 'event');
    assert.equal(body.type, 'event');
  });
});

describe('peer: serving the host', () => {
  const request = (id, action, payload, extra = {}) => ({ v: 1, type: 'request', id, action, payload, ...extra });
  const responseTo = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, 10_000, `the response to ${id}`);

  test('runs a handler with its context, streams progress, answers once', async (t) => {
    let context;
    const { host } = await setup(t, {
      peer: {
        actions: {
          render: async (payload, ctx) => {
            context = ctx;
            assert.equal(ctx.progress({ step: 1 }), true);
            ctx.progress({ step: 2 });
            return { html: `<b>${payload.text}</b>` };
          },
        },
      },
    });
    host.send(request('h1', 'render', { text: 'hi' }, { progress: true, timeout_ms: 5000 }));
    const p1 = await host.nextOfType('progress');
    const p2 = await host.nextOfType('progress');
    assert.deepEqual([p1.body.seq, p1.body.payload, p2.body.seq, p2.body.payload], [1, { step: 1 }, 2, { step: 2 }]);
    const { body } = await responseTo(host, 'h1');
    assert.deepEqual(body, { v: 1, type: 'response', id: 'h1', ok: true, result: { html: '<b>hi</b>' } });
    assert.equal(context.id, 'h1');
    assert.equal(typeof context.deadline, 'number');
    assert.ok(context.deadline > Date.now() - 10_000);
    assert.equal(context.signal.aborted, false);
  });

  test('sends no progress when the host did not ask for it', async (t) => {
    const { host } = await setup(t, { peer: { actions: { work: async (_, ctx) => ctx.progress('x') } } });
    host.send(request('h2', 'work', null));
    const { body } = await responseTo(host, 'h2');
    assert.equal(body.result, false, 'progress() said it sent nothing');
  });

  test('answers unknown_action, handler_error, BridgeError codes and duplicate_id', async (t) => {
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    const { host } = await setup(t, {
      peer: {
        actions: {
          boom: async () => { throw new RangeError('out of range'); },
          strict: async () => { throw new BridgeError('invalid_payload', 'need a', { data: { field: 'a' } }); },
          slow: async () => { await gate; return 'slow done'; },
          sync: () => 'plain value',
        },
      },
    });
    host.send(request('u1', 'nope', null));
    assert.equal((await responseTo(host, 'u1')).body.error.code, 'unknown_action');
    host.send(request('b1', 'boom', null));
    const boom = (await responseTo(host, 'b1')).body.error;
    assert.equal(boom.code, 'handler_error');
    assert.match(boom.message, /RangeError: out of range/);
    host.send(request('s1', 'strict', null));
    assert.deepEqual((await responseTo(host, 's1')).body.error, { code: 'invalid_payload', message: 'need a', data: { field: 'a' } });
    host.send(request('y1', 'sync', null));
    assert.equal((await responseTo(host, 'y1')).body.result, 'plain value');
    host.send(request('d1', 'slow', null));
    host.send(request('d1', 'slow', null));
    assert.equal((await responseTo(host, 'd1')).body.error.code, 'duplicate_id');
    release();
    assert.equal((await responseTo(host, 'd1')).body.result, 'slow done', 'the original is unaffected');
  });

  test('cancel aborts the handler\'s signal and answers cancelled exactly once', async (t) => {
    let aborted;
    let started;
    let returned;
    const running = new Promise((resolve) => { started = resolve; });
    const lateResultReturned = new Promise((resolve) => { returned = resolve; });
    const { host } = await setup(t, {
      peer: {
        actions: {
          wait: (payload, ctx) => new Promise((resolve) => {
            started(); // a cancel read before the handler starts means it never starts (SPEC 7.3): this one is running
            ctx.signal.addEventListener('abort', () => {
              aborted = ctx.signal.reason;
              setTimeout(() => { resolve('finished anyway'); returned(); }, 20); // a late result: must be discarded
            });
          }),
        },
      },
    });
    host.send(request('c1', 'wait', null));
    await within(running, 10_000, 'the handler to start');
    host.send({ v: 1, type: 'cancel', id: 'c1' });
    assert.equal((await responseTo(host, 'c1')).body.error.code, 'cancelled');
    host.send({ v: 1, type: 'cancel', id: 'c1' }); // finished: ignored
    host.send({ v: 1, type: 'cancel', id: 'never-seen' }); // unknown: ignored
    // The handler has returned its late result (a fixed pause could end first on a loaded machine, and the ping
    // below would then pass before any second response could be sent); the peer handles the result next.
    await within(lateResultReturned, 10_000, 'the handler to return its late result');
    await new Promise((resolve) => setImmediate(resolve));
    host.send({ v: 1, type: 'ping' });
    const next = await host.next((b) => b?.type === 'response' || b?.type === 'pong');
    assert.equal(next.body.type, 'pong', 'no second response for c1 and no answer to the cancels');
    assert.equal(aborted.code, 'cancelled');
  });

  test('timeout_ms aborts the handler and answers timeout at the deadline', async (t) => {
    let reason;
    const { host } = await setup(t, {
      peer: { actions: { hang: (payload, ctx) => new Promise(() => ctx.signal.addEventListener('abort', () => { reason = ctx.signal.reason; })) } },
    });
    const started = Date.now();
    host.send(request('t1', 'hang', null, { timeout_ms: 150 }));
    assert.equal((await responseTo(host, 't1')).body.error.code, 'timeout');
    assert.ok(Date.now() - started >= 140);
    assert.equal(reason.code, 'timeout');
  });

  test('$actions lists the handlers; $evaluate is refused unless enabled', async (t) => {
    const { host } = await setup(t, { peer: { actions: { a: async () => 1, b: async () => 2 } } });
    host.send(request('x1', '$actions', null));
    assert.deepEqual((await responseTo(host, 'x1')).body.result, ['a', 'b']);
    host.send(request('x2', '$evaluate', { script: 'return 1', arguments: {} }));
    assert.equal((await responseTo(host, 'x2')).body.error.code, 'not_allowed');
  });

  test('$evaluate runs the script as an async function body when enabled', async (t) => {
    const { host } = await setup(t, { peer: { evaluate: true } });
    const evaluate = (id, script, args) => host.send(request(id, '$evaluate', args === undefined ? { script } : { script, arguments: args }));
    evaluate('e1', 'return a + b', { a: 1, b: 2 });
    assert.equal((await responseTo(host, 'e1')).body.result, 3);
    evaluate('e2', 'await new Promise((r) => setTimeout(r, 10)); return [typeof process, items.length]', { items: [1, 2, 3] });
    assert.deepEqual((await responseTo(host, 'e2')).body.result, ['object', 3]);
    evaluate('e3', 'const x = 1;');
    assert.equal((await responseTo(host, 'e3')).body.result, null, 'no return value is null');
    evaluate('e4', 'return (');
    const syntax = (await responseTo(host, 'e4')).body.error;
    assert.equal(syntax.code, 'handler_error');
    assert.match(syntax.message, /SyntaxError/);
    evaluate('e5', 'throw new Error("nope")');
    assert.match((await responseTo(host, 'e5')).body.error.message, /nope/);
    evaluate('e6', 'return 1', { 'not a name': 1 });
    assert.equal((await responseTo(host, 'e6')).body.error.code, 'invalid_payload');
    host.send(request('e7', '$evaluate', 'return 1'));
    assert.equal((await responseTo(host, 'e7')).body.error.code, 'invalid_payload');
    evaluate('e8', 'return 10n');
    assert.equal((await responseTo(host, 'e8')).body.result, 10, 'a BigInt in the 64-bit range is an integer (SPEC 7.14)');
    evaluate('e9', 'return [2n ** 64n]');
    const bigint = (await responseTo(host, 'e9')).body.error;
    assert.equal(bigint.code, 'handler_error');
    assert.match(bigint.message, /^result\[0\]: the BigInt 18446744073709551616 is outside the signed 64-bit range/);
  });

  test('events from the host reach on() listeners; a throwing listener is logged, not fatal', async (t) => {
    const { host, peer, logs } = await setup(t);
    const received = [];
    peer.on('progress-note', () => { throw new Error('listener bug'); });
    peer.on('progress-note', (payload) => received.push(payload));
    host.send({ v: 1, type: 'event', action: 'progress-note', payload: { pct: 50 } });
    host.send({ v: 1, type: 'event', action: 'nobody-listens', payload: 1 });
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.deepEqual(received, [{ pct: 50 }]);
    assert.ok(logs.some((l) => l.includes('listener bug')), logs.join('\n'));
  });
});

describe('peer: a host that sends garbage', () => {
  test('answers every unreadable message bad_message (id echoed when readable) and keeps working', async (t) => {
    const { host, peer } = await setup(t);
    const raw = (body) => [Buffer.alloc(0), Buffer.from(body)];
    const cases = [
      { frames: [Buffer.alloc(0)], code: 'bad_message', id: null },
      { frames: [Buffer.alloc(0), Buffer.from([0xc3, 0x28])], code: 'bad_message', id: null },
      { frames: raw('not json at all'), code: 'bad_message', id: null },
      { frames: raw('[1, 2, 3]'), code: 'bad_message', id: null },
      { frames: raw('{"v": 1, "type": "request", "id": "g1"}'), code: 'bad_message', id: 'g1' },
      { frames: raw('{"v": 2, "type": "request", "id": "g2", "action": "x"}'), code: 'unsupported_version', id: 'g2' },
      { frames: raw('{"v": "1", "type": "ping"}'), code: 'bad_message', id: null },
      { frames: raw('{"v": 1, "type": "telepathy", "id": "g3"}'), code: 'bad_message', id: 'g3' },
      { frames: raw(`{"v": 1, "type": "event", "action": "a", "payload": ${'['.repeat(100)}${']'.repeat(100)}}`), code: 'bad_message', id: null },
      { frames: raw('{"v": 1, "type": "request", "id": "g4", "action": "echo", "payload": {"$attachment": 3}}'), code: 'bad_message', id: 'g4' },
      { frames: raw('{"v": 1, "type": "event"}'), code: 'bad_message', id: null },
      { frames: raw('{"v": 1, "type": "response", "id": "g5", "ok": "yes"}'), code: 'bad_message', id: 'g5' },
      { frames: raw('{"v": 1, "type": "progress", "id": "g6", "seq": 0}'), code: 'bad_message', id: 'g6' },
      // Only a peer says hello (SPEC 7.5, step 8).
      { frames: raw('{"v": 1, "type": "hello", "peer": "confused-host"}'), code: 'bad_message', id: null },
    ];
    for (const { frames, code, id } of cases) {
      host.sendFrames(frames);
      const { body } = await host.nextOfType('response');
      assert.equal(body.ok, false);
      assert.equal(body.error.code, code, `${frames.map(String).join('|')}: ${body.error.message}`);
      assert.equal(body.id, id);
    }
    // Well-formed but unexpected messages are dropped without an answer.
    host.send({ v: 1, type: 'response', id: 'no-such-call', ok: true, result: 1 });
    host.send({ v: 1, type: 'progress', id: 'no-such-call', seq: 1, payload: 1 });
    host.send({ v: 1, type: 'ping' });
    assert.equal((await host.next((b) => b?.type === 'response' || b?.type === 'pong')).body.type, 'pong');
    // And the session still works both ways.
    const result = peer.call('echo', 'still alive');
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: body.payload });
    assert.equal(await result, 'still alive');
  });
  test('an unreadable response to a pending call fails that call at once with bad_message', async (t) => {
    const { host, peer } = await setup(t);
    const started = Date.now();
    const result = peer.call('echo', 1, { timeout: 20_000 });
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { $attachment: 0 } }); // no attachment frame
    await assert.rejects(result, expectCode('bad_message'));
    assert.ok(Date.now() - started < 10_000, 'not at the deadline');
    const { body: answer } = await host.nextOfType('response');
    assert.equal(answer.id, body.id);
    assert.equal(answer.error.code, 'bad_message');
  });
});

describe('peer: losing the host', () => {
  test('3 x heartbeat of silence fails pending calls with peer_lost, and a fresh hello follows when the host is back', async (t) => {
    const { host, peer } = await setup(t, { peer: { heartbeatMs: 100 }, welcome: { heartbeat_ms: 100, session: 'old' } });
    const started = Date.now();
    const lost = assert.rejects(within(peer.call('sleep', { ms: 60_000 }, { timeout: 30_000 }), 5000, 'peer_lost'), expectCode('peer_lost'));
    await host.nextOfType('request');
    await host.nextOfType('ping'); // nothing sent for heartbeat_ms: the peer pings
    await lost;
    assert.ok(Date.now() - started >= 290, 'not before 3 x heartbeat_ms');
    assert.equal(peer.connected, false);
    host.send({ v: 1, type: 'pong' }); // the host is heard from again
    const hello = await host.welcome({ heartbeat_ms: 100, session: 'new' });
    assert.equal(hello.session, undefined, 'a fresh session, not a resumption');
    const again = peer.call('echo', 2);
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 2 });
    assert.equal(await again, 2);
    assert.equal(peer.session, 'new');
  });

  test('a host that keeps talking is not lost, and pings are answered with pong', async (t) => {
    const { host, peer } = await setup(t, { peer: { heartbeatMs: 100 }, welcome: { heartbeat_ms: 100 } });
    for (let i = 0; i < 8; i += 1) {
      host.send({ v: 1, type: 'ping' });
      await host.nextOfType('pong');
      await new Promise((resolve) => setTimeout(resolve, 60));
    }
    assert.equal(peer.connected, true, 'still in session after 4+ heartbeat periods');
  });

  test('bye from the host fails pending calls with peer_lost and cancels its requests', async (t) => {
    let signal;
    const { host, peer } = await setup(t, {
      peer: { actions: { wait: (payload, ctx) => { signal = ctx.signal; return new Promise(() => {}); } } },
    });
    const lost = assert.rejects(peer.call('sleep', { ms: 60_000 }), expectCode('peer_lost'));
    await host.nextOfType('request');
    host.send({ v: 1, type: 'request', id: 'r-bye', action: 'wait', payload: null });
    await within((async () => { while (!signal) await new Promise((r) => setTimeout(r, 5)); })(), 5000, 'the handler to start');
    host.send({ v: 1, type: 'bye' });
    await lost;
    assert.equal(signal.aborted, true);
    assert.equal(signal.reason.code, 'peer_lost');
  });

  test('a broken connection fails pending calls with peer_lost; after the host restarts the peer says hello afresh', async (t) => {
    const first = await FakeHost.start(transports.ipc());
    const endpoint = first.endpoint;
    const peer = new Peer(endpoint, { name: 'survivor', log: () => {}, reconnectIvl: 20, reconnectIvlMax: 200 });
    t.after(() => peer.close());
    const connecting = peer.connect();
    await first.welcome({ session: 'one' });
    await connecting;
    const lost = assert.rejects(within(peer.call('sleep', { ms: 60_000 }), 5000, 'peer_lost'), expectCode('peer_lost'));
    await first.nextOfType('request');
    await first.stop();
    await lost;

    const second = await FakeHost.start(endpoint);
    t.after(() => second.stop());
    const hello = await second.welcome({ session: 'two' });
    assert.equal(hello.session, undefined);
    const result = peer.call('echo', 'again');
    const { body } = await second.nextOfType('request');
    second.send({ v: 1, type: 'response', id: body.id, ok: true, result: body.payload });
    assert.equal(await result, 'again');
    assert.equal(peer.session, 'two');
  });
});

describe('peer: resuming and names (SPEC 1.2)', () => {
  const TOKEN = 'a1'.repeat(32);
  const OTHER_TOKEN = '7e'.repeat(32);
  const nameTaken = { v: 1, type: 'response', id: null, ok: false, error: { code: 'name_taken', message: 'the name is held by another live session' } };

  /** Answers every hello with name_taken until stopped; returns how many it refused. */
  function refuseNames(host) {
    const refuser = { refused: 0, stopped: false };
    (async () => {
      while (!refuser.stopped) {
        const hello = await host.nextOfType('hello').catch(() => null);
        if (!hello || refuser.stopped) return;
        host.send(nameTaken);
        refuser.refused += 1;
      }
    })();
    return refuser;
  }

  test('after a loss the hello resumes the last session with its token; what the peer gave up is cancelled in it', async (t) => {
    let signal;
    const { host, peer, hello: first } = await setup(t, {
      peer: { actions: { wait: (payload, ctx) => { signal = ctx.signal; return new Promise(() => {}); } } },
      welcome: { session: 'keep', resume_token: TOKEN },
    });
    assert.equal(first.resume_token, undefined, 'nothing to resume on the first hello');
    const lost = assert.rejects(peer.call('sleep', { ms: 60_000 }), expectCode('peer_lost'));
    const { body: ours } = await host.nextOfType('request');
    host.send({ v: 1, type: 'request', id: 'h-wait', action: 'wait', payload: null });
    await within((async () => { while (!signal) await new Promise((r) => setTimeout(r, 5)); })(), 5000, 'the handler to start');
    host.send({ v: 1, type: 'bye' });
    await lost;

    const hello = await host.welcome({ session: 'keep', resume_token: TOKEN });
    assert.equal(hello.session, 'keep');
    assert.equal(hello.resume_token, TOKEN);
    assert.equal(peer.session, 'keep');
    // The host kept the session and its calls: its request gets its one response, ours is cancelled.
    const { body: answer } = await host.next((b) => b?.type === 'response' && b.id === 'h-wait', 10_000, 'the answer to h-wait');
    assert.equal(answer.error.code, 'cancelled');
    assert.equal((await host.nextOfType('cancel')).body.id, ours.id);
    assert.equal(signal.reason.code, 'peer_lost', 'the handler was aborted at the loss');
  });

  test('keeps the token of the session last welcomed into; after a welcome without one (a 1.1 host) it sends none', async (t) => {
    const { host, peer } = await setup(t, { welcome: { session: 'one', resume_token: TOKEN } });
    host.send({ v: 1, type: 'bye' });
    const second = await host.welcome({ session: 'two', resume_token: OTHER_TOKEN }); // not resumed: a new session
    assert.deepEqual([second.session, second.resume_token], ['one', TOKEN]);
    assert.equal(peer.session, 'two');
    peer.handle('late', async () => 1);
    const { body: update } = await host.nextOfType('hello');
    assert.deepEqual([update.session, update.resume_token], ['two', OTHER_TOKEN], 'a hello in session names it, with its token');

    host.send({ v: 1, type: 'bye' });
    const third = await host.welcome({ session: 'three' }); // no token: a host older than 1.2
    assert.deepEqual([third.session, third.resume_token], ['two', OTHER_TOKEN]);
    host.send({ v: 1, type: 'bye' });
    const fourth = await host.welcome({ session: 'four' });
    assert.equal(fourth.session, undefined, 'without a token there is nothing to resume: a fresh hello');
    assert.equal('resume_token' in fourth, false);
  });

  test('name_taken while connecting: the peer says hello again about a second later, and a later welcome connects', async (t) => {
    const host = await FakeHost.start(transports.tcp());
    t.after(() => host.stop());
    const { lines, log } = collectLog();
    const peer = new Peer(host.endpoint, { name: 'restarted', log, connectTimeout: 30_000, waitForName: true });
    t.after(() => peer.close());
    const connecting = peer.connect();
    const { body: first } = await host.nextOfType('hello');
    host.send(nameTaken);
    const refusedAt = Date.now();
    const { body: again } = await host.nextOfType('hello');
    const waited = Date.now() - refusedAt;
    assert.ok(waited >= 500 && waited < 10_000, `hello again after ${waited} ms`);
    assert.deepEqual(again, first, 'the same hello');
    assert.equal(peer.connected, false);
    host.send(host.welcomeBody({ session: 'finally', resume_token: TOKEN }));
    assert.equal(await within(connecting, 10_000, 'connect() to resolve'), peer);
    assert.equal(peer.session, 'finally');
    assert.equal(lines.filter((line) => line.includes('name_taken')).length, 1, lines.join('\n'));
  });

  test('name_taken until the connect timeout rejects connect() with name_taken', async (t) => {
    const host = await FakeHost.start(transports.tcp());
    t.after(() => host.stop());
    const refuser = refuseNames(host);
    t.after(() => { refuser.stopped = true; });
    const started = Date.now();
    await assert.rejects(within(connect(host.endpoint, { name: 'taken', connectTimeout: 2500, waitForName: true, log: () => {} }), 15_000, 'connect() to fail'),
      (error) => expectCode('name_taken')(error) && /held by another live session/.test(error.message) && /"taken"/.test(error.message));
    assert.ok(Date.now() - started >= 2400, 'not before the connect timeout');
    assert.ok(refuser.refused >= 2, `said hello ${refuser.refused} times`);
  });

  test('after a loss, name_taken is retried in the background until the host welcomes again', async (t) => {
    const { host, peer } = await setup(t, { welcome: { session: 'first', resume_token: TOKEN } });
    host.send({ v: 1, type: 'bye' });
    const { body: resume } = await host.nextOfType('hello');
    assert.equal(resume.resume_token, TOKEN);
    host.send(nameTaken);
    await host.nextOfType('hello');
    host.send(nameTaken);
    await assert.rejects(peer.call('echo', 1), expectCode('peer_lost'), 'still lost meanwhile');
    await host.welcome({ session: 'second', resume_token: OTHER_TOKEN });
    assert.equal(peer.connected, true);
    assert.equal(peer.session, 'second');
  });

  test('the token never appears in log output, nor on the peer object', async (t) => {
    const { host, peer, logs } = await setup(t, { welcome: { session: 'secret-keeper', resume_token: TOKEN } });
    host.send({ v: 1, type: 'bye' });
    await host.nextOfType('hello');
    host.send(nameTaken);
    await host.welcome({ session: 'secret-keeper', resume_token: TOKEN });
    // A welcome whose token is malformed is refused without repeating it.
    const malformed = `${TOKEN.slice(0, 63)}G`;
    host.send(host.welcomeBody({ resume_token: malformed }));
    await host.nextOfType('response');
    assert.ok(logs.some((line) => line.includes('resume_token')), logs.join('\n'));
    for (const secret of [TOKEN, malformed]) {
      assert.equal(logs.filter((line) => line.includes(secret)).length, 0, logs.join('\n'));
      assert.equal(inspect(peer, { depth: 3 }).includes(secret), false, 'not in inspect()');
      assert.equal(String(peer).includes(secret), false);
      assert.equal(Object.values(peer).some((value) => value === secret), false);
    }
  });
});
