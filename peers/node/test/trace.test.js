// W3C trace context (SPEC 7.18) through the real Swift conformance host: a handler sees the trace its request or
// event arrived with, and the calls it makes carry it (AsyncLocalStorage), through awaits; nothing leaks outside.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, withTrace, currentTrace } from '../index.js';
import { ConformanceHost, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

test('a handler sees the trace it was called in, and the calls it makes carry it', async () => {
  const host = await ConformanceHost.start();
  const peer = await connect(host.endpoint, { name: 'node-traced' });
  try {
    const seen = { outer: [], inner: [], note: [] };
    peer.handle('outer', async (payload, ctx) => {
      seen.outer.push([ctx.traceparent, ctx.tracestate]);
      await new Promise((resolve) => setTimeout(resolve, 5)); // the context survives a timer and an await
      await peer.call('emit', { action: 'note', payload: 1 });
      return peer.call('callback', { action: 'inner' });
    });
    peer.handle('inner', async (payload, ctx) => {
      seen.inner.push([ctx.traceparent, ctx.tracestate]);
      return 'done';
    });
    const noted = new Promise((resolve) => {
      peer.on('note', (payload, ctx) => {
        seen.note.push([ctx.traceparent, ctx.tracestate]);
        resolve();
      });
    });

    const result = await withTrace({ traceparent: TRACEPARENT, tracestate: 'rojo=1' }, async () => {
      assert.deepEqual(currentTrace(), { traceparent: TRACEPARENT, tracestate: 'rojo=1' });
      return peer.call('callback', { action: 'outer' });
    });
    assert.equal(result, 'done');
    await noted;
    assert.equal(currentTrace(), null);
    assert.equal(await peer.call('callback', { action: 'inner' }), 'done'); // outside any trace: none sent

    assert.deepEqual(seen, {
      outer: [[TRACEPARENT, 'rojo=1']],
      inner: [[TRACEPARENT, 'rojo=1'], [null, null]],
      note: [[TRACEPARENT, 'rojo=1']],
    });
  } finally {
    await peer.close();
    await host.stop();
  }
});

test('withTrace refuses a traceparent that is not valid and drops a tracestate that is not', () => {
  for (const bad of [undefined, '', 'garbage', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, TRACEPARENT.toUpperCase()]) {
    assert.throws(() => withTrace({ traceparent: bad }, () => {}), TypeError);
  }
  assert.deepEqual(withTrace({ traceparent: TRACEPARENT, tracestate: 'Bad Key=1' }, currentTrace), { traceparent: TRACEPARENT });
});
