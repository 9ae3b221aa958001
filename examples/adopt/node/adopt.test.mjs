// A project outside the repository that installed the packed zerobridge tarball, as the README's Install section
// says. `make test-install` runs it with ZEROBRIDGE_BIN naming the built CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { connect, version } from 'zerobridge';
import { loadConversation } from 'zerobridge/fixtures';

async function startHost(t) {
  const host = spawn(process.env.ZEROBRIDGE_BIN, ['serve', '--conformance', '--endpoint', 'tcp://127.0.0.1:*'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => host.kill('SIGTERM'));
  const lines = createInterface({ input: host.stdout });
  for await (const line of lines) {                  // `zerobridge ready <endpoint>`; ends if the host exits
    const [word, state, endpoint] = line.split(' ');
    if (word === 'zerobridge' && state === 'ready') return endpoint;
  }
  throw new Error('the host exited before it was ready');
}

test('the package resolves from node_modules, with its version', () => {
  const require = createRequire(import.meta.url);
  assert.match(require.resolve('zerobridge/package.json'), /node_modules\/zerobridge\/package\.json$/);
  assert.equal(version, require('zerobridge/package.json').version);
  assert.equal(typeof loadConversation, 'function');
});

test('a peer from the installed package calls the host and streams progress', async (t) => {
  const endpoint = await startHost(t);
  const peer = await connect(endpoint, { name: 'adopter' });
  try {
    assert.equal(await peer.call('add', { a: 2, b: 3 }), 5);
    assert.equal(peer.hostLibraryVersion, version);   // one version for host and peer
    const call = peer.stream('count', { n: 3 });
    const seen = [];
    for await (const progress of call.progress) seen.push(progress.i);
    assert.deepEqual(seen, [1, 2, 3]);
    assert.deepEqual(await call.result, { n: 3 });
  } finally {
    await peer.close();
  }
});
