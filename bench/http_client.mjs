// The HTTP/JSON anchor's Node front-end: node:http against zerobridge-anchors' Hummingbird 2 server; one JSON line.
//   node bench/http_client.mjs echo HOST:PORT [--window 1|N] [--seconds S] [--max N]
//   node bench/http_client.mjs progress HOST:PORT [--events N]
// `echo`: POST /echo with the JSON payload, the answer parsed and compared. HTTP/1.1 has no pipelining: a keep-alive
// Agent with `window` sockets, so N in flight are N connections. `progress`: POST /count {"n": N}, one chunked response
// of newline-delimited JSON events, each parsed and checked in order. The result's fields are bench/node_peer.mjs's.
import http from 'node:http';
import { PAYLOAD, WARMUP_CALLS, measureEcho, measured, now, parseArgs } from './node_common.mjs';

const args = parseArgs(process.argv.slice(2), { window: 1, seconds: 1, max: 1e6, warmup: WARMUP_CALLS, events: 100000 },
  'usage: http_client.mjs echo|progress HOST:PORT [options]');
const colon = args.endpoint.lastIndexOf(':');
const [host, port] = [args.endpoint.slice(0, colon), Number(args.endpoint.slice(colon + 1))];
const agent = new http.Agent({ keepAlive: true, maxSockets: args.window });
const WARMUP_EVENTS = 1000;

/** POSTs `body` (a JSON text) to `path`; calls `onChunk` with each chunk of the answer's body as it arrives. */
function post(path, body, onChunk) {
  return new Promise((resolve, reject) => {
    const request = http.request({ host, port, path, method: 'POST', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        reject(new Error(`${path} answered ${response.statusCode}`));
        return;
      }
      response.setEncoding('utf8');
      response.on('data', onChunk);
      response.on('end', resolve);
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function checkedEcho() {
  let text = '';
  await post('/echo', JSON.stringify(PAYLOAD), (chunk) => { text += chunk; });
  // Swift's JSONEncoder writes the keys in any order: the same members, whatever their order.
  const answer = JSON.parse(text);
  const same = Object.keys(answer).length === Object.keys(PAYLOAD).length
    && Object.entries(PAYLOAD).every(([key, value]) => answer[key] === value);
  if (!same) throw new Error(`/echo returned ${text.slice(0, 200)}`);
}

/** Streams `n` events; how many arrived and how many out of order. */
async function count(n) {
  let expected = 1;
  let outOfOrder = 0;
  let rest = '';
  await post('/count', JSON.stringify({ n }), (chunk) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop();
    for (const line of lines) {
      const event = JSON.parse(line);
      if (event.i !== expected || event.n !== n) outOfOrder += 1;
      expected += 1;
    }
  });
  if (rest !== '') throw new Error(`/count ended inside an event: ${rest.slice(0, 200)}`);
  return { received: expected - 1, outOfOrder };
}

async function progress() {
  await count(WARMUP_EVENTS);
  const startCpu = process.cpuUsage();
  const start = now();
  const { received, outOfOrder } = await count(args.events);
  return { ...measured(received, start, startCpu, WARMUP_EVENTS), events: args.events, received,
    out_of_order: outOfOrder, in_order_and_complete: received === args.events && outOfOrder === 0 };
}

try {
  const result = args.what === 'echo' ? await measureEcho(args, checkedEcho) : await progress();
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  agent.destroy();
}
