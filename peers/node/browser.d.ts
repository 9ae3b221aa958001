// The browser peer (src/browser.js, SPEC 2.2): the Node peer's API over a WebSocket, signed synchronously (src/sha256.js).
// `import { connect } from 'zerobridge/browser'` in a bundled app, or '/_zerobridge/browser.js' in a page the host serves.
import { Peer as NodePeer } from './index.js';
import type { PeerOptions } from './index.js';

export { BridgeError, version, withTrace, currentTrace } from './index.js';

/** What differs from the Node peer's options: `key` is the connection key in hex (by default the one the host injected), no CURVE. */
export type BrowserPeerOptions = Omit<PeerOptions, 'curve'>;

/**
 * A peer in a browser: the Node peer's API (index.d.ts) over a WebSocket to `ws://HOST:PORT/zerobridge`. Without an
 * endpoint it uses the configuration the host injected into the page it served; no connection files, no CURVE.
 */
export declare class Peer extends NodePeer {
  constructor(options?: BrowserPeerOptions);
  constructor(endpoint: string | undefined, options?: BrowserPeerOptions);
}

/**
 * The channel of one keyed connection (SPEC 3.1) as the page signs it: HMAC-SHA256 from src/sha256.js, at once (no
 * promise, no WebCrypto, so a page that is not a secure context signs too). The session makes one per connection.
 */
export declare function pageChannel(connectionKey: Uint8Array, nonce?: string): {
  readonly nonce: string;
  /** Frame 0 for the next message, `frames` its frames 1..n. */
  sign(frames: Uint8Array[], now?: number): Uint8Array;
  /** Why a message from the host is refused, or null when it is accepted. */
  refusal(frame0: Uint8Array, frames: Uint8Array[]): string | null;
};

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text` (a catalogue's hash, SPEC 7.8), from src/sha256.js. */
export declare function sha256Hex(text: string): string;

/**
 * The WebSocket under a browser peer: one protocol message per binary WebSocket message (SPEC 3.2), or batches of
 * them when the host selects `zerobridge.1.batch` (since 1.9), redialled with backoff after a loss. The session
 * drives it; an app has no need to.
 */
export declare class WebSocketTransport {
  constructor(endpoint: string, options?: {
    sendQueueLimit?: number; reconnectIvl?: number; reconnectIvlMax?: number; log?: (level: string, message: string) => void;
  });
  readonly endpoint: string;
  readonly queuedBytes: number;
  /** The subprotocol the host selected for the current connection (`zerobridge.1` or `zerobridge.1.batch`), or null. */
  readonly subprotocol: string | null;
  on(event: 'connect' | 'disconnect' | 'message' | 'drain' | 'error' | 'unreachable', listener: (...args: any[]) => void): this;
  connect(): void;
  /** Sends one message (frame 0 may be a promise of a signature); queued while not connected, up to `sendQueueLimit`. */
  send(frames: Array<Uint8Array | Promise<Uint8Array>>): void;
  reconnect(delayMs?: number): void;
  close(lingerMs?: number): Promise<void>;
}

/** The subprotocol every bridge connection offers (`zerobridge.1`). */
export declare const SUBPROTOCOL: string;
/** The subprotocol of batches (`zerobridge.1.batch`, SPEC 2.2 since 1.9), offered before SUBPROTOCOL. */
export declare const BATCH_SUBPROTOCOL: string;

/** What the host that served this page injected: `{endpoint, key, info}` (and `peer`, the WebKit layer's), or null. */
export declare function injectedConfiguration(): { endpoint: string; key: string | null; info: Record<string, unknown> | null } | null;

/**
 * Connects to the host at `endpoint` (`ws://HOST:PORT/zerobridge`), says hello and resolves once it is welcomed. Without
 * an endpoint: the one the host injected into the page it served, with its key.
 */
export function connect(options?: BrowserPeerOptions): Promise<Peer>;
export function connect(endpoint: string | undefined, options?: BrowserPeerOptions): Promise<Peer>;
