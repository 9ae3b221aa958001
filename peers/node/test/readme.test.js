// The repository README's Node example runs as printed and prints what it says.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { ConformanceHost, repoRoot, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses);

test('the README example prints 3 against the conformance host', async () => {
  const host = await ConformanceHost.start();
  const readme = await readFile(path.join(repoRoot, 'README.md'), 'utf8');
  const example = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((code) => code.includes("name: 'hello-node'"));
  assert.ok(example, 'the README has the hello-node example');
  const script = example.replace('tcp://127.0.0.1:5555', host.endpoint);
  // Evaluated as a module from the repository root, where the example's relative import points.
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, timeout: 20_000 });
  assert.equal(stdout, '3\n');
});
