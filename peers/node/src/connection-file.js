// Connection files (SPEC 10): read from disk, so for the Node peer only (a page is given its endpoint and key by the
// host that serves it).

import { readFileSync } from 'node:fs';
import { BridgeError } from './errors.js';
import { curveKey } from './curve.js';
import { has, isName, isObject } from './wire.js';

/**
 * Reads a connection file: `{"protocol": 1, "endpoint", "host", "signature_scheme": "hmac-sha256", "key",
 * "curve_server_key"?, "peer"?}`. Returns `{ endpoint, host, key }`, plus `curveServerKey` (Z85) and `peer` (the
 * name a supervising host launched this peer under, SPEC 10.1) when the file has them; throws a BridgeError
 * (`bad_message`) naming the file and the problem.
 */
export function readConnectionFile(path) {
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new BridgeError('bad_message', `cannot read the connection file ${path}: ${error.message}`, { cause: error });
  }
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new BridgeError('bad_message', `the connection file ${path} is not JSON: ${error.message}`);
  }
  const problem = connectionFileProblem(parsed);
  if (problem) throw new BridgeError('bad_message', `the connection file ${path} is not valid: ${problem}`);
  const info = { endpoint: parsed.endpoint, host: parsed.host, key: parsed.key };
  if (parsed.curve_server_key !== undefined) info.curveServerKey = parsed.curve_server_key;
  if (parsed.peer !== undefined) info.peer = parsed.peer;
  return info;
}

/** Why a parsed connection file is invalid, or null. */
export function connectionFileProblem(file) {
  if (!isObject(file)) return 'it is not a JSON object';
  if (file.protocol !== 1 || !Number.isInteger(file.protocol)) return 'protocol must be the integer 1';
  if (typeof file.endpoint !== 'string' || !/^(tcp|ipc|inproc):\/\/[^*]+$/.test(file.endpoint)) {
    return 'endpoint must be a tcp://, ipc:// or inproc:// address without wildcards';
  }
  if (!isName(file.host)) return 'host must be a string of 1..128 characters';
  if (file.signature_scheme !== 'hmac-sha256') return 'signature_scheme must be "hmac-sha256"';
  if (typeof file.key !== 'string' || !/^([0-9a-fA-F]{2})*$/.test(file.key)) return 'key must be hex (an even number of digits) or empty';
  if (has(file, 'curve_server_key')) {
    if (typeof file.curve_server_key !== 'string') return 'curve_server_key must be the host\'s CURVE public key in Z85 (40 characters)';
    try {
      curveKey(file.curve_server_key, 'curve_server_key');
    } catch (error) {
      return error.message;
    }
  }
  if (has(file, 'peer') && !isName(file.peer)) return 'peer must be a string of 1..128 characters';
  return null;
}
