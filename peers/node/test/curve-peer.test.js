// SPEC 2.1 in the Node peer: CURVE through a connection file's curve_server_key or options.curve, against the real
// conformance host (`zerobridge serve --curve-secret-key-file K`, which also puts a signing key in the file by default,
// so CURVE and keyed connections run together), and the $evaluate rule: without CURVE evaluation is for the first
// host that welcomed the peer only; with CURVE it stays on across a host restart.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, curveKeyPair, Peer, BridgeError } from '../index.js';
import { publicKeyOf, z85Decode } from '../src/curve.js';
import { RouterHost } from '../test-helpers/router-host.js';
import { ConformanceHost, transports, within, delay, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

// Generous: a loaded 2-core machine runs the whole suite at once.
const PATIENCE = 30_000;

const expectCode = (code, pattern) => (error) => {
  assert.ok(error instanceof BridgeError, `a BridgeError, got ${error}`);
  assert.equal(error.code, code, error.message);
  if (pattern) assert.match(error.message, pattern);
  return true;
};

function collectLog() {
  const lines = [];
  return { lines, log: (level, message) => lines.push(`${level}: ${message}`) };
}

/** Resolves once `check()` is truthy (checked every 10 ms); fails naming `what` after PATIENCE. */
function until(check, what) {
  return within((async () => { while (!check()) await delay(10); })(), PATIENCE, what);
}

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'zb-node-curve-'));

/** A conformance host requiring CURVE with its secret key in a file, writing a connection file; stopped after the test. */
async function curveHost(t, { bind = 'tcp://127.0.0.1:*', dir = tempDir(), extra = [] } = {}) {
  const file = path.join(dir, `host-${Math.random().toString(16).slice(2, 8)}.json`);
  const host = await ConformanceHost.start(bind, ['--connection-file', file, '--curve-secret-key-file', path.join(dir, 'host.key'), ...extra]);
  t.after(() => host.stop());
  return { host, file, dir, contents: JSON.parse(readFileSync(file, 'utf8')) };
}

function connectionFile(fields) {
  const file = path.join(tempDir(), 'host.json');
  writeFileSync(file, JSON.stringify({ protocol: 1, endpoint: 'tcp://127.0.0.1:1', host: 'h', signature_scheme: 'hmac-sha256', key: '', ...fields }));
  return file;
}

