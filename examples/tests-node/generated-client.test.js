// `zerobridge types --typescript`: the ES module client generated from a live conformance host imports, and calls
// every conformance action through a real Node peer (SPEC 7.8). Run with `node --test examples/tests-node/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { connect } from '../../peers/node/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const zerobridge = process.env.ZEROBRIDGE_BIN || path.join(root, '.build/debug/zerobridge');

/** `zerobridge types ARGUMENTS`: what it printed; fails the test when it fails. */
async function generate(...args) {
  const { stdout } = await promisify(execFile)(zerobridge, ['types', ...args], { timeout: 60_000 });
  return stdout;
}

/** A fresh folder, removed after the test. */
async function temporaryFolder(t) {
  const folder = await mkdtemp(path.join(tmpdir(), 'zb-generated-'));
  t.after(() => rm(folder, { recursive: true, force: true }));
  return folder;
}

/** A `zerobridge serve --conformance` on a free loopback port, and its endpoint once it is ready. */
async function startConformanceHost(t) {
  const host = spawn(zerobridge, ['serve', '--conformance', '--endpoint', 'tcp://127.0.0.1:*'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(async () => {
    if (host.exitCode === null) {
      host.kill('SIGTERM');
      await once(host, 'exit');
    }
  });
  for await (const line of createInterface({ input: host.stdout })) {
    if (line.startsWith('zerobridge ready ')) return line.slice('zerobridge ready '.length);
  }
  throw new Error(`${zerobridge} exited before it was ready`);
}

test('the generated client calls every conformance action through a Node peer', { timeout: 120_000 }, async (t) => {
  const endpoint = await startConformanceHost(t);
  const folder = await temporaryFolder(t);
  const base = path.join(folder, 'conformance-client');
  assert.match(await generate('--endpoint', endpoint, '--typescript', base), /ConformanceClient: 12 actions/);
  const declarations = await readFile(`${base}.d.ts`, 'utf8');
  assert.match(declarations, /countStream\(payload: CountPayload, options\?: CallOptions\): StreamingCall<CountProgress, CountResult>;/);

  const { CATALOGUE, ConformanceClient } = await import(pathToFileURL(`${base}.js`).href);
  const emitted = [];
  const peer = await connect(endpoint, {
    name: 'generated-client-test',
    evaluate: true,
    actions: { double: (payload) => payload * 2 },
  });
  try {
    peer.on('emitted', (payload) => emitted.push(payload));
    const client = new ConformanceClient(peer);
    assert.equal(client.peer, peer);
    assert.match(CATALOGUE, /^[0-9a-f]{64}$/);
    assert.equal(client.catalogueIsCurrent(), true);

    assert.equal(await client.add({ a: 2, b: 3 }), 5);
    assert.equal(await client.add({ a: 0.5, b: 2 }), 2.5);
    assert.deepEqual(await client.echo({ nested: [1, 'two', null] }), { nested: [1, 'two', null] });
    assert.equal(await client.echo(), null);
    assert.deepEqual(await client.sleep({ ms: 20 }), { slept_ms: 20 });
    assert.deepEqual(await client.sleep({ ms: 20 }, { timeout: Infinity }), { slept_ms: 20 });
    await assert.rejects(client.sleep({ ms: 5000 }, { timeout: 200 }), { code: 'timeout' });

    assert.deepEqual(await client.count({ n: 2 }), { n: 2 });
    const call = client.countStream({ n: 3, delay_ms: 5 });
    const steps = [];
    for await (const step of call.progress) steps.push(step);
    assert.deepEqual(steps, [{ i: 1, n: 3 }, { i: 2, n: 3 }, { i: 3, n: 3 }]);
    assert.deepEqual(await call.result, { n: 3 });
    // A job (SPEC 7.16): a second call with the same idempotency key attaches to the first one's job.
    const job = client.countJobStream({ n: 2 }, { idempotencyKey: 'generated-client' });
    const jobSteps = [];
    for await (const step of job.progress) jobSteps.push(step);
    assert.deepEqual([jobSteps, await job.result], [[{ i: 1, n: 2 }, { i: 2, n: 2 }], { n: 2 }]);
    assert.deepEqual(await client.countJob({ n: 99 }, { idempotencyKey: 'generated-client' }), { n: 2 });

    await assert.rejects(client.fail({ message: 'no such luck' }), { code: 'handler_error', message: /no such luck/ });
    assert.equal(await client.emit({ action: 'emitted', payload: { k: 1 } }), null);
    const deadline = Date.now() + 10_000;
    while (emitted.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(emitted, [{ k: 1 }]);
    assert.deepEqual(await client.broadcast({ action: 'emitted', payload: { k: 2 } }), { delivered: 1, skipped: 0 });
    while (emitted.length === 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.deepEqual(emitted, [{ k: 1 }, { k: 2 }]);
    assert.equal(await client.callback({ action: 'double', payload: 21 }), 42);
    assert.equal(await client.callPeer({ peer: 'generated-client-test', action: 'double', payload: 4 }), 8);
    await assert.rejects(client.callPeer({ peer: 'nobody-by-that-name', action: 'double' }), { code: 'peer_lost' });
    assert.equal(await client.evaluate({ script: 'return a * b', arguments: { a: 6, b: 7 } }), 42);

    assert.deepEqual(await client.once(), { called: true });
    await assert.rejects(client.once(), { code: 'handler_gone' });
  } finally {
    await peer.close(); // before the host stops, so the peer does not see it lost
  }
});

test('awkward action names still make a module that imports, with a method for each', async (t) => {
  const folder = await temporaryFolder(t);
  const catalogue = path.join(folder, 'awkward.json');
  const names = ['$odd name', '2fa', 'class', 'constructor', 'then', 'import-file', 'import_file', 'peer'];
  await writeFile(catalogue, JSON.stringify({
    catalogue: '0'.repeat(64),
    actions: names.map((name) => ({ name, doc: 'ends with */ and "', payload: {}, result: {}, progress: {} })),
  }));
  await generate('--catalogue', catalogue, '--typescript', path.join(folder, 'awkward'));
  const { AwkwardClient } = await import(pathToFileURL(path.join(folder, 'awkward.js')).href);
  const calls = [];
  const client = new AwkwardClient({ call: async (...args) => calls.push(args), stream: (...args) => args });
  for (const method of ['oddName', 'action2fa', 'class', 'constructor2', 'then2', 'importFile', 'importFile2', 'peer2']) {
    await client[method]({ x: 1 });
  }
  assert.deepEqual(calls.map(([action]) => action), names);
  assert.deepEqual(client.oddNameStream(null, { timeout: 5 }), ['$odd name', null, { timeout: 5 }]);
  assert.equal(await Promise.resolve(client), client, 'not a thenable');
});

test('a hostile catalogue cannot put code into the client: names and docs stay inside strings and comments', async (t) => {
  const folder = await temporaryFolder(t);
  const catalogue = path.join(folder, 'hostile.json');
  const name = 'x */ globalThis.injected = true; /*\n*/ globalThis.injected = true; //';
  await writeFile(catalogue, JSON.stringify({
    catalogue: '0'.repeat(64),
    actions: [{ name, doc: '*/ globalThis.injected = true; /*', payload: {}, result: {}, progress: {} }],
  }));
  await generate('--catalogue', catalogue, '--typescript', path.join(folder, 'hostile'));
  const { HostileClient } = await import(pathToFileURL(path.join(folder, 'hostile.js')).href);
  assert.equal(globalThis.injected, undefined, 'nothing from the catalogue ran');
  const calls = [];
  const client = new HostileClient({ call: async (...args) => calls.push(args), stream: (...args) => args });
  const methods = Object.getOwnPropertyNames(HostileClient.prototype).filter((m) => !['constructor', 'catalogueIsCurrent'].includes(m));
  assert.equal(methods.length, 2, `a call and a stream method: ${methods}`);
  await client[methods.find((m) => !m.endsWith('Stream'))]({});
  assert.deepEqual(calls.map(([action]) => action), [name]);
  const declarations = await readFile(path.join(folder, 'hostile.d.ts'), 'utf8');
  assert.equal(declarations.includes('*/ globalThis'), false, 'no comment in the declarations is closed early');
});
