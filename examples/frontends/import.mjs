#!/usr/bin/env node
// Import a folder through the import host, with a progress line; Ctrl-C cancels the import cleanly.
//
//   node examples/frontends/import.mjs FOLDER [--connect ENDPOINT_OR_CONNECTION_FILE] [--search WORDS]
//   node examples/frontends/import.mjs --watch [--watch-seconds N] [--connect ...]
//
// The import is a job on the host (SPEC 7.16): started, then followed; Ctrl-C cancels the job. On a terminal the
// progress line redraws itself (on stderr); otherwise (CI, pipes) a plain line is printed at most once a second. At
// the end, or after Ctrl-C, prints the summary (per-file errors included), what the database holds, and a sample
// search. Exit status: 0 completed, 130 cancelled, 1 failed. `--json` prints one JSON object instead of the text.
//
// Each `catalogChanged` the host broadcasts on the topic `catalog` is printed as one line. `--watch` imports nothing:
// it stays connected and prints them (after `watching catalogChanged on <host>`) until SIGINT or SIGTERM, or for
// `--watch-seconds`.

import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { connect } from '../../peers/node/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    connect: { type: 'string', default: path.join(root, '.demo/import-host.json') },
    search: { type: 'string', default: 'lighthouse' },
    'show-errors': { type: 'string', default: '8' },
    'delay-per-file-ms': { type: 'string' },
    transform: { type: 'string' },
    json: { type: 'boolean', default: false },
    watch: { type: 'boolean', default: false },
    'watch-seconds': { type: 'string' },
  },
});
if (positionals.length !== (options.watch ? 0 : 1)) {
  console.error('usage: node examples/frontends/import.mjs FOLDER [--connect TARGET] [--search WORDS] [--json]\n'
    + '       node examples/frontends/import.mjs --watch [--watch-seconds N] [--connect TARGET]');
  process.exit(2);
}
const say = options.json ? (text) => console.error(text) : (text) => console.log(text);

/** One redrawn line on a terminal; plain lines at most once a second otherwise. */
class ProgressLine {
  constructor(quiet) {
    this.quiet = quiet;
    this.live = !quiet && process.stderr.isTTY;
    this.lastPrinted = 0;
    this.last = null;
  }

  update(p) {
    this.last = p;
    if (this.quiet) return;
    const text = `${p.filesDone}/${p.filesTotal} files (${percent(p)}), ${p.records.toLocaleString('en')} records, `
      + `${p.filesFailed} failed, ${Math.round(p.filesPerSecond)} files/s, ${Math.round(p.recordsPerSecond).toLocaleString('en')} records/s`
      + describeEtl(p);
    if (this.live) {
      const width = process.stderr.columns || 100;
      const line = `${text}${at(p)}`;
      process.stderr.write(`\r${line.length > width - 1 ? line.slice(0, width - 2) + '…' : line}\x1b[K`);
      return;
    }
    const now = Date.now();
    if (now - this.lastPrinted >= 1000 || p.filesDone === p.filesTotal) {
      this.lastPrinted = now;
      console.log(`progress ${text}${at(p)}`);
    }
  }

  close() {
    if (this.live) process.stderr.write('\n');
  }
}

/** The file finished last; a report relayed before any file finished has none. */
function at(p) {
  return p.currentFile ? `, at ${p.currentFile}` : '';
}

/** What a progress report says of the ETL peer, when there is news (the Python front-end says the same). */
function describeEtl(p) {
  const retries = p.etlRetries ? `, ${p.etlRetries} ETL call(s) retried` : '';
  const parsing = (p.parsing ?? []).slice(0, 2)
    .map((file) => `, parsing ${file.file} ${Math.floor((100 * file.bytesDone) / Math.max(file.bytesTotal, 1))}%`);
  return retries + parsing.join('');
}

function percent(p) {
  return p.filesTotal === 0 ? '100%' : `${Math.floor((100 * p.filesDone) / p.filesTotal)}%`;
}

/** One line for a `catalogChanged` broadcast (the Python front-end prints the same). */
function describeChange(change) {
  const n = (value) => value.toLocaleString('en');
  return `catalogChanged: run ${change.run} ${change.status} (${change.folder}): `
    + `${n(change.filesImported)} files, ${n(change.records)} records imported; `
    + `the catalogue holds ${n(change.files)} files, ${n(change.recordsTotal)} records`;
}

const changes = [];
let peer;
try {
  peer = await connect(options.connect, { name: options.watch ? 'watch-node' : 'import-node', connectTimeout: 10_000, waitForName: true, topics: ['catalog'] });
} catch (error) {
  console.error(`import.mjs: cannot reach the import host at ${options.connect}: ${error.message}`);
  process.exit(1);
}
let onChange = () => {};
peer.on('catalogChanged', (change) => {
  changes.push(change);
  say(describeChange(change));
  onChange();
});

