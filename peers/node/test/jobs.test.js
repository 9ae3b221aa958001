// Jobs (SPEC 7.16) in the Node peer: request.idempotency_key on the wire; startJob/attachJob/cancelJob/listJobs, their
// payloads, records in camelCase, stream.lastSeq and detaching, first against a host in this process
// (test-helpers/router-host.js) that shows exactly what goes on the wire; then end to end against the Swift conformance
// host's countJob, a kill -9 of that host on its journal included, and a reader that re-attaches 30 times.

import { describe, test, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { connect, BridgeError } from '../index.js';
import { decode, bodies, encode } from '../src/wire.js';
import { ERROR_CODES } from '../src/errors.js';
import { welcomedPeer } from '../test-helpers/router-host.js';
import { ConformanceHost, repoRoot, within, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

const frames = (text) => [Buffer.alloc(0), Buffer.from(text, 'utf8')];
const REQUEST = { v: 1, type: 'request', id: 'r1', action: 'countJob' };
const unique = (prefix) => `${prefix}-${randomBytes(6).toString('hex')}`;

const expectCode = (code) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  return true;
};

const expectTypeError = (pattern) => (error) => {
  assert.ok(error instanceof TypeError, `a TypeError, got ${error}`);
  assert.match(error.message, pattern);
  return true;
};

/** Resolves once `condition()` (which may be async) holds, checked every 20 ms, failing after `ms`. */
const until = (condition, ms, what) => within((async () => {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 20));
})(), ms, what);

/** The next `count` payloads of a stream's progress, each with the stream's lastSeq right after it was taken. */
async function take(call, count, ms = 30_000) {
  const taken = [];
  if (count === 0) return taken;
  // next() rather than for-await: leaving a for-await early would cancel the call, and the caller reads on.
  const progress = call.progress[Symbol.asyncIterator]();
  await within((async () => {
    while (taken.length < count) {
      const { value, done } = await progress.next();
      if (done) break;
      taken.push({ payload: value, seq: call.lastSeq });
    }
  })(), ms, `${count} progress messages`);
  return taken;
}

/** Every remaining payload of a stream's progress with its seq, then its result. */
async function drain(call, ms = 60_000) {
  return within((async () => {
    const taken = [];
    for await (const payload of call.progress) taken.push({ payload, seq: call.lastSeq });
    return { taken, result: await call.result };
  })(), ms, 'the stream to end');
}

const RECORD = { job: 'j1', action: 'countJob', state: 'running', last_seq: 0, runs: 1, created_ms: 1795430400000 };

