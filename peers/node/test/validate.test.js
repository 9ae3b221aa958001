// The `validate` option (SPEC 7.14, with the catalogue of 7.8): src/validate.js on every keyword of SPEC 7.8's
// subset and on bytes, then a peer with `validate: true` against a host in this process (test-helpers/router-host.js):
// the `$describe` fetch after the welcome (and again when a welcome's catalogue differs), payloads checked before they
// are sent, and a host that does not describe its actions.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Peer, BridgeError } from '../index.js';
import { schemaProblem, jsonEqual } from '../src/validate.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within, delay } from '../test-helpers/processes.js';

const shown = (value) => (typeof value === 'object' && value !== null ? 'an object' : String(value));
const ok = (schema, value) => assert.equal(schemaProblem(schema, value), null, `${JSON.stringify(schema)} accepts ${shown(value)}`);
const bad = (schema, value, message) => {
  const problem = schemaProblem(schema, value);
  assert.notEqual(problem, null, `${JSON.stringify(schema)} refuses ${shown(value)}`);
  if (message instanceof RegExp) assert.match(problem.message, message);
  else assert.equal(problem.message, message);
  assert.equal(problem.message, `${problem.path}: ${problem.reason}`);
};

describe('validate.js: SPEC 7.8\'s keywords', () => {
  test('true, {} and false', () => {
    ok(true, 1);
    ok({}, { anything: [1] });
    bad(false, 1, 'payload: no value is allowed here (the schema is false), got 1');
  });

  test('type: one name or a list; integer is a number; BigInts are integers; booleans are not numbers', () => {
    ok({ type: 'integer' }, 3);
    ok({ type: 'integer' }, 3.0);
    ok({ type: 'integer' }, 2n ** 60n);
    ok({ type: 'number' }, 3);
    ok({ type: 'number' }, 0.5);
    ok({ type: ['string', 'null'] }, null);
    ok({ type: 'array' }, []);
    ok({ type: 'object' }, Object.create(null));
    bad({ type: 'integer' }, 0.5, 'payload: expected an integer, got 0.5');
    bad({ type: 'number' }, true, 'payload: expected a number, got true');
    bad({ type: ['string', 'null'] }, 1, 'payload: expected a string or null, got 1');
    bad({ type: 'object' }, [], 'payload: expected an object, got an array of 0 items');
    bad({ type: 'array' }, {}, 'payload: expected an array, got an object');
    bad({ type: 'null' }, 'x', 'payload: expected null, got the string "x"');
  });

  test('properties, required, additionalProperties (false or a schema); undefined members are absent', () => {
    const point = { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x'], additionalProperties: false };
    ok(point, { x: 1 });
    ok(point, { x: 1, y: 2, z: undefined });
    bad(point, { y: 2 }, 'payload: missing the required member "x"');
    bad(point, { x: undefined }, 'payload: missing the required member "x"');
    bad(point, { x: 'one' }, 'payload.x: expected a number, got the string "one"');
    bad(point, { x: 1, z: 3 }, 'payload.z: not allowed (additionalProperties is false; the members are "x", "y")');
    const tags = { type: 'object', additionalProperties: { type: 'string' } };
    ok(tags, { a: 'x', b: 'y' });
    bad(tags, { a: 'x', 'b c': 2 }, 'payload["b c"]: expected a string, got 2');
    ok({ properties: { a: { type: 'string' } } }, 5, 'properties constrain objects only');
  });

  test('items and prefixItems (items after the prefix; items false closes the tuple)', () => {
    ok({ type: 'array', items: { type: 'integer' } }, [1, 2, 3]);
    bad({ type: 'array', items: { type: 'integer' } }, [1, 'two'], 'payload[1]: expected an integer, got the string "two"');
    const pair = { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], items: false };
    ok(pair, ['a', 1]);
    ok(pair, ['a']);
    bad(pair, [1, 1], 'payload[0]: expected a string, got 1');
    bad(pair, ['a', 1, true], 'payload[2]: no item is allowed here (2 prefixItems, and items is false)');
    const rest = { prefixItems: [{ const: 'head' }], items: { type: 'boolean' } };
    ok(rest, ['head', true, false]);
    bad(rest, ['head', true, 0], 'payload[2]: expected a boolean, got 0');
  });

  test('enum and const, compared as JSON (members in any order; 1, 1.0 and 1n alike)', () => {
    ok({ enum: ['red', 'green', 1] }, 'green');
    ok({ enum: [1] }, 1n);
    ok({ const: { a: [1, { b: null }] } }, { a: [1.0, { b: null }] });
    ok({ const: { a: 1, b: 2 } }, { b: 2, a: 1 });
    bad({ enum: ['red', 'green'] }, 'blue', 'payload: expected one of ["red","green"], got "blue"');
    bad({ const: 'v1' }, 'v2', 'payload: expected "v1", got "v2"');
    bad({ const: { a: 1 } }, { a: 1, b: 2 }, /^payload: expected \{"a":1\}/);
    assert.equal(jsonEqual([1, { x: 'y' }], [1, { x: 'y' }]), true);
    assert.equal(jsonEqual({ a: undefined }, {}), true);
    assert.equal(jsonEqual(Buffer.from('ab'), new Uint8Array([97, 98])), true);
    assert.equal(jsonEqual(null, {}), false);
  });

  test('anyOf: one alternative is enough; the message lists why each failed', () => {
    const idOrName = { anyOf: [{ type: 'integer', minimum: 1 }, { type: 'string', minLength: 1 }] };
    ok(idOrName, 5);
    ok(idOrName, 'x');
    bad(idOrName, '', /^payload: matches none of the 2 schemas of anyOf \(payload: expected an integer, got the string ""; payload: expected a string of at least 1 characters, got 0/);
    bad(idOrName, 0, /^payload: matches none of the 2 schemas of anyOf \(payload: expected at least 1, got 0;/);
  });

  test('minimum, maximum (numbers and BigInts), minLength and maxLength (in code points)', () => {
    ok({ minimum: 0, maximum: 10 }, 10);
    ok({ minimum: 0 }, 'not a number: not constrained');
    bad({ minimum: 0 }, -1, 'payload: expected at least 0, got -1');
    bad({ maximum: 10 }, 10.5, 'payload: expected at most 10, got 10.5');
    bad({ maximum: 2 ** 53 }, 2n ** 60n, 'payload: expected at most 9007199254740992, got 1152921504606846976');
    ok({ maxLength: 1 }, '😀', 'one code point, two UTF-16 units');
    ok({ minLength: 2, maxLength: 2 }, 'é😀');
    bad({ maxLength: 1 }, 'ab', 'payload: expected a string of at most 1 characters, got 2');
    bad({ minLength: 3 }, '😀😀', 'payload: expected a string of at least 3 characters, got 2: "😀😀"');
  });

  test('minItems, maxItems, uniqueItems', () => {
    ok({ minItems: 1, maxItems: 2, uniqueItems: true }, [1, 2]);
    bad({ minItems: 1 }, [], 'payload: expected at least 1 items, got 0');
    bad({ maxItems: 1 }, [1, 2], 'payload: expected at most 1 items, got 2');
    bad({ uniqueItems: true }, [{ a: 1 }, 2, { a: 1.0 }], 'payload: expected unique items, but [0] and [2] are equal ({"a":1})');
    ok({ uniqueItems: false }, [1, 1]);
  });

  test('annotations and keywords outside the subset do not refuse anything', () => {
    ok({ type: 'string', format: 'date-time', title: 'When', description: 'd', $comment: 'c' }, 'not a date');
    ok({ type: 'string', pattern: '^a$', not: {}, oneOf: [false], $ref: '#/nowhere' }, 'b');
    const patterned = { type: 'object', patternProperties: { '^x-': {} }, additionalProperties: false };
    ok(patterned, { 'x-custom': 1 }, 'additionalProperties beside patternProperties is not applied: no false refusal');
  });

  test('bytes: a Uint8Array/Buffer or base64 text matches the bytes schema; bytes match no other string schema', () => {
    const bytes = { type: 'string', contentEncoding: 'base64' };
    ok(bytes, Buffer.from('hello'));
    ok(bytes, new Uint8Array(0));
    ok(bytes, 'aGVsbG8=');
    ok(bytes, '');
    ok({ type: ['string', 'null'], contentEncoding: 'base64' }, null);
    ok({ type: 'object', properties: { data: bytes } }, { data: Buffer.from([1, 2]) });
    bad(bytes, 'hello!', 'payload: expected bytes (a Uint8Array/Buffer, or base64 text), got the string "hello!", which is not base64');
    bad(bytes, 5, 'payload: expected bytes (a Uint8Array/Buffer, or base64 text), got 5');
    bad({ type: 'string' }, Buffer.from('x'), 'payload: expected a string, got 1 bytes');
    bad({ type: 'object', properties: { data: { type: 'array' } } }, { data: new Uint8Array(3) }, 'payload.data: expected an array, got 3 bytes');
    ok({}, Buffer.from('any value'));
  });

  test('the path goes down into nested values', () => {
    const schema = {
      type: 'object',
      properties: { items: { type: 'array', items: { type: 'object', properties: { price: { type: 'number', minimum: 0 } }, required: ['price'] } } },
    };
    bad(schema, { items: [{ price: 1 }, { price: 2 }, { price: 3 }, { price: -1 }] }, 'payload.items[3].price: expected at least 0, got -1');
    bad(schema, { items: [{}] }, 'payload.items[0]: missing the required member "price"');
  });
});

// --- a peer with validate: true ------------------------------------------------------------------------------------

const CATALOGUE = {
  catalogue: 'c'.repeat(64),
  actions: [
    {
      name: 'add',
      doc: 'Adds.',
      payload: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
      result: { type: 'number' },
    },
    { name: 'note', doc: '', payload: { type: 'string' }, result: {} },
    { name: 'upload', doc: '', payload: { type: 'object', properties: { data: { type: 'string', contentEncoding: 'base64' } }, required: ['data'] }, result: {} },
  ],
};

const expectInvalid = (path, reason) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, 'invalid_payload', error.message);
  assert.equal(error.message, `${path}: ${reason}`);
  assert.deepEqual(error.data, { path });
  return true;
};

