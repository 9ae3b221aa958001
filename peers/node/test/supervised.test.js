// Peers launched by a host (SPEC 10.1): connect() without an endpoint reads the connection file that
// ZEROBRIDGE_CONNECTION_FILE names and says hello with its `peer` (else ZEROBRIDGE_PEER_NAME), against the real
// conformance host writing a keyed connection file; without the variable it fails at once, saying what to set. Such a
// peer ends with its host: its host's bye or loss closes it (`peer.closed` resolves with why) instead of redialling.

import { describe, test, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, Peer, BridgeError } from '../index.js';
import { ConformanceHost, delay, stopAllProcesses, within } from '../test-helpers/processes.js';

after(stopAllProcesses);

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const FILE_VARIABLE = 'ZEROBRIDGE_CONNECTION_FILE';
const NAME_VARIABLE = 'ZEROBRIDGE_PEER_NAME';
const UNKEYED = { protocol: 1, endpoint: 'tcp://127.0.0.1:1', host: 'h', signature_scheme: 'hmac-sha256', key: '' };
// How long a peer whose name the host must refuse keeps trying: its failure is the expected outcome.
const REFUSED_TIMEOUT = 1500;

// Each test sets the variables it needs; none leaks into the next.
beforeEach(() => {
  delete process.env[FILE_VARIABLE];
  delete process.env[NAME_VARIABLE];
});

function write(fields) {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'zb-node-supervised-')), 'connection.json');
  writeFileSync(file, JSON.stringify({ ...UNKEYED, ...fields }));
  return file;
}

/**
 * A conformance host writing a connection file (keyed unless `flags` say --no-key), and what a supervising host hands a
 * peer: a copy of that file with `peer`, written again (with the new key) for a host started again in the same `dir`.
 */
async function launch(t, peer, { flags = [], endpoint = 'tcp://127.0.0.1:*', dir = mkdtempSync(path.join(tmpdir(), 'zb-node-supervised-host-')) } = {}) {
  const written = path.join(dir, 'host.json');
  const host = await ConformanceHost.start(endpoint, ['--connection-file', written, ...flags]);
  t.after(() => host.stop());
  const contents = JSON.parse(readFileSync(written, 'utf8'));
  if (!flags.includes('--no-key')) assert.match(contents.key, /^[0-9a-f]{64}$/, 'keyed: the host refuses a peer that does not sign with it');
  const file = path.join(dir, 'peer.json');
  writeFileSync(file, JSON.stringify({ ...contents, peer }), { mode: 0o600 }); // a new file: created 0600
  return { host, file, dir };
}

async function launchedFile(t, peer) {
  return (await launch(t, peer)).file;
}

/** Waits (up to 20 s) until `condition()` holds. */
async function until(condition, what) {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(10);
  }
}

