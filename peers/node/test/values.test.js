// SPEC 7.14 in the Node peer: every value it is asked to send is checked where it is made and refused with the path of
// its first offending part, never converted silently. src/values.js on its own, then through a peer against a host in
// this process (test-helpers/router-host.js): payloads of calls, streams and events fail invalid_payload with nothing
// sent; handler results, progress payloads, error data and $evaluate results are answered handler_error.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Peer, BridgeError } from '../index.js';
import { serialize, ValueRefusal, encodeRequest } from '../src/values.js';
import { decode } from '../src/wire.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { transports, within } from '../test-helpers/processes.js';

/** serialize() must refuse `value` with exactly this message (path: reason). */
function refuses(value, message, root = 'payload') {
  assert.throws(() => serialize(value, root), (error) => {
    assert.ok(error instanceof ValueRefusal, `a ValueRefusal, got ${error}`);
    assert.ok(error instanceof TypeError);
    if (message instanceof RegExp) assert.match(error.message, message);
    else assert.equal(error.message, message);
    assert.equal(error.message, `${error.path}: ${error.reason}`);
    return true;
  });
}

const nested = (levels, inner = 1) => {
  let value = inner;
  for (let i = 0; i < levels; i += 1) value = [value];
  return value;
};

describe('values.js: what is carried is written as JSON.stringify writes it', () => {
  test('null, booleans, strings with escapes, numbers, arrays, objects, null-prototype objects', () => {
    const values = [
      null, true, false, 0, -0, 1, -1.5, 0.1, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, Number.MAX_SAFE_INTEGER,
      '', 'plain', 'quote " backslash \\ slash /', '\b\t\n\f\r\u0000\u001f\u007f', 'é € 😀 \u2028', [], {},
      [1, 'two', [3, { four: 4 }], null], { a: 1, 'b c': [true], '': 'empty name', '\n': 'escaped name', 10: 'int', 2: 'first' },
    ];
    for (const value of values) {
      assert.equal(serialize(value).json, JSON.stringify(value), JSON.stringify(value));
      assert.deepEqual(serialize(value).attachments, []);
    }
    const bare = Object.create(null);
    bare.x = [1];
    assert.equal(serialize(bare).json, '{"x":[1]}');
  });

  test('undefined members are left out; undefined as the whole value is null', () => {
    assert.equal(serialize({ a: undefined, b: 1, c: undefined }).json, '{"b":1}');
    assert.equal(serialize(undefined).json, 'null');
  });

  test('a value shared by two members (not a cycle) is written twice', () => {
    const shared = { x: 1 };
    assert.equal(serialize({ a: shared, b: [shared, shared] }).json, '{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });

  test('bytes are attachments, referenced in order; a Uint8Array view keeps only its own bytes', () => {
    const backing = new Uint8Array([9, 1, 2, 3, 9]);
    const { json, attachments } = serialize({ a: Buffer.from('hi'), b: [new Uint8Array([7]), backing.subarray(1, 4)] });
    assert.equal(json, '{"a":{"$attachment":0},"b":[{"$attachment":1},{"$attachment":2}]}');
    assert.deepEqual(attachments.map((bytes) => [...bytes]), [[0x68, 0x69], [7], [1, 2, 3]]);
    assert.ok(attachments.every((bytes) => bytes instanceof Uint8Array)); // sent as they are: the transport writes views
  });

  test('BigInts in the signed 64-bit range are written exactly, as integers', () => {
    const max = 2n ** 63n - 1n;
    const min = -(2n ** 63n);
    assert.equal(serialize({ max, min, zero: 0n, past2to53: 2n ** 53n + 1n }).json,
      '{"max":9223372036854775807,"min":-9223372036854775808,"zero":0,"past2to53":9007199254740993}');
  });
});

describe('values.js: every kind of value JSON cannot carry is refused with its path', () => {
  test('NaN and the infinities', () => {
    refuses({ items: [1, 2, 3, Number.NaN] }, 'payload.items[3]: NaN cannot be carried in JSON');
    refuses({ price: Infinity }, 'payload.price: Infinity cannot be carried in JSON');
    refuses([-Infinity], 'payload[0]: -Infinity cannot be carried in JSON');
    refuses(Number.NaN, 'result: NaN cannot be carried in JSON', 'result');
  });

  test('BigInts outside the signed 64-bit range', () => {
    refuses({ big: 2n ** 63n }, /^payload\.big: the BigInt 9223372036854775808 is outside the signed 64-bit range/);
    refuses([-(2n ** 63n) - 1n], /^payload\[0\]: the BigInt -9223372036854775809 is outside/);
  });

  test('Map, Set, functions and symbols, as values and as members (not dropped)', () => {
    refuses({ tags: new Map([['a', 1]]) }, /^payload\.tags: a Map cannot be carried in JSON/);
    refuses(new Set([1]), /^payload: a Set cannot be carried in JSON/);
    refuses({ ok: 1, onClick() {} }, 'payload.onClick: a function cannot be carried in JSON');
    refuses([() => 1], 'payload[0]: a function cannot be carried in JSON');
    refuses({ kind: Symbol('k') }, 'payload.kind: a symbol cannot be carried in JSON');
    refuses({ [Symbol('hidden')]: 1, shown: 2 }, /^payload: a member keyed by a symbol \(Symbol\(hidden\)\) cannot be carried/);
  });

  test('undefined as an array item, and a hole in an array', () => {
    refuses({ list: [1, undefined] }, 'payload.list[1]: undefined cannot be an array item in JSON (use null)');
    // eslint-disable-next-line no-sparse-arrays
    refuses([1, , 3], 'payload[1]: undefined cannot be an array item in JSON (use null)');
  });

  test('objects that are not plain data: class instances, Date, RegExp, boxed primitives, typed arrays, errors', () => {
    class Point { constructor() { this.x = 1; } }
    refuses({ at: new Point() }, /^payload\.at: an instance of Point cannot be carried in JSON: it is not plain data/);
    refuses({ when: new Date(0) }, /^payload\.when: a Date cannot be carried in JSON \(send an ISO-8601 string/);
    refuses({ re: /x/ }, /^payload\.re: a RegExp cannot be carried in JSON/);
    refuses({ n: new Number(1) }, /^payload\.n: a boxed Number .* \(use the primitive value\)/); // eslint-disable-line no-new-wrappers
    refuses({ s: new String('s') }, /^payload\.s: a boxed String/); // eslint-disable-line no-new-wrappers
    refuses({ b: Object(true) }, /^payload\.b: a boxed Boolean/);
    refuses({ f: new Float64Array(2) }, /^payload\.f: a Float64Array cannot be carried in JSON: only Uint8Array and Buffer are bytes/);
    refuses({ u: new Uint16Array(2) }, /^payload\.u: a Uint16Array cannot be carried/);
    refuses({ c: new Uint8ClampedArray(2) }, /^payload\.c: a Uint8ClampedArray cannot be carried/);
    refuses({ v: new DataView(new ArrayBuffer(2)) }, /^payload\.v: a DataView cannot be carried/);
    refuses({ raw: new ArrayBuffer(2) }, /^payload\.raw: an ArrayBuffer cannot be carried in JSON \(wrap it as bytes/);
    refuses({ e: new Error('x') }, /^payload\.e: an Error cannot be carried in JSON/);
    refuses({ p: Promise.resolve(1) }, /^payload\.p: a Promise cannot be carried in JSON \(await it first\)/);
    refuses({ w: new WeakMap() }, /^payload\.w: a WeakMap cannot be carried/);
  });

  test('an object with a toJSON method (it would be converted silently)', () => {
    refuses({ money: { amount: 1, toJSON() { return '1 EUR'; } } }, /^payload\.money: an object with a toJSON method cannot be carried as it is/);
  });

  test('cycles, named where the value first contains itself', () => {
    const self = { name: 'loop' };
    self.self = self;
    refuses(self, /^payload\.self: a cycle: this is payload again, which contains it/);
    const list = [1];
    list.push({ back: list });
    refuses({ list }, /^payload\.list\[1\]\.back: a cycle: this is payload\.list again/);
    const a = { b: { c: {} } };
    a.b.c.a = a.b;
    refuses({ ok: [1, 2], a }, /^payload\.a\.b\.c\.a: a cycle: this is payload\.a\.b again/);
  });

  test('nesting past level 64 (the body is level 1, a payload level 2)', () => {
    // nested(n, []) is n + 1 arrays: as a payload, at levels 2 .. n + 2.
    assert.equal(serialize(nested(62, [])).json, `${'['.repeat(63)}${']'.repeat(63)}`, '63 arrays: levels 2..64');
    refuses(nested(63, []), /^payload(\[0\]){63}: nested deeper than 64 levels/);
    assert.doesNotThrow(() => serialize(nested(62, 1)), 'a number inside level 64 adds no level');
    // What is sent at the limit is what a receiver (the Node decoder, here) takes, and one level more it refuses.
    assert.equal(decode(encodeRequest('1', 'echo', nested(62, []))).error, undefined);
    const over = `{"v":1,"type":"request","id":"1","action":"echo","payload":${'['.repeat(64)}${']'.repeat(64)}}`;
    assert.equal(decode([Buffer.alloc(0), Buffer.from(over)]).error.code, 'bad_message');
    // An error's data is one level deeper (body, error, data).
    assert.doesNotThrow(() => serialize(nested(61, []), 'error.data', 3));
    assert.throws(() => serialize(nested(62, []), 'error.data', 3), /error\.data(\[0\]){62}: nested deeper than 64 levels/);
  });

  test('strings and member names with unpaired surrogates; pairs are fine', () => {
    assert.equal(serialize({ smile: '\ud83d\ude00' }).json, '{"smile":"😀"}');
    refuses({ items: ['ok', 'broken \ud800'] }, 'payload.items[1]: a string with an unpaired UTF-16 surrogate cannot be carried in JSON (it has no UTF-8 form)');
    refuses({ 'tail \udc00': 1 }, /^payload\["tail \uFFFD"\]: a member name with an unpaired UTF-16 surrogate/);
  });

  test('an object whose only member is "$attachment" (every receiver reads it as a reference: SPEC 3)', () => {
    refuses({ ref: { $attachment: 0 } }, /^payload\.ref: an object whose only member is "\$attachment" cannot be carried as data/);
    refuses([{ $attachment: 'x', other: undefined }], /^payload\[0\]: an object whose only member is "\$attachment"/);
    assert.equal(serialize({ $attachment: 0, literal: true }).json, '{"$attachment":0,"literal":true}', 'with another member it is data');
    assert.equal(serialize({ $attachments: 0 }).json, '{"$attachments":0}');
  });

  test('the first offending part is named, in the order the text is written', () => {
    refuses({ a: [1, { b: Number.NaN }], c: new Map() }, 'payload.a[1].b: NaN cannot be carried in JSON');
    refuses({ 'not an identifier': { 0: Infinity } }, 'payload["not an identifier"]["0"]: Infinity cannot be carried in JSON');
  });
});

// --- through a peer ------------------------------------------------------------------------------------------------

const request = (id, action, payload, extra = {}) => ({ v: 1, type: 'request', id, action, payload, ...extra });
const responseTo = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, 10_000, `the response to ${id}`);

const expectRefusal = (path, reason) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, 'invalid_payload', error.message);
  assert.match(error.message, reason);
  assert.ok(error.message.startsWith(`${path}: `), error.message);
  assert.deepEqual(error.data, { path });
  return true;
};

async function setup(t, peerOptions = {}) {
  const host = await RouterHost.start(transports.ipc());
  t.after(() => host.stop());
  const logs = [];
  const peer = new Peer(host.endpoint, { name: 'values', log: (level, message) => logs.push(`${level}: ${message}`), ...peerOptions });
  t.after(() => peer.close());
  const connected = peer.connect();
  await host.welcome();
  await within(connected, 10_000, 'connect() to resolve');
  return { host, peer, logs };
}

/** The next request the host receives is the one for `marker`: nothing was sent for what was refused before it. */
async function nothingSentBefore(host, peer, marker) {
  const answered = peer.call('echo', marker);
  const { body } = await host.nextOfType('request');
  assert.deepEqual(body.payload, marker, 'the first request the host received is the one sent after the refusals');
  host.send({ v: 1, type: 'response', id: body.id, ok: true, result: marker });
  assert.deepEqual(await answered, marker);
  assert.equal(host.messages.filter((m) => m.body?.type === 'event').length, 0, 'no event was sent');
}

describe('payloads the peer refuses before sending (invalid_payload)', () => {
  test('call and stream reject at once, naming the path; post throws at once; nothing goes out', async (t) => {
    const { host, peer } = await setup(t);
    class Order {}
    await assert.rejects(peer.call('save', { items: [1, 2, 3, Number.NaN] }), expectRefusal('payload.items[3]', /NaN cannot be carried in JSON$/));
    await assert.rejects(peer.call('save', new Map()), expectRefusal('payload', /a Map cannot be carried/));
    await assert.rejects(peer.call('save', { onDone: () => {} }), expectRefusal('payload.onDone', /a function/));
    await assert.rejects(peer.call('save', { order: new Order() }), expectRefusal('payload.order', /an instance of Order/));
    await assert.rejects(peer.call('save', { big: 2n ** 64n }), expectRefusal('payload.big', /outside the signed 64-bit range/));
    const cyclic = { a: 1 };
    cyclic.me = cyclic;
    await assert.rejects(peer.call('save', cyclic), expectRefusal('payload.me', /a cycle/));
    await assert.rejects(peer.stream('save', { when: new Date() }).result, expectRefusal('payload.when', /a Date/));
    let progressed = 0;
    const streamed = peer.stream('save', [undefined]);
    for await (const _ of streamed.progress) progressed += 1;
    assert.equal(progressed, 0);
    await assert.rejects(streamed.result, expectRefusal('payload[0]', /undefined cannot be an array item/));
    assert.throws(() => peer.post('note', { s: new Set() }), expectRefusal('payload.s', /a Set/));
    assert.throws(() => peer.post('note', { text: 'x\udfff' }), expectRefusal('payload.text', /unpaired UTF-16 surrogate/));
    await nothingSentBefore(host, peer, { after: 'the refusals' });
  });

  test('a BigInt inside the 64-bit range goes on the wire exactly (past 2^53 too)', async (t) => {
    const { host, peer } = await setup(t);
    const answered = peer.call('store', { max: 2n ** 63n - 1n, min: -(2n ** 63n), odd: 2n ** 53n + 1n });
    const { body, frames } = await host.nextOfType('request');
    assert.match(frames[1].toString('utf8'), /"payload":\{"max":9223372036854775807,"min":-9223372036854775808,"odd":9007199254740993\}/);
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: 'stored' });
    assert.equal(await answered, 'stored');
    peer.post('note', 1234567890123456789n);
    const event = await host.nextOfType('event');
    assert.match(event.frames[1].toString('utf8'), /"payload":1234567890123456789\}$/);
  });

  test('undefined members are left out; bytes still travel as attachments', async (t) => {
    const { host, peer } = await setup(t);
    const answered = peer.call('upload', { name: 'f', skip: undefined, data: Buffer.from([1, 2, 3]) });
    const { body, frames } = await host.nextOfType('request');
    assert.deepEqual(body.payload, { name: 'f', data: { $attachment: 0 } });
    assert.deepEqual([...frames[2]], [1, 2, 3]);
    host.send({ v: 1, type: 'response', id: body.id, ok: true, result: null });
    await answered;
  });
});