/** Answers the next `$describe` request with `answer` (a response body without v/type/id). */
async function answerDescribe(host, answer) {
  const { body } = await host.next((b) => b?.type === 'request' && b.action === '$describe', 10_000, 'the $describe request');
  host.send({ v: 1, type: 'response', id: body.id, ...answer });
  return body;
}

/** A peer with validate: true, welcomed with `welcome`; its $describe answered with `describe` (null: not answered). */
async function setup(t, { welcome = { catalogue: CATALOGUE.catalogue }, describe = { ok: true, result: CATALOGUE }, peer: options = {} } = {}) {
  const host = await RouterHost.start(transports.ipc());
  t.after(() => host.stop());
  const logs = [];
  const peer = new Peer(host.endpoint, { name: 'validating', validate: true, log: (level, message) => logs.push(`${level}: ${message}`), ...options });
  t.after(() => peer.close());
  const connected = peer.connect();
  await host.welcome(welcome);
  if (describe !== null) {
    await answerDescribe(host, describe);
    await within(connected, 10_000, 'connect() to resolve');
  }
  return { host, peer, logs, connected };
}

/** Answers the next request to `action` with `result`; returns its body. */
async function answer(host, action, result = null) {
  const { body, frames } = await host.next((b) => b?.type === 'request' && b.action === action, 10_000, `a request to ${action}`);
  host.send({ v: 1, type: 'response', id: body.id, ok: true, result });
  return { body, frames };
}

