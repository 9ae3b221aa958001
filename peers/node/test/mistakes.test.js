// Each row of docs/errors.md provoked from Node: the code, what the message says, and that a cause known at once
// fails at once (well under the connect timeout). Against the real conformance host, or a host in this process.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Peer, BridgeError } from '../index.js';
import { ConformanceHost, stopAllProcesses, within } from '../test-helpers/processes.js';
import { welcomedPeer } from '../test-helpers/router-host.js';

after(stopAllProcesses);

const AT_ONCE_MS = 1000; // a cause the host or the kernel states at once fails within this
const LONG_MS = 20_000; // the connect timeout these tests give, so only a failure at once is fast

/** A loopback port nothing listens on (bound, then released, by this process). */
async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** connect() of `peer` rejects within AT_ONCE_MS with a BridgeError of `code`; resolves with it. */
async function failsAtOnce(peer, code) {
  const started = Date.now();
  const error = await peer.connect().then(() => assert.fail('connected'), (e) => e);
  const elapsed = Date.now() - started;
  assert.ok(error instanceof BridgeError, String(error));
  assert.equal(error.code, code, error.message);
  assert.ok(elapsed < AT_ONCE_MS, `${error.code} after ${elapsed} ms`);
  return error;
}

describe('the mistakes table (docs/errors.md)', () => {
  test('no host at a tcp endpoint: unreachable at once', async () => {
    const endpoint = `tcp://127.0.0.1:${await closedPort()}`;
    const peer = new Peer(endpoint, { name: 'node-nobody', connectTimeout: LONG_MS, log: () => {} });
    const error = await failsAtOnce(peer, 'unreachable');
    assert.match(error.message, /connection was refused \(is the host running\?\)/);
    assert.ok(error.message.includes(endpoint));
    assert.match(await peer.closed, /connecting failed/);
  });

  test('no socket file at an ipc endpoint: unreachable at once', async () => {
    const endpoint = `ipc://${path.join(tmpdir(), `zb-node-nobody-${randomBytes(4).toString('hex')}.sock`)}`;
    const error = await failsAtOnce(new Peer(endpoint, { name: 'node-nobody', connectTimeout: LONG_MS, log: () => {} }), 'unreachable');
    assert.match(error.message, /socket file does not exist/);
  });

  test('a wrong key or none: unauthorized at once', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-mistakes-')), 'host.json');
    const host = await ConformanceHost.start('tcp://127.0.0.1:*', ['--connection-file', file]);
    try {
      const wrong = new Peer(host.endpoint, { name: 'node-wrong-key', key: '00'.repeat(32), connectTimeout: LONG_MS, log: () => {} });
      assert.match((await failsAtOnce(wrong, 'unauthorized')).message, /is the key the host's\?/);
      const none = new Peer(host.endpoint, { name: 'node-no-key', connectTimeout: LONG_MS, log: () => {} });
      assert.match((await failsAtOnce(none, 'unauthorized')).message, /connect through its connection file/);
    } finally {
      await host.stop();
    }
  });

  test('a taken name: name_taken at once, unless the peer waits for it', async (t) => {
    const host = await ConformanceHost.start();
    t.after(() => host.stop());
    const first = await new Peer(host.endpoint, { name: 'node-taken', connectTimeout: LONG_MS }).connect();
    t.after(() => first.close());
    const error = await failsAtOnce(new Peer(host.endpoint, { name: 'node-taken', connectTimeout: LONG_MS, log: () => {} }), 'name_taken');
    assert.match(error.message, /"node-taken".*waitForName: true/);
    const waiting = new Peer(host.endpoint, { name: 'node-taken', connectTimeout: 500, waitForName: true, log: () => {} });
    await assert.rejects(waiting.connect(), (e) => e.code === 'name_taken' && /still refused after 500 ms/.test(e.message));
  });

  for (const target of ['127.0.0.1:5599', 'localhost:5599', '[::1]:5599']) {
    test(`${target} without its scheme: a TypeError saying to write tcp://${target}`, () => {
      assert.throws(() => new Peer(target, { name: 'node-schemeless' }),
        (e) => e instanceof TypeError && e.message.includes(`neither an endpoint nor a connection file: write tcp://${target}`));
    });
  }

  test('a typed payload error names the path and what was there', async (t) => {
    const host = await ConformanceHost.start();
    t.after(() => host.stop());
    const peer = await new Peer(host.endpoint, { name: 'node-typed', validate: true }).connect();
    t.after(() => peer.close());
    await assert.rejects(peer.call('add', { a: 1, b: '2' }),
      (e) => e.code === 'invalid_payload' && e.message.startsWith('payload.b: expected a number, got the string "2"'));
  });

  test('leaving a for-await over progress early cancels the call', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'node-break');
    const call = peer.stream('work', null);
    const { body: request } = await host.nextOfType('request');
    host.send({ v: 1, type: 'progress', id: request.id, seq: 1, payload: { done: 1 } });
    for await (const step of call.progress) {
      assert.deepEqual(step, { done: 1 });
      break;
    }
    const { body: cancel } = await host.nextOfType('cancel', AT_ONCE_MS);
    assert.equal(cancel.id, request.id);
    await assert.rejects(call.result, (e) => e.code === 'cancelled' && /progress loop over work ended early/.test(e.message));
  });

  test('AbortSignal.timeout() rejects with timeout, an abort() with cancelled', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'node-signal');
    const timedOut = peer.call('work', null, { signal: AbortSignal.timeout(50) });
    await host.nextOfType('request');
    await assert.rejects(within(timedOut, 5000, 'the call to time out'),
      (e) => e instanceof BridgeError && e.code === 'timeout' && e.cause?.name === 'TimeoutError');
    const controller = new AbortController();
    const aborted = peer.call('work', null, { signal: controller.signal });
    await host.nextOfType('request');
    controller.abort();
    await assert.rejects(aborted, (e) => e.code === 'cancelled');
    await assert.rejects(peer.call('work', null, { signal: AbortSignal.abort(new DOMException('late', 'TimeoutError')) }),
      (e) => e.code === 'timeout' && /before it was sent/.test(e.message));
  });

  test('a Peer is an EventTarget: error when the host is lost, close with the reason', async (t) => {
    const { host, peer } = await welcomedPeer(t, 'node-events');
    assert.ok(peer instanceof EventTarget);
    const errored = new Promise((resolve) => peer.addEventListener('error', (event) => resolve(event.error), { once: true }));
    host.send({ v: 1, type: 'bye' });
    const error = await within(errored, 5000, 'the error event');
    assert.equal(error.code, 'peer_lost');
    assert.match(error.message, /the host said bye/);
    const closedEvent = new Promise((resolve) => peer.addEventListener('close', resolve, { once: true }));
    await peer.close();
    const event = await within(closedEvent, 5000, 'the close event');
    assert.equal(event.reason, 'the program closed the peer');
    assert.equal(await peer.closed, event.reason);
  });

  test('the defaults: connect timeout 10 s, call timeout 30 s', () => {
    const peer = new Peer('tcp://127.0.0.1:1', { name: 'node-defaults' });
    assert.equal(peer.connectTimeout, 10_000);
    assert.equal(peer.timeout, 30_000);
  });
});
