import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import path from 'node:path';
import { MAX_RUNNING, networkIsolated, runSandboxed } from '../sandbox.mjs';

// The script the import host sends with a transform (examples/import-host/Sources/EtlPeer.swift, transformScript).
const TRANSFORM_SCRIPT = `
const apply = new Function('record', transform);
return records.map((record) => apply(record));`;

const records = [
  { title: 'alice', body: 'alice likes tea', fields: { name: 'alice' } },
  { title: 'bob', body: 'bob likes coffee', fields: { name: 'bob' } },
];

/** Runs `transform` over `records` as the host's import does, in the sandbox. */
const transform = (body, options) => runSandboxed(TRANSFORM_SCRIPT, { records, transform: body }, options);

/** A folder of its own for a test, removed after it. */
function scratch(t) {
  const folder = mkdtempSync(path.join(tmpdir(), 'etl-sandbox-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  return folder;
}

/** Asserts `promise` rejects with a BridgeError of `code` whose message matches `pattern`. */
async function refused(promise, code, pattern) {
  await assert.rejects(promise, (error) => {
    assert.equal(error.code, code, `${error.name}: ${error.message}`);
    assert.match(error.message, pattern);
    return true;
  });
}

test('a transform that maps records works, and its answer is the records it returned', async () => {
  const mapped = await transform('record.title = record.title.toUpperCase(); return record;');
  assert.deepEqual(mapped.map((r) => r.title), ['ALICE', 'BOB']);
  assert.deepEqual(mapped[1].fields, { name: 'bob' });
  // What a script throws comes back as its own error, with its name.
  await assert.rejects(transform('throw new RangeError("no such column")'), { name: 'RangeError', message: 'no such column' });
});

test('a transform that writes a file is refused, and nothing is written', async (t) => {
  const target = path.join(scratch(t), 'written-by-the-transform');
  for (const write of [
    `require('node:fs').writeFileSync(${JSON.stringify(target)}, 'pwned'); return record;`,
    `process.binding('fs'); return record;`,
  ]) {
    await refused(transform(write), 'not_allowed', /refused .*no file system, child process, worker, add-on or signal rights/);
  }
  await refused(runSandboxed(`const fs = await import('node:fs/promises'); await fs.writeFile(${JSON.stringify(target)}, 'x')`, {}),
    'not_allowed', /FileSystemWrite/);
  assert.equal(existsSync(target), false, 'the file must not exist');
});

test('a transform that reads /etc/passwd is refused', async () => {
  await refused(transform("record.body = require('node:fs').readFileSync('/etc/passwd', 'utf8'); return record;"),
    'not_allowed', /FileSystemRead \(\/etc\/passwd\)/);
});

test('a transform that starts a process or a worker is refused, and the process never runs', async (t) => {
  const marker = path.join(scratch(t), 'spawned');
  await refused(transform(`require('node:child_process').execFileSync('/bin/touch', [${JSON.stringify(marker)}]); return record;`),
    'not_allowed', /ChildProcess/);
  await refused(transform("new (require('node:worker_threads').Worker)('1', { eval: true }); return record;"),
    'not_allowed', /WorkerThreads/);
  assert.equal(existsSync(marker), false, 'the spawned process must not have run');
});

test('a transform cannot signal other processes: not kill them, nor open a Node process\'s inspector (SIGUSR1)', async (t) => {
  const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  t.after(() => other.kill('SIGKILL'));
  for (const [attempt, refusal] of [
    [`process.kill(${other.pid}, 'SIGKILL')`, /refused Signal/],
    [`process._debugProcess(${other.pid})`, /refused Signal/],
    [`require('node:os').setPriority(${other.pid}, 19)`, /refused Priority/],
    [`delete process.kill; process.kill(${process.pid}, 'SIGKILL')`, /refused Signal/],
  ]) {
    await refused(transform(`${attempt}; return record;`), 'not_allowed', refusal);
  }
  assert.equal(other.exitCode, null, 'the other process is still running');
  assert.equal(other.signalCode, null);
});

test('the script runs as nobody when the ETL peer runs as root (else as its user)', async () => {
  const expected = process.getuid() === 0 ? 65534 : process.getuid();
  assert.equal(await runSandboxed('return process.getuid()', {}), expected);
});

test('a transform that loops forever is stopped at its time limit with a clear error', async () => {
  const started = performance.now();
  await refused(transform('for (;;) {}', { timeLimitMs: 1500 }), 'handler_error', /ran longer than its limit of 1500 ms and was stopped/);
  // Generous: a loaded 2-core machine may take seconds to start and kill a process.
  assert.ok(performance.now() - started < 15_000, 'stopped long after its limit');
});

test('the request signal (a deadline or a cancel) stops the script too', async () => {
  const controller = new AbortController();
  const run = runSandboxed('await new Promise((resolve) => setTimeout(resolve, 60_000))', {}, { signal: controller.signal, timeLimitMs: 60_000 });
  setTimeout(() => controller.abort(new Error('cancelled by the caller')), 200);
  await assert.rejects(run, /cancelled by the caller/);
  // A script awaiting what nothing will settle is told so at once, not at its time limit.
  await assert.rejects(runSandboxed('await new Promise(() => {})', {}, { timeLimitMs: 60_000 }), /the script never finished/);
});

test('an answer over the output bound is stopped, and one JSON cannot carry is refused', async () => {
  await refused(runSandboxed("return 'x'.repeat(1 << 20)", {}, { maxOutputBytes: 64 << 10 }), 'handler_error',
    /more than 65536 bytes/);
  await assert.rejects(runSandboxed('return new Map([[1, 2]])', {}), /the result is a Map, which JSON cannot carry/);
  await assert.rejects(runSandboxed('return [1, NaN]', {}), /NaN, which JSON cannot carry/);
});

test('the sandbox gets no environment: secrets in this process are not there', async () => {
  process.env.ETL_SANDBOX_TEST_SECRET = 'hunter2';
  try {
    assert.deepEqual(await runSandboxed('return Object.keys(process.env)', {}), []);
  } finally {
    delete process.env.ETL_SANDBOX_TEST_SECRET;
  }
});

test('at most MAX_RUNNING children at once: the others wait their turn, and every script gets its answer', async () => {
  // Each script answers when it started (ms since the epoch) and when it ended; waiting ones start after others end.
  const spans = await Promise.all(Array.from({ length: MAX_RUNNING * 2 }, () => runSandboxed(
    'const started = Date.now(); await new Promise((r) => setTimeout(r, 300)); return [started, Date.now()]', {})));
  for (const [started] of spans) {
    const running = spans.filter(([from, to]) => from <= started && started < to).length;
    assert.ok(running <= MAX_RUNNING, `${running} children ran at once: ${JSON.stringify(spans)}`);
  }
});

test('run by root where unshare works, the script has no network: a server on this loopback is out of its reach', async (t) => {
  const server = createServer((socket) => socket.end('reached'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const reach = `return await new Promise((resolve) => {
    const socket = process.getBuiltinModule('node:net').connect(${server.address().port}, '127.0.0.1');
    socket.on('data', (data) => resolve(String(data)));
    socket.on('error', (error) => resolve(error.code));
  })`;
  const answer = await runSandboxed(reach, {});
  // As root here (CI) unshare works, so the network is isolated; elsewhere the docs say the network is reachable.
  assert.equal(networkIsolated(), process.getuid() === 0 && networkIsolated());
  if (networkIsolated()) assert.match(answer, /^E[A-Z]+$/, `the script reached the server: ${answer}`);
  else assert.equal(answer, 'reached');
});
