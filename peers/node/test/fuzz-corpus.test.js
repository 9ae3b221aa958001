// The ZMTP decoder's fuzz corpus (fuzz/corpus/node-zmtp, SECURITY.md) replayed on every test run through the fuzz
// loop's own checks (fuzz/node/fuzz-zmtp.mjs): no exception out of the decoder, only ZmtpErrors (never EINTERNAL),
// nothing past the size limit. Each input whole, and cut into bytes one at a time for the greeting's early checks.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runInput } from '../../../fuzz/node/fuzz-zmtp.mjs';
import { repoRoot } from '../test-helpers/processes.js';

const folder = path.join(repoRoot, 'fuzz/corpus/node-zmtp');

test('every input of the ZMTP fuzz corpus is decoded or refused with a ZmtpError', () => {
  const names = readdirSync(folder).sort();
  assert.ok(names.length > 50, `the corpus is missing: ${folder}`);
  for (const name of names) {
    const input = readFileSync(path.join(folder, name));
    const everyByte = Array.from({ length: Math.min(input.length, 80) }, (_, i) => i + 1);
    for (const cuts of [[], everyByte]) {
      assert.doesNotThrow(() => runInput(input, cuts), `fuzz/corpus/node-zmtp/${name}`);
    }
  }
});
