// Runs an `$evaluate` script (the import's record transform) where it cannot use this process's powers: in a Node
// child process of its own under Node's permission model, with no file system, child process, worker or add-on
// rights, no way to signal other processes, an empty environment (and as nobody when this process is root), a time
// limit and a bound on its output. `node:vm` alone would not do: Node's documentation says it is not a security
// mechanism.
//
// The child's code comes from `-e`, and the script and its arguments from stdin, as one JSON text; the answer goes
// back on stdout as one JSON text. An entry script given as a file would need --allow-fs-read on it (Node 20.20
// refuses to load it otherwise); `-e` needs no file at all, so the child gets no file rights whatsoever.

import { spawn, spawnSync } from 'node:child_process';
import { BridgeError } from '../../peers/node/index.js';

/** How long one script may run, the child's start included, unless the caller says otherwise. */
export const DEFAULT_TIME_LIMIT_MS = 4000;
/** The most a script's answer may take on stdout (JSON text), unless the caller says otherwise: a message's worth. */
export const DEFAULT_MAX_OUTPUT_BYTES = 16 << 20;
/** The most of the child's stderr kept to explain a failure. */
const MAX_STDERR_BYTES = 4096;
/** The child's V8 heap, in MiB: the records of a file the host imports (at most 4 MiB) and a transform's copy. */
const HEAP_MB = 256;

// Run as root (the ETL peer in a container, or CI), the child runs as nobody instead: a user that owns no file and
// may signal none of this user's processes, should the script find a way around what the child takes away. And, where
// util-linux's unshare can make one (root with CAP_SYS_ADMIN), in a network namespace of its own with no interface
// up: the permission model does not cover the network, this does.
const NOBODY = '65534';
const AS_ROOT = process.getuid?.() === 0;
const ISOLATED = ['unshare', '--net', '--setuid', NOBODY, '--setgid', NOBODY, '--'];
let isolated; // checked on first use

/** Whether children run without a network (checked once: unshare may be missing or refused in a container). */
export function networkIsolated() {
  isolated ??= AS_ROOT && spawnSync(ISOLATED[0], [...ISOLATED.slice(1), process.execPath, '-e', ''],
    { stdio: 'ignore', timeout: 10_000 }).status === 0;
  return isolated;
}

/** The command that starts a child running `nodeArguments`, and spawn's options for it. */
function childCommand(nodeArguments) {
  const options = { env: {}, stdio: ['pipe', 'pipe', 'pipe'] };
  if (networkIsolated()) return [ISOLATED[0], [...ISOLATED.slice(1), process.execPath, ...nodeArguments], options];
  if (AS_ROOT) return [process.execPath, nodeArguments, { ...options, uid: Number(NOBODY), gid: Number(NOBODY) }];
  return [process.execPath, nodeArguments, options];
}

// Node 20 calls it --experimental-permission; later versions call it --permission (and may drop the old name). Before
// Node 20 there is none, and no script runs.
const PERMISSION_FLAG = ['--permission', '--experimental-permission'].find((flag) => process.allowedNodeEnvironmentFlags.has(flag));

// The child's program. It refuses to run a script unless the permission model is on and grants none of the rights
// checked (failing closed on a Node without it), reads {script, args} from stdin, writes {ok, value} or
// {ok: false, error} to stdout and exits, whatever the script left running. The answer is refused when JSON would
// silently change it (NaN written as null, a Map as {}, a function dropped): the rule the peer applies to every
// value it sends (SPEC 7.14). The script's console output goes to stderr, so it cannot garble the answer.
const CHILD = String.raw`
'use strict';
// Taken before the script runs, which may replace what it likes in its own process.
const send = process.stdout.write.bind(process.stdout);
const exit = process.exit.bind(process);
const answer = (text) => send(text, () => exit(0));
for (const name of ['log', 'info', 'debug', 'dir', 'table']) console[name] = console.error;
// The permission model does not cover signals or priorities: without this the script could kill other processes, or
// send SIGUSR1 (_debugProcess) to a Node process, the ETL peer included, to open its inspector to the network.
const refuse = (what) => () => {
  throw Object.assign(new Error('Access to this API has been restricted'), { code: 'ERR_ACCESS_DENIED', permission: what });
};
for (const name of ['kill', '_kill', '_debugProcess', '_debugEnd']) {
  Object.defineProperty(process, name, { value: refuse('Signal'), writable: false, configurable: false });
}
Object.defineProperty(require('node:os'), 'setPriority', { value: refuse('Priority'), writable: false, configurable: false });
function refuseSilentChanges(key, value) {
  const where = key === '' ? 'the result' : 'the value at ' + JSON.stringify(key);
  if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError(where + ' is ' + value + ', which JSON cannot carry');
  if (typeof value === 'function' || typeof value === 'symbol') throw new TypeError(where + ' is a ' + typeof value + ', which JSON cannot carry');
  if (value instanceof Map || value instanceof Set) throw new TypeError(where + ' is a ' + value.constructor.name + ', which JSON cannot carry');
  return value;
}
const granted = ['fs.read', 'fs.write', 'child', 'worker'].filter((scope) => process.permission?.has(scope) !== false);
if (granted.length > 0) {
  answer(JSON.stringify({ ok: false, error: { name: 'SandboxError', message: 'the permission model is not in force (' + granted.join(', ') + ' granted): the script was not run' } }));
} else {
  // Nothing left to run and no answer: the script awaited a promise that nothing will ever settle.
  process.once('beforeExit', () => answer(JSON.stringify({ ok: false, error: { name: 'Error', message: 'the script never finished: it awaited a promise that nothing was left to settle' } })));
  const chunks = [];
  process.stdin.on('data', (chunk) => chunks.push(chunk));
  process.stdin.on('end', async () => {
    try {
      const { script, args } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const names = Object.keys(args);
      const AsyncFunction = (async () => {}).constructor;
      const value = await new AsyncFunction(...names, script)(...names.map((name) => args[name]));
      answer('{"ok":true,"value":' + JSON.stringify(value === undefined ? null : value, refuseSilentChanges) + '}');
    } catch (error) {
      const { name = 'Error', message = error, code, permission, resource } = error ?? {};
      answer(JSON.stringify({ ok: false, error: { name: String(name), message: String(message), code, permission, resource } }));
    }
  });
}
`;