if (options.watch) {
  say(`watching catalogChanged on ${peer.host} at ${peer.endpoint}`);
  await new Promise((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, resolve);
    if (options['watch-seconds'] !== undefined) setTimeout(resolve, Number(options['watch-seconds']) * 1000);
  });
  await peer.close();
  say(`watched ${changes.length} catalogChanged broadcast(s)`);
  process.exit(0);
}

const folder = path.resolve(positionals[0]);
const view = new ProgressLine(options.json);
const importOptions = {};
if (options['delay-per-file-ms'] !== undefined) importOptions.delayPerFileMs = Number(options['delay-per-file-ms']);
if (options.transform !== undefined) importOptions.transform = options.transform;

say(`importing ${folder} through ${peer.host} at ${peer.endpoint}`);
let status = 'completed';
let result = null;
let job = null;
let interrupted = false;
const cancelJob = () => peer.cancelJob({ job }).catch((error) => console.error(`import.mjs: cancelling: ${error.message}`));
// Detaching is not cancelling (SPEC 7.16): Ctrl-C cancels the job itself, and the attach then ends `cancelled`.
const onInterrupt = () => {
  say('\ncancelling the import (Ctrl-C again to quit at once)...');
  interrupted = true;
  if (job !== null) cancelJob();
  process.once('SIGINT', () => process.exit(130));
};
process.once('SIGINT', onInterrupt);
try {
  ({ job } = await peer.startJob('importFolder', { path: folder, options: importOptions }));
  if (interrupted) cancelJob(); // Ctrl-C came while the job was being started
  const call = peer.attachJob({ job });
  for await (const progress of call.progress) view.update(progress);
  result = await call.result;
} catch (error) {
  if (error.code !== 'cancelled') {
    view.close();
    console.error(error.code === 'suspended'
      ? `import.mjs: the import host stopped; the import resumes when it starts again (attach to job ${job}): ${error.message}`
      : `import.mjs: the import failed: ${error.code}: ${error.message}`);
    await peer.close();
    process.exit(1);
  }
  status = 'cancelled';
} finally {
  process.off('SIGINT', onInterrupt);
}
view.close();
if (result !== null && result.filesImported > 0) await broadcastFor(folder, 5000);

const stats = await peer.call('stats');
const found = await peer.call('search', { query: options.search, limit: 3 });
await peer.close();

if (options.json) {
  console.log(JSON.stringify({ status, result, lastProgress: view.last, stats, search: found, catalogChanged: changes }));
} else {
  for (const line of describeRun(result, view.last, Number(options['show-errors']))) console.log(line);
  console.log(`database ${stats.database}: ${stats.files.toLocaleString('en')} files, ${stats.records.toLocaleString('en')} records`);
  console.log(`search ${JSON.stringify(found.query)}: ${found.total.toLocaleString('en')} matching records${found.hits.length ? ', best first:' : ''}`);
  for (const hit of found.hits) {
    console.log(`  ${hit.file} #${hit.record} ${JSON.stringify(hit.title)}: ${hit.snippet.split(/\s+/).join(' ')}`);
  }
}
process.exit(status === 'completed' ? 0 : 130);

/** Waits (up to `ms`) for the catalogChanged of an import of `folder`: the host broadcasts it before it answers. */
function broadcastFor(importedFolder, ms) {
  const arrived = () => changes.some((change) => change.folder === importedFolder);
  if (arrived()) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      say(`import.mjs: no catalogChanged arrived for this import within ${ms / 1000} s`);
      resolve();
    }, ms);
    onChange = () => {
      if (!arrived()) return;
      clearTimeout(timer);
      resolve();
    };
  });
}

function describeRun(result, last, shownErrors) {
  if (result === null) {
    const done = last ?? { filesDone: 0, filesTotal: 0, records: 0, filesFailed: 0 };
    return [`cancelled: the last progress report had ${done.filesDone} of ${done.filesTotal} files done `
      + `(${done.records.toLocaleString('en')} records, ${done.filesFailed} failed); each file is in the database whole or not at all`];
  }
  const lines = [
    `imported ${result.filesImported} of ${result.filesTotal} files (${result.filesFailed} failed): `
    + `${result.records.toLocaleString('en')} records, ${(result.bytes / 1e6).toFixed(1)} MB in ${result.seconds.toFixed(1)} s, `
    + `${Math.round(result.filesPerSecond).toLocaleString('en')} files/s, ${Math.round(result.recordsPerSecond).toLocaleString('en')} records/s`,
  ];
  if (result.errors.length > 0) {
    const kinds = new Map();
    for (const error of result.errors) kinds.set(error.kind, (kinds.get(error.kind) ?? 0) + 1);
    lines.push(`failed files by kind: ${[...kinds].sort().map(([kind, count]) => `${kind} ${count}`).join(', ')}`);
    for (const error of result.errors.slice(0, shownErrors)) lines.push(`  ${error.file}: [${error.kind}] ${error.message}`);
    const hidden = result.errors.length - shownErrors + result.errorsOmitted;
    if (hidden > 0) lines.push(`  ... and ${hidden} more`);
  }
  return lines;
}
