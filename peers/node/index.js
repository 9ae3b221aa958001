// zerobridge: the Node peer of ZeroBridge. Types and documentation: index.d.ts.
import { Peer } from './src/peer.js';

export { Peer } from './src/peer.js';
export { BridgeError } from './src/errors.js';
export { curveKeyPair } from './src/curve.js';

/** Creates a peer, connects it, says hello and resolves once the host has welcomed it. */
export async function connect(endpointOrConnectionFile, options) {
  return new Peer(endpointOrConnectionFile, options).connect();
}
