// Keyed connections (SPEC 3.1) byte for byte: every sign and verify case of protocol/fixtures/signatures.json
// (SPEC 14.1a), the peer's channel, and the strict parsing of frame 0.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { PeerChannel, clockSkewDiagnosis, mac, parseKey, parseSignature, signMessage, signOpening } from '../src/signing.js';
import { decodeZeroMQBatch, encodeWebSocketBatch } from '../src/websocket-frames.js';
import { BridgeError } from '../src/errors.js';
import { KeyedHost } from '../test-helpers/keyed-host.js';
import { generator } from '../test-helpers/random.js';
import { repoRoot } from '../test-helpers/processes.js';

// A list of fixture objects (SPEC 14.1a), each with its key; read as a list whether or not it is wrapped in one.
const fixtures = [JSON.parse(readFileSync(path.join(repoRoot, 'protocol/fixtures/signatures.json'), 'utf8'))].flat();
const [fixture] = fixtures;
const key = parseKey(fixture.key);
// What the shared core gives: plain Uint8Arrays (a Buffer is one, but deepEqual tells them apart).
const bytes = (text, encoding) => new Uint8Array(Buffer.from(text, encoding));
const toFrame = (frame) => (typeof frame === 'string' ? Buffer.from(frame, 'utf8') : Buffer.from(frame.hex, 'hex'));

describe('signatures.json: sign', () => {
  test('the fixture has sign cases', () => assert.ok(fixtures.every((f) => f.sign.length > 0)));
  for (const c of fixtures.flatMap((f) => f.sign.map((s) => ({ ...s, key: parseKey(f.key) })))) {
    test(`signatures.json: sign: ${c.description}`, () => {
      const { key } = c;
      const frames = c.frames.map(toFrame);
      const frame0 = c.kind === 'hello'
        ? signOpening(key, c.channel, c.ms, frames)
        : signMessage(key, c.kind, c.channel, c.counter, frames);
      assert.equal(frame0.toString('latin1'), c.frame0);
      const signed = () => ({ counter: BigInt(c.counter), mac: bytes(c.frame0.split('.')[2], 'hex') });
      assert.deepEqual(parseSignature(frame0), c.kind === 'hello'
        ? { nonce: c.channel, ms: BigInt(c.ms), mac: bytes(c.frame0.split('.')[3], 'hex') }
        : (c.kind.endsWith('-batch') ? { batch: true, ...signed() } : signed()));
    });
  }

  test('the fixture signs batches of both directions (SPEC 3.3)', () => {
    assert.deepEqual(new Set(fixture.sign.map((c) => c.kind).filter((kind) => kind.endsWith('-batch'))), new Set(['p2h-batch', 'h2p-batch']));
  });

  test('the peer\'s channel signs a batch as the fixture does, in the sequence its messages take', () => {
    const batch = fixture.sign.find((c) => c.kind === 'p2h-batch');
    const channel = new PeerChannel(key, batch.channel);
    channel.opened = true;
    channel.sent = batch.counter - 1;
    assert.equal(Buffer.from(channel.signBatch(toFrame(batch.frames[0]))).toString('latin1'), batch.frame0);
    assert.match(Buffer.from(channel.sign([Buffer.from('{}')])).toString('latin1'), new RegExp(`^m\\.${batch.counter + 1}\\.`));
    assert.throws(() => new PeerChannel(key).signBatch(Buffer.from('x')), /cannot open a channel/);
  });
});

describe('signatures.json: verify', () => {
  test('the fixture has verify cases for both sides', () => {
    assert.deepEqual(new Set(fixtures.flatMap((f) => f.verify.map((c) => c.side))), new Set(['host', 'peer']));
  });
  for (const c of fixtures.flatMap((f) => f.verify.map((v) => ({ ...v, key: parseKey(f.key) })))) {
    test(`signatures.json: verify: ${c.description}`, () => {
      const { key } = c;
      const host = c.side === 'host' ? new KeyedHost(key, { now: () => c.now_ms }) : null;
      const peer = c.side === 'peer' ? new PeerChannel(key, c.channel) : null;
      c.messages.forEach((m, i) => {
        const frame0 = Buffer.from(m.frame0, 'latin1');
        const frames = m.frames.map(toFrame);
        if (peer && c.description.includes('batch')) peer.welcomed = true; // these cases start after the welcome (SPEC 3.3)
        const why = host ? host.receive(m.connection ?? 'a', frame0, frames) : peer.refusal(frame0, frames);
        assert.equal(why === null, m.accept, `message ${i} (${m.note ?? m.frame0}): ${why ?? 'accepted'}`);
        if (host) assert.equal(host.clockSkewMs, m.clock_skew_ms ?? null, `message ${i}: the clock skew`);
      });
    });
  }
});

