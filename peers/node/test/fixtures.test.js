// protocol/fixtures through zerobridge/fixtures: every conversation against the real conformance host, every
// message case against the Node wire decoder, and every peer conversation (plays: host) against the Node and the
// Python conformance peers. One test each, named by its description. When the host binary is missing, the
// conversation tests fail with a message saying where it looked. A conversation that restarts the host (restart_host,
// SPEC 14.2) gets a host of its own on a journal file in a fresh folder, killed and started again on cue.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import {
  loadConversations, loadMessageCases, runConversation, runPeerConversation, checkMessageCase, match, restartsHost,
  FixtureFailure, FixtureFormatError,
} from 'zerobridge/fixtures';
import { ZmtpRouter } from '../src/zmtp-router.js';
import { ConformanceHost, repoRoot, python, stopAllProcesses, within } from '../test-helpers/processes.js';

after(stopAllProcesses);

const fixtures = path.join(repoRoot, 'protocol/fixtures');
const conversations = loadConversations([path.join(fixtures, 'conversations')]);
const peerConversations = loadConversations([path.join(fixtures, 'peer-conversations')], { plays: 'host' });
const messageCases = loadMessageCases([path.join(fixtures, 'messages')]);
const PEERS = {
  node: { language: 'node', command: [process.execPath, path.join(repoRoot, 'peers/node/bin/conformance-peer.js')] },
  python: { language: 'python', command: [python, '-m', 'zerobridge.conformance_peer'] },
};
const LIMIT_FLAGS = { max_message_bytes: '--max-message-bytes', max_in_flight: '--max-in-flight' };

const limitFlags = (limits) => Object.entries(limits).sort(([a], [b]) => (a < b ? -1 : 1))
  .flatMap(([name, value]) => [LIMIT_FLAGS[name], String(value)]);

// One conformance host per set of limits the conversations name, started on first use.
const hosts = new Map();
function hostWith(limits = {}) {
  const flags = limitFlags(limits);
  const key = JSON.stringify(flags);
  if (!hosts.has(key)) hosts.set(key, ConformanceHost.start('tcp://127.0.0.1:*', flags));
  return hosts.get(key);
}
after(async () => {
  for (const host of hosts.values()) await (await host.catch(() => null))?.stop();
});

/**
 * Runs a conversation that restarts its host against a host of its own, on a new journal file: restartHost kills it
 * with SIGKILL and starts it again with the same flags on the port the first one bound.
 */
