#!/usr/bin/env node
// The Node ETL peer: connects to the import host as "etl" and serves `importFile`
// ({file, format, bytes} -> {records, attachmentBytes}), the way a Swift app hands parsing to a JavaScript
// pipeline. The host reads each file and sends its bytes as an attachment (a Buffer here, never base64 text); the
// peer parses CSV, JSON or Markdown, streams {records, bytesDone, bytesTotal} on long files, and answers with the
// records. A broken file is refused with the host's error kind as the code (`binary`, `csv`, `json`, `markdown`),
// its data saying how many bytes came, as the answer to a good one does.
//
//   node examples/etl-peer/etl-peer.mjs [--connect ENDPOINT_OR_CONNECTION_FILE] [--name etl] [--allow-evaluate]
//                                       [--evaluate-time-limit-ms 4000] [--delay-per-file-ms N] [--trace-log FILE]
//
// Where to connect: --connect, else the connection file a supervising host names in ZEROBRIDGE_CONNECTION_FILE
// (SPEC 10.1: the peer library reads it, and the name in it), else .demo/import-host.json. The name: --name, else
// the launching host's, else etl. --allow-evaluate lets the host run scripts (`$evaluate`: the import's opt-in record
// transform), each in a sandboxed child process (sandbox.mjs: no file system, child process or worker rights, killed
// past --evaluate-time-limit-ms); without it `$evaluate` is answered not_allowed. --delay-per-file-ms holds each
// parsed file that long before answering (to watch an import and the progress of long files, or to kill the peer
// while it holds calls). --trace-log appends, for each importFile, the W3C trace context it came with (SPEC 7.18)
// as a JSON line {file, traceparent, tracestate}: the trace a front-end started, through the host. Prints `etl ready <host>` once welcomed; runs until SIGINT or SIGTERM, or, launched by the
// host (import-host --etl-command), until its host says bye or is lost.

import { appendFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { connect, BridgeError } from '../../peers/node/index.js';
import { FileError, FORMATS, importFile } from './formats.mjs';
import { DEFAULT_TIME_LIMIT_MS, networkIsolated, runSandboxed } from './sandbox.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: options } = parseArgs({
  options: {
    connect: { type: 'string' },
    name: { type: 'string' },
    'allow-evaluate': { type: 'boolean', default: false },
    'evaluate-time-limit-ms': { type: 'string', default: String(DEFAULT_TIME_LIMIT_MS) },
    'delay-per-file-ms': { type: 'string', default: '0' },
    'trace-log': { type: 'string' },
  },
});
const delayPerFile = Number(options['delay-per-file-ms']);
const evaluateTimeLimit = Number(options['evaluate-time-limit-ms']);
if (!Number.isInteger(evaluateTimeLimit) || evaluateTimeLimit < 1) {
  console.error(`etl-peer: --evaluate-time-limit-ms takes a positive number of milliseconds, not ${options['evaluate-time-limit-ms']}`);
  process.exit(2);
}
// Scripts the host sends run in a sandboxed child, never in this process: the transform comes from any front-end.
const evaluateSandboxed = (script, args, context) => runSandboxed(script, args, { timeLimitMs: evaluateTimeLimit, signal: context.signal });

const received = { files: 0, attachmentBytes: 0, refused: 0 };

async function serveImportFile(payload, ctx) {
  const { file, format, bytes } = payload ?? {};
  if (typeof file !== 'string' || !FORMATS.includes(format)) {
    throw new BridgeError('invalid_payload', `importFile takes {file: string, format: ${FORMATS.join('|')}, bytes}`);
  }
  if (!Buffer.isBuffer(bytes)) {
    throw new BridgeError('invalid_payload', `${file}: the bytes must come as an attachment (bytes), not as ${typeof bytes}`);
  }
  received.files += 1;
  if (options['trace-log'] !== undefined) {
    appendFileSync(options['trace-log'], `${JSON.stringify({ file, traceparent: ctx.traceparent, tracestate: ctx.tracestate })}\n`);
  }
  received.attachmentBytes += bytes.length;
  try {
    const records = await importFile({ file, format, bytes }, { progress: (p) => ctx.progress(p), signal: ctx.signal });
    if (delayPerFile > 0) await setTimeout(delayPerFile, undefined, { signal: ctx.signal });
    return { records, attachmentBytes: bytes.length };
  } catch (error) {
    if (!(error instanceof FileError)) throw error;
    received.refused += 1;
    throw new BridgeError(error.kind, error.message, { data: { attachmentBytes: bytes.length } });
  }
}

const launched = options.connect === undefined && Boolean(process.env.ZEROBRIDGE_CONNECTION_FILE);
const target = launched ? undefined : options.connect ?? path.join(root, '.demo/import-host.json');
const peer = await connect(target, {
  name: options.name ?? (launched ? undefined : 'etl'),
  evaluate: options['allow-evaluate'] ? evaluateSandboxed : false,
  // A peer beside its host: when it dies, its session (and the name) is let go after 3 missed beats, 1.5 s, so the
  // host fails the calls it held and a new ETL peer can take the name soon.
  heartbeatMs: 500,
  // A restarted ETL peer waits for that (its name held by its dead predecessor) rather than failing at once.
  waitForName: true,
  actions: {
    importFile: {
      handler: serveImportFile,
      doc: 'A file\'s bytes (an attachment) to records; refused with the error kind as the code.',
      payload: {
        type: 'object',
        properties: {
          file: { type: 'string' },
          format: { enum: FORMATS },
          bytes: { type: 'string', contentEncoding: 'base64' },
        },
        required: ['file', 'format', 'bytes'],
      },
      progress: {
        type: 'object',
        properties: { records: { type: 'integer' }, bytesDone: { type: 'integer' }, bytesTotal: { type: 'integer' } },
      },
    },
  },
}).catch((error) => {
  console.error(`etl-peer: cannot connect to ${target ?? process.env.ZEROBRIDGE_CONNECTION_FILE}: ${error.message}`);
  process.exit(1);
});
const evaluating = options['allow-evaluate'] ? ` (evaluate allowed: in a sandbox${networkIsolated() ? ' without network' : ''})` : '';
console.log(`etl ready ${peer.host}${evaluating}`);

for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => peer.close());
// Closed by a signal, or, launched by the host, with the host (SPEC 10.1: its bye or its loss closes the peer; the
// host starts a new one when it needs one): the program goes with the peer.
peer.closed.then((why) => {
  console.error(`etl-peer: ${received.files} file(s), ${received.attachmentBytes} bytes received as attachments `
    + `(${received.refused} refused); closed: ${why}`);
  process.exit(0);
});
