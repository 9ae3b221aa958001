// The Node peer against the real conformance host (`zerobridge serve --conformance`), over tcp and
// ipc. When the host binary is missing, every test here fails with a message saying where it looked.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, BridgeError } from '../index.js';
import { ConformanceHost, transports, within, delay, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

const expectCode = (code) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  return true;
};

const CONFORMANCE_ACTIONS = ['add', 'broadcast', 'callPeer', 'callback', 'count', 'countJob', 'echo', 'emit', 'evaluate', 'fail', 'once', 'sleep'];

/** Collects the peer's log lines so a test can assert that nothing went wrong quietly. */
function collectLog() {
  const lines = [];
  return { lines, log: (level, message) => lines.push(`${level}: ${message}`) };
}

/** Memoizes an async factory (a failure is remembered too, so each test reports it). */
function lazy(factory) {
  let promise;
  return () => {
    promise ??= factory();
    return promise;
  };
}

// Handlers the host reaches through its `callback` action.
let lastSlowSignal = null;
const handlers = {
  greet: async (payload) => `hello ${payload.name}`,
  explode: async () => { throw new Error('kaboom'); },
  strict: async () => { throw new BridgeError('invalid_payload', 'strict wants more', { data: { field: 'x' } }); },
  slow: (payload, ctx) => {
    lastSlowSignal = ctx.signal;
    return new Promise((resolve) => setTimeout(() => resolve('too late'), payload.ms));
  },
};