async function runWithOwnHost(t, conversation) {
  const folder = mkdtempSync(path.join(tmpdir(), 'zb-node-journal-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  let host = await ConformanceHost.start('tcp://127.0.0.1:*', ['--journal', path.join(folder, 'journal.sqlite'), ...limitFlags(conversation.limits)]);
  t.after(() => host.stop());
  const restartHost = async () => {
    host = await host.restarted();
    return host.endpoint;
  };
  await runConversation(conversation, host.endpoint, { restartHost });
}

describe('conversations against the conformance host', () => {
  test('the conversations are there', () => assert.ok(conversations.length >= 44, `${conversations.length} conversations`));
  test('some conversations restart the host', () => assert.ok(conversations.some(restartsHost)));
  for (const conversation of conversations) {
    test(conversation.description, async (t) => {
      if (restartsHost(conversation)) {
        await runWithOwnHost(t, conversation);
        return;
      }
      const host = await hostWith(conversation.limits);
      await runConversation(conversation, host.endpoint);
    });
  }
});

describe('message cases against the Node wire decoder', () => {
  test('the cases are there', () => assert.ok(messageCases.length >= 80));
  for (const fixtureCase of messageCases) {
    test(fixtureCase.name, () => checkMessageCase(fixtureCase));
  }
});

for (const [language, program] of Object.entries(PEERS)) {
  describe(`peer conversations against the ${language} conformance peer`, () => {
    test('the peer conversations are there', () => assert.ok(peerConversations.length >= 12));
    for (const conversation of peerConversations) {
      test(conversation.description, () => runPeerConversation(conversation, program));
    }
  });
}

describe('failure reports', () => {
  const wrongAdd = (expect) => ({
    description: 'a deliberately wrong expectation', file: 'wrong.json', plays: 'peers', clients: ['peer'], pings: 'auto', limits: {},
    steps: [{ send: { v: 1, type: 'request', id: 'w1', action: 'add', payload: { a: 1, b: 2 } } }, { expect }],
  });

  test('a wrong expectation fails with a diff naming the field', async () => {
    const host = await hostWith();
    await assert.rejects(
      runConversation(wrongAdd({ v: 1, type: 'response', id: 'w1', ok: true, result: 4 }), host.endpoint),
      (error) => {
        assert.ok(error instanceof FixtureFailure, String(error));
        assert.match(error.message, /step 2 of 2 \(expect; \$\.steps\[1\]\)/);
        assert.match(error.message, /\$\.result: expected 4, received 3/);
        assert.match(error.message, /received: \{"v": 1, "type": "response", "id": "w1", "ok": true, "result": 3\}/);
        return true;
      },
    );
    await assert.rejects(
      runConversation(wrongAdd({ v: 1, type: 'response', id: 'w1', ok: false, error: { code: 'x', message: { $any: 'string' } } }), host.endpoint),
      /\$\.ok: expected false, received true/,
    );
  });

  test('silence where a message is expected, and a message where silence is, fail', async () => {
    const host = await hostWith();
    const base = { description: 'd', file: '', plays: 'peers', clients: ['peer'], pings: 'auto', limits: {} };
    await assert.rejects(runConversation({ ...base, steps: [{ expect: { v: 1, type: 'pong' }, within_ms: 200 }] }, host.endpoint),
      /nothing came within 200 ms/);
    await assert.rejects(runConversation({ ...base, steps: [{ send: { v: 1, type: 'ping' } }, { expect_nothing_ms: 2000 }] }, host.endpoint),
      /expected nothing for 2000 ms, received: \{"v": 1, "type": "pong"\}/);
  });

  test('a peer that answers wrongly fails with a diff naming the field', async () => {
    const conversation = {
      description: 'the peer counts wrongly', file: 'wrong-peer.json', plays: 'host', clients: ['peer'], pings: 'auto', evaluate: false,
      steps: [
        { expect: { v: 1, type: 'hello', peer: 'conformance-peer' }, within_ms: 10000 },
        { send: { v: 1, type: 'request', id: 'w', action: 'count', payload: { n: 2 }, progress: true } },
        { expect: { v: 1, type: 'progress', id: 'w', seq: 1, payload: { i: 1, n: 3 } } },
      ],
    };
    await assert.rejects(runPeerConversation(conversation, PEERS.node), /step 3 of 3[\s\S]*\$\.payload\.n: expected 3, received 2/);
  });

  test('a peer that exits fails with its stderr', async () => {
    const conversation = { description: 'waits', file: '', plays: 'host', clients: ['peer'], pings: 'auto', evaluate: false,
      steps: [{ expect: { v: 1, type: 'hello' }, within_ms: 10000 }] };
    const crashing = { language: 'node', command: [process.execPath, '-e', 'console.error("no host for me"); process.exit(3)'] };
    await assert.rejects(runPeerConversation(conversation, crashing), /exited with code 3[\s\S]*no host for me/);
  });

  test('a $per_language without a value for the peer is a fixture error naming the path', async () => {
    const conversation = { description: 'python only', file: 'one.json', plays: 'host', clients: ['peer'], pings: 'auto', evaluate: false,
      steps: [
        { expect: { v: 1, type: 'hello' }, within_ms: 10000 },
        { send: { v: 1, type: 'request', id: 's', action: '$evaluate', payload: { script: { $per_language: { python: 'return 1' } } } } },
      ] };
    await assert.rejects(runPeerConversation(conversation, PEERS.node), (error) => {
      assert.ok(error instanceof FixtureFormatError);
      assert.equal(error.path, '$.steps[1].send.payload.script');
      return true;
    });
  });

  test('matching names the path and forgets the captures of a failed match', () => {
    const variables = {};
    const pattern = { a: [{ b: { $capture: 'x' } }, { c: 2 }] };
    assert.equal(String(match(pattern, { a: [{ b: 1 }, { c: 3 }] }, variables)), '$.a[1].c: expected 2, received 3');
    assert.deepEqual(variables, {});
    assert.equal(match(pattern, { a: [{ b: 1 }, { c: 2 }], extra: true }, variables), null);
    assert.deepEqual(variables, { x: 1 });
    assert.notEqual(match({ ok: true }, { ok: 1 }), null);
    assert.equal(match({ k: { $not: 1 } }, {}), null);
    assert.equal(match({ $exact: { a: 1 } }, { a: 1, b: 2 }).path, '$.b');
  });

  test('a case that disagrees with the decoder fails', () => {
    assert.throws(() => checkMessageCase({ name: 'x', data: { v: 1, type: 'ping' }, valid: false, error: 'bad_message' }), /an invalid body was accepted/);
    assert.throws(() => checkMessageCase({ name: 'x', data: { v: 2, type: 'ping' }, valid: false, error: 'bad_message' }), /refused with unsupported_version/);
  });
});

describe('the restart_host step', () => {
  const PING = { v: 1, type: 'ping' };
  const PONG = { v: 1, type: 'pong' };
  const restarting = (clients, steps) => ({ description: 'restarts', file: 'restart.json', plays: 'peers', clients, pings: 'auto', limits: {}, steps });

  /**
   * A host in this process that answers each ping with `pongs` pongs and records who connected and left; enough to
   * watch the runner's sockets across a restart without a conformance host.
   */
  async function pongHost(pongs) {
    const router = new ZmtpRouter();
    const seen = { connected: new Set(), disconnected: new Set() };
    router.on('connect', (id) => seen.connected.add(id.toString('hex')));
    router.on('disconnect', (id) => seen.disconnected.add(id.toString('hex')));
    router.on('message', (id, frames) => {
      if (JSON.parse(frames[1]).type !== 'ping') return;
      for (let k = 0; k < pongs; k += 1) router.send(id, [Buffer.alloc(0), Buffer.from(JSON.stringify(PONG))]);
    });
    const endpoint = await router.bind('tcp://127.0.0.1:*');
    return { router, endpoint, seen };
  }

  test('closes every client socket, awaits restartHost, and opens fresh ones; what no step took is dropped', async (t) => {
    const first = await pongHost(2); // one pong too many: still queued when the host restarts
    const second = await pongHost(1);
    t.after(() => first.router.close());
    t.after(() => second.router.close());
    let closedBeforeRestart = null;
    const restartHost = async () => {
      closedBeforeRestart = await within((async () => {
        while (first.seen.disconnected.size < 2) await new Promise((resolve) => setTimeout(resolve, 10));
        return [...first.seen.connected].every((id) => first.seen.disconnected.has(id));
      })(), 10_000, 'both clients to leave the first host');
      await first.router.close();
      return second.endpoint;
    };
    await runConversation(restarting(['one', 'two'], [
      { send: PING, client: 'one' },
      { send: PING, client: 'two' },
      { expect: PONG, client: 'one' },
      { expect: PONG, client: 'two' },
      { restart_host: 'kill' },
      { send: PING, client: 'one' },
      { send: PING, client: 'two' },
      { expect: PONG, client: 'one' },
      { expect: PONG, client: 'two' },
      { expect_nothing_ms: 300, client: 'one' },
      { expect_nothing_ms: 300, client: 'two' },
    ]), first.endpoint, { restartHost });
    assert.equal(closedBeforeRestart, true, 'every socket to the first host was closed before restartHost ran');
    assert.equal(first.seen.connected.size, 2);
    assert.equal(second.seen.connected.size, 2, 'a fresh socket per client');
  });

  test('without restartHost the conversation is not run, and the failure says why', async () => {
    const conversation = restarting(['peer'], [{ send: PING }, { restart_host: 'kill' }]);
    await assert.rejects(runConversation(conversation, 'tcp://127.0.0.1:9'), (error) => {
      assert.ok(error instanceof FixtureFailure, String(error));
      assert.match(error.message, /was not run: step 2 restarts the host \(restart_host\).*\{ restartHost \}/s);
      return true;
    });
  });

  test('a restartHost that fails, or resolves to no endpoint, fails the step', async (t) => {
    const host = await pongHost(1);
    t.after(() => host.router.close());
    const conversation = restarting(['peer'], [{ restart_host: 'kill' }]);
    await assert.rejects(runConversation(conversation, host.endpoint, { restartHost: async () => { throw new Error('no binary'); } }),
      /step 1 of 1 \(restart_host; \$\.steps\[0\]\): restartHost\(\) failed to kill the host and start it again: no binary/);
    await assert.rejects(runConversation(conversation, host.endpoint, { restartHost: async () => undefined }),
      /restartHost\(\) must resolve to the restarted host's endpoint/);
  });

  test('restart_host is "kill", and only in conversations with a host', (t) => {
    const folder = mkdtempSync(path.join(tmpdir(), 'zb-node-fixture-'));
    t.after(() => rmSync(folder, { recursive: true, force: true }));
    const write = (name, value) => {
      const file = path.join(folder, name);
      writeFileSync(file, JSON.stringify(value));
      return file;
    };
    const base = { format: 1, description: 'd', clients: ['peer'] };
    assert.equal(restartsHost(loadConversations([write('ok.json', { ...base, steps: [{ restart_host: 'kill', note: 'why' }] })])[0]), true);
    assert.throws(() => loadConversations([write('term.json', { ...base, steps: [{ restart_host: 'term' }] })]),
      (error) => error instanceof FixtureFormatError && error.path === '$.steps[0].restart_host' && /must be "kill"/.test(error.reason));
    assert.throws(() => loadConversations([write('extra.json', { ...base, steps: [{ restart_host: 'kill', client: 'peer' }] })]),
      (error) => error instanceof FixtureFormatError && error.path === '$.steps[0].client');
    const peerConversation = { format: 1, description: 'd', plays: 'host', steps: [{ expect: PING }, { restart_host: 'kill' }] };
    assert.throws(() => loadConversations([write('peer.json', peerConversation)], { plays: 'host' }),
      (error) => error instanceof FixtureFormatError && error.path === '$.steps[1].restart_host' && /no host to restart/.test(error.reason));
  });
});
