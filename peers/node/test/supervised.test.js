// Peers launched by a host (SPEC 10.1): connect() without an endpoint reads the connection file that
// ZEROBRIDGE_CONNECTION_FILE names and says hello with its `peer` (else ZEROBRIDGE_PEER_NAME), against the real
// conformance host writing a keyed connection file; without the variable it fails at once, saying what to set.

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
import { ConformanceHost, stopAllProcesses, within } from '../test-helpers/processes.js';

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

/** What a supervising host hands a peer: a copy of the keyed conformance host's connection file with `peer`. */
async function launchedFile(t, peer) {
  const dir = mkdtempSync(path.join(tmpdir(), 'zb-node-supervised-host-'));
  const written = path.join(dir, 'host.json');
  const host = await ConformanceHost.start('tcp://127.0.0.1:*', ['--connection-file', written]);
  t.after(() => host.stop());
  const contents = JSON.parse(readFileSync(written, 'utf8'));
  assert.match(contents.key, /^[0-9a-f]{64}$/, 'keyed: the host refuses a peer that does not sign with it');
  const file = path.join(dir, 'peer.json');
  writeFileSync(file, JSON.stringify({ ...contents, peer }), { mode: 0o600 }); // a new file: created 0600
  return file;
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
    const readme = readFileSync(path.join(packageDir, 'README.md'), 'utf8');
    const example = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((code) => code.includes("process.once('SIGTERM'"));
    assert.ok(example, 'the README has the launched-by-a-host example');
    const file = await launchedFile(t, 'node-launched-readme');
    // From the package folder, where `import 'zerobridge'` resolves to this package.
    const child = spawn(process.execPath, ['--input-type=module', '-e', example], {
      cwd: packageDir, env: { ...process.env, [FILE_VARIABLE]: file }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    const exited = once(child, 'exit');
    t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
    const [line] = await within(once(createInterface({ input: child.stdout }), 'line'), 20_000, 'the example\'s first line');
    assert.equal(line, 'serving as node-launched-readme');
    child.kill('SIGTERM');
    const [code, signal] = await within(exited, 20_000, 'the example to exit');
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
    // It said bye: the host let the name go at once (a peer gone without bye holds it for 3 heartbeats, 15 s).
    const again = await connect(file, { timeout: 5000 });
    assert.equal(again.name, 'node-launched-readme');
    await again.close();
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