for (const transport of ['tcp', 'ipc']) {
  describe(`conformance host over ${transport}`, () => {
    const hostLog = collectLog();
    const getHost = lazy(() => ConformanceHost.start(transports[transport]()));
    const getPeer = lazy(async () => connect((await getHost()).endpoint, { name: `node-${transport}`, actions: handlers, timeout: 10_000, log: hostLog.log }));
    after(async () => {
      const peer = await getPeer().catch(() => null);
      await peer?.close();
      const host = await getHost().catch(() => null);
      await host?.stop();
    });

    test('welcome: host name, actions, heartbeat and limits as the decisions say', async () => {
      const peer = await getPeer();
      assert.equal(peer.host, 'conformance');
      assert.equal(typeof peer.session, 'string');
      for (const action of CONFORMANCE_ACTIONS.filter((a) => a !== 'once')) assert.ok(peer.hostActions.includes(action), action);
      assert.equal(peer.heartbeatMs, 5000);
      assert.deepEqual(peer.limits, { max_message_bytes: 1048576, max_in_flight: 256 });
    });

    test('echo returns the payload unchanged', async () => {
      const peer = await getPeer();
      const payloads = [null, 0, -1.5, 42, true, 'unicode ✓ 😀', [], {}, { nested: { list: [1, 'two', null, { three: 3 }] } }, 'x'.repeat(900_000)];
      for (const payload of payloads) assert.deepEqual(await peer.call('echo', payload), payload);
    });

    test('add adds; integers stay integers; a bad payload is invalid_payload', async () => {
      const peer = await getPeer();
      const three = await peer.call('add', { a: 1, b: 2 });
      assert.equal(three, 3);
      assert.ok(Number.isInteger(three));
      assert.equal(await peer.call('add', { a: 0.5, b: 0.25 }), 0.75);
      assert.equal(await peer.call('add', { a: -7, b: 7 }), 0);
      await assert.rejects(peer.call('add', { a: 'x', b: 1 }), expectCode('invalid_payload'));
      await assert.rejects(peer.call('add', null), expectCode('invalid_payload'));
    });

    test('sleep answers slept_ms, and a call fails with timeout at its own deadline', async () => {
      const peer = await getPeer();
      assert.deepEqual(await peer.call('sleep', { ms: 20 }), { slept_ms: 20 });
      const started = Date.now();
      await assert.rejects(peer.call('sleep', { ms: 10_000 }, { timeout: 200 }), expectCode('timeout'));
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 190 && elapsed < 3000, `timed out after ${elapsed} ms`);
    });

    test('count streams progress 1..n in order before its result', async () => {
      const peer = await getPeer();
      const call = peer.stream('count', { n: 50 });
      const seen = [];
      for await (const p of call.progress) seen.push(p);
      assert.deepEqual(seen, Array.from({ length: 50 }, (_, k) => ({ i: k + 1, n: 50 })));
      assert.deepEqual(await call.result, { n: 50 });
      const slow = peer.stream('count', { n: 3, delay_ms: 20 });
      const order = [];
      for await (const p of slow.progress) order.push(p.i);
      assert.deepEqual(order, [1, 2, 3]);
      assert.deepEqual(await peer.call('count', { n: 4 }), { n: 4 }, 'without a stream, just the result');
    });

    test('fail is handler_error with the given message', async () => {
      const peer = await getPeer();
      await assert.rejects(peer.call('fail', { message: 'on purpose' }), (e) => expectCode('handler_error')(e) && e.message === 'on purpose');
    });

    test('callback calls our handlers and passes on their results and error codes', async () => {
      const peer = await getPeer();
      assert.equal(await peer.call('callback', { action: 'greet', payload: { name: 'swift' } }), 'hello swift');
      await assert.rejects(peer.call('callback', { action: 'explode', payload: null }),
        (e) => expectCode('handler_error')(e) && /kaboom/.test(e.message));
      await assert.rejects(peer.call('callback', { action: 'strict', payload: null }), expectCode('invalid_payload'));
      await assert.rejects(peer.call('callback', { action: 'not-served', payload: null }), expectCode('unknown_action'));
      assert.deepEqual((await peer.call('callback', { action: '$actions', payload: null })).sort(), Object.keys(handlers).sort(),
        'the host can ask our $actions');
    });

    test('a handler registered after connect is announced by a new hello and reachable, in the same session', async () => {
      const peer = await getPeer();
      const session = peer.session;
      await assert.rejects(peer.call('callback', { action: 'late', payload: null }), expectCode('unknown_action'));
      const remove = peer.handle('late', async (payload) => ({ late: payload }));
      try {
        assert.deepEqual(await peer.call('callback', { action: 'late', payload: 7 }), { late: 7 });
        assert.equal(peer.session, session, 'the new hello resumed the session');
      } finally {
        remove();
      }
      await assert.rejects(peer.call('callback', { action: 'late', payload: null }), expectCode('unknown_action'));
    });

    test('callback with timeout_ms: our handler is aborted and the host passes on timeout', async () => {
      const peer = await getPeer();
      await assert.rejects(peer.call('callback', { action: 'slow', payload: { ms: 2000 }, timeout_ms: 100 }), expectCode('timeout'));
      // The host's answer and our own deadline race: wait for the abort rather than expect it done.
      const signal = lastSlowSignal;
      if (!signal.aborted) await within(new Promise((resolve) => signal.addEventListener('abort', resolve)), 3000, 'the handler to be aborted');
      assert.ok(['timeout', 'cancelled'].includes(signal.reason.code), signal.reason.message);
    });

    test('$evaluate is refused by default (not_allowed), and the host runs no scripts itself', async () => {
      const peer = await getPeer();
      await assert.rejects(peer.call('evaluate', { script: 'return 1' }), expectCode('not_allowed'));
      await assert.rejects(peer.call('$evaluate', { script: 'return 1', arguments: {} }), expectCode('not_allowed'));
    });

    test('$evaluate runs scripts when the peer turned evaluation on', async (t) => {
      const host = await getHost();
      const peer = await connect(host.endpoint, { name: `node-eval-${transport}`, evaluate: true, log: () => {} });
      t.after(() => peer.close());
      assert.equal(await peer.call('evaluate', { script: 'return a + b', arguments: { a: 1, b: 2 } }), 3);
      assert.deepEqual(await peer.call('evaluate', { script: 'await new Promise((r) => setTimeout(r, 5)); return { twice: x * 2 }', arguments: { x: 21 } }), { twice: 42 });
      assert.equal(await peer.call('evaluate', { script: 'return 7' }), 7, 'arguments are optional');
      await assert.rejects(peer.call('evaluate', { script: 'throw new Error("script failed")' }),
        (e) => expectCode('handler_error')(e) && /script failed/.test(e.message));
    });

    test('$evaluate goes to the evaluator the peer was given (a sandbox), with its arguments and the request signal', async (t) => {
      const host = await getHost();
      const seen = [];
      const evaluate = async (script, args, context) => {
        seen.push({ script, args, signal: context.signal instanceof AbortSignal });
        return { ranElsewhere: true };
      };
      const peer = await connect(host.endpoint, { name: `node-evaluator-${transport}`, evaluate, log: () => {} });
      t.after(() => peer.close());
      assert.deepEqual(await peer.call('evaluate', { script: 'return a', arguments: { a: 1 } }), { ranElsewhere: true });
      assert.deepEqual(seen, [{ script: 'return a', args: { a: 1 }, signal: true }]);
      await assert.rejects(peer.call('evaluate', { script: 'return 1', arguments: { 'not a name': 1 } }), expectCode('invalid_payload'));
      assert.equal(seen.length, 1, 'a payload $evaluate refuses never reaches the evaluator');
    });

    test('emit sends an event to our on() listener before its result', async () => {
      const peer = await getPeer();
      const received = [];
      const listener = (payload) => received.push(payload);
      peer.on('note', listener);
      try {
        assert.equal(await peer.call('emit', { action: 'note', payload: { text: 'from swift' } }), null);
        assert.deepEqual(received, [{ text: 'from swift' }]);
      } finally {
        peer.off('note', listener);
      }
    });

    test('post sends events the host takes without answering', async () => {
      const peer = await getPeer();
      const before = hostLog.lines.length;
      peer.post('note', { from: 'node' });
      peer.post('nobody-handles-this', 1);
      assert.equal(await peer.call('echo', 'after the events'), 'after the events');
      assert.deepEqual(hostLog.lines.slice(before).filter((l) => l.startsWith('warn')), [], 'no bad messages, no answers to events');
    });

    test('once: the first call may succeed or find the handler gone; later calls are handler_gone', async () => {
      const peer = await getPeer();
      try {
        await peer.call('once', { first: true });
      } catch (error) {
        expectCode('handler_gone')(error);
      }
      await assert.rejects(peer.call('once', { second: true }), expectCode('handler_gone'));
    });

    test('an unknown action is unknown_action', async () => {
      const peer = await getPeer();
      await assert.rejects(peer.call('no-such-action', null), expectCode('unknown_action'));
    });

    test('an AbortSignal cancels a call in flight', async () => {
      const peer = await getPeer();
      const controller = new AbortController();
      const started = Date.now();
      const call = peer.call('sleep', { ms: 10_000 }, { signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      await assert.rejects(call, expectCode('cancelled'));
      assert.ok(Date.now() - started < 3000);
      assert.equal(await peer.call('echo', 'next'), 'next');
    });

    test('200 concurrent calls from one peer all get their own answers', async () => {
      const peer = await getPeer();
      const calls = Array.from({ length: 200 }, (_, i) => (i % 2 === 0
        ? peer.call('echo', { i })
        : peer.call('add', { a: i, b: 1000 })));
      const results = await within(Promise.all(calls), 20_000, '200 calls');
      results.forEach((result, i) => assert.deepEqual(result, i % 2 === 0 ? { i } : i + 1000));
    });

    test('a message over max_message_bytes fails locally with too_large', async () => {
      const peer = await getPeer();
      await assert.rejects(peer.call('echo', 'x'.repeat(1048576)), expectCode('too_large'));
    });

    test('heartbeats: the host clamps the wish and keeps an idle session alive', async (t) => {
      const host = await getHost();
      const clamped = await connect(host.endpoint, { name: `node-hb-min-${transport}`, heartbeatMs: 10, log: () => {} });
      t.after(() => clamped.close());
      assert.equal(clamped.heartbeatMs, 50, 'a wish under 50 ms is clamped to 50');
      const idle = await connect(host.endpoint, { name: `node-hb-${transport}`, heartbeatMs: 60, log: () => {} });
      t.after(() => idle.close());
      assert.equal(idle.heartbeatMs, 60);
      const session = idle.session;
      await delay(600); // ten heartbeat periods with no calls: only pings and pongs
      assert.equal(idle.connected, true);
      assert.equal(idle.session, session, 'the same session throughout');
      assert.equal(await idle.call('echo', 'awake'), 'awake');
    });

    test('a call with timeout null waits past the peer default; one without uses the default', async (t) => {
      const host = await getHost();
      const peer = await connect(host.endpoint, { name: `node-null-timeout-${transport}`, timeout: 300, log: () => {} });
      t.after(() => peer.close());
      assert.deepEqual(await peer.call('sleep', { ms: 600 }, { timeout: null }), { slept_ms: 600 });
      await assert.rejects(peer.call('sleep', { ms: 600 }), expectCode('timeout'));
    });

    test('bytes in a payload come back from echo as bytes', async () => {
      const peer = await getPeer();
      const result = await peer.call('echo', { blob: Buffer.from([1, 2, 3]) }, { timeout: 2000 });
      assert.ok(Buffer.isBuffer(result.blob));
      assert.deepEqual([...result.blob], [1, 2, 3]);
    });
  });

  describe(`conformance host lifecycle over ${transport}`, () => {
    test('a host killed mid-call fails the call with peer_lost; a restarted host gets a fresh hello', async (t) => {
      const first = await ConformanceHost.start(transports[transport]());
      t.after(() => first.kill());
      const peer = await connect(first.endpoint, { name: `node-kill-${transport}`, log: () => {}, reconnectIvl: 20, reconnectIvlMax: 200 });
      t.after(() => peer.close());
      const firstSession = peer.session;
      const lost = assert.rejects(within(peer.call('sleep', { ms: 30_000 }), 10_000, 'peer_lost'), expectCode('peer_lost'));
      await delay(100); // let the request reach the host
      await first.kill();
      await lost;

      const second = await ConformanceHost.start(first.endpoint); // the same address again
      t.after(() => second.stop());
      await within((async () => { while (!peer.connected) await delay(20); })(), 10_000, 'the peer to be welcomed by the new host');
      assert.notEqual(peer.session, firstSession);
      assert.equal(await peer.call('echo', 'second life'), 'second life');
    });

    test('a broken connection is resumed with the token, the same session; until the peer leaves, its name is taken', async (t) => {
      const host = await ConformanceHost.start(transports[transport]());
      t.after(() => host.stop());
      const name = `node-resume-${transport}`;
      const { lines, log } = collectLog();
      const peer = await connect(host.endpoint, { name, actions: handlers, log, reconnectIvl: 20 });
      t.after(() => peer.close());
      const session = peer.session;
      peer.dealer.socket.destroy(); // the connection breaks; the host keeps the session for its peer to resume
      await within((async () => { while (!lines.some((l) => /lost the host/.test(l)) || !peer.connected) await delay(10); })(),
        10_000, 'the peer to lose the host and be welcomed again');
      assert.equal(peer.session, session, 'resumed, not a new session');
      assert.equal(await peer.call('callback', { action: 'greet', payload: { name: 'again' } }), 'hello again', 'the host reaches it over the new connection');

      // Its name is taken: a newcomer is refused at once, and one that asks to wait for it, at its connect timeout.
      await assert.rejects(connect(host.endpoint, { name, log: () => {} }),
        (e) => expectCode('name_taken')(e) && /held by another live session/.test(e.message));
      const started = Date.now();
      await assert.rejects(connect(host.endpoint, { name, connectTimeout: 1500, waitForName: true, log: () => {} }),
        (e) => expectCode('name_taken')(e) && /held by another live session/.test(e.message));
      assert.ok(Date.now() - started >= 1400, 'refused until the connect timeout');
      await peer.close(); // bye: the session ends and frees the name
      const successor = await connect(host.endpoint, { name, timeout: 10_000, log: () => {} });
      t.after(() => successor.close());
      assert.notEqual(successor.session, session);
      assert.ok(lines.every((l) => !l.includes('name_taken')), lines.join('\n'));
    });

    test('a host shutting down (SIGTERM) answers or cancels what is in flight, says bye and is lost', async (t) => {
      const host = await ConformanceHost.start(transports[transport]());
      t.after(() => host.kill());
      const { lines, log } = collectLog();
      const peer = await connect(host.endpoint, { name: `node-term-${transport}`, log });
      t.after(() => peer.close());
      const inFlight = peer.call('sleep', { ms: 300 }, { timeout: 10_000 }).then(
        (result) => ({ result }),
        (error) => ({ error }),
      );
      await delay(50);
      await host.stop();
      const outcome = await within(inFlight, 10_000, 'the call in flight to settle');
      if (outcome.error) assert.ok(['cancelled', 'peer_lost'].includes(outcome.error.code), outcome.error.message);
      else assert.deepEqual(outcome.result, { slept_ms: 300 });
      await within((async () => { while (peer.connected) await delay(10); })(), 5000, 'the peer to notice');
      assert.ok(lines.some((l) => /said bye/.test(l)), `the host said bye:\n${lines.join('\n')}`);
    });
  });
}
