// SPEC 7.3 "One default": a call or stream given no timeout waits 30 s, and says so on the wire (timeout_ms 30000 and
// a deadline); waiting without a limit is asked for with `timeout: Infinity` (or null), and such a request carries
// neither. Against a host in this process (test-helpers/router-host.js).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Peer, BridgeError } from '../index.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within, delay } from '../test-helpers/processes.js';

async function setup(t, peerOptions = {}) {
  const host = await RouterHost.start(transports.ipc());
  t.after(() => host.stop());
  const peer = new Peer(host.endpoint, { name: 'timeouts', ...peerOptions });
  t.after(() => peer.close());
  const connected = peer.connect();
  await host.welcome();
  await within(connected, 10_000, 'connect() to resolve');
  return { host, peer };
}

/** Makes the call with `send`, returns the request the host got (answered with null). */
async function requestOf(host, send) {
  const before = Date.now();
  const pending = send();
  const { body } = await host.nextOfType('request');
  const after = Date.now();
  host.send({ v: 1, type: 'response', id: body.id, ok: true, result: null });
  await pending;
  return { body, before, after };
}

const assertDeadline = ({ body, before, after }, ms) => {
  assert.equal(body.timeout_ms, ms);
  assert.ok(Number.isInteger(body.deadline) && body.deadline >= before + ms && body.deadline <= after + ms, `deadline ${body.deadline}`);
};
const assertNoLimit = ({ body }) => {
  assert.equal(Object.hasOwn(body, 'timeout_ms'), false, 'no timeout_ms');
  assert.equal(Object.hasOwn(body, 'deadline'), false, 'no deadline');
};

describe('one default timeout (SPEC 7.3)', () => {
  test('a call and a stream without a timeout carry timeout_ms 30000 and deadline = now + 30 s', async (t) => {
    const { host, peer } = await setup(t);
    assertDeadline(await requestOf(host, () => peer.call('echo', 1)), 30_000);
    assertDeadline(await requestOf(host, () => peer.stream('count', { n: 1 }).result), 30_000);
    assertDeadline(await requestOf(host, () => peer.call('echo', 1, {})), 30_000);
    assertDeadline(await requestOf(host, () => peer.call('echo', 1, { timeout: undefined })), 30_000);
  });

  test('timeout: Infinity (or null) on a call or a stream: no limit, neither timeout_ms nor deadline', async (t) => {
    const { host, peer } = await setup(t);
    assertNoLimit(await requestOf(host, () => peer.call('echo', 1, { timeout: Infinity })));
    assertNoLimit(await requestOf(host, () => peer.stream('count', { n: 1 }, { timeout: Infinity }).result));
    assertNoLimit(await requestOf(host, () => peer.call('echo', 1, { timeout: null })));
  });

  test('the peer\'s timeout option sets the default; Infinity there makes every call unlimited unless it says otherwise', async (t) => {
    const { host, peer } = await setup(t, { timeout: Infinity });
    assertNoLimit(await requestOf(host, () => peer.call('echo', 1)));
    assertNoLimit(await requestOf(host, () => peer.stream('count', { n: 1 }).result));
    assertDeadline(await requestOf(host, () => peer.call('echo', 1, { timeout: 2500 })), 2500);
    const { host: other, peer: shorter } = await setup(t, { timeout: 1200 });
    assertDeadline(await requestOf(other, () => shorter.call('echo', 1)), 1200);
  });

  test('an unlimited call is not failed locally; a limited one is, at its deadline', async (t) => {
    const { host, peer } = await setup(t);
    let settled = false;
    const unlimited = peer.call('slow', null, { timeout: Infinity });
    unlimited.then(() => { settled = true; }, () => { settled = true; });
    const { body } = await host.nextOfType('request');
    await assert.rejects(peer.call('slow', null, { timeout: 150 }), (error) => error instanceof BridgeError && error.code === 'timeout');
    await delay(100);
    assert.equal(settled, false, 'still waiting, as asked');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 'late but wanted' });
    assert.equal(await unlimited, 'late but wanted');
  });

  test('a timeout that is not a positive number, Infinity or null is a TypeError', async (t) => {
    const { peer } = await setup(t);
    await assert.rejects(peer.call('echo', 1, { timeout: 0 }), TypeError);
    await assert.rejects(peer.call('echo', 1, { timeout: -Infinity }), TypeError);
    await assert.rejects(peer.call('echo', 1, { timeout: '30s' }), TypeError);
    assert.throws(() => new Peer('tcp://127.0.0.1:9', { name: 'n', timeout: Number.NaN }), TypeError);
  });
});