describe('wire: request.idempotency_key', () => {
  const decodeBody = (body) => decode(frames(JSON.stringify(body)));

  test('1..128 code points (not UTF-16 units) is decoded and kept; anything else is bad_message naming the field', () => {
    for (const key of ['k', 'import-2026-11-24', 'k'.repeat(128), '🔑'.repeat(128)]) {
      assert.equal(decodeBody({ ...REQUEST, idempotency_key: key }).body.idempotency_key, key);
    }
    assert.equal('idempotency_key' in decodeBody(REQUEST).body, false, 'absent stays absent');
    for (const bad of ['', 'k'.repeat(129), '🔑'.repeat(129), 7, null, true, ['k'], { k: 1 }]) {
      const { error, id } = decodeBody({ ...REQUEST, idempotency_key: bad });
      assert.equal(error?.code, 'bad_message', JSON.stringify(bad));
      assert.match(error.message, /request\.idempotency_key/);
      assert.equal(id, 'r1', 'the id stays readable for the answer');
    }
  });

  test('bodies.request writes it when given and leaves it out otherwise', () => {
    const written = (key) => JSON.parse(encode(bodies.request('r1', 'countJob', null, undefined, false, undefined, key))[1]);
    assert.equal(written('retry-1').idempotency_key, 'retry-1');
    assert.equal('idempotency_key' in written(undefined), false);
  });

  test('errors.js knows the codes of SPEC 8, unknown_job and interrupted among them, as index.d.ts does', () => {
    const spec = readFileSync(path.join(repoRoot, 'protocol/SPEC.md'), 'utf8');
    const table = spec.slice(spec.indexOf('## 8. Error codes'), spec.indexOf('## 9. Sequence diagrams'));
    const specCodes = [...table.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    assert.deepEqual([...ERROR_CODES], specCodes);
    const declarations = readFileSync(path.join(repoRoot, 'peers/node/index.d.ts'), 'utf8');
    const union = declarations.slice(declarations.indexOf('export type BridgeErrorCode'), declarations.indexOf('(string & {})'));
    assert.deepEqual([...union.matchAll(/\| '([a-z_]+)'/g)].map((m) => m[1]).sort(), [...ERROR_CODES].sort());
  });
});

describe('jobs against a scripted host', () => {
  test('call and stream carry idempotencyKey as request.idempotency_key; without one the request has none', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'keys');
    const called = peer.call('countJob', { n: 1 }, { idempotencyKey: 'retry-1' });
    const { body: first } = await host.nextOfType('request');
    assert.equal(first.idempotency_key, 'retry-1');
    host.send({ v: 1, type: 'response', id: first.id, ok: true, result: { n: 1 } });
    assert.deepEqual(await called, { n: 1 });

    const streamed = peer.stream('countJob', { n: 1 }, { idempotencyKey: '🔑'.repeat(128) });
    const { body: second } = await host.nextOfType('request');
    assert.equal(second.idempotency_key, '🔑'.repeat(128), '128 code points are 256 UTF-16 units, and allowed');
    assert.equal(second.progress, true);
    host.send({ v: 1, type: 'response', id: second.id, ok: true, result: null });
    await streamed.result;

    const plain = peer.call('echo', 1);
    const { body: third } = await host.nextOfType('request');
    assert.equal(Object.hasOwn(third, 'idempotency_key'), false);
    host.send({ v: 1, type: 'response', id: third.id, ok: true, result: 1 });
    await plain;
  });

  test('an idempotencyKey that is not 1..128 characters is a TypeError, nothing sent', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'bad-keys');
    for (const bad of ['', 'k'.repeat(129), '🔑'.repeat(129), 7, null, '\ud800 lone']) {
      await assert.rejects(peer.call('countJob', null, { idempotencyKey: bad }), expectTypeError(/idempotencyKey must be a string of 1\.\.128/), String(bad));
      await assert.rejects(peer.stream('countJob', null, { idempotencyKey: bad }).result, expectTypeError(/idempotencyKey/), String(bad));
    }
    const marker = peer.call('echo', 'marker');
    const { body } = await host.nextOfType('request');
    assert.equal(body.payload, 'marker', 'the first request the host gets is the one after the refused ones');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 'marker' });
    await marker;
  });

  test('startJob sends $job.start {action, payload, key} and resolves with the record in camelCase', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'starter');
    const started = peer.startJob('countJob', { n: 3 }, { key: 'k1' });
    const { body } = await host.nextOfType('request');
    assert.equal(body.action, '$job.start');
    assert.deepEqual(body.payload, { action: 'countJob', payload: { n: 3 }, key: 'k1' });
    assert.equal(body.timeout_ms, 30_000, 'a start answers at once: the default timeout of calls');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { ...RECORD, key: 'k1', created: true, future_field: 1 } });
    assert.deepEqual(await started, { job: 'j1', action: 'countJob', key: 'k1', state: 'running', lastSeq: 0, runs: 1, createdMs: 1795430400000, created: true });

    const keyless = peer.startJob('countJob');
    const { body: second } = await host.nextOfType('request');
    assert.deepEqual(second.payload, { action: 'countJob', payload: null }, 'no key member without a key');
    const finished = { ...RECORD, job: 'j2', state: 'failed', last_seq: 2, finished_ms: 1795430401000, error: { code: 'quota', message: 'no room', data: { left: 0 } }, created: true };
    host.send({ v: 1, type: 'response', id: second.id, ok: true, result: finished });
    assert.deepEqual(await keyless, {
      job: 'j2', action: 'countJob', state: 'failed', lastSeq: 2, runs: 1, createdMs: 1795430400000, finishedMs: 1795430401000,
      error: { code: 'quota', message: 'no room', data: { left: 0 } }, created: true,
    });
  });

  test('an answer that is not a job record (job.schema.json) is bad_message saying what is wrong', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'bad-records');
    const withoutJob = { ...RECORD };
    delete withoutJob.job;
    const cases = [
      [null, /not an object/],
      [withoutJob, /job must be/],
      [{ ...RECORD, state: 'sleeping' }, /state must be one of/],
      [{ ...RECORD, last_seq: -1 }, /last_seq/],
      [{ ...RECORD, runs: 0 }, /runs/],
      [{ ...RECORD, created_ms: '2026' }, /created_ms/],
      [{ ...RECORD, key: '' }, /key/],
      [{ ...RECORD, created: 'yes' }, /created must be a boolean/],
      [{ ...RECORD, finished_ms: 5 }, /a running job has no finished_ms/],
      [{ ...RECORD, state: 'succeeded' }, /a succeeded job needs finished_ms/],
      [{ ...RECORD, state: 'succeeded', finished_ms: 5, error: { code: 'x', message: '' } }, /a succeeded job has no error/],
      [{ ...RECORD, state: 'interrupted', finished_ms: 5 }, /an? interrupted job needs error/],
      [{ ...RECORD, state: 'failed', finished_ms: 5, error: { code: 'x' } }, /error must be \{code, message, data\?\}/],
    ];
    for (const [result, why] of cases) {
      const started = peer.startJob('countJob');
      const { body } = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: body.id, ok: true, result });
      await assert.rejects(started, (error) => expectCode('bad_message')(error) && /\$job\.start result is not a job record/.test(error.message)
        && why.test(error.message), JSON.stringify(result));
    }
    for (const [result, why] of [[[], /not \{"jobs": \[\.\.\.\]\}/], [{ jobs: [RECORD, { ...RECORD, runs: 1.5 }] }, /jobs\[1\]\).*runs/]]) {
      const listed = peer.listJobs();
      const { body } = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: body.id, ok: true, result });
      await assert.rejects(listed, (error) => expectCode('bad_message')(error) && why.test(error.message), JSON.stringify(result));
    }
  });

  test('attachJob: $job.attach with progress and no timeout by default; progress in the job\'s seq; lastSeq starts at afterSeq', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'attacher');
    const call = peer.attachJob({ job: 'j1' }, { afterSeq: 4 });
    assert.equal(call.lastSeq, 4, 'before any progress: where it attached');
    const { body } = await host.nextOfType('request');
    assert.equal(body.action, '$job.attach');
    assert.deepEqual(body.payload, { job: 'j1', after_seq: 4 });
    assert.equal(body.progress, true);
    assert.equal(Object.hasOwn(body, 'timeout_ms'), false, 'an attach waits as long as the job runs');
    assert.equal(Object.hasOwn(body, 'deadline'), false);
    for (const seq of [5, 6, 7]) host.send({ v: 1, type: 'progress', id: body.id, seq, payload: { i: seq } });
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { n: 7 } });
    const { taken, result } = await drain(call);
    assert.deepEqual(taken, [5, 6, 7].map((seq) => ({ payload: { i: seq }, seq })));
    assert.deepEqual(result, { n: 7 });
    assert.equal(call.lastSeq, 7);

    const byKey = peer.attachJob({ action: 'countJob', key: 'k1' }, { timeout: 2500 });
    const { body: second } = await host.nextOfType('request');
    assert.deepEqual(second.payload, { action: 'countJob', key: 'k1', after_seq: 0 });
    assert.equal(second.timeout_ms, 2500, 'a timeout of its own goes on the wire');
    assert.equal(byKey.lastSeq, 0);
    host.send({ v: 1, type: 'response', id: second.id, ok: true, result: null });
    assert.equal(await byKey.result, null);
  });

  test('progress at or below afterSeq is dropped and logged: a reader never gets a seq twice', async (t) => {
    const { host, peer, logs } = await welcomedPeer(t, 'replayed');
    const call = peer.attachJob({ job: 'j1' }, { afterSeq: 4 });
    const { body } = await host.nextOfType('request');
    for (const seq of [3, 4, 5]) host.send({ v: 1, type: 'progress', id: body.id, seq, payload: seq });
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: null });
    assert.deepEqual((await drain(call)).taken, [{ payload: 5, seq: 5 }]);
    assert.equal(logs.filter((line) => /dropped progress/.test(line)).length, 2, logs.join('\n'));
  });

  test('lastSeq counts the progress the reader took, not what arrived: re-attaching after it loses nothing', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'slow-reader');
    const call = peer.attachJob({ job: 'j1' });
    const { body } = await host.nextOfType('request');
    for (const seq of [1, 2, 3]) host.send({ v: 1, type: 'progress', id: body.id, seq, payload: seq });
    // Once the host's ping is answered, the three progress messages before it have arrived.
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(call.lastSeq, 0, 'three arrived, none taken');
    assert.deepEqual(await take(call, 1), [{ payload: 1, seq: 1 }]);
    assert.equal(call.lastSeq, 1, 'the reader left after the first: seqs 2 and 3 are for its next attach');
  });

  test('aborting an attach detaches: a cancel for the attach request, the stream rejects with cancelled', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'detacher');
    const controller = new AbortController();
    const call = peer.attachJob({ job: 'j1' }, { signal: controller.signal });
    const { body } = await host.nextOfType('request');
    host.send({ v: 1, type: 'progress', id: body.id, seq: 1, payload: 1 });
    assert.deepEqual(await take(call, 1), [{ payload: 1, seq: 1 }]);
    controller.abort();
    await assert.rejects(call.result, expectCode('cancelled'));
    const { body: cancel } = await host.nextOfType('cancel');
    assert.equal(cancel.id, body.id, 'the attach request is cancelled, nothing else: the host keeps the job');
  });

  test('cancelJob and listJobs send their payloads and resolve with records', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'canceller');
    const cancelled = { ...RECORD, state: 'cancelled', finished_ms: 1795430402000, error: { code: 'cancelled', message: 'cancelled by $job.cancel' } };
    for (const [selector, payload] of [[{ job: 'j1' }, { job: 'j1' }], [{ action: 'countJob', key: 'k1' }, { action: 'countJob', key: 'k1' }]]) {
      const pending = peer.cancelJob(selector);
      const { body } = await host.nextOfType('request');
      assert.equal(body.action, '$job.cancel');
      assert.deepEqual(body.payload, payload);
      host.send({ v: 1, type: 'response', id: body.id, ok: true, result: cancelled });
      assert.deepEqual(await pending, {
        job: 'j1', action: 'countJob', state: 'cancelled', lastSeq: 0, runs: 1, createdMs: 1795430400000, finishedMs: 1795430402000,
        error: { code: 'cancelled', message: 'cancelled by $job.cancel' },
      });
    }
    for (const [filter, payload] of [[undefined, { limit: 100 }], [{ action: 'countJob', state: 'running', job: 'j1', limit: 5 }, { action: 'countJob', state: 'running', job: 'j1', limit: 5 }]]) {
      const pending = peer.listJobs(filter);
      const { body } = await host.nextOfType('request');
      assert.equal(body.action, '$job.list');
      assert.deepEqual(body.payload, payload);
      host.send({ v: 1, type: 'response', id: body.id, ok: true, result: { jobs: [{ ...RECORD, job: 'j2' }, RECORD] } });
      assert.deepEqual((await pending).map((record) => record.job), ['j2', 'j1'], 'in the host\'s order');
    }
  });

  test('selectors, afterSeq and filters the host would refuse are TypeErrors, nothing sent', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'refusals');
    const selectors = [
      [undefined, /takes \{ job \} or \{ action, key \}/], [null, /takes/], ['j1', /takes/], [{}, /neither was given/],
      [{ job: 'j1', action: 'countJob', key: 'k' }, /both were given/], [{ action: 'countJob' }, /key must be/], [{ key: 'k' }, /action must be/],
      [{ job: '' }, /job must be/], [{ job: 'x'.repeat(129) }, /job must be/], [{ action: 'countJob', key: '\udc00' }, /key must be/],
    ];
    for (const [selector, why] of selectors) {
      await assert.rejects(peer.attachJob(selector).result, expectTypeError(why), `attach ${JSON.stringify(selector)}`);
      await assert.rejects(peer.cancelJob(selector), expectTypeError(why), `cancel ${JSON.stringify(selector)}`);
    }
    for (const afterSeq of [-1, 1.5, '3', NaN, null, 2 ** 53]) {
      await assert.rejects(peer.attachJob({ job: 'j1' }, { afterSeq }).result, expectTypeError(/afterSeq must be an integer >= 0/), String(afterSeq));
    }
    const filters = [
      ['countJob', /takes \{ action\?, state\?, job\?, limit\? \}/], [{ state: 'sleeping' }, /state must be one of running, suspended, succeeded/],
      [{ limit: 0 }, /limit must be an integer in 1\.\.1000/], [{ limit: 1001 }, /limit/], [{ limit: 2.5 }, /limit/], [{ action: '' }, /action/],
    ];
    for (const [filter, why] of filters) await assert.rejects(peer.listJobs(filter), expectTypeError(why), JSON.stringify(filter));
    await assert.rejects(peer.startJob('', null), expectTypeError(/action must be/));
    await assert.rejects(peer.startJob('countJob', null, { key: 'k'.repeat(129) }), expectTypeError(/key must be/));
    const marker = peer.call('echo', 'marker');
    const { body } = await host.nextOfType('request');
    assert.equal(body.payload, 'marker', 'the first request the host gets is the one after the refused ones');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 'marker' });
    await marker;
  });

  test('unknown_job and interrupted reach the caller as BridgeErrors with their code', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'job-errors');
    const answers = [
      [() => peer.attachJob({ job: 'gone' }).result, 'unknown_job'],
      [() => peer.cancelJob({ job: 'gone' }), 'unknown_job'],
      [() => peer.attachJob({ action: 'countJob', key: 'k' }).result, 'interrupted'],
      [() => peer.call('countJob', null, { idempotencyKey: 'k' }), 'interrupted'],
    ];
    for (const [send, code] of answers) {
      const pending = send();
      const { body } = await host.nextOfType('request');
      host.send({ v: 1, type: 'response', id: body.id, ok: false, error: { code, message: `${code} from the host` } });
      await assert.rejects(pending, (error) => expectCode(code)(error) && error.message === `${code} from the host`);
    }
  });
});

