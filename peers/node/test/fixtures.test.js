// protocol/fixtures through zerobridge/fixtures: every conversation against the real conformance host, every
// message case against the Node wire decoder, and every peer conversation (plays: host) against the Node and the
// Python conformance peers. One test each, named by its description. When the host binary is missing, the
// conversation tests fail with a message saying where it looked.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  loadConversations, loadMessageCases, runConversation, runPeerConversation, checkMessageCase, match,
  FixtureFailure, FixtureFormatError,
} from 'zerobridge/fixtures';
import { ConformanceHost, repoRoot, python, stopAllProcesses } from '../test-helpers/processes.js';

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

// One conformance host per set of limits the conversations name, started on first use.
const hosts = new Map();
function hostWith(limits = {}) {
  const entries = Object.entries(limits).sort(([a], [b]) => (a < b ? -1 : 1));
  const key = JSON.stringify(entries);
  if (!hosts.has(key)) hosts.set(key, ConformanceHost.start('tcp://127.0.0.1:*', entries.flatMap(([name, value]) => [LIMIT_FLAGS[name], String(value)])));
  return hosts.get(key);
}
after(async () => {
  for (const host of hosts.values()) await (await host.catch(() => null))?.stop();
});

describe('conversations against the conformance host', () => {
  test('the conversations are there', () => assert.ok(conversations.length >= 38, `${conversations.length} conversations`));
  for (const conversation of conversations) {
    test(conversation.description, async () => {
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
