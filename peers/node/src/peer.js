// The Node peer: the session of src/core.js over a ZMTP DEALER (src/zmtp.js), node:crypto's HMAC, and what only a
// process has: connection files, its environment (a peer launched by its host, SPEC 10.1), CURVE.

import { AsyncLocalStorage } from 'node:async_hooks';
import { debuglog } from 'node:util';
import { existsSync } from 'node:fs';
import { ZmtpDealer } from './zmtp.js';
import { PeerCore } from './core.js';
import { isName, isObject } from './wire.js';
import { readConnectionFile } from './connection-file.js';
import { PeerChannel, parseKey, sha256Hex } from './signing.js';
import { useTraceStorage } from './trace.js';

// A handler's trace context stays current through its awaits, so everything it sends carries it (SPEC 7.18).
useTraceStorage(new AsyncLocalStorage());

const debug = debuglog('zerobridge');
// host:port without a scheme (127.0.0.1:5599, localhost:5599, [::1]:5599): an endpoint missing its tcp://, not a file.
const SCHEMELESS_TCP = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$/;

function defaultLog(level, message) {
  if (level === 'warn') console.warn(`zerobridge: ${message}`);
  else debug(message);
}

/**
 * The ZmtpDealer's `curve` option from `options.curve` and a connection file's `curve_server_key`: CURVE whenever a
 * server key is known (the option's wins), with the given key pair or a fresh one. A key pair without a server key is
 * an error, never plaintext.
 */
function curveSettings(given, fileServerKey) {
  if (given === undefined || given === null) return fileServerKey === undefined ? null : { serverKey: fileServerKey };
  if (typeof given !== 'object') throw new TypeError('options.curve must be an object { serverKey?, publicKey?, secretKey? }');
  const serverKey = given.serverKey ?? fileServerKey;
  if (serverKey === undefined) {
    throw new TypeError('options.curve needs serverKey, the host\'s CURVE public key (or a connection file with curve_server_key): '
      + 'CURVE cannot run without it, and this peer does not fall back to plaintext');
  }
  return { serverKey, publicKey: given.publicKey, secretKey: given.secretKey };
}

// What a supervising host hands the peers it launches (SPEC 10.1): in their environment, never on their command line.
const CONNECTION_FILE_VARIABLE = 'ZEROBRIDGE_CONNECTION_FILE';
const PEER_NAME_VARIABLE = 'ZEROBRIDGE_PEER_NAME';

/**
 * The connection file a supervising host wrote for this process; a TypeError saying what to set when there is none,
 * so a peer started by hand fails at once instead of waiting for a host it cannot find.
 */
function connectionFileFromEnvironment() {
  const path = process.env[CONNECTION_FILE_VARIABLE];
  if (!path) {
    throw new TypeError(`connect() was not told where the host is and ${CONNECTION_FILE_VARIABLE} is not set: give an endpoint `
      + `or a connection file's path, or set ${CONNECTION_FILE_VARIABLE} to a connection file's path (a supervising host sets it `
      + 'for the peers it launches)');
  }
  return path;
}

/**
 * The name to say hello with: options.name, else the connection file's `peer`, else (for a peer launched by a host)
 * ZEROBRIDGE_PEER_NAME; a TypeError otherwise.
 */
function peerName(given, file, launched) {
  if (given !== undefined) {
    if (!isName(given)) throw new TypeError('options.name (the peer name sent in hello) must be a string of 1..128 characters');
    return given;
  }
  if (file?.peer !== undefined) return file.peer; // checked with the file
  const fromEnvironment = launched ? process.env[PEER_NAME_VARIABLE] : undefined;
  if (fromEnvironment) {
    if (!isName(fromEnvironment)) throw new TypeError(`${PEER_NAME_VARIABLE} must be a name of 1..128 characters`);
    return fromEnvironment;
  }
  throw new TypeError('options.name (the peer name sent in hello) is required: give a name, or connect through a connection file '
    + `with a peer field${launched ? ` (or set ${PEER_NAME_VARIABLE})` : ''}`);
}

/**
 * A ZeroBridge peer: a DEALER connected to a host's ROUTER. See index.d.ts for the documentation
 * of each member.
 */
export class Peer extends PeerCore {
  constructor(endpointOrConnectionFile, options) {
    // new Peer(options) and new Peer(): a peer launched by a host (SPEC 10.1), told where by its environment.
    if (isObject(endpointOrConnectionFile) && options === undefined) [endpointOrConnectionFile, options] = [undefined, endpointOrConnectionFile];
    options ??= {};
    const launched = endpointOrConnectionFile === undefined;
    if (!launched && (typeof endpointOrConnectionFile !== 'string' || endpointOrConnectionFile.length === 0)) {
      throw new TypeError('connect() needs an endpoint (tcp://host:port, ipc:///path) or a connection file path');
    }
    if (!launched && SCHEMELESS_TCP.test(endpointOrConnectionFile) && !existsSync(endpointOrConnectionFile)) {
      throw new TypeError(`${JSON.stringify(endpointOrConnectionFile)} is neither an endpoint nor a connection file: write tcp://${endpointOrConnectionFile}`);
    }
    let key = options.key ?? '';
    if (typeof key !== 'string') throw new TypeError('options.key must be the connection key as hex');
    let file = null;
    let endpoint = endpointOrConnectionFile;
    if (launched || !endpointOrConnectionFile.includes('://')) {
      if (options.key !== undefined) throw new TypeError('options.key is for an endpoint: a connection file brings its own key');
      file = readConnectionFile(launched ? connectionFileFromEnvironment() : endpointOrConnectionFile);
      endpoint = file.endpoint;
      key = file.key;
    }
    const where = { endpoint, key: key === '' ? null : parseKey(key), name: peerName(options.name, file, launched), launched };
    super(where, options, {
      transport: (peer) => new ZmtpDealer(peer.endpoint, {
        curve: curveSettings(options.curve, file?.curveServerKey),
        reconnectIvl: options.reconnectIvl,
        reconnectIvlMax: options.reconnectIvlMax,
        sendQueueLimit: options.sendQueueLimit,
      }),
      channel: (connectionKey) => new PeerChannel(connectionKey),
      sha256Hex,
      log: defaultLog,
      batches: true,
    });
  }
}