describe('signatures.json: batches (SPEC 3.3)', () => {
  test('the fixture has batches read whole, refused whole and with messages refused alone', () => {
    assert.ok(fixture.batches.some((c) => c.error) && fixture.batches.some((c) => c.messages?.some((m) => m.error)));
  });
  for (const c of fixture.batches) {
    test(`signatures.json: batches: ${c.description}`, () => {
      const frame1 = Buffer.from(c.hex, 'hex');
      if (c.error) {
        assert.equal(c.error, 'bad_message');
        assert.throws(() => decodeZeroMQBatch(frame1), (error) => error instanceof BridgeError && error.code === 'bad_message');
        return;
      }
      const read = decodeZeroMQBatch(frame1);
      assert.equal(read.length, c.messages.length);
      c.messages.forEach((expected, i) => {
        if (expected.error) {
          assert.ok(read[i] instanceof BridgeError && read[i].code === expected.error, `message ${i} is refused alone`);
          return;
        }
        assert.ok(!(read[i] instanceof BridgeError), `message ${i}: ${read[i].message}`);
        assert.equal(read[i][0].length, 0, `message ${i}: frame 0 is empty`);
        assert.deepEqual(read[i].slice(1).map((f) => Buffer.from(f)), expected.map(toFrame), `message ${i}`);
      });
      if (c.messages.every((m) => !m.error)) {
        assert.deepEqual(Buffer.from(encodeWebSocketBatch(c.messages.map((m) => [Buffer.alloc(0), ...m.map(toFrame)]))), frame1);
      }
    });
  }
});

describe('signing: the peer\'s channel', () => {
  const [opening, first] = fixture.sign;

  test('opens with its hello at the given clock, then signs p2h from counter 1', () => {
    const channel = new PeerChannel(key, opening.channel);
    assert.equal(Buffer.from(channel.sign(opening.frames.map(toFrame), opening.ms)).toString('latin1'), opening.frame0);
    assert.equal(Buffer.from(channel.sign(first.frames.map(toFrame))).toString('latin1'), first.frame0);
    assert.match(Buffer.from(channel.sign([Buffer.from('{}')])).toString('latin1'), /^m\.2\.[0-9a-f]{64}$/);
  });

  test('each channel gets a fresh 128-bit nonce and opens with the wall clock', () => {
    const a = new PeerChannel(key);
    const b = new PeerChannel(key);
    assert.match(a.nonce, /^[0-9a-f]{32}$/);
    assert.notEqual(a.nonce, b.nonce);
    const before = Date.now();
    const parsed = parseSignature(a.sign([Buffer.from('{"v":1,"type":"hello","peer":"p"}')]));
    assert.equal(parsed.nonce, a.nonce);
    assert.ok(parsed.ms >= BigInt(before) && parsed.ms <= BigInt(Date.now()));
  });

  test('the host\'s messages from counter 1, gaps allowed; the largest counter 2^63-1 is still accepted', () => {
    const channel = new PeerChannel(key, opening.channel);
    const welcome = [Buffer.from('{"v":1,"type":"welcome"}')];
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, 4, welcome), welcome), null);
    const last = 2n ** 63n - 1n;
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, last, welcome), welcome), null);
    assert.match(channel.refusal(signMessage(key, 'h2p', opening.channel, last, welcome), welcome), /replayed/);
  });

  test('nothing before the first welcome, not even a well-signed message; the welcome after it is accepted', () => {
    const channel = new PeerChannel(key, opening.channel);
    const ping = [Buffer.from('{"v":1,"type":"ping"}')];
    assert.match(channel.refusal(signMessage(key, 'h2p', opening.channel, 1, ping), ping), /before the channel's first welcome/);
    const welcome = [Buffer.from('{"v":1,"type":"welcome"}')];
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, 2, welcome), welcome), null);
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, 3, ping), ping), null);
  });

  test('before the first welcome, a response with "id": null (the name_taken answering a hello) is accepted', () => {
    const channel = new PeerChannel(key, opening.channel);
    const nameTaken = [Buffer.from('{"v":1,"type":"response","id":null,"ok":false,"error":{"code":"name_taken","message":"m"}}')];
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, 1, nameTaken), nameTaken), null);
    const answer = [Buffer.from('{"v":1,"type":"response","id":"1","ok":true,"result":null}')];
    assert.match(channel.refusal(signMessage(key, 'h2p', opening.channel, 2, answer), answer), /before the channel's first welcome/);
    assert.match(channel.refusal(signMessage(key, 'h2p', opening.channel, 1, nameTaken), nameTaken), /replayed/, 'its counter counts');
    const welcome = [Buffer.from('{"v":1,"type":"welcome"}')];
    assert.equal(channel.refusal(signMessage(key, 'h2p', opening.channel, 3, welcome), welcome), null);
  });

  test('an opening signature from the host, and a signature with another key, are refused', () => {
    const channel = new PeerChannel(key, opening.channel);
    const welcome = [Buffer.from('{"v":1,"type":"welcome"}')];
    assert.match(channel.refusal(signOpening(key, opening.channel, 1, welcome), welcome), /opening/);
    const other = parseKey('00'.repeat(32));
    assert.match(channel.refusal(signMessage(other, 'h2p', opening.channel, 1, welcome), welcome), /wrong signature/);
  });
});

