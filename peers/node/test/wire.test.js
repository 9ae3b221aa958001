// The wire layer against the project's protocol fixtures (protocol/fixtures), plus the byte-level
// cases JSON fixtures cannot express (invalid UTF-8, missing frames, attachments).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decode, encode, encodePayload, encodeProgress, bodies, messageBytes, isName } from '../src/wire.js';
import { connectionFileProblem, readConnectionFile } from '../src/connection-file.js';
import { repoRoot } from '../test-helpers/processes.js';

const fixtures = path.join(repoRoot, 'protocol/fixtures');
const frames = (text) => [Buffer.alloc(0), Buffer.from(text, 'utf8')];

describe('protocol fixtures: message bodies', () => {
  const dir = path.join(fixtures, 'messages');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  test('the fixture directory has message fixtures', () => assert.ok(files.length > 0, dir));
  for (const file of files) {
    for (const group of JSON.parse(readFileSync(path.join(dir, file), 'utf8'))) {
      describe(`${file}: ${group.description}`, () => {
        for (const fixture of group.tests) {
          test(fixture.description, () => {
            const decoded = decode(frames(JSON.stringify(fixture.data)));
            if (fixture.valid) {
              assert.equal(decoded.error, undefined, decoded.error?.message);
              assert.equal(decoded.body.type, fixture.data.type);
            } else {
              assert.ok(decoded.error, 'rejected');
              assert.equal(decoded.error.code, fixture.error);
              const id = fixture.data?.id;
              assert.equal(decoded.id, isName(id) ? id : null, 'the readable id is kept for the error response');
            }
          });
        }
      });
    }
  }
});

describe('protocol fixtures: connection files', () => {
  for (const group of JSON.parse(readFileSync(path.join(fixtures, 'connection-files.json'), 'utf8'))) {
    for (const fixture of group.tests) {
      test(fixture.description, () => {
        const problem = connectionFileProblem(fixture.data);
        if (fixture.valid) assert.equal(problem, null);
        else assert.equal(typeof problem, 'string');
        const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-cf-')), 'connection.json');
        writeFileSync(file, JSON.stringify(fixture.data));
        if (fixture.valid) assert.equal(readConnectionFile(file).peer, fixture.data.peer);
        else assert.throws(() => readConnectionFile(file), (e) => e.code === 'bad_message' && e.message.includes(problem));
      });
    }
  }

  test('readConnectionFile names the file in its errors', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'zb-node-cf-'));
    const good = path.join(dir, 'good.json');
    writeFileSync(good, JSON.stringify({ protocol: 1, endpoint: 'tcp://127.0.0.1:5555', host: 'h', signature_scheme: 'hmac-sha256', key: '' }));
    assert.deepEqual(readConnectionFile(good), { endpoint: 'tcp://127.0.0.1:5555', host: 'h', key: '' });
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, '{"protocol": 2}');
    assert.throws(() => readConnectionFile(bad), (e) => e.code === 'bad_message' && e.message.includes(bad));
    assert.throws(() => readConnectionFile(path.join(dir, 'missing.json')), (e) => e.code === 'bad_message' && /cannot read/.test(e.message));
  });
});