/**
 * Runs `script` as the body of an async function whose parameters are the names in `args` (as `$evaluate` does), in
 * a sandboxed child process, and resolves with what it returned. A script that throws, runs past `timeLimitMs`
 * (then it is killed), answers more than `maxOutputBytes`, or dies, rejects with a BridgeError `handler_error`
 * saying so; `signal` (the request's) kills it too. At most {@link MAX_RUNNING} children run at once.
 *
 * For example:
 *
 *   await runSandboxed('return records.map((r) => r.title)', { records }, { timeLimitMs: 2000 })
 */
export async function runSandboxed(script, args, options = {}) {
  // A front-end chooses how many files an import runs at once (up to 64), and each child may take its heap: the
  // children are bounded here, and a script waits its turn (its time limit starts with its child; the request's
  // deadline, through `signal`, bounds the wait).
  while (running >= MAX_RUNNING) await new Promise((resolve) => turns.push(resolve));
  running += 1;
  try {
    return await runInChild(script, args, options);
  } finally {
    running -= 1;
    turns.shift()?.();
  }
}

/** At most this many sandboxed children at once. */
export const MAX_RUNNING = 2;
let running = 0;
const turns = []; // resolves of the scripts waiting for a child, in order

function runInChild(script, args, { timeLimitMs = DEFAULT_TIME_LIMIT_MS, maxOutputBytes = DEFAULT_MAX_OUTPUT_BYTES, signal } = {}) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    if (PERMISSION_FLAG === undefined) {
      reject(new BridgeError('not_allowed', `Node ${process.version} has no permission model to run the script in, so it `
        + 'is not run: the sandbox needs Node 20 or later'));
      return;
    }
    const child = spawn(...childCommand([PERMISSION_FLAG, '--no-warnings', `--max-old-space-size=${HEAP_MB}`, '-e', CHILD]));
    const output = [];
    let outputBytes = 0;
    let stderr = '';
    let failure = null; // why the child was stopped, when it was
    const stop = (error) => {
      failure ??= error;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(new BridgeError('handler_error',
      `the script ran longer than its limit of ${timeLimitMs} ms and was stopped`)), timeLimitMs);
    const onAbort = () => stop(signal.reason ?? new BridgeError('cancelled', 'the request was cancelled'));
    signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', (chunk) => {
      outputBytes += chunk.length;
      if (outputBytes > maxOutputBytes) {
        stop(new BridgeError('handler_error', `the script's answer is more than ${maxOutputBytes} bytes, the most a sandboxed script may answer: stopped`));
      } else {
        output.push(chunk);
      }
    });
    child.stderr.on('data', (chunk) => {
      if (stderr.length < MAX_STDERR_BYTES) stderr += chunk.toString('utf8').slice(0, MAX_STDERR_BYTES - stderr.length);
    });
    child.stdin.on('error', () => {}); // a child that died early: its exit says why
    child.on('error', (error) => stop(new BridgeError('handler_error', `the sandbox could not be started: ${error.message}`)));
    child.on('close', (code, exitSignal) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (failure !== null) {
        reject(failure);
        return;
      }
      let body = null;
      try {
        body = JSON.parse(Buffer.concat(output).toString('utf8'));
      } catch {
        const why = exitSignal !== null ? `was killed by ${exitSignal}` : `exited with status ${code}`;
        const said = stderr.trim().split('\n').filter(Boolean).slice(-3).join(' | ');
        reject(new BridgeError('handler_error', `the sandboxed script ${why} without an answer${said ? `: ${said}` : ''}`));
        return;
      }
      if (body?.ok === true) {
        resolve(body.value);
      } else if (body?.error?.code === 'ERR_ACCESS_DENIED') {
        const { permission, resource } = body.error;
        const what = `${permission || 'an API'}${resource ? ` (${resource})` : ''}`;
        reject(new BridgeError('not_allowed', `the script was refused ${what}: a sandboxed script has no file system, `
          + 'child process, worker, add-on or signal rights'));
      } else {
        // As the script's own exception would read had it run here ("TypeError: ...").
        const error = new Error(String(body?.error?.message));
        error.name = String(body?.error?.name ?? 'Error');
        reject(error);
      }
    });
    child.stdin.end(JSON.stringify({ script, args }));
  });
}
