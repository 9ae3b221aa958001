// protocol/fixtures/json-texts.json (SPEC 14.1b): every JSON text through the decoder the peer runs on a received
// body, wire.js's decode(). "accept" means it yields a valid event, "refuse" that it answers bad_message.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { decode } from '../src/wire.js';
import { repoRoot } from '../test-helpers/processes.js';

const cases = JSON.parse(readFileSync(path.join(repoRoot, 'protocol/fixtures/json-texts.json'), 'utf8'));

describe('protocol fixtures: JSON texts', () => {
  test('the corpus has cases of every category', () => {
    for (const prefix of ['y_', 'n_', 'i_']) {
      assert.ok(cases.filter((c) => c.name.startsWith(prefix)).length >= 30, `too few ${prefix} cases`);
    }
  });
  for (const c of cases) {
    test(c.name, () => {
      const decoded = decode([Buffer.alloc(0), Buffer.from(c.hex, 'hex')]);
      if (decoded.error) {
        assert.equal(c.verdict, 'refuse', `${c.name} (${c.why}): refused with ${decoded.error.code}: ${decoded.error.message}`);
        assert.equal(decoded.error.code, 'bad_message', `${c.name}: refused with ${decoded.error.code}, not bad_message`);
      } else {
        assert.equal(c.verdict, 'accept', `${c.name} (${c.why}): accepted`);
        assert.equal(decoded.body.type, 'event', `${c.name}: accepted, but as a ${decoded.body.type}, not an event`);
      }
    });
  }
});