describe('wire: byte-level rules', () => {
  test('fewer than two frames is bad_message with a null id', () => {
    for (const message of [[], [Buffer.alloc(0)]]) {
      const decoded = decode(message);
      assert.equal(decoded.error.code, 'bad_message');
      assert.equal(decoded.id, null);
    }
  });

  // The huge-number check reads the runs of number characters around each "e123"-like place first and steps over the
  // strings only when one reads as infinite: both outcomes of that first look, with and without a huge number.
  test('an exponent-like place in a string is not a huge number; a huge number beside one is still refused', () => {
    const event = (payload) => `{"v":1,"type":"event","action":"a","payload":${payload}}`;
    const accepted = [
      '{"id":"42fae123-1","uuid":"3f2e1000-9e12-4e55-b1e0-0c8e9e7e1234"}', // runs that read as NaN or finite
      '["-1e999-", "x1e999", "1e999 "]', // runs that read as infinite, inside strings: the strings are stepped over
      '{"1E+400": 1.7976931348623157e308}',
    ];
    for (const payload of accepted) assert.equal(decode(frames(event(payload))).error, undefined, payload);
    const refused = ['{"id":"42fae123-1","n":1e400}', '["ae123", -1E+400]', '["1e999", 2e999]', `[1${'0'.repeat(400)}]`];
    for (const payload of refused) {
      const decoded = decode(frames(event(payload)));
      assert.equal(decoded.error?.code, 'bad_message', payload);
      assert.match(decoded.error.message, /outside the range of a double/, payload);
    }
  });

  test('invalid UTF-8 and non-JSON bodies are bad_message', () => {
    const invalidUtf8 = [Buffer.alloc(0), Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])];
    assert.equal(decode(invalidUtf8).error.code, 'bad_message');
    for (const text of ['', 'not json', '{"v":1,', '{"v":1,"type":"ping"} trailing']) {
      assert.equal(decode(frames(text)).error.code, 'bad_message', text);
    }
  });

  test('nesting up to 64 levels is accepted, 65 is bad_message', () => {
    const nest = (levels) => '['.repeat(levels) + ']'.repeat(levels);
    const ok = `{"v":1,"type":"event","action":"a","payload":${nest(63)}}`;
    assert.equal(decode(frames(ok)).error, undefined);
    const deep = `{"v":1,"type":"event","action":"a","payload":${nest(64)}}`;
    assert.match(decode(frames(deep)).error.message, /deeper than 64/);
    const brackets = `{"v":1,"type":"event","action":"a","payload":"${'['.repeat(200)}\\"{{"}`;
    assert.equal(decode(frames(brackets)).error, undefined, 'brackets inside strings do not count');
  });

  test('integers survive the round trip as integers', () => {
    const [, body] = encode({ v: 1, type: 'response', id: 'r', ok: true, result: 1 + 2 });
    assert.equal(body.toString(), '{"v":1,"type":"response","id":"r","ok":true,"result":3}');
  });

  test('bytes travel as attachment frames and come back as Buffers', () => {
    const blob = Buffer.from([1, 2, 3]);
    const typed = new Uint8Array([9, 8]);
    const encoded = encode({ v: 1, type: 'event', action: 'a', payload: { blob, list: [typed] } });
    assert.equal(encoded.length, 4);
    assert.equal(JSON.parse(encoded[1]).payload.blob.$attachment, 0);
    assert.equal(messageBytes(encoded), encoded[1].length + 5);
    const { body } = decode(encoded);
    assert.ok(body.payload.blob.equals(blob));
    assert.deepEqual([...body.payload.list[0]], [9, 8]);
  });

  test('a reference to a missing attachment is bad_message with the id kept', () => {
    const decoded = decode(frames('{"v":1,"type":"request","id":"r9","action":"a","payload":{"$attachment":0}}'));
    assert.equal(decoded.error.code, 'bad_message');
    assert.equal(decoded.id, 'r9');
  });

  test('an escaped "$attachment" key is an attachment reference too', () => {
    const decoded = decode([...frames('{"v":1,"type":"request","id":"r8","action":"a","payload":{"\\u0024attachment":0}}'), Buffer.from([7])]);
    assert.ok(Buffer.isBuffer(decoded.body.payload), JSON.stringify(decoded));
    assert.deepEqual([...decoded.body.payload], [7]);
    const missing = decode(frames('{"v":1,"type":"request","id":"r7","action":"a","payload":{"\\u0024attachment":0}}'));
    assert.equal(missing.error.code, 'bad_message');
  });

  test('bodies that cannot be JSON make encode throw', () => {
    const cyclic = { v: 1 };
    cyclic.self = cyclic;
    assert.throws(() => encode(cyclic), TypeError);
    assert.throws(() => encode({ big: 1n }), TypeError);
  });

  test('a request carries deadline beside timeout_ms only when set; both are checked like other integers', () => {
    const request = (extra) => decode(frames(JSON.stringify({ v: 1, type: 'request', id: 'd1', action: 'a', ...extra })));
    assert.equal(request({ timeout_ms: 100, deadline: 0 }).body.deadline, 0);
    for (const deadline of [-1, 1.5, '1', null]) {
      const decoded = request({ deadline });
      assert.equal(decoded.error?.code, 'bad_message', JSON.stringify(deadline));
      assert.equal(decoded.id, 'd1');
    }
    const sent = JSON.parse(encode(bodies.request('r', 'a', null, 500, false, 1_700_000_000_500))[1]);
    assert.deepEqual(sent, { v: 1, type: 'request', id: 'r', action: 'a', payload: null, timeout_ms: 500, deadline: 1_700_000_000_500 });
    assert.equal('deadline' in JSON.parse(encode(bodies.request('r', 'a', null))[1]), false);
  });

  test('hello carries resume_token only when given; a malformed token is bad_message whose text does not repeat it', () => {
    const token = '0123456789abcdef'.repeat(4);
    const hello = JSON.parse(encode(bodies.hello('p', [], [], 1000, 's1', token))[1]);
    assert.deepEqual(hello, { v: 1, type: 'hello', peer: 'p', actions: [], features: [], heartbeat_ms: 1000, session: 's1', resume_token: token });
    assert.equal('resume_token' in JSON.parse(encode(bodies.hello('p', [], [], 1000, 's1'))[1]), false);
    assert.equal(decode(encode(hello)).body.resume_token, token);
    const welcome = { v: 1, type: 'welcome', host: 'h', session: 's1', actions: [], heartbeat_ms: 5000, limits: { max_message_bytes: 1, max_in_flight: 1 } };
    assert.equal(decode(frames(JSON.stringify({ ...welcome, resume_token: token }))).body.resume_token, token);
    for (const bad of [token.toUpperCase(), `${token}0`, token.slice(1), null]) {
      for (const body of [{ ...welcome, resume_token: bad }, { ...hello, resume_token: bad }]) {
        const { error } = decode(frames(JSON.stringify(body)));
        assert.equal(error?.code, 'bad_message', `${body.type}: ${bad}`);
        assert.equal(typeof bad === 'string' && error.message.includes(bad), false, error.message);
      }
    }
  });

  test('progress is encoded around a payload encoded once, with skipped only when some were', () => {
    const payload = { i: 1, data: Buffer.from([7]) };
    const encoded = encodePayload(payload);
    payload.i = 2; // reported progress keeps the value it had when reported
    const plain = encodeProgress('p1', 3, encoded);
    assert.deepEqual(JSON.parse(plain[1]), { v: 1, type: 'progress', id: 'p1', seq: 3, payload: { i: 1, data: { $attachment: 0 } } });
    assert.deepEqual([...plain[2]], [7]);
    const { body } = decode(encodeProgress('p1', 4, encoded, 5));
    assert.equal(body.skipped, 5);
    assert.equal(body.payload.i, 1);
    assert.equal(encoded.bytes, plain[1].length - '{"v":1,"type":"progress","id":"p1","seq":3,"payload":}'.length + 1);
    assert.equal(JSON.parse(encodeProgress('p2', 1, encodePayload(undefined))[1]).payload, null);
    for (const skipped of [0, 1.5, '2']) {
      assert.equal(decode(frames(JSON.stringify({ v: 1, type: 'progress', id: 'p', seq: 1, skipped }))).error?.code, 'bad_message');
    }
  });
});