describe('signing: frame 0 and keys', () => {
  const hex = 'ab'.repeat(32);

  test('frame 0 is read strictly', () => {
    for (const text of ['', 'm', 'm.1', `m.1.${hex}.`, `m..${hex}`, `m.-1.${hex}`, `m.1e3.${hex}`, `m.1.${hex.toUpperCase()}`,
      `m. 1.${hex}`, `M.1.${hex}`, `m.1.${hex}0`, `h.${'0'.repeat(32)}.01.${hex}`, `h.${'0'.repeat(32)}..${hex}`,
      `h.${'0'.repeat(33)}.1.${hex}`, `h.${'0'.repeat(32)}.1.${hex}.x`, `m.1.${hex}\n`, `x.1.${hex}`,
      `m.99999999999999999999.${hex}`, `h.${'0'.repeat(32)}.9223372036854775808.${hex}`]) {
      assert.equal(parseSignature(Buffer.from(text, 'latin1')), null, JSON.stringify(text));
    }
    assert.deepEqual(parseSignature(Buffer.from(`m.9223372036854775807.${hex}`)), { counter: 2n ** 63n - 1n, mac: bytes(hex, 'hex') });
    assert.deepEqual(parseSignature(Buffer.from(`h.${'0'.repeat(32)}.0.${hex}`)), { nonce: '0'.repeat(32), ms: 0n, mac: bytes(hex, 'hex') });
    // A multi-byte character must not pass for its code units.
    assert.equal(parseSignature(Buffer.concat([Buffer.from('m.1.'), Buffer.from(`${hex.slice(1)}\u00e9`, 'utf8')])), null);
  });

  test('the byte-by-byte reader agrees with the reference patterns on thousands of near misses', () => {
    // The patterns the reader replaced (and the Python peer's signing.py uses), with the range check after them.
    const message = /^m\.([1-9][0-9]{0,18})\.([0-9a-f]{64})$/;
    const opening = /^h\.([0-9a-f]{32})\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{64})$/;
    const reference = (text) => {
      let match = message.exec(text);
      if (match) return BigInt(match[1]) < 2n ** 63n ? { counter: BigInt(match[1]), mac: bytes(match[2], 'hex') } : null;
      match = opening.exec(text);
      if (match) return BigInt(match[2]) < 2n ** 63n ? { nonce: match[1], ms: BigInt(match[2]), mac: bytes(match[3], 'hex') } : null;
      return null;
    };
    const seeds = [`m.1.${hex}`, `m.9223372036854775807.${hex}`, `h.${'0a'.repeat(16)}.0.${hex}`, `h.${'f'.repeat(32)}.1700000000000.${hex}`];
    const alphabet = ['m', 'h', '.', '0', '1', '9', 'a', 'f', 'g', 'A', 'F', ' ', '\u00e9', '-'];
    let seed = 26;
    const next = (n) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
    let accepted = 0;
    for (let i = 0; i < 5000; i += 1) {
      let text = seeds[next(seeds.length)];
      for (let edits = 1 + next(3); edits > 0; edits -= 1) {
        const at = next(text.length + 1);
        const kind = next(3); // replace, insert or delete one character
        const char = alphabet[next(alphabet.length)];
        text = text.slice(0, at) + (kind === 2 ? '' : char) + text.slice(kind === 1 ? at : at + 1);
      }
      const expected = reference(text);
      if (expected) accepted += 1;
      assert.deepEqual(parseSignature(Buffer.from(text, 'latin1')), expected, JSON.stringify(text));
    }
    assert.ok(accepted > 100, `some edits keep a valid frame 0 (${accepted})`);
  });

  test('a message signature read from its bytes agrees with the strict text form on every one-byte change', () => {
    // The reference: SPEC 3.1's form as a regex over the text (what parseSignature matched before it read bytes).
    const strict = /^m\.([1-9][0-9]{0,18})\.([0-9a-f]{64})$/;
    const reference = (frame0) => {
      const match = strict.exec(frame0.toString('latin1'));
      if (!match) return null;
      const counter = BigInt(match[1]);
      return counter <= 2n ** 63n - 1n ? { counter, mac: bytes(match[2], 'hex') } : null;
    };
    const replacements = [0x00, 0x2e, 0x2f, 0x30, 0x31, 0x39, 0x3a, 0x41, 0x46, 0x61, 0x66, 0x67, 0x6d, 0x7f, 0xe9, 0xff];
    for (const valid of [`m.1.${hex}`, `m.1234567890123456789.${hex}`, `m.9223372036854775807.${hex}`]) {
      const original = Buffer.from(valid, 'latin1');
      for (let at = 0; at < original.length; at += 1) {
        for (const byte of replacements) {
          const changed = Buffer.from(original);
          changed[at] = byte;
          assert.deepEqual(parseSignature(changed), reference(changed), `${valid} with byte ${at} as ${byte}`);
        }
        const shorter = Buffer.concat([original.subarray(0, at), original.subarray(at + 1)]);
        if (shorter[0] === 0x6d) assert.deepEqual(parseSignature(shorter), reference(shorter), `${valid} without byte ${at}`);
      }
    }
  });

  test('frame boundaries and attachments are under the MAC', () => {
    const ab = mac(key, 'p2h', 'c', 1, [Buffer.from('ab'), Buffer.from('c')]);
    const a = mac(key, 'p2h', 'c', 1, [Buffer.from('a'), Buffer.from('bc')]);
    assert.notDeepEqual(ab, a);
    assert.notDeepEqual(mac(key, 'p2h', 'c', 1, [Buffer.from('x')]), mac(key, 'p2h', 'c', 1, [Buffer.from('x'), Buffer.alloc(0)]));
  });

  test('a key is hex of an even, non-zero number of digits, either case', () => {
    assert.deepEqual(parseKey('0aFf'), new Uint8Array([0x0a, 0xff]));
    for (const bad of ['', 'abc', 'zz', '0x00', ' 00', 42]) assert.throws(() => parseKey(bad), TypeError, String(bad));
  });
});

