// Keyed connections (SPEC 3.1) end to end: the Node peer through the connection file of the real conformance host
// (`zerobridge serve --connection-file F`, which puts a new key in F unless told --no-key), over tcp and ipc; and
// batches (SPEC 3.3) through such a file both with a key and without (--no-key).

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, BridgeError } from '../index.js';
import { ConformanceHost, transports, within, delay, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

/** A conformance host writing a connection file; stopped after the test. */
async function keyedHost(t, transport, extra = []) {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-keyed-host-')), 'host.json');
  const host = await ConformanceHost.start(transports[transport](), ['--connection-file', file, ...extra]);
  t.after(() => host.stop());
  return { host, file, contents: JSON.parse(readFileSync(file, 'utf8')) };
}

function collectLog() {
  const lines = [];
  return { lines, log: (level, message) => lines.push(`${level}: ${message}`) };
}

for (const transport of ['tcp', 'ipc']) {
  describe(`keyed conformance host over ${transport}`, () => {
    test('a peer given the connection file signs and is served both ways; nothing is refused', async (t) => {
      const { file, contents } = await keyedHost(t, transport);
      assert.match(contents.key, /^[0-9a-f]{64}$/, 'the host generated a key into its connection file');
      const { lines, log } = collectLog();
      const peer = await connect(file, { name: `node-keyed-${transport}`, actions: { greet: async (p) => `hello ${p.name}` }, timeout: 10_000, log });
      t.after(() => peer.close());
      assert.equal(peer.host, 'conformance');
      assert.equal(await peer.call('echo', { bytes: Buffer.from([1, 2, 3]).toString('base64') }).then((r) => r.bytes), 'AQID');
      assert.equal(await peer.call('add', { a: 2, b: 3 }), 5);
      assert.equal(await peer.call('callback', { action: 'greet', payload: { name: 'keyed' } }), 'hello keyed', 'the host\'s request and our answer are signed too');
      const stream = peer.stream('count', { n: 3 });
      const progress = [];
      for await (const p of stream.progress) progress.push(p.i);
      assert.deepEqual(await stream.result, { n: 3 });
      assert.deepEqual(progress, [1, 2, 3]);
      const heard = new Promise((resolve) => peer.on('ping-me', resolve));
      await peer.call('emit', { action: 'ping-me', payload: 'x' });
      assert.equal(await within(heard, 10_000, 'the emitted event'), 'x');
      await assert.rejects(peer.call('fail', { message: 'as asked' }), (e) => e instanceof BridgeError && e.code === 'handler_error');
      assert.equal(peer.rejectedMessages, 0);
      assert.deepEqual(lines.filter((l) => l.startsWith('warn')), []);
    });

    for (const keyed of [true, false]) {
      test(`batches flow both ways ${keyed ? 'keyed' : 'without a key'} (SPEC 3.3): 64 calls in flight, 64 of the host's calls in flight and a progress stream, every one answered right`, async (t) => {
        const { file, contents } = await keyedHost(t, transport, keyed ? [] : ['--no-key']);
        assert.equal(Boolean(contents.key), keyed, 'with --no-key the file\'s key is empty');
        const { lines, log } = collectLog();
        const peer = await connect(file, { name: `node-${keyed ? 'keyed' : 'plain'}-batches-${transport}`, actions: { greet: async (p) => `hello ${p.name}` }, timeout: 20_000, log });
        t.after(() => peer.close());
        const calls = Array.from({ length: 64 }, (_, i) => peer.call('add', { a: i, b: 1000 }));
        assert.deepEqual(await Promise.all(calls), Array.from({ length: 64 }, (_, i) => i + 1000));
        const sentByCalls = peer.batches.sent;
        assert.ok(sentByCalls > 0, 'the 64 calls made at once went out in batches');
        const callbacks = Array.from({ length: 64 }, (_, i) => peer.call('callback', { action: 'greet', payload: { name: `n${i}` } }));
        assert.deepEqual(await Promise.all(callbacks), Array.from({ length: 64 }, (_, i) => `hello n${i}`));
        const stream = peer.stream('count', { n: 5000 });
        let expected = 1;
        for await (const p of stream.progress) {
          assert.equal(p.i, expected, 'progress in order, none lost');
          expected += 1;
        }
        assert.deepEqual(await stream.result, { n: 5000 });
        assert.equal(expected, 5001);
        const { read, sent } = peer.batches;
        assert.ok(read > 0, `the host's answers and progress came in batches (read ${read})`);
        assert.ok(sent > 0, `sent ${sent}`);
        assert.equal(peer.rejectedMessages, 0);
        assert.deepEqual(lines.filter((l) => l.startsWith('warn')), []);
      });
    }

    test('a broken connection is resumed over a new channel: the same session, served both ways, nothing refused', async (t) => {
      const { file } = await keyedHost(t, transport);
      const { lines, log } = collectLog();
      const peer = await connect(file, { name: `node-keyed-resume-${transport}`, actions: { greet: async (p) => `hello ${p.name}` }, log, reconnectIvl: 20 });
      t.after(() => peer.close());
      const session = peer.session;
      peer.dealer.socket.destroy(); // the host keeps the session; the peer dials again and opens a new channel
      await within((async () => { while (!lines.some((l) => /lost the host/.test(l)) || !peer.connected) await delay(10); })(),
        10_000, 'the peer to lose the host and be welcomed again');
      assert.equal(peer.session, session, 'resumed, not a new session');
      assert.equal(await peer.call('callback', { action: 'greet', payload: { name: 'again' } }), 'hello again');
      assert.equal(peer.rejectedMessages, 0);
    });

    test('a peer with the wrong key, or none, is refused: the host answers unauthorized and never welcomes it', async (t) => {
      const { host } = await keyedHost(t, transport);
      const { lines, log } = collectLog();
      const wrong = connect(host.endpoint, { name: 'intruder', key: randomBytes(32).toString('hex'), timeout: 1500, log });
      await assert.rejects(wrong, (e) => e instanceof BridgeError && e.code === 'unauthorized' && /unauthorized/.test(e.message));
      assert.ok(lines.some((l) => l.startsWith('warn: the host refused a message of this peer as unauthorized')), lines.join('\n'));
      const unkeyed = connect(host.endpoint, { name: 'plain', timeout: 1500, log });
      await assert.rejects(unkeyed, (e) => e instanceof BridgeError && e.code === 'unauthorized' && /it requires a key/.test(e.message));
    });

    test('a peer 400 s off the host\'s clock is told the clocks differ, not that the key is wrong', async (t) => {
      const { file } = await keyedHost(t, transport);
      const realNow = Date.now;
      t.after(() => { Date.now = realNow; });
      for (const [offset, side] of [[400_000, 'ahead'], [-400_000, 'behind']]) {
        const { lines, log } = collectLog();
        Date.now = () => realNow() + offset; // this process's wall clock, which the peer signs its hello with
        await assert.rejects(connect(file, { name: 'skewed', timeout: 1500, log }), (e) => e instanceof BridgeError && e.code === 'unauthorized'
          && e.message.includes(`the host's clock and this peer's differ by 400 s (this peer's is ${side}), more than the 300 s window`)
          && e.message.includes(`400 s ${offset > 0 ? 'ahead of' : 'behind'} the host's`) && !e.message.includes('is the key'));
        Date.now = realNow;
        assert.ok(lines.some((l) => l.startsWith('warn: ') && l.includes('differ by 400 s')), lines.join('\n'));
      }
      const peer = await connect(file, { name: `node-in-time-${transport}`, timeout: 10_000, log: () => {} });
      t.after(() => peer.close());
      assert.equal(await peer.call('echo', 1), 1);
    });

    test('with --no-key the file has an empty key and the peer connects unkeyed', async (t) => {
      const { file, contents } = await keyedHost(t, transport, ['--no-key']);
      assert.equal(contents.key, '');
      const peer = await connect(file, { name: `node-plain-${transport}`, timeout: 10_000, log: () => {} });
      t.after(() => peer.close());
      assert.equal(await peer.call('echo', 'plain'), 'plain');
    });
  });
}
