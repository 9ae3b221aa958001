// zerobridge: the Node peer of ZeroBridge. Types and documentation: index.d.ts.
import { Peer } from './src/peer.js';

export { Peer } from './src/peer.js';
export { BridgeError } from './src/errors.js';
export { curveKeyPair } from './src/curve.js';
export { withTrace, currentTrace } from './src/trace.js';

export { version } from './src/version.js';

/**
 * Creates a peer, connects it, says hello and resolves once the host has welcomed it. Without an endpoint
 * (`connect()`, `connect(options)`): the connection file ZEROBRIDGE_CONNECTION_FILE names (SPEC 10.1).
 */
export async function connect(endpointOrConnectionFile, options) {
  return new Peer(endpointOrConnectionFile, options).connect();
}