describe('values a handler makes that the peer refuses (handler_error, with the path)', () => {
  test('results: a Map, NaN, a function member, a class instance, a cycle, a Date', async (t) => {
    const cyclic = [];
    cyclic.push(cyclic);
    const results = {
      map: () => ({ tags: new Map([['a', 1]]) }),
      nan: () => [0, Number.NaN],
      fn: () => ({ ok: true, callback: () => {} }),
      instance: () => new (class Widget {})(),
      cycle: () => cyclic,
      date: async () => ({ at: new Date() }),
    };
    const { host, logs } = await setup(t, { actions: results });
    const expected = {
      map: /^result\.tags: a Map cannot be carried in JSON/,
      nan: /^result\[1\]: NaN cannot be carried in JSON$/,
      fn: /^result\.callback: a function cannot be carried in JSON$/,
      instance: /^result: an instance of Widget cannot be carried/,
      cycle: /^result\[0\]: a cycle/,
      date: /^result\.at: a Date cannot be carried/,
    };
    for (const [action, message] of Object.entries(expected)) {
      host.send(request(`r-${action}`, action, null));
      const { body } = await responseTo(host, `r-${action}`);
      assert.equal(body.ok, false, action);
      assert.equal(body.error.code, 'handler_error', action);
      assert.match(body.error.message, message);
    }
    assert.ok(logs.some((line) => line.startsWith('warn: map (request r-map) returned a result that cannot be sent')), logs.join('\n'));
  });

  test('a progress payload: the request is answered handler_error and ctx.progress() throws to the handler', async (t) => {
    let thrown = null;
    let aborted = null;
    const { host } = await setup(t, {
      actions: {
        work: async (payload, ctx) => {
          ctx.progress({ step: 1 });
          try {
            ctx.progress({ step: 2, eta: Infinity });
          } catch (error) {
            thrown = error;
            aborted = ctx.signal.aborted;
          }
          return 'finished anyway';
        },
      },
    });
    host.send(request('p1', 'work', null, { progress: true }));
    const first = await host.next((b) => b?.type === 'progress' && b.id === 'p1');
    assert.deepEqual(first.body.payload, { step: 1 });
    const { body } = await responseTo(host, 'p1');
    assert.equal(body.error.code, 'handler_error');
    assert.equal(body.error.message, 'progress.eta: Infinity cannot be carried in JSON');
    assert.ok(thrown instanceof BridgeError && thrown.code === 'handler_error', String(thrown));
    assert.equal(aborted, true, 'the handler\'s signal is aborted');
    host.send({ v: 1, type: 'ping' });
    await host.nextOfType('pong');
    assert.equal(host.messages.filter((m) => m.body?.id === 'p1').length, 0, 'nothing more for p1 (one response)');
  });

  test('a thrown BridgeError whose data cannot be carried', async (t) => {
    const { host } = await setup(t, {
      actions: { picky: () => { throw new BridgeError('too_picky', 'no', { data: { why: new Set(['x']) } }); } },
    });
    host.send(request('d1', 'picky', null));
    const { body } = await responseTo(host, 'd1');
    assert.equal(body.error.code, 'handler_error');
    assert.match(body.error.message, /^error\.data\.why: a Set cannot be carried/);
  });

  test('an error message with an unpaired surrogate is sent readable (U+FFFD), not refused by the host', async (t) => {
    const { host } = await setup(t, { actions: { echoBroken: () => { throw new Error('bad input \ud800'); } } });
    host.send(request('m1', 'echoBroken', null));
    const { body, frames } = await responseTo(host, 'm1');
    assert.equal(body.error.code, 'handler_error');
    assert.equal(body.error.message, 'Error: bad input \ufffd');
    assert.equal(decode(frames.slice(0, 2)).error, undefined, 'the response is a body every receiver takes');
  });

  test('$evaluate results: a Map is refused (not {}), a BigInt in range is an integer, NaN and functions refused', async (t) => {
    const { host } = await setup(t, { evaluate: true });
    const evaluate = (id, script) => host.send(request(id, '$evaluate', { script, arguments: {} }));
    evaluate('e1', 'return new Map([["a", 1]])');
    const map = (await responseTo(host, 'e1')).body;
    assert.equal(map.ok, false, 'not {}');
    assert.equal(map.error.code, 'handler_error');
    assert.match(map.error.message, /^result: a Map cannot be carried in JSON/);
    evaluate('e2', 'return { total: 0 / 0 }');
    assert.equal((await responseTo(host, 'e2')).body.error.message, 'result.total: NaN cannot be carried in JSON');
    evaluate('e3', 'return { f: function () {} }');
    assert.equal((await responseTo(host, 'e3')).body.error.message, 'result.f: a function cannot be carried in JSON');
    evaluate('e4', 'return 2n ** 62n');
    const big = await responseTo(host, 'e4');
    assert.match(big.frames[1].toString('utf8'), /"result":4611686018427387904\}$/);
    evaluate('e5', 'return undefined');
    assert.equal((await responseTo(host, 'e5')).body.result, null);
  });
});
