// Test support: child processes the tests talk to (a pyzmq ROUTER, the conformance host), and
// small waiting helpers. Lives outside test/ so that `node --test peers/node/test/` does not run it.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const python = process.env.ZEROBRIDGE_PYTHON ?? path.join(repoRoot, '.venv/bin/python');
export const hostBinary = process.env.ZEROBRIDGE_BIN ?? path.join(repoRoot, '.build/debug/zerobridge');

/** The transports every ZMTP test repeats over: a bind endpoint for each. */
export const transports = {
  tcp: () => 'tcp://127.0.0.1:*',
  ipc: () => `ipc://${path.join(tmpdir(), `zb-node-${process.pid}-${randomBytes(4).toString('hex')}.sock`)}`,
};

/** Rejects after `ms` with a message naming what was awaited, so a broken test fails instead of hanging. */
export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const live = new Set();

function track(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

/** Kills every child process a test started and did not stop (for a file-level `after`). */
export async function stopAllProcesses() {
  const children = [...live];
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? once(child, 'exit') : null)));
}

/** Lines of JSON from a child's stdout, consumed by predicate in arrival order. */
class EventLog {
  constructor(stream, label) {
    this.events = [];
    this.waiters = [];
    this.label = label;
    this.ended = false;
    createInterface({ input: stream }).on('line', (line) => {
      let event;
      try {
        event = JSON.parse(line);
      } catch {
        event = { event: 'line', text: line };
      }
      this.events.push(event);
      this.wake();
    }).on('close', () => {
      this.ended = true;
      this.wake();
    });
  }

  wake() {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** The first unconsumed event matching `predicate` (removed from the log). */
  next(predicate, ms = 10_000, what = 'an event') {
    return within(new Promise((resolve, reject) => {
      const check = () => {
        const index = this.events.findIndex(predicate);
        if (index >= 0) {
          this.waiters = this.waiters.filter((w) => w !== check);
          resolve(this.events.splice(index, 1)[0]);
        } else if (this.ended) {
          this.waiters = this.waiters.filter((w) => w !== check);
          reject(new Error(`${this.label} exited while waiting for ${what}`));
        }
      };
      this.waiters.push(check);
      check();
    }), ms, `${what} from ${this.label}`);
  }
}

const b64 = (frame) => Buffer.from(frame).toString('base64');

/** A pyzmq ROUTER in a child process (test-helpers/router.py). */
export class PyRouter {
  static async start(bindEndpoint, { echo = false, heartbeatIvl = 0, heartbeatTimeout = 0 } = {}) {
    const args = [path.join(here, 'router.py'), bindEndpoint];
    if (echo) args.push('--echo');
    if (heartbeatIvl) args.push('--heartbeat-ivl', String(heartbeatIvl));
    if (heartbeatTimeout) args.push('--heartbeat-timeout', String(heartbeatTimeout));
    const child = track(spawn(python, args, { stdio: ['pipe', 'pipe', 'inherit'] }));
    const router = new PyRouter(child);
    const ready = await router.log.next((e) => e.event === 'ready', 15_000, 'the ROUTER to bind');
    router.endpoint = ready.endpoint;
    return router;
  }

  constructor(child) {
    this.child = child;
    this.log = new EventLog(child.stdout, 'the pyzmq ROUTER');
    this.exited = once(child, 'exit');
  }

  next(predicate, ms, what) {
    return this.log.next(predicate, ms, what);
  }

  /** The next message the ROUTER received, as Buffers (routing id first). */
  async receive(ms = 10_000) {
    const event = await this.next((e) => e.event === 'recv', ms, 'a message');
    return event.frames.map((f) => Buffer.from(f, 'base64'));
  }

  send(frames) {
    this.child.stdin.write(`${JSON.stringify({ send: frames.map(b64) })}\n`);
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.stdin.end(`${JSON.stringify({ quit: true })}\n`);
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}

/** The Swift conformance host (`zerobridge serve --conformance`). */
export class ConformanceHost {
  static async start(bindEndpoint = 'tcp://127.0.0.1:*', extraArgs = []) {
    if (!existsSync(hostBinary)) {
      throw new Error(`the conformance host is not built: no executable at ${hostBinary} (set ZEROBRIDGE_BIN or run \`swift build\`)`);
    }
    const child = track(spawn(hostBinary, ['serve', '--conformance', '--endpoint', bindEndpoint, ...extraArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }));
    const host = new ConformanceHost(child, extraArgs);
    const ready = await host.log.next((e) => e.event === 'line' && e.text.startsWith('zerobridge ready '), 20_000,
      `"zerobridge ready <endpoint>" from ${hostBinary}`);
    host.endpoint = ready.text.slice('zerobridge ready '.length).trim();
    return host;
  }

  constructor(child, extraArgs) {
    this.child = child;
    this.extraArgs = extraArgs; // the flags it was started with, to start it again alike
    this.stderr = '';
    child.stderr.on('data', (chunk) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-20_000);
    });
    this.log = new EventLog(child.stdout, 'the conformance host');
    this.exited = once(child, 'exit');
  }

  /** Kills the host without a chance to say bye (SIGKILL). */
  async kill() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }

  /**
   * Kills the host (SIGKILL) and starts another with the same flags (its --journal included) on the endpoint this one
   * had bound, so that peers find it where they were; resolves to the new host.
   */
  async restarted() {
    await this.kill();
    return ConformanceHost.start(this.endpoint, this.extraArgs);
  }

  /** Asks the host to shut down gracefully (SIGTERM), killing it if it takes more than 10 s. */
  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(timer);
    }
  }
}