describe('validate: true', () => {
  test('not on by default: no $describe is fetched', async (t) => {
    const host = await RouterHost.start(transports.ipc());
    t.after(() => host.stop());
    const peer = new Peer(host.endpoint, { name: 'plain' });
    t.after(() => peer.close());
    const connected = peer.connect();
    await host.welcome({ catalogue: CATALOGUE.catalogue });
    await within(connected, 10_000, 'connect()');
    const sent = peer.call('add', { a: 'x' });
    const { body } = await answer(host, 'add', 'the host decides');
    assert.deepEqual(body.payload, { a: 'x' });
    assert.equal(await sent, 'the host decides');
    assert.equal(host.messages.some((m) => m.body?.action === '$describe'), false);
    assert.throws(() => new Peer(host.endpoint, { name: 'x', validate: 'yes' }), /options.validate must be a boolean/);
  });

  test('connect() resolves once the host\'s catalogue is in; payloads are checked before sending, nothing sent when refused', async (t) => {
    const { host, peer, connected } = await setup(t, { describe: null });
    let resolved = false;
    connected.then(() => { resolved = true; });
    const describeRequest = await answerDescribe(host, { ok: true, result: CATALOGUE });
    assert.equal(describeRequest.timeout_ms, 30_000);
    await within(connected, 10_000, 'connect()');
    assert.equal(resolved, true);

    await assert.rejects(peer.call('add', { a: 1 }), expectInvalid('payload', 'missing the required member "b"'));
    await assert.rejects(peer.call('add', { a: 1, b: '2' }), expectInvalid('payload.b', 'expected a number, got the string "2"'));
    await assert.rejects(peer.stream('add', [1, 2]).result, expectInvalid('payload', 'expected an object, got an array of 2 items'));
    await assert.rejects(peer.call('add', null), expectInvalid('payload', 'expected an object, got null'));
    assert.throws(() => peer.post('note', 5), expectInvalid('payload', 'expected a string, got 5'));
    await assert.rejects(peer.call('upload', { data: 'not base64!' }), /payload\.data: expected bytes/);

    // What matches goes out, bytes as attachments; actions the catalogue does not describe are not checked.
    const sum = peer.call('add', { a: 1, b: 2 });
    const first = await answer(host, 'add', 3);
    assert.deepEqual(first.body.payload, { a: 1, b: 2 }, 'the first request the host got is the valid one');
    assert.equal(await sum, 3);
    const upload = peer.call('upload', { data: Buffer.from([1, 2, 3]) });
    const uploaded = await answer(host, 'upload', 'ok');
    assert.deepEqual([...uploaded.frames[2]], [1, 2, 3]);
    assert.equal(await upload, 'ok');
    const other = peer.call('undescribed', { anything: true });
    await answer(host, 'undescribed', 'unchecked');
    assert.equal(await other, 'unchecked');
    peer.post('note', 'fine');
    assert.equal((await host.nextOfType('event')).body.payload, 'fine');
    assert.equal(host.messages.filter((m) => m.body?.type === 'request' || m.body?.type === 'event').length, 0, 'nothing else was sent');
  });

  test('values JSON cannot carry are refused first, by SPEC 7.14, before the schema', async (t) => {
    const { peer } = await setup(t);
    await assert.rejects(peer.call('add', { a: Number.NaN, b: 1 }), expectInvalid('payload.a', 'NaN cannot be carried in JSON'));
  });

  test('a call made while the catalogue is being fetched waits for it, then is checked', async (t) => {
    const { host, peer } = await setup(t);
    peer.handle('served', () => 1); // a new hello; the welcome answering it announces another catalogue
    await host.nextOfType('hello');
    const changed = { ...CATALOGUE, catalogue: 'd'.repeat(64), actions: [{ name: 'add', doc: '', payload: { type: 'array' }, result: {} }] };
    host.send(host.welcomeBody({ catalogue: changed.catalogue, session: peer.session }));
    const describing = await host.next((b) => b?.type === 'request' && b.action === '$describe', 10_000, 'a second $describe');
    const early = peer.call('add', { a: 1, b: 2 }); // valid for the old catalogue, not for the new one
    const earlyOk = peer.call('add', [1, 2]);
    await delay(100);
    assert.equal(host.messages.some((m) => m.body?.action === 'add'), false, 'held until the catalogue is in');
    host.send({ v: 1, type: 'response', id: describing.body.id, ok: true, result: changed });
    await assert.rejects(early, expectInvalid('payload', 'expected an array, got an object'));
    const sent = await answer(host, 'add', 3);
    assert.deepEqual(sent.body.payload, [1, 2]);
    assert.equal(await earlyOk, 3);
    assert.equal(peer.hostCatalogue, changed.catalogue);
  });

  test('calls made before the first welcome wait for the first catalogue, and are checked', async (t) => {
    const host = await RouterHost.start(transports.ipc());
    t.after(() => host.stop());
    const peer = new Peer(host.endpoint, { name: 'early-bird', validate: true });
    t.after(() => peer.close());
    const connected = peer.connect();
    const wrong = peer.call('add', { a: 1 });
    const right = peer.stream('add', { a: 1, b: 2 });
    await host.welcome({ catalogue: CATALOGUE.catalogue });
    await delay(50);
    assert.equal(host.messages.some((m) => m.body?.action === 'add'), false, 'held until the catalogue is in');
    await answerDescribe(host, { ok: true, result: CATALOGUE });
    await within(connected, 10_000, 'connect()');
    await assert.rejects(wrong, expectInvalid('payload', 'missing the required member "b"'));
    const { body } = await answer(host, 'add', 3);
    assert.deepEqual(body.payload, { a: 1, b: 2 });
    assert.ok(body.timeout_ms <= 30_000 && body.timeout_ms > 25_000, `its timeout counts the wait: ${body.timeout_ms}`);
    assert.equal(await right.result, 3);

    const closing = new Peer(host.endpoint, { name: 'never-welcomed', validate: true, timeout: Infinity });
    const waiting = closing.call('add', { a: 1, b: 2 });
    await closing.close();
    await assert.rejects(waiting, (error) => error instanceof BridgeError && error.code === 'cancelled');
  });

  test('a welcome announcing another catalogue while a fetch is under way: that one is fetched after it', async (t) => {
    const { host, peer } = await setup(t);
    peer.handle('one', () => 1);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ catalogue: 'd'.repeat(64), session: peer.session }));
    const first = await host.next((b) => b?.type === 'request' && b.action === '$describe', 10_000, 'the second $describe');
    peer.handle('two', () => 2);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ catalogue: 'e'.repeat(64), session: peer.session }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    const older = { catalogue: 'd'.repeat(64), actions: [{ name: 'add', doc: '', payload: { type: 'string' }, result: {} }] };
    host.send({ v: 1, type: 'response', id: first.body.id, ok: true, result: older });
    const newer = { catalogue: 'e'.repeat(64), actions: [{ name: 'add', doc: '', payload: { type: 'boolean' }, result: {} }] };
    await answerDescribe(host, { ok: true, result: newer });
    await delay(20);
    await assert.rejects(peer.call('add', 'text'), expectInvalid('payload', 'expected a boolean, got the string "text"'));
  });

  test('a welcome with the same catalogue fetches nothing; after a loss the catalogue in hand still checks', async (t) => {
    const { host, peer } = await setup(t);
    peer.handle('served', () => 1);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ catalogue: CATALOGUE.catalogue, session: peer.session }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    await delay(50);
    assert.equal(host.messages.some((m) => m.body?.action === '$describe'), false, 'same hash: no new $describe');
    await assert.rejects(peer.call('add', {}), expectInvalid('payload', 'missing the required member "a"'));
  });

  test('a host that does not serve $describe: calls go unchecked, with one warning; a new hash makes the peer ask again', async (t) => {
    const { host, peer, logs } = await setup(t, {
      welcome: {},
      describe: { ok: false, error: { code: 'unknown_action', message: 'no $describe on a 1.2 host' } },
    });
    assert.ok(logs.some((line) => line.startsWith('warn: validate: the host does not describe its actions ($describe answered unknown_action')), logs.join('\n'));
    const call = peer.call('add', { a: 'not checked' });
    assert.deepEqual((await answer(host, 'add', 0)).body.payload, { a: 'not checked' });
    assert.equal(await call, 0);
    // The same host, welcoming again without a catalogue: not asked again.
    peer.handle('served', () => 1);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ session: peer.session }));
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(host.messages.some((m) => m.body?.action === '$describe'), false);
    // An upgraded host announcing a catalogue: asked again, and checks start.
    peer.handle('served2', () => 1);
    await host.nextOfType('hello');
    host.send(host.welcomeBody({ session: peer.session, catalogue: CATALOGUE.catalogue }));
    await answerDescribe(host, { ok: true, result: CATALOGUE });
    await delay(20);
    await assert.rejects(peer.call('add', { a: 'checked' }), /payload: missing the required member "b"/);
  });

  test('describe() also refreshes the catalogue validation uses', async (t) => {
    const { host, peer } = await setup(t);
    const described = peer.describe();
    const tighter = { ...CATALOGUE, catalogue: 'e'.repeat(64), actions: [{ name: 'add', doc: '', payload: { type: 'object', additionalProperties: false }, result: {} }] };
    await answerDescribe(host, { ok: true, result: tighter });
    assert.deepEqual(await described, tighter);
    await assert.rejects(peer.call('add', { a: 1 }), expectInvalid('payload.a', 'not allowed (additionalProperties is false)'));
  });
});
