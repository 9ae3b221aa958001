#!/usr/bin/env node
// The Node ETL peer: connects to the import host as "etl" and serves `parseMarkdown`
// ({file, text} -> {records}), the way a Swift app hands parsing to a JavaScript pipeline.
//
//   node examples/etl-peer/etl-peer.mjs [--connect ENDPOINT_OR_CONNECTION_FILE] [--name etl]
//
// Prints `etl ready <host>` once the host has welcomed it; runs until SIGINT or SIGTERM.

import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { connect } from '../../peers/node/index.js';
import { parseMarkdown } from './markdown.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: options } = parseArgs({
  options: {
    connect: { type: 'string', default: path.join(root, '.demo/import-host.json') },
    name: { type: 'string', default: 'etl' },
  },
});

let parsed = 0;
const peer = await connect(options.connect, {
  name: options.name,
  actions: {
    parseMarkdown: async ({ file, text } = {}) => {
      const records = parseMarkdown(text, typeof file === 'string' ? file : undefined);
      parsed += 1;
      return { records };
    },
  },
}).catch((error) => {
  console.error(`etl-peer: cannot connect to ${options.connect}: ${error.message}`);
  process.exit(1);
});
console.log(`etl ready ${peer.host}`);

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    await peer.close();
    console.error(`etl-peer: parsed ${parsed} Markdown file(s); bye`);
    process.exit(0);
  });
}