/** The README's launched-by-a-host example, run as a host launches it (its connection file in the environment). */
function runReadmeExample(t, file) {
  const readme = readFileSync(path.join(packageDir, 'README.md'), 'utf8');
  const example = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((code) => code.includes("process.once('SIGTERM'"));
  assert.ok(example, 'the README has the launched-by-a-host example');
  // From the package folder, where `import 'zerobridge'` resolves to this package.
  const child = spawn(process.execPath, ['--input-type=module', '-e', example], {
    cwd: packageDir, env: { ...process.env, [FILE_VARIABLE]: file }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const exited = once(child, 'exit');
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    child,
    nextLine: async (what) => (await within(lines.next(), 20_000, what)).value,
    exit: async () => {
      const [code, signal] = await within(exited, 20_000, 'the example to exit');
      return { code, signal, stderr };
    },
  };
}

describe('a peer launched by a host, against the conformance host', () => {
  const actions = { twice: async (p) => p * 2 };
  for (const [form, open] of [
    ['connect()', () => connect()],
    ['connect(options)', () => connect({ timeout: 10_000, actions })],
    ['connect(undefined, options)', () => connect(undefined, { timeout: 10_000, actions })],
  ]) {
    test(`${form} connects through the variable's file under its peer name, with its key`, async (t) => {
      const name = `node-launched-${randomBytes(4).toString('hex')}`;
      process.env[FILE_VARIABLE] = await launchedFile(t, name);
      const peer = await open();
      t.after(() => peer.close());
      assert.equal(peer.name, name);
      assert.equal(peer.host, 'conformance');
      assert.equal(await peer.call('add', { a: 1, b: 2 }), 3, 'welcomed and served by a keyed host: signed with the file\'s key');
      if (form !== 'connect()') assert.equal(await peer.call('callback', { action: 'twice', payload: 21 }), 42, 'the options given are used');
      assert.equal(peer.rejectedMessages, 0);
      // The host holds the session under the file's name: another peer asking for it is refused.
      await assert.rejects(connect(process.env[FILE_VARIABLE], { timeout: REFUSED_TIMEOUT, log: () => {} }),
        (e) => e instanceof BridgeError && e.code === 'name_taken' && e.message.includes(name));
    });
  }

  test('the README example serves under the file\'s name, and on SIGTERM says bye and exits 0', async (t) => {
    const file = await launchedFile(t, 'node-launched-readme');
    const example = runReadmeExample(t, file);
    assert.equal(await example.nextLine('the example\'s first line'), 'serving as node-launched-readme');
    example.child.kill('SIGTERM');
    assert.equal(await example.nextLine('the example\'s last line'), 'closed: the program closed the peer');
    const { code, signal, stderr } = await example.exit();
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
    // It said bye: the host let the name go at once (a peer gone without bye holds it for 3 heartbeats, 15 s).
    const again = await connect(file, { timeout: 5000 });
    assert.equal(again.name, 'node-launched-readme');
    await again.close();
  });
});

describe('a peer launched by a host ends with its host (SPEC 10.1), against the conformance host', () => {
  test('when its host says bye it closes, and closed resolves saying so', async (t) => {
    const { host, file } = await launch(t, 'node-launched-bye');
    process.env[FILE_VARIABLE] = file;
    const peer = await connect({ timeout: 10_000 });
    t.after(() => peer.close());
    assert.equal(await peer.call('echo', 1), 1);
    host.child.kill('SIGTERM'); // a graceful shutdown: the host says bye to its peers
    const reason = await within(peer.closed, 20_000, 'the peer to close');
    assert.equal(reason, 'lost the host: the host said bye');
    assert.equal(peer.connected, false);
    assert.equal(await peer.closed, reason, 'the same reason, as often as asked');
    await assert.rejects(peer.call('echo', 2), (e) => e.code === 'cancelled' && e.message.includes('the host said bye'));
    await peer.close(); // closed already: changes nothing
    assert.equal(await peer.closed, reason);
  });

  for (const [how, signal, why] of [
    ['killed', 'SIGKILL', /^lost the host: (the connection to the host at .* broke|nothing heard for \d+ ms \(heartbeat 300 ms\))$/],
    ['frozen', 'SIGSTOP', /^lost the host: nothing heard for \d+ ms \(heartbeat 300 ms\)$/],
  ]) {
    test(`when its host is ${how} it closes, and does not reconnect to the host started again on its endpoint`, async (t) => {
      const name = `node-launched-${how}`;
      const { host, file, dir } = await launch(t, name);
      process.env[FILE_VARIABLE] = file;
      const peer = await connect({ timeout: 10_000, heartbeatMs: 300 });
      t.after(() => peer.close());
      assert.equal(peer.heartbeatMs, 300, 'the host agreed');
      const inFlight = peer.call('sleep', { ms: 60_000 }, { timeout: null });
      inFlight.catch(() => {}); // awaited below
      host.child.kill(signal); // killed: the connection breaks; frozen: it stays, silent
      const reason = await within(peer.closed, 20_000, 'the peer to close');
      assert.match(reason, why);
      await assert.rejects(inFlight, (e) => e.code === 'peer_lost' && e.message.startsWith('lost the host'));
      // The host starts again on the same endpoint, and the peer's file is written anew with its new key: the launched
      // peer does not come back. Its name is free: another peer takes it at once, where one that reconnected would
      // hold it for as long as it lives.
      await host.kill();
      await launch(t, name, { endpoint: host.endpoint, dir });
      const successor = await connect(file, { timeout: 20_000 });
      assert.equal(successor.name, name);
      assert.equal(successor.rejectedMessages, 0);
      await successor.close();
      assert.equal(peer.connected, false);
    });
  }

  test('a peer given a connection file\'s path is not launched: it reconnects to the host started again', async (t) => {
    const { host, file, dir } = await launch(t, 'node-given-path', { flags: ['--no-key'] });
    const peer = await connect(file, { timeout: 10_000 });
    t.after(() => peer.close());
    let closed = false;
    peer.closed.then(() => { closed = true; });
    const first = peer.session;
    await host.stop(); // it says bye
    await until(() => !peer.connected, 'the peer to take the host\'s bye');
    await launch(t, 'node-given-path', { flags: ['--no-key'], endpoint: host.endpoint, dir });
    await until(() => peer.connected, 'the peer to be welcomed by the host started again');
    assert.notEqual(peer.session, first);
    assert.equal(await peer.call('add', { a: 1, b: 1 }), 2);
    assert.equal(closed, false);
  });

  test('the README example exits 0 by itself when its host shuts down', async (t) => {
    const { host, file } = await launch(t, 'node-launched-readme-bye');
    const example = runReadmeExample(t, file);
    assert.equal(await example.nextLine('the example\'s first line'), 'serving as node-launched-readme-bye');
    await host.stop(); // SIGTERM to the host: it says bye to its peers; nothing is sent to the example
    assert.equal(await example.nextLine('the example\'s last line'), 'closed: lost the host: the host said bye');
    const { code, signal, stderr } = await example.exit();
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
  });
});

describe('a peer launched by a host: where and under which name', () => {
  test('without an endpoint or the variable, connect() fails at once saying what to set', async () => {
    for (const attempt of [() => connect(), () => connect({ name: 'n' }), () => connect(undefined, { name: 'n' })]) {
      await assert.rejects(attempt(), (e) => e instanceof TypeError && /ZEROBRIDGE_CONNECTION_FILE is not set/.test(e.message));
    }
    assert.throws(() => new Peer(), /ZEROBRIDGE_CONNECTION_FILE is not set/);
    process.env[FILE_VARIABLE] = ''; // set but empty says nowhere too
    assert.throws(() => new Peer({ name: 'n' }), /ZEROBRIDGE_CONNECTION_FILE is not set/);
  });

  for (const [what, peer] of [['empty', ''], ['129 characters', 'p'.repeat(129)], ['a number', 7], ['null', null]]) {
    test(`a peer field that is ${what} in the variable's file is an error naming the field`, async () => {
      process.env[FILE_VARIABLE] = write({ peer });
      await assert.rejects(connect(), (e) => e instanceof BridgeError && e.code === 'bad_message'
        && e.message.includes(process.env[FILE_VARIABLE]) && /peer must be a string of 1\.\.128 characters/.test(e.message));
    });
  }

  test('the variable naming a missing file is an error naming the file', () => {
    process.env[FILE_VARIABLE] = path.join(tmpdir(), `zb-node-missing-${process.pid}.json`);
    assert.throws(() => new Peer(), (e) => e.code === 'bad_message' && e.message.includes(`cannot read the connection file ${process.env[FILE_VARIABLE]}`));
  });

  test('the name is the one given, else the file\'s peer, else ZEROBRIDGE_PEER_NAME', () => {
    const file = write({ peer: 'from-file' });
    process.env[FILE_VARIABLE] = file;
    process.env[NAME_VARIABLE] = 'from-variable';
    assert.equal(new Peer().name, 'from-file');
    assert.equal(new Peer({ name: 'chosen' }).name, 'chosen', 'allowed; a supervising host waits for "from-file"');
    writeFileSync(file, JSON.stringify(UNKEYED));
    assert.equal(new Peer().name, 'from-variable');
    delete process.env[NAME_VARIABLE];
    assert.throws(() => new Peer(), (e) => e instanceof TypeError && /options.name .* is required.*ZEROBRIDGE_PEER_NAME/.test(e.message));
    process.env[NAME_VARIABLE] = 'p'.repeat(129);
    assert.throws(() => new Peer(), /ZEROBRIDGE_PEER_NAME must be a name of 1\.\.128 characters/);
    assert.throws(() => new Peer({ name: '' }), /options.name .* must be a string of 1\.\.128 characters/);
  });

  test('an endpoint or file given is used whatever the environment says', () => {
    process.env[FILE_VARIABLE] = path.join(tmpdir(), 'not-read.json');
    process.env[NAME_VARIABLE] = 'from-variable';
    assert.equal(new Peer(write({ peer: 'from-file' })).name, 'from-file', 'a file given by path names the peer too');
    assert.throws(() => new Peer('tcp://127.0.0.1:1'), /options.name .* is required/, 'the variables are for a peer not told where');
    assert.equal(new Peer('tcp://127.0.0.1:1', { name: 'given' }).endpoint, 'tcp://127.0.0.1:1');
    assert.throws(() => new Peer({ name: 'n' }, { name: 'm' }), /needs an endpoint/, 'two option objects are not an endpoint');
  });

  test('a launched peer takes its key from the file only', () => {
    process.env[FILE_VARIABLE] = write({ peer: 'p', key: 'ab'.repeat(32) });
    assert.throws(() => new Peer({ key: 'cd'.repeat(32) }), /a connection file brings its own key/);
    assert.equal(new Peer().name, 'p');
  });
});
