// The browser peer's half of "one core, two transports" (issue 24), checked in Node where it can be: what
// src/browser.js imports uses nothing of Node's, and its signing (src/sha256.js, synchronous) is byte for byte the
// node:crypto signing of protocol/fixtures/signatures.json. The browser peer itself runs in Chromium:
// peers/browser-tests/.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PeerChannel as NodeChannel, parseKey, sha256Hex as nodeSha256Hex } from '../src/signing.js';
import { pageChannel, sha256Hex } from '../src/browser.js';
import { canonicalHash } from '../src/describe.js';
import { repoRoot } from '../test-helpers/processes.js';

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src');
const fixtures = [JSON.parse(readFileSync(path.join(repoRoot, 'protocol/fixtures/signatures.json'), 'utf8'))].flat();
const toFrame = (frame) => (typeof frame === 'string' ? Buffer.from(frame, 'utf8') : Buffer.from(frame.hex, 'hex'));
const latin1 = (bytes) => Buffer.from(bytes).toString('latin1');

/** The relative modules `file` imports, and the lines that name Node's own globals (not looked up on globalThis). */
function importsOf(file) {
  const text = readFileSync(path.join(src, file), 'utf8');
  const specifiers = [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+'([^']+)'/gms)].map((match) => match[1]);
  const nodeGlobals = text.split('\n').filter((line) => !/^\s*(\/\/|\*|\/\*\*)/.test(line) && !line.includes('globalThis.')
    && /\b(Buffer|process)\.|\b(setImmediate|clearImmediate|require)\(/.test(line));
  return { specifiers, nodeGlobals };
}

describe('the browser peer\'s modules', () => {
  test('nothing src/browser.js loads imports node:* or uses Buffer, process or setImmediate', () => {
    const seen = new Set();
    const visit = (file) => {
      if (seen.has(file)) return;
      seen.add(file);
      const { specifiers, nodeGlobals } = importsOf(file);
      assert.deepEqual(nodeGlobals, [], `${file} uses Node's globals`);
      for (const specifier of specifiers) {
        assert.ok(specifier.startsWith('./'), `${file} imports ${specifier}: the browser loads only ./ modules from /_zerobridge/`);
        visit(specifier.slice(2));
      }
    };
    visit('browser.js');
    assert.ok(seen.has('core.js') && seen.has('link.js') && seen.has('wire.js'), 'the session, the link and the wire are shared');
    assert.ok(!seen.has('zmtp.js') && !seen.has('signing.js') && !seen.has('peer.js'));
  });
});

describe('the page\'s signing is node:crypto signing', () => {
  for (const f of fixtures) {
    const key = parseKey(f.key);
    for (const c of f.sign.filter((s) => !s.kind.startsWith('h2p'))) {
      test(`signatures.json: sign: ${c.description}`, () => {
        // A channel at the fixture's counter: opened, and c.counter - 1 messages signed after the opening.
        const channel = pageChannel(key, c.channel);
        if (c.kind !== 'hello') {
          channel.opened = true;
          channel.sent = c.counter - 1;
        }
        const frames = c.frames.map(toFrame);
        const frame0 = c.kind === 'p2h-batch' ? channel.signBatch(frames[0]) : channel.sign(frames, c.ms);
        assert.equal(latin1(frame0), c.frame0, 'signed at once, not a promise');
      });
    }
    const peerCases = f.verify.filter((v) => v.side === 'peer');
    for (const c of peerCases) {
      test(`signatures.json: verify: ${c.description}`, () => {
        const page = pageChannel(key, c.channel);
        const node = new NodeChannel(key, c.channel);
        if (c.description.includes('batch')) page.welcomed = node.welcomed = true; // these cases start after the welcome (SPEC 3.3)
        for (const [i, m] of c.messages.entries()) {
          const frame0 = Buffer.from(m.frame0, 'latin1');
          const frames = m.frames.map(toFrame);
          const why = page.refusal(frame0, frames);
          assert.equal(why === null, m.accept, `message ${i} (${m.note ?? m.frame0}): ${why ?? 'accepted'}`);
          assert.equal(why, node.refusal(frame0, frames), `message ${i}: the same verdict as node:crypto's`);
        }
      });
    }
  }

  test('the catalogue hash is node:crypto\'s', () => {
    const value = { actions: [{ name: 'é', doc: 'x', payload: {}, result: { type: 'integer' } }] };
    assert.equal(canonicalHash(value, sha256Hex), canonicalHash(value, nodeSha256Hex));
  });
});