describe('CURVE options', () => {
  const server = curveKeyPair();
  const pair = curveKeyPair();

  test('a connection file with curve_server_key turns CURVE on, with a fresh key pair for each peer', () => {
    const file = connectionFile({ curve_server_key: server.publicKey });
    const one = new Peer(file, { name: 'one' });
    const two = new Peer(file, { name: 'two' });
    assert.equal(one.dealer.mechanism, 'CURVE');
    assert.match(one.curvePublicKey, /^.{40}$/);
    assert.notEqual(one.curvePublicKey, two.curvePublicKey);
    assert.equal(one.dealer.curveServerKey, server.publicKey);
    const plain = new Peer(connectionFile({}), { name: 'plain' });
    assert.equal(plain.dealer.mechanism, 'NULL');
    assert.equal(plain.curvePublicKey, null);
    assert.equal(new Peer('tcp://127.0.0.1:1', { name: 'endpoint' }).curvePublicKey, null);
  });

  test('options.curve gives a key pair (Z85 or bytes) and a server key, which wins over the file\'s', () => {
    const file = connectionFile({ curve_server_key: server.publicKey });
    const given = new Peer(file, { name: 'given', curve: pair });
    assert.equal(given.curvePublicKey, pair.publicKey);
    const bytes = new Peer(file, { name: 'bytes', curve: { secretKey: z85Decode(pair.secretKey) } });
    assert.equal(bytes.curvePublicKey, pair.publicKey, 'the public key is derived from a 32-byte secret key');
    const other = curveKeyPair().publicKey;
    assert.equal(new Peer(file, { name: 'pinned', curve: { serverKey: other } }).dealer.curveServerKey, other);
    const endpoint = new Peer('tcp://127.0.0.1:1', { name: 'endpoint', curve: { serverKey: z85Decode(server.publicKey), ...pair } });
    assert.equal(endpoint.dealer.curveServerKey, server.publicKey);
    assert.equal(endpoint.curvePublicKey, pair.publicKey);
  });

  test('a key pair without a server key, or a bad key, is an error: never plaintext', () => {
    assert.throws(() => new Peer('tcp://127.0.0.1:1', { name: 'n', curve: pair }), /needs serverKey.*does not fall back to plaintext/s);
    assert.throws(() => new Peer(connectionFile({}), { name: 'n', curve: { secretKey: pair.secretKey } }), /needs serverKey/);
    assert.throws(() => new Peer('tcp://127.0.0.1:1', { name: 'n', curve: 'key' }), /options\.curve must be an object/);
    assert.throws(() => new Peer('tcp://127.0.0.1:1', { name: 'n', curve: { serverKey: server.publicKey.slice(1) } }), /40 Z85 characters/);
    assert.throws(() => new Peer('tcp://127.0.0.1:1', { name: 'n', curve: { serverKey: server.publicKey, publicKey: pair.publicKey } }),
      /needs its curve\.secretKey/);
    const badSecret = `${pair.secretKey.slice(0, 39)}~`;
    assert.throws(() => new Peer('tcp://127.0.0.1:1', { name: 'n', curve: { serverKey: server.publicKey, secretKey: badSecret } }),
      (error) => error instanceof TypeError && /not Z85/.test(error.message) && !error.message.includes(badSecret.slice(35)));
    assert.throws(() => new Peer(connectionFile({ curve_server_key: 'short' }), { name: 'n' }),
      (error) => error.code === 'bad_message' && /curve_server_key must be 40 Z85 characters/.test(error.message));
  });

  test('the secret key shows nowhere on the peer', () => {
    const peer = new Peer('tcp://127.0.0.1:1', { name: 'secretive', curve: { serverKey: server.publicKey, ...pair } });
    // Its own fields, as a plain object: a Peer is an EventTarget, whose inspection shows none of them.
    const shown = inspect({ ...peer }, { depth: Infinity, showHidden: true });
    const secret = z85Decode(pair.secretKey);
    assert.ok(shown.includes('ZmtpDealer'), 'the dealer is inspected too');
    for (const form of [pair.secretKey, secret.toString('hex'), secret.toString('hex').match(/../g).join(' ')]) {
      assert.ok(!shown.includes(form), 'the secret key is not shown');
    }
    assert.deepEqual(publicKeyOf(secret), z85Decode(peer.curvePublicKey));
  });
});

for (const transport of ['tcp', 'ipc']) {
  describe(`CURVE conformance host over ${transport}`, () => {
    test('a peer given the connection file connects with CURVE and its key, and is served: echo, a streaming count', async (t) => {
      const { file, contents } = await curveHost(t, { bind: transports[transport]() });
      assert.match(contents.curve_server_key, /^.{40}$/);
      assert.match(contents.key, /^[0-9a-f]{64}$/, 'a signing key too');
      const { lines, log } = collectLog();
      const peer = await connect(file, { name: `node-curve-${transport}`, actions: { greet: async (p) => `hello ${p}` }, log });
      t.after(() => peer.close());
      assert.equal(peer.dealer.mechanism, 'CURVE');
      assert.match(peer.curvePublicKey, /^.{40}$/);
      assert.deepEqual(await peer.call('echo', { text: 'sealed' }), { text: 'sealed' });
      const stream = peer.stream('count', { n: 4 });
      const progress = [];
      for await (const p of stream.progress) progress.push(p.i);
      assert.deepEqual(await stream.result, { n: 4 });
      assert.deepEqual(progress, [1, 2, 3, 4]);
      assert.equal(await peer.call('callback', { action: 'greet', payload: 'back' }), 'hello back');
      assert.equal(peer.rejectedMessages, 0);
      assert.deepEqual(lines.filter((l) => l.startsWith('warn')), []);
    });
  });
}

