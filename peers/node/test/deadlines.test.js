// The link's deadlines on one timer (src/link.js Deadlines): they fire in order, once, never before their time; a
// cleared one never fires; cleared ones do not pile up; and in Node the timer keeps the process alive only while a
// deadline is live.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Deadlines } from '../src/link.js';

/** Runs `body` in a Node process of its own, with Deadlines imported. */
const runNode = (body) => spawnSync(process.execPath, ['--input-type=module', '-e',
  `import { writeSync } from "node:fs";\nimport { Deadlines } from ${JSON.stringify(new URL('../src/link.js', import.meta.url).href)};\n${body}`],
{ encoding: 'utf8', timeout: 30_000 });

const waitFor = async (condition, what, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => { setTimeout(resolve, 5); });
  }
};

test('deadlines fire in the order of their instants, once each, none early; a cleared one never fires', async () => {
  const deadlines = new Deadlines();
  const fired = [];
  const started = performance.now();
  const at = {};
  for (const [name, ms] of [['c', 60], ['a', 20], ['d', 80], ['b', 40], ['x', 30]]) {
    at[name] = started + ms;
    const deadline = deadlines.after(ms, () => fired.push([name, performance.now()]));
    if (name === 'x') deadline.clear();
  }
  assert.equal(deadlines.size, 4);
  await waitFor(() => fired.length === 4, 'four deadlines');
  assert.deepEqual(fired.map(([name]) => name), ['a', 'b', 'c', 'd']);
  // performance.now() and a timer's clock may differ by a rounding: "early" would be by more than a millisecond.
  for (const [name, when] of fired) assert.ok(when >= at[name] - 1, `${name} fired ${at[name] - when} ms early`);
  assert.equal(deadlines.size, 0);
});

test('a deadline added while firing, and one added earlier than the armed one, both fire', async () => {
  const deadlines = new Deadlines();
  const fired = [];
  // A minute away: the timer armed for it must be armed again for the earlier one. (The gap is wide so that a loaded
  // machine, firing timers late, cannot make the two due together.)
  const late = deadlines.after(60_000, () => fired.push('late'));
  deadlines.after(10, () => {
    fired.push('first');
    deadlines.after(5, () => fired.push('from a fire'));
  });
  await waitFor(() => fired.length === 2, 'the earlier deadline and the one added while it fired');
  assert.deepEqual(fired, ['first', 'from a fire']);
  assert.equal(deadlines.size, 1, 'the later deadline is still waiting');
  late.clear();
  assert.equal(deadlines.size, 0);
});

test('a fire that throws does not stop the others, and its error is uncaught as from a timer of its own', () => {
  const run = runNode(`
    const deadlines = new Deadlines();
    deadlines.after(5, () => { throw new Error('boom'); });
    deadlines.after(6, () => writeSync(1, 'second\\n')); // written at once: the uncaught error ends the process
    const busy = Date.now() + 20;
    while (Date.now() < busy); // both are due when the timer fires
  `);
  assert.equal(run.stdout.trim(), 'second');
  assert.equal(run.status, 1);
  assert.match(run.stderr, /Error: boom/);
});

test('cleared deadlines are dropped: the heap stays within twice the live ones and a constant', () => {
  const deadlines = new Deadlines();
  const live = [];
  let heapMax = 0;
  for (let i = 0; i < 100_000; i += 1) {
    const deadline = deadlines.after(30_000, () => assert.fail('no deadline here fires'));
    live.push(deadline);
    if (live.length > 64) live.shift().clear(); // 64 calls in flight, each answered long before its deadline
    heapMax = Math.max(heapMax, deadlines.heapLength);
  }
  assert.equal(deadlines.size, 64);
  assert.ok(heapMax <= 2 * 64 + 64 + 1, `the heap held ${heapMax} deadlines for 64 live ones`);
  for (const deadline of live) deadline.clear();
  assert.equal(deadlines.size, 0);
});

test('in Node, the timer keeps the process alive only while a deadline is live', () => {
  const started = Date.now();
  const run = runNode(`
    const deadlines = new Deadlines();
    deadlines.after(60_000, () => {}).clear(); // cleared: the process must not wait a minute for its timer
    deadlines.after(50, () => console.log('fired'));
  `);
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), 'fired', 'a live deadline keeps the process alive until it fires');
  assert.ok(Date.now() - started < 30_000, 'the process ended without waiting for the cleared deadline');
});