// --- against the conformance host (zerobridge serve --conformance) ---------------------------------------------------

/** A conformance host on a journal file in a fresh folder (removed after the test), which the test may kill -9 and restart. */
async function hostOnJournal(t) {
  const folder = mkdtempSync(path.join(tmpdir(), 'zb-node-jobs-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  const holder = { host: await ConformanceHost.start('tcp://127.0.0.1:*', ['--journal', path.join(folder, 'journal.sqlite')]) };
  t.after(() => holder.host.stop());
  return holder;
}

// Progress the peers dropped for a seq at or below one already had (or below an attach's after_seq): a host that sends
// any breaks SPEC 7.16's "each once", even though the peer keeps its reader from seeing it twice.
const droppedProgress = [];
const noteDropped = (level, message) => {
  if (/dropped progress/.test(message)) droppedProgress.push(message);
};

/** A peer connected to `endpoint`, closed after the test; it reconnects quickly after a host restart. */
async function peerOf(t, endpoint, name) {
  const peer = await connect(endpoint, { name: unique(name), timeout: 20_000, reconnectIvl: 20, reconnectIvlMax: 500, log: noteDropped });
  t.after(() => peer.close());
  return peer;
}

describe('jobs on the conformance host', () => {
  let shared;
  const sharedHost = () => {
    shared ??= ConformanceHost.start('tcp://127.0.0.1:*');
    return shared;
  };
  after(async () => (await shared?.catch(() => null))?.stop());
  afterEach(() => {
    assert.deepEqual(droppedProgress.splice(0), [], 'the host sent no progress twice and none at or below after_seq');
  });

  test('countJob is served as a job: startJob, attachJob to the result, listJobs newest first', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-e2e');
    const record = await peer.startJob('countJob', { n: 5, delay_ms: 20 });
    assert.match(record.job, /^[0-9a-f]{32}$/);
    assert.equal(record.action, 'countJob');
    assert.ok(['running', 'succeeded'].includes(record.state), record.state);
    assert.equal(record.runs, 1);
    assert.equal(record.created, true);
    assert.ok(Number.isInteger(record.createdMs) && Math.abs(record.createdMs - Date.now()) < 60_000, `createdMs ${record.createdMs}`);
    assert.equal(record.key, undefined);

    const call = peer.attachJob({ job: record.job });
    const { taken, result } = await drain(call);
    assert.deepEqual(taken, [1, 2, 3, 4, 5].map((i) => ({ payload: { i, n: 5 }, seq: i })));
    assert.deepEqual(result, { n: 5 });

    const [listed] = await peer.listJobs({ job: record.job });
    assert.equal(listed.state, 'succeeded');
    assert.equal(listed.lastSeq, 5);
    assert.equal(listed.runs, 1);
    assert.ok(listed.finishedMs >= listed.createdMs);
    assert.equal(listed.created, undefined, 'created is for $job.start only');

    // A job started later is listed first.
    await until(() => Date.now() > listed.createdMs + 1, 5000, 'the clock to move past the first job');
    const later = await peer.startJob('countJob', { n: 1 });
    const newest = await peer.listJobs({ action: 'countJob', limit: 2 });
    assert.deepEqual(newest.map((r) => r.job), [later.job, record.job]);
    assert.ok((await peer.listJobs({ state: 'succeeded', limit: 1000 })).every((r) => r.state === 'succeeded'));
  });

  test('an idempotency key through call and stream: the retry attaches to the job it started instead of running it again', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-keys');
    const key = unique('retry');
    assert.deepEqual(await peer.call('countJob', { n: 3 }, { idempotencyKey: key }), { n: 3 });
    assert.deepEqual(await peer.call('countJob', { n: 50 }, { idempotencyKey: key }), { n: 3 }, 'the payload of a retry is not compared');
    const streamed = peer.stream('countJob', { n: 50 }, { idempotencyKey: key });
    const { taken, result } = await drain(streamed);
    assert.deepEqual(taken, [1, 2, 3].map((i) => ({ payload: { i, n: 3 }, seq: i })), 'the progress again, from the journal');
    assert.deepEqual(result, { n: 3 });
    const found = await peer.startJob('countJob', { n: 1 }, { key });
    assert.equal(found.created, false);
    assert.equal(found.key, key);
    assert.equal(found.runs, 1, 'run once');
    assert.equal(found.lastSeq, 3);
    const ofKey = (await peer.listJobs({ action: 'countJob', limit: 1000 })).filter((r) => r.key === key);
    assert.equal(ofKey.length, 1, 'a key never starts two jobs');
  });

  test('attach by action and key after a seq; lastSeq follows the job\'s seq', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-by-key');
    const key = unique('by-key');
    const started = await peer.startJob('countJob', { n: 6, delay_ms: 10 }, { key });
    assert.equal(started.created, true);
    const call = peer.attachJob({ action: 'countJob', key }, { afterSeq: 2 });
    assert.equal(call.lastSeq, 2);
    const { taken, result } = await drain(call);
    assert.deepEqual(taken, [3, 4, 5, 6].map((i) => ({ payload: { i, n: 6 }, seq: i })));
    assert.deepEqual(result, { n: 6 });
    assert.equal(call.lastSeq, 6);
  });

  test('aborting an attach only detaches: the job runs on until cancelJob, which ends it cancelled', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-detach');
    const { job } = await peer.startJob('countJob', { n: 100_000, delay_ms: 20 });
    const controller = new AbortController();
    const call = peer.attachJob({ job }, { signal: controller.signal });
    const [first] = await take(call, 1);
    assert.deepEqual(first, { payload: { i: 1, n: 100_000 }, seq: 1 });
    controller.abort();
    await assert.rejects(call.result, expectCode('cancelled'));
    const [detached] = await peer.listJobs({ job });
    assert.equal(detached.state, 'running');
    await until(async () => (await peer.listJobs({ job }))[0].lastSeq > detached.lastSeq + 2, 30_000, 'the job to report more progress after the detach');

    const cancelled = await peer.cancelJob({ job });
    assert.equal(cancelled.state, 'cancelled');
    assert.equal(cancelled.error.code, 'cancelled');
    assert.ok(Number.isInteger(cancelled.finishedMs));
    assert.deepEqual(await peer.cancelJob({ job }), cancelled, 'cancelling a finished job changes nothing');
    await assert.rejects(peer.attachJob({ job }, { timeout: 10_000 }).result, expectCode('cancelled'), 'its outcome, at once');
  });

  test('cancelJob answers every attach with the outcome', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-cancel');
    const key = unique('cancel');
    await peer.startJob('countJob', { n: 100_000, delay_ms: 20 }, { key });
    const attached = peer.attachJob({ action: 'countJob', key });
    await take(attached, 1);
    const record = await peer.cancelJob({ action: 'countJob', key });
    assert.equal(record.state, 'cancelled');
    await assert.rejects(within(attached.result, 10_000, 'the attach to be answered'), expectCode('cancelled'));
  });

  test('unknown_job for a job the host does not have; invalid_payload for an action not served as a job', async (t) => {
    const peer = await peerOf(t, (await sharedHost()).endpoint, 'job-unknown');
    await assert.rejects(peer.attachJob({ job: 'no-such-job' }).result, expectCode('unknown_job'));
    await assert.rejects(peer.attachJob({ action: 'countJob', key: unique('never-used') }).result, expectCode('unknown_job'));
    await assert.rejects(peer.cancelJob({ job: 'no-such-job' }), expectCode('unknown_job'));
    await assert.rejects(peer.startJob('echo', 1), expectCode('invalid_payload'));
    await assert.rejects(peer.call('countJob', { n: 'three' }), expectCode('invalid_payload'), 'the job fails with its handler\'s code');
    assert.deepEqual(await peer.listJobs({ job: 'no-such-job' }), []);
  });

  test('a host killed mid-job (kill -9): the job is interrupted and never run again; a checkpointed one resumes where the reader left', async (t) => {
    const holder = await hostOnJournal(t);
    const peer = await peerOf(t, holder.host.endpoint, 'job-restart');
    const plainKey = unique('plain');
    const plain = await peer.startJob('countJob', { n: 1000, delay_ms: 50 }, { key: plainKey });
    const { job: resumable } = await peer.startJob('countJob', { n: 12, delay_ms: 250, checkpoint: true });
    const beforeKill = peer.attachJob({ job: resumable });
    const seen = await take(beforeKill, 2);
    assert.deepEqual(seen, [1, 2].map((i) => ({ payload: { i, n: 12 }, seq: i })));
    const session = peer.session;

    holder.host = await holder.host.restarted();
    await assert.rejects(within(beforeKill.result, 20_000, 'the attach to fail'), expectCode('peer_lost'));
    await until(() => peer.connected && peer.session !== session, 30_000, 'the peer to be welcomed by the restarted host');

    const [interrupted] = await peer.listJobs({ job: plain.job });
    assert.equal(interrupted.state, 'interrupted');
    assert.equal(interrupted.error.code, 'interrupted');
    assert.equal(interrupted.runs, 1);
    await assert.rejects(peer.attachJob({ job: plain.job }).result, expectCode('interrupted'));
    await assert.rejects(peer.call('countJob', { n: 1 }, { idempotencyKey: plainKey }), expectCode('interrupted'), 'a retry gets the outcome, not a second run');

    const after = peer.attachJob({ job: resumable }, { afterSeq: beforeKill.lastSeq });
    const { taken, result } = await drain(after);
    assert.deepEqual(taken, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map((i) => ({ payload: { i, n: 12 }, seq: i })), 'each once, in order, across the restart');
    assert.deepEqual(result, { n: 12 });
    const [done] = await peer.listJobs({ job: resumable });
    assert.equal(done.state, 'succeeded');
    assert.equal(done.runs, 2, 'resumed from its checkpoint');
  });

  test('a reader that re-attaches 30 times, from a fresh peer each time, gets every progress exactly once, in order', async (t) => {
    const { endpoint } = await sharedHost();
    const n = 150;
    const starter = await peerOf(t, endpoint, 'reattach-starter');
    const { job } = await starter.startJob('countJob', { n, delay_ms: 20 });
    const seen = [];
    let lastSeq = 0;
    const note = (taken) => {
      for (const { payload, seq } of taken) {
        assert.deepEqual(payload, { i: seen.length + 1, n }, `after ${seen.length} progress messages`);
        assert.equal(seq, payload.i, 'seq is the job\'s: i');
        seen.push(seq);
      }
    };
    for (let round = 0; round < 30; round += 1) {
      const reader = await connect(endpoint, { name: unique(`reattach-${round}`), timeout: 20_000, log: noteDropped });
      try {
        const call = reader.attachJob({ job }, { afterSeq: lastSeq });
        note(await take(call, (round % 4) + 1));
        lastSeq = call.lastSeq;
      } finally {
        await reader.close();
      }
    }
    assert.equal(lastSeq, seen.length);
    const last = await peerOf(t, endpoint, 'reattach-last');
    const call = last.attachJob({ job }, { afterSeq: lastSeq });
    const { taken, result } = await drain(call);
    note(taken);
    assert.deepEqual(result, { n });
    assert.deepEqual(seen, Array.from({ length: n }, (_, k) => k + 1));
  });
  test('a graceful stop (SIGTERM) tells a checkpointed job\'s caller suspended, an unchecked one\'s interrupted; the next start resumes the first', async (t) => {
    const holder = await hostOnJournal(t);
    const peer = await peerOf(t, holder.host.endpoint, 'job-suspend');
    const { job: resumable } = await peer.startJob('countJob', { n: 1000, delay_ms: 50, checkpoint: true });
    const { job: plain } = await peer.startJob('countJob', { n: 1000, delay_ms: 50 });
    const attached = [peer.attachJob({ job: resumable }), peer.attachJob({ job: plain })];
    for (const call of attached) await take(call, 1);
    const stopping = holder.host.stop();
    await assert.rejects(within(attached[0].result, 20_000, 'the suspended job\'s answer'), expectCode('suspended'));
    await assert.rejects(within(attached[1].result, 20_000, 'the interrupted job\'s answer'), expectCode('interrupted'));
    await stopping;

    holder.host = await ConformanceHost.start(holder.host.endpoint, holder.host.extraArgs);
    const again = await peerOf(t, holder.host.endpoint, 'job-suspend-again');
    // The id proves ownership (SPEC 7.16); cancelling the running job answers with its record.
    const record = await again.cancelJob({ job: resumable });
    assert.equal(record.runs, 2, 'resumed from its checkpoint by the next start');
    assert.equal(record.state, 'cancelled');
    assert.equal((await again.cancelJob({ job: plain })).state, 'interrupted', 'a finished job is left as it is');
  });

  test('a job is its starter\'s: another peer neither lists it nor reaches it by its key; the same key starts its own', async (t) => {
    const { endpoint } = await sharedHost();
    const alice = await peerOf(t, endpoint, 'owner-alice');
    const bob = await peerOf(t, endpoint, 'owner-bob');
    const key = unique('owned');
    const started = await alice.startJob('countJob', { n: 100000, delay_ms: 20 }, { key });
    assert.deepEqual(await bob.listJobs(), []);
    await assert.rejects(bob.cancelJob({ action: 'countJob', key }), expectCode('unknown_job'));
    await assert.rejects(bob.attachJob({ action: 'countJob', key }).result, expectCode('unknown_job'));
    const own = await bob.startJob('countJob', { n: 1 }, { key });
    assert.ok(own.created && own.job !== started.job);
    assert.deepEqual((await alice.listJobs()).map((record) => record.job), [started.job]);
    assert.equal((await alice.cancelJob({ action: 'countJob', key })).state, 'cancelled');
  });
});
