// SPEC 7.8 `$describe` in the Node peer: the RFC 8785 canonical form and hash against every case of
// protocol/fixtures/catalogues/canonical.json, the catalogue built from handle()'s options, `hello.catalogue` (and a
// new hash when handlers change), `$describe` served, the host's `welcome.catalogue` as `peer.hostCatalogue`, and
// `peer.describe()`, against a host in this process (test-helpers/router-host.js).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Peer, BridgeError } from '../index.js';
import { canonicalJson, canonicalHash, buildCatalogue, describeAction } from '../src/describe.js';
import { sha256Hex } from '../src/signing.js';
import { RouterHost, welcomedPeer } from '../test-helpers/router-host.js';
import { transports, within, repoRoot } from '../test-helpers/processes.js';

const sha256 = (text) => createHash('sha256').update(text, 'utf8').digest('hex');
const canonicalCases = JSON.parse(readFileSync(path.join(repoRoot, 'protocol/fixtures/catalogues/canonical.json'), 'utf8'));

describe('RFC 8785: every case of fixtures/catalogues/canonical.json', () => {
  test('the cases are there', () => assert.ok(canonicalCases.length >= 6, `${canonicalCases.length} cases`));
  for (const fixture of canonicalCases) {
    test(fixture.name, () => {
      assert.equal(canonicalJson(fixture.value), fixture.canonical);
      assert.equal(sha256(fixture.canonical), fixture.sha256, 'the fixture agrees with itself');
      assert.equal(canonicalHash(fixture.value, sha256Hex), fixture.sha256);
    });
  }

  test('what RFC 8785 has no form for is refused, not converted', () => {
    assert.throws(() => canonicalJson([Number.NaN]), /NaN has no canonical form/);
    assert.throws(() => canonicalJson({ a: 'x\ud800' }), /unpaired surrogate/);
    assert.throws(() => canonicalJson({ a: 1n }), /bigint has no canonical form/);
    assert.equal(canonicalJson({ b: undefined, a: -0 }), '{"a":0}');
  });
});

describe('the catalogue of handle()\'s descriptions', () => {
  test('a description: doc one line (default empty), schemas {} when not given, progress only when given', () => {
    assert.deepEqual(describeAction('a', undefined), { name: 'a', doc: '', payload: {}, result: {} });
    assert.deepEqual(describeAction('a', { doc: 'Adds.', payload: { type: 'object' }, progress: true }),
      { name: 'a', doc: 'Adds.', payload: { type: 'object' }, result: {}, progress: true });
    assert.throws(() => describeAction('a', { doc: 'two\nlines' }), /doc of "a" must be one line/);
    assert.throws(() => describeAction('a', { doc: 3 }), /doc of "a" must be one line/);
    assert.throws(() => describeAction('a', { payload: 'string' }), /payload schema of "a" must be a JSON Schema/);
    assert.throws(() => describeAction('a', { result: [] }), /result schema of "a" must be a JSON Schema/);
    assert.throws(() => describeAction('a', { payload: { maximum: Infinity } }), /payload schema of "a" is not JSON: payload\.maximum: Infinity/);
    assert.throws(() => describeAction('a', 'doc'), /options of "a" must be an object/);
  });

  test('a schema is copied when registered: changing the caller\'s object later changes nothing', () => {
    const payload = { type: 'object', properties: { a: { type: 'number' } } };
    const description = describeAction('a', { payload });
    payload.properties.a.type = 'string';
    assert.deepEqual(description.payload, { type: 'object', properties: { a: { type: 'number' } } });
  });

  test('sorted by name in UTF-16 code units; the hash is that of the RFC 8785 form of actions', () => {
    const names = ['b', 'a', 'é', 'ﬁ', '😀', 'B', '10', '9'];
    const catalogue = buildCatalogue(names.map((name) => describeAction(name)), sha256Hex);
    // U+1F600 is the surrogate pair D83D DE00, which sorts before U+FB01 in UTF-16 code units (not in code points).
    assert.deepEqual(catalogue.actions.map((d) => d.name), ['10', '9', 'B', 'a', 'b', 'é', '😀', 'ﬁ']);
    const text = `[${catalogue.actions.map((d) => `{"doc":"","name":${JSON.stringify(d.name)},"payload":{},"result":{}}`).join(',')}]`;
    assert.equal(catalogue.catalogue, sha256(text));
    assert.equal(canonicalHash(catalogue.actions, sha256Hex), catalogue.catalogue);
    assert.deepEqual(buildCatalogue([], sha256Hex), { catalogue: sha256('[]'), actions: [] });
  });
});