describe('signing: the channel against node:crypto\'s createHmac', () => {
  // The channel's MAC is node:crypto's one-shot inner hash and src/sha256.js's outer block over one reused array up to
  // 16 KiB, createHmac over parts above: frame sizes on both sides of that limit, keys of 1 to 100 bytes.
  test('2,000 random keys and messages: the peer signs what createHmac signs, and accepts only what it signs', () => {
    const random = generator(26);
    const sizes = [0, 1, 63, 64, 200, 300, 370, 380, 390, 448, 500, 1000, 16_300, 16_384, 17_000, 70_000];
    for (let i = 0; i < 2000; i += 1) {
      const key = Uint8Array.from({ length: 1 + Math.floor(random() * 100) }, () => Math.floor(random() * 256));
      const nonce = Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(random() * 16)]).join('');
      const frameCount = 1 + Math.floor(random() * 3);
      const frames = Array.from({ length: frameCount }, () => {
        const size = random() < 0.5 ? sizes[Math.floor(random() * sizes.length)] : Math.floor(random() * 600);
        return Buffer.from(Uint8Array.from({ length: size }, () => Math.floor(random() * 256)));
      });
      const channel = new PeerChannel(key, nonce);
      channel.opened = true;
      channel.sent = Math.floor(random() * 1e6);
      const counter = channel.sent + 1;
      const what = `case ${i}: key ${key.length} bytes, frames of ${frames.map((f) => f.length)} bytes, counter ${counter}`;
      assert.deepEqual(Buffer.from(channel.sign(frames)), signMessage(key, 'p2h', nonce, counter, frames), what);
      channel.welcomed = true;
      const signed = signMessage(key, 'h2p', nonce, counter, frames);
      const forged = Buffer.from(signed);
      forged[forged.length - 1 - Math.floor(random() * 64)] ^= 1; // another hex digit (or not hex at all)
      assert.notEqual(channel.refusal(forged, frames), null, `forged ${what}`);
      assert.equal(channel.refusal(signed, frames), null, what);
      assert.match(channel.refusal(signed, frames), /replayed/, what);
    }
  });

  test('a Node without crypto.hash (before 20.12) signs the same, through a Hash object', () => {
    // In a child process: this one loaded src/signing.js with crypto.hash already.
    const script = `
      import crypto from 'node:crypto';
      delete crypto.hash;
      const { channelKey, channelMac } = await import(${JSON.stringify(new URL('../src/signing.js', import.meta.url).href)});
      const key = crypto.randomBytes(32);
      const same = [0, 100, 3000, 16384, 20000].every((size) => {
        const input = crypto.randomBytes(size);
        return Buffer.from(channelMac(channelKey(key), [input])).equals(crypto.createHmac('sha256', key).update(input).digest());
      });
      process.stdout.write(String(typeof crypto.hash === 'undefined' && same));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(child.stderr, '');
    assert.equal(child.stdout, 'true');
  });

  test('counters past 15 digits and past 2^53 are compared exactly', () => {
    const nonce = 'c'.repeat(32);
    const channel = new PeerChannel(key, nonce);
    channel.welcomed = true;
    const ping = [Buffer.from('{"v":1,"type":"ping"}')];
    const send = (counter) => channel.refusal(signMessage(key, 'h2p', nonce, counter, ping), ping);
    for (const counter of [999_999_999_999_999n, 10n ** 15n, 2n ** 53n, 2n ** 53n + 1n]) assert.equal(send(counter), null, `${counter}`);
    assert.match(send(2n ** 53n + 1n), /replayed/);
    assert.match(send(2n ** 53n), /replayed/);
    assert.match(send(999_999_999_999_999n), /replayed/);
    assert.equal(send(2n ** 53n + 2n), null);
    assert.match(send(2n ** 63n), /not a signature/);
  });
});

describe('signing: the host\'s opening history', () => {
  const hello = [Buffer.from('{"v":1,"type":"hello","peer":"p"}')];
  const nonce = (i) => i.toString(16).padStart(32, '0');

  test('a nonce forgotten early raises a floor: no opening at or before it is accepted again', () => {
    let now = 1_000_000;
    const host = new KeyedHost(key, { now: () => now, capacity: 2 });
    for (let i = 1; i <= 3; i += 1) assert.equal(host.receive(`c${i}`, signOpening(key, nonce(i), now + i, hello), hello), null);
    // nonce 1 (ms now+1) was forgotten to keep 2: its replay, and any opening not later than it, is refused.
    assert.match(host.receive('c4', signOpening(key, nonce(1), now + 1, hello), hello), /replayed/);
    assert.match(host.receive('c5', signOpening(key, nonce(9), now + 1, hello), hello), /replayed/);
    assert.equal(host.receive('c6', signOpening(key, nonce(10), now + 2, hello), hello), null);
    now += 900_000; // long after: old nonces are forgotten, and their openings fail the clock bound anyway
    assert.match(host.receive('c7', signOpening(key, nonce(2), now - 900_000 + 2, hello), hello), /clock/);
    assert.equal(host.nonces.size, 0);
  });
});

describe('signing: a clock skew is said (SPEC 3.1, error.data.clock_skew_ms)', () => {
  test('in whole seconds, unless that would hide that it is past the window; nothing for other answers', () => {
    assert.equal(clockSkewDiagnosis({ clock_skew_ms: 300_001, window_ms: 300_000 }),
      'the host\'s clock and this peer\'s differ by 300001 ms (this peer\'s is ahead), more than the 300 s window for an opening hello: set both clocks right (NTP)');
    assert.match(clockSkewDiagnosis({ clock_skew_ms: -400_499 }), /differ by 400 s \(this peer's is behind\)/);
    for (const data of [undefined, null, {}, { clock_skew_ms: '400000' }, { clock_skew_ms: true }, [400_000]]) {
      assert.equal(clockSkewDiagnosis(data), null);
    }
  });
});