describe('CURVE conformance host: keys refused', () => {
  test('with an allow-list a listed key connects; an unlisted one is refused with a clear error, and the host logs it', async (t) => {
    const dir = tempDir();
    const listed = curveKeyPair();
    writeFileSync(path.join(dir, 'peers.txt'), `# the peers allowed\n${listed.publicKey} listed\n`);
    const { host, file } = await curveHost(t, { dir, extra: ['--allow-peer-keys', path.join(dir, 'peers.txt'), '--log-level', 'warning'] });

    const peer = await connect(file, { name: 'listed', curve: listed, log: () => {} });
    t.after(() => peer.close());
    assert.equal(peer.curvePublicKey, listed.publicKey);
    assert.equal(await peer.call('echo', 'allowed'), 'allowed');

    const { lines, log } = collectLog();
    const stranger = new Peer(file, { name: 'stranger', log });
    await assert.rejects(stranger.connect(), expectCode('unauthorized', /refused this peer's CURVE key .*allow-list/));
    await assert.rejects(stranger.connect(), (e) => e.message.includes(stranger.curvePublicKey), 'the error names the refused key');
    assert.equal(stranger.session, null);
    await until(() => host.stderr.includes(stranger.curvePublicKey), 'the host to log the refused key');
    assert.ok(!host.stderr.includes(listed.publicKey), `only the refused key is logged:\n${host.stderr}`);
    assert.ok(lines.some((l) => l.startsWith('warn: ZMTP error') && l.includes('ERROR "400"')), lines.join('\n'));
  });

  test('a peer pinning another server key is never welcomed: the host cannot prove it', async (t) => {
    const { file, contents } = await curveHost(t);
    const wrong = curveKeyPair().publicKey;
    const peer = new Peer(file, { name: 'misled', curve: { serverKey: wrong }, log: () => {} });
    await assert.rejects(peer.connect(), expectCode('unauthorized', /did not prove it holds the CURVE server key/));
    await assert.rejects(peer.connect(), (e) => e.message.includes(wrong) && !e.message.includes(contents.curve_server_key));
    assert.equal(peer.session, null);
    assert.equal(peer.host, null);
  });
});

// --- the $evaluate rule -----------------------------------------------------------------------

const request = (id, action, payload) => ({ v: 1, type: 'request', id, action, payload });
const evaluate = (id, script) => request(id, '$evaluate', { script, arguments: {} });
const responseTo = (host, id) => host.next((b) => b?.type === 'response' && b.id === id, PATIENCE, `the response to ${id}`);
const refusedEvaluate = (lines) => lines.filter((l) => l.includes('$evaluate is refused from now on'));

/** Makes the host lost in one of three ways; returns the first hello the peer says afterwards (not yet welcomed). */
const losses = {
  async bye(host) {
    host.send({ v: 1, type: 'bye' });
    return host.nextOfType('hello', PATIENCE);
  },
  async 'a dropped connection'(host) {
    host.socketOf().destroy();
    return host.nextOfType('hello', PATIENCE);
  },
  async silence(host, peer) {
    // A hello (new handlers) is answered with a 50 ms heartbeat, then nothing: the peer gives the host up.
    peer.handle('later', async () => 1);
    await host.nextOfType('hello', PATIENCE);
    host.send(host.welcomeBody({ heartbeat_ms: 50 }));
    return host.nextOfType('hello', PATIENCE);
  },
};

describe('$evaluate without CURVE: for the first host that welcomed the peer only (SPEC 2.1)', () => {
  for (const [kind, lose] of Object.entries(losses)) {
    test(`after ${kind}, hello drops the feature and $evaluate is not_allowed, with one warning`, async (t) => {
      const host = await RouterHost.start(transports.tcp());
      t.after(() => host.stop());
      const { lines, log } = collectLog();
      const peer = new Peer(host.endpoint, { name: 'evaluator', evaluate: true, log, reconnectIvl: 20, reconnectIvlMax: 200 });
      t.after(() => peer.close());
      const connecting = peer.connect();
      assert.deepEqual((await host.welcome()).features, ['evaluate', 'batch']);
      await within(connecting, PATIENCE, 'connect()');
      host.send(evaluate('e1', 'return 6 * 7'));
      assert.equal((await responseTo(host, 'e1')).body.result, 42);
      assert.deepEqual(refusedEvaluate(lines), []);

      const hello = await lose(host, peer);
      assert.deepEqual(hello.body.features, ['batch'], 'the next host is not offered evaluation');
      host.send(host.welcomeBody());
      host.send(evaluate('e2', 'return 1'));
      const refused = (await responseTo(host, 'e2')).body;
      assert.equal(refused.ok, false);
      assert.equal(refused.error.code, 'not_allowed');
      assert.match(refused.error.message, /lost the first host that welcomed it: without CURVE/);
      assert.equal(refusedEvaluate(lines).length, 1, lines.join('\n'));
      assert.match(refusedEvaluate(lines)[0], /^warn: .*without CURVE nothing proves/);

      host.send({ v: 1, type: 'bye' }); // lost again: still off, and not warned about twice
      assert.deepEqual((await host.nextOfType('hello', PATIENCE)).body.features, ['batch']);
      assert.equal(refusedEvaluate(lines).length, 1);
    });
  }

  test('a connection lost before any welcome does not count: the first host to welcome gets evaluation', async (t) => {
    const host = await RouterHost.start(transports.tcp());
    t.after(() => host.stop());
    const { lines, log } = collectLog();
    const peer = new Peer(host.endpoint, { name: 'patient', evaluate: true, log, reconnectIvl: 20 });
    t.after(() => peer.close());
    const connecting = peer.connect();
    assert.deepEqual((await host.nextOfType('hello', PATIENCE)).body.features, ['evaluate', 'batch']);
    host.socketOf().destroy(); // never welcomed on that connection
    assert.deepEqual((await host.welcome()).features, ['evaluate', 'batch']);
    await within(connecting, PATIENCE, 'connect()');
    host.send(evaluate('e1', 'return "still on"'));
    assert.equal((await responseTo(host, 'e1')).body.result, 'still on');
    assert.deepEqual(refusedEvaluate(lines), []);
  });

  test('a peer that does not evaluate says why it refuses, as before', async (t) => {
    const host = await RouterHost.start(transports.tcp());
    t.after(() => host.stop());
    const peer = new Peer(host.endpoint, { name: 'plain', log: () => {} });
    t.after(() => peer.close());
    const connecting = peer.connect();
    assert.deepEqual((await host.welcome()).features, ['batch']);
    await connecting;
    host.send(evaluate('e1', 'return 1'));
    const { error } = (await responseTo(host, 'e1')).body;
    assert.equal(error.code, 'not_allowed');
    assert.match(error.message, /evaluate: true/);
  });
});

describe('$evaluate with CURVE: the host proves its key, so evaluation stays on', () => {
  test('across a host restart (killed, then started again with the same key on the same endpoint)', async (t) => {
    // --no-key: a restarted host writes a new signing key into its file, which this peer read once; CURVE is the point.
    const dir = tempDir();
    const first = await curveHost(t, { dir, extra: ['--no-key'] });
    const { lines, log } = collectLog();
    const peer = await connect(first.file, { name: 'curve-evaluator', evaluate: true, log, reconnectIvl: 20, reconnectIvlMax: 200 });
    t.after(() => peer.close());
    const script = { action: '$evaluate', payload: { script: 'return n + 1', arguments: { n: 41 } } };
    assert.equal(await peer.call('callback', script), 42);

    await first.host.kill();
    await until(() => !peer.connected, 'the peer to lose the host');
    const second = await curveHost(t, { bind: first.host.endpoint, dir, extra: ['--no-key'] });
    assert.equal(second.contents.curve_server_key, first.contents.curve_server_key, 'the same host key');
    await until(() => peer.connected, 'the peer to be welcomed by the restarted host');
    assert.equal(await peer.call('callback', script), 42, 'evaluation is still on');
    assert.deepEqual(refusedEvaluate(lines), []);
  });
});