// --- through a peer ------------------------------------------------------------------------------------------------

const request = (id, action, payload, extra = {}) => ({ v: 1, type: 'request', id, action, payload, ...extra });
const responseTo = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, 10_000, `the response to ${id}`);
const HASH = 'a'.repeat(64);

const setup = (t, options) => welcomedPeer(t, 'describer', options);

const ADD = {
  doc: 'Adds two numbers.',
  payload: { type: 'object', title: 'Payload', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  result: { type: 'number' },
};

describe('$describe served by the peer, and the hash in its hello', () => {
  test('hello carries the hash of the catalogue that $describe serves (reserved names left out; the payload ignored)', async (t) => {
    const { host, hello } = await setup(t, {
      peer: { actions: { echo: () => 1, add: { handler: ({ a, b }) => a + b, ...ADD } }, evaluate: true },
      before: (peer) => peer.handle('count', () => null, { doc: 'Counts.', progress: { type: 'object' } }),
    });
    host.send(request('d1', '$describe', { ignored: true }));
    const { body } = await responseTo(host, 'd1');
    assert.equal(body.ok, true);
    assert.deepEqual(body.result.actions, [
      { name: 'add', ...ADD },
      { name: 'count', doc: 'Counts.', payload: {}, result: {}, progress: { type: 'object' } },
      { name: 'echo', doc: '', payload: {}, result: {} },
    ]);
    // The fixture's own catalogue case ("a catalogue") is add and echo; ours adds count. Hash written out by hand:
    const text = '[{"doc":"Adds two numbers.","name":"add","payload":{"properties":{"a":{"type":"number"},"b":{"type":"number"}},'
      + '"required":["a","b"],"title":"Payload","type":"object"},"result":{"type":"number"}},'
      + '{"doc":"Counts.","name":"count","payload":{},"progress":{"type":"object"},"result":{}},'
      + '{"doc":"","name":"echo","payload":{},"result":{}}]';
    assert.equal(body.result.catalogue, sha256(text));
    assert.equal(hello.catalogue, body.result.catalogue);
    host.send(request('d2', '$describe', null));
    assert.deepEqual((await responseTo(host, 'd2')).body.result, body.result, 'the same catalogue every time');
  });

  test('the fixture catalogue (add and echo) hashes as canonical.json says, over the wire', async (t) => {
    const { hello } = await setup(t, { peer: { actions: { echo: { handler: (p) => p }, add: { handler: () => 0, ...ADD } } } });
    assert.equal(hello.catalogue, canonicalCases.find((c) => c.name === 'a catalogue').sha256);
  });

  test('a peer without handlers says hello with the hash of an empty catalogue, and serves it', async (t) => {
    const { host, hello } = await setup(t);
    assert.equal(hello.catalogue, sha256('[]'));
    host.send(request('e1', '$describe', null));
    assert.deepEqual((await responseTo(host, 'e1')).body.result, { catalogue: sha256('[]'), actions: [] });
  });

  test('handle() and its remover send a new hello with the new hash; handle() with bad options throws, changing nothing', async (t) => {
    const { host, peer, hello } = await setup(t, { peer: { actions: { echo: () => 1 } } });
    const first = hello.catalogue;
    assert.throws(() => peer.handle('bad', () => 1, { doc: 'one\ntwo' }), TypeError);
    const remove = peer.handle('add', () => 0, ADD);
    const second = await host.nextOfType('hello');
    assert.deepEqual(second.body.actions, ['echo', 'add']);
    assert.notEqual(second.body.catalogue, first);
    host.send(request('h1', '$describe', null));
    const described = (await responseTo(host, 'h1')).body.result;
    assert.equal(described.catalogue, second.body.catalogue);
    assert.deepEqual(described.actions.map((d) => d.name), ['add', 'echo']);
    peer.handle('add', () => 0, { ...ADD, doc: 'Adds, described anew.' }); // same name, new description: a new hash
    const third = await host.nextOfType('hello');
    assert.notEqual(third.body.catalogue, second.body.catalogue);
    remove(); // no longer the registered handler: nothing changes
    peer.handle('add', () => 0)(); // registered then removed in one turn: one hello, with echo alone
    const fourth = await host.nextOfType('hello');
    assert.deepEqual(fourth.body.actions, ['echo']);
    assert.equal(fourth.body.catalogue, first, 'back to the first catalogue, back to its hash');
  });
});

describe('the host\'s catalogue: welcome.catalogue and peer.describe()', () => {
  test('peer.hostCatalogue is the welcome\'s hash, null when it has none or a malformed one', async (t) => {
    const { peer } = await setup(t, { welcome: { catalogue: HASH } });
    assert.equal(peer.hostCatalogue, HASH);
    const { peer: older } = await setup(t);
    assert.equal(older.hostCatalogue, null);
    assert.equal(new Peer('tcp://127.0.0.1:9', { name: 'n' }).hostCatalogue, null, 'null before any welcome');
  });

  test('a welcome whose catalogue is not 64 lowercase hex digits is a bad message: answered, and connect() fails', async (t) => {
    const host = await RouterHost.start(transports.ipc());
    t.after(() => host.stop());
    const peer = new Peer(host.endpoint, { name: 'strict', log: () => {} });
    t.after(() => peer.close());
    const connected = peer.connect();
    connected.catch(() => {});
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ catalogue: 'A'.repeat(64) }));
    const { body } = await host.next((b) => b?.type === 'response', 10_000, 'the bad_message answer');
    assert.deepEqual(body, { v: 1, type: 'response', id: null, ok: false, error: { code: 'bad_message', message: 'welcome.catalogue must be 64 lowercase hex digits' } });
    await assert.rejects(within(connected, 10_000, 'connect() to fail'), (error) => error instanceof BridgeError && error.code === 'bad_message');
    assert.equal(peer.hostCatalogue, null);
  });

  test('a later welcome updates peer.hostCatalogue', async (t) => {
    const { host, peer } = await setup(t, { welcome: { catalogue: HASH, session: 's1' } });
    peer.handle('x', () => 1);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ catalogue: 'b'.repeat(64), session: 's1' }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(peer.hostCatalogue, 'b'.repeat(64));
  });

  test('describe() sends $describe and resolves with the host\'s catalogue; what is not a catalogue is bad_message', async (t) => {
    const { host, peer } = await setup(t, { welcome: { catalogue: HASH } });
    const catalogue = { catalogue: HASH, actions: [{ name: 'greet', doc: 'Greets.', payload: { type: 'string' }, result: { type: 'string' } }] };
    const described = peer.describe();
    const { body } = await host.nextOfType('request');
    assert.equal(body.action, '$describe');
    assert.equal(body.payload, null);
    assert.equal(body.timeout_ms, 30_000, 'a call like any other, with the default timeout');
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: catalogue });
    assert.deepEqual(await described, catalogue);

    const malformed = peer.describe({ timeout: 5000 });
    const second = await host.nextOfType('request');
    assert.equal(second.body.timeout_ms, 5000);
    host.send({ v: 1, type: 'response', id: second.body.id, ok: true, result: ['greet'] });
    await assert.rejects(malformed, (error) => error instanceof BridgeError && error.code === 'bad_message' && /not a catalogue/.test(error.message));

    const refused = peer.describe();
    const third = await host.nextOfType('request');
    host.send({ v: 1, type: 'response', id: third.body.id, ok: false, error: { code: 'unknown_action', message: 'a 1.2 host' } });
    await assert.rejects(refused, (error) => error.code === 'unknown_action');
  });
});
