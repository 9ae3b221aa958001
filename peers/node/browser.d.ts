// The browser peer (src/browser.js, SPEC 2.2): the Node peer's API over a WebSocket, signed with WebCrypto.
// `import { connect } from 'zerobridge/browser'` in a bundled app, or '/_zerobridge/browser.js' in a page the host serves.
import type { Peer, PeerOptions } from './index.js';

export { BridgeError, version } from './index.js';
export type { Peer } from './index.js';

/** What differs from the Node peer's options: `key` is the connection key in hex (by default the one the host injected), no CURVE. */
export type BrowserPeerOptions = Omit<PeerOptions, 'curve'>;

/** The subprotocol a bridge connection offers (`zerobridge.1`). */
export declare const SUBPROTOCOL: string;

/** What the host that served this page injected: `{endpoint, key, info}` (and `peer`, the WebKit layer's), or null. */
export declare function injectedConfiguration(): { endpoint: string; key: string | null; info: Record<string, unknown> | null } | null;

/**
 * Connects to the host at `endpoint` (`ws://HOST:PORT/zerobridge`), says hello and resolves once it is welcomed. Without
 * an endpoint: the one the host injected into the page it served, with its key.
 */
export function connect(options?: BrowserPeerOptions): Promise<Peer>;
export function connect(endpoint: string | undefined, options?: BrowserPeerOptions): Promise<Peer>;
