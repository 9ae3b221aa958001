// The Node peer's hand-written code pinned to references from PyPI, on the random corpora of
// fuzz/differential/reference.py (seeded, so a failure replays; run with the repository's .venv, `make deps`):
// canonicalJson (src/describe.js, the catalogue hash of SPEC 7.8) against rfc8785, byte for byte, and schemaProblem
// (src/validate.js, the `validate` option) against jsonschema (draft 2020-12), verdict for verdict.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { canonicalJson } from '../src/describe.js';
import { schemaProblem } from '../src/validate.js';
import { python, repoRoot } from '../test-helpers/processes.js';

const reference = path.join(repoRoot, 'fuzz/differential/reference.py');

async function corpus(kind, seed) {
  const { stdout } = await promisify(execFile)(python, [reference, kind, '--seed', String(seed), '--count', '3000'],
    { maxBuffer: 64 * 1024 * 1024 });
  return stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

for (const seed of [1, 2]) {
  test(`canonicalJson writes 3000 random values (seed ${seed}) byte for byte as rfc8785 does`, async () => {
    const cases = await corpus('canonical', seed);
    assert.equal(cases.length, 3000);
    const disagreements = cases.filter(({ text, canonical }) => canonicalJson(JSON.parse(text)) !== canonical)
      .map(({ text, canonical }) => `${text}: ours ${canonicalJson(JSON.parse(text))}, rfc8785 ${canonical}`);
    assert.deepEqual(disagreements.slice(0, 3), [], `${disagreements.length} of 3000 differ`);
  });

  test(`schemaProblem gives jsonschema's verdict on 3000 schema and instance pairs (seed ${seed})`, async () => {
    const cases = await corpus('schemas', seed);
    assert.equal(cases.length, 3000);
    const disagreements = cases.filter(({ schema, instance, valid }) => (schemaProblem(schema, instance) === null) !== valid)
      .map(({ schema, instance, valid }) => `schema ${JSON.stringify(schema)} instance ${JSON.stringify(instance)}: `
        + `ours ${schemaProblem(schema, instance)?.message ?? 'valid'}, jsonschema ${valid ? 'valid' : 'invalid'}`);
    assert.deepEqual(disagreements.slice(0, 3), [], `${disagreements.length} of 3000 differ`);
  });
}
