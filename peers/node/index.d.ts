// Type declarations for `zerobridge`, the Node peer of ZeroBridge.

/** Any JSON value; `Uint8Array`/`Buffer` values travel as attachment frames (`{"$attachment": i}`). */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | Uint8Array
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * `error.code`: the protocol's error codes. Hosts may send codes this version does not know, so
 * any string is accepted.
 */
export type BridgeErrorCode =
  | 'bad_message'
  | 'unsupported_version'
  | 'unknown_action'
  | 'invalid_payload'
  | 'handler_gone'
  | 'handler_error'
  | 'timeout'
  | 'cancelled'
  | 'peer_lost'
  | 'duplicate_id'
  | 'too_large'
  | 'overloaded'
  | 'not_allowed'
  | 'unauthorized'
  | 'name_taken'
  | (string & {});

/**
 * The error every ZeroBridge failure rejects with; throw one from a handler to answer with that code.
 *
 * For example:
 * ```js
 * try { await peer.call('add', { a: 'x' }) }
 * catch (error) { if (error instanceof BridgeError && error.code === 'invalid_payload') ... }
 * ```
 */
export class BridgeError extends Error {
  constructor(code: BridgeErrorCode, message: string, options?: { data?: JsonValue; cause?: unknown });
  /** `error.code`: what went wrong, machine-readable (`timeout`, `cancelled`, `peer_lost`, ...). */
  readonly code: BridgeErrorCode;
  /** `error.data`: optional details sent with the error. */
  readonly data?: JsonValue;
  /** The wire form, `{"code", "message", "data"?}`. */
  toJSON(): { code: string; message: string; data?: JsonValue };
}

/** What a handler learns about the request it is answering. */
export interface RequestContext {
  /** `request.id`: the host's id for this request. */
  readonly id: string;
  /** `request.action`: the action called. */
  readonly action: string;
  /**
   * The request's limit as an absolute time, `Date.now()` milliseconds: the earlier of its receipt plus
   * `request.timeout_ms` and `request.deadline`. At that time the request is answered `timeout` and
   * `signal` aborts; `null` when the host set neither. (A request that arrives with its `deadline`
   * already passed is answered `timeout` without running its handler.)
   */
  readonly deadline: number | null;
  /**
   * Aborted when the host sends `cancel`, when `deadline` passes, or when the host is lost; the
   * reason is a BridgeError (`cancelled`, `timeout`, `peer_lost`). The response has then already been
   * sent (or discarded); whatever the handler returns later is dropped.
   */
  readonly signal: AbortSignal;
  /**
   * `progress.payload`: sends one progress message (`seq` 1, 2, ...) before the response.
   * Returns false, sending nothing, when the request did not ask for progress (`request.progress`)
   * or has already been answered.
   *
   * Never waits and never fails because the host is slow: while it is not keeping up, payloads are
   * held (the value as reported, up to 64 per request and 1 MiB in all) and sent in order when it
   * reads again; past that, a new payload replaces the newest held one, and the next message sent says
   * how many it replaced in `progress.skipped`. The last progress before the response is always the
   * last reported.
   */
  progress(payload: JsonValue): boolean;
}

/** What an event listener learns about the event it runs for. */
export interface EventContext {
  /** `event.action`. */
  readonly action: string;
  /**
   * Aborted (reason: a BridgeError `peer_lost` or `cancelled`) when the session ends while the
   * listener still runs: the host is lost, or the peer is closed.
   */
  readonly signal: AbortSignal;
}

/** Serves one action for the host: its return (or awaited) value is `response.result`. */
export type Handler = (payload: any, context: RequestContext) => unknown | Promise<unknown>;

/**
 * Receives `event.payload` of events the host posts with that `event.action`. Until the promise it
 * returns settles, the event counts toward `maxInFlight`.
 */
export type EventListener = (payload: any, context: EventContext) => void | Promise<void>;

export interface CallOptions {
  /**
   * `request.timeout_ms` and `request.deadline` (`Date.now()` + timeout): the call fails with
   * `timeout` at this deadline, whatever the host does, and the host does not start it once the
   * deadline has passed. Defaults to the peer's `timeout`; `null` or `Infinity` sends neither.
   */
  timeout?: number | null;
  /** Aborting sends `cancel` and rejects the call with code `cancelled`. */
  signal?: AbortSignal;
}

/** A call with progress, from {@link Peer.stream}. */
export interface StreamingCall<Progress = any, Result = any> {
  /** `progress.payload` of each progress message, in `seq` order; ends when the call ends. */
  readonly progress: AsyncIterable<Progress>;
  /** `response.result`; rejects with a BridgeError like {@link Peer.call}. */
  readonly result: Promise<Result>;
  /**
   * The sum of `progress.skipped` so far: payloads the host coalesced away because this peer was not
   * reading fast enough. `progress` still yields every message that arrived, in order.
   */
  readonly skipped: number;
}

export interface PeerOptions {
  /** `hello.peer`: this peer's name (1..128 characters). */
  name: string;
  /** `hello.actions`: handlers the host may call, by action name (more via {@link Peer.handle}). */
  actions?: Record<string, Handler> | Map<string, Handler>;
  /**
   * `hello.features` gets `"evaluate"`: lets the host run JavaScript in this process through
   * `$evaluate`. Off by default (`$evaluate` is answered `not_allowed`). Read the README first.
   * Without CURVE it holds for the first host that welcomed this peer only: after losing that host the
   * peer says `hello` without the feature and answers `$evaluate` with `not_allowed` (SPEC 2.1).
   */
  evaluate?: boolean;
  /**
   * `hello.heartbeat_ms`: the heartbeat interval this peer asks for (default 5000). The host's
   * `welcome.heartbeat_ms` is the one used.
   */
  heartbeatMs?: number;
  /**
   * Milliseconds: how long connect() waits for the welcome, and the default `timeout_ms` of calls
   * (default 30000). `null` or `Infinity`: no limit. While the host refuses the name (`name_taken`:
   * another live session holds it), connect() says `hello` again every second within this time.
   */
  timeout?: number | null;
  /** First delay before reconnecting after the connection breaks, in ms (default 100); doubles per failed attempt. */
  reconnectIvl?: number;
  /** Longest delay between reconnection attempts, in ms (default 5000). */
  reconnectIvlMax?: number;
  /**
   * Messages kept before the first connection is up (default 1000); beyond that, calls fail with
   * `overloaded`. (After the host is lost, nothing is kept: calls fail with `peer_lost`.)
   */
  sendQueueLimit?: number;
  /**
   * How many of the host's requests and events this peer runs at once (default 4096). A request over
   * it is answered `overloaded`; an event over it is not run and is answered with a `response` with
   * `"id": null`, code `overloaded`.
   */
  maxInFlight?: number;
  /**
   * The connection key (hex) of a keyed host, when connecting to an endpoint (a connection file brings its own
   * `key`, and then this must not be given). With a key every connection is keyed (SPEC 3.1): each new connection
   * opens a fresh channel with a signed `hello`, everything sent on it is signed, and messages from the host that are
   * not signed for that channel (forged, replayed, unsigned, or anything before the first `welcome`) are dropped,
   * logged and counted in {@link Peer.rejectedMessages}, never answered. Keyed mode authenticates; it does not
   * encrypt. Default: no key (`""` is no key too).
   */
  key?: string;
  /**
   * CURVE (SPEC 2.1): encrypts every connection and makes the host prove it holds the secret key of `serverKey`.
   * A connection file with `curve_server_key` turns it on by itself; this gives keys of your own. `serverKey` (the
   * host's public key) wins over the file's; without `secretKey` the peer makes itself a fresh key pair;
   * `publicKey`, if given, must match `secretKey`. Keys are 40-character Z85 strings or 32-byte buffers. A key pair
   * with no server key here or in the file is an error: the peer never falls back to plaintext. Combines with `key`.
   */
  curve?: { serverKey?: string | Uint8Array; publicKey?: string | Uint8Array; secretKey?: string | Uint8Array };
  /**
   * Where diagnostics go: dropped or malformed messages from the host, host loss, listener errors.
   * Default: warnings to `console.warn`, debug lines to `NODE_DEBUG=zerobridge`.
   */
  log?: (level: 'debug' | 'warn', message: string) => void;
}

/**
 * A peer: a ZeroMQ DEALER connected to a host's ROUTER, with one session at a time.
 *
 * For example:
 * ```js
 * const peer = new Peer('ipc:///run/etl.sock', { name: 'frontend' });
 * peer.handle('render', async (payload, ctx) => render(payload));
 * await peer.connect();
 * ```
 */
export class Peer {
  constructor(endpointOrConnectionFile: string, options: PeerOptions);

  /**
   * Connects, sends `hello` and resolves once the host's `welcome` arrives. Rejects at the `timeout`
   * option with `timeout`, or with `name_taken` when the host kept refusing the name because another
   * live session holds it (say, this program's previous run, until the host has seen that one end).
   * With CURVE, rejects at once with `unauthorized` when the host refuses this peer's key (its message
   * names {@link Peer.curvePublicKey} and the allow-list) or does not prove it holds the server key.
   */
  connect(): Promise<this>;

  /** The endpoint connected to (`tcp://host:port` or `ipc:///path`). */
  readonly endpoint: string;
  /** `hello.peer`. */
  readonly name: string;
  /**
   * `welcome.session`: the session in force, or null before the welcome and after the host is lost.
   * After a loss the peer asks to resume the last one (with its `welcome.resume_token`, which it keeps
   * private and never logs); a different id here means the host started a new session instead.
   */
  readonly session: string | null;
  /** `welcome.host`: the host's name. */
  readonly host: string | null;
  /** `welcome.actions`: the actions the host serves. */
  readonly hostActions: string[];
  /** `welcome.heartbeat_ms` once welcomed (before: the interval asked for). */
  readonly heartbeatMs: number;
  /** `welcome.limits`. */
  readonly limits: { max_message_bytes: number; max_in_flight: number } | null;
  /** True while a session is in force: welcomed, and the host not lost since. */
  readonly connected: boolean;
  /**
   * With CURVE: this peer's public key (Z85, 40 characters), for the host's allow-list
   * (`zerobridge serve --allow-peer-keys FILE`); null without CURVE. The secret key is never shown.
   */
  readonly curvePublicKey: string | null;
  /**
   * On a keyed connection (a `key`): messages from the host not processed since the peer started, because their
   * signature was missing, wrong or replayed, or they came before the first `welcome` of their connection (SPEC 3.1);
   * each is also logged (a warning at most once a second, the rest at debug). It includes the host's unsigned
   * `unauthorized` answers (the host refused a message of this peer: typically a wrong key), which are logged as
   * warnings, and makes `connect()`'s timeout error say so. Always 0 without a key.
   */
  readonly rejectedMessages: number;

  /**
   * `request.action`: calls an action on the host and resolves with `response.result`.
   * Rejects with a BridgeError: the host's error code, or `timeout`, `cancelled`, `peer_lost`,
   * `too_large`, `overloaded`. While the host is lost (silent, said bye, connection broken) and has
   * not welcomed this peer again, rejects at once with `peer_lost`. While more than 8 MiB wait to be
   * sent to the host, the request waits for room, up to its timeout.
   */
  call<Result = any>(action: string, payload?: JsonValue, options?: CallOptions): Promise<Result>;

  /** `request.progress`: like call(), asking the host for progress messages. */
  stream<Progress = any, Result = any>(action: string, payload?: JsonValue, options?: CallOptions): StreamingCall<Progress, Result>;

  /**
   * `event.action`: posts a fire-and-forget event to the host (no response, not even an error).
   * Throws a BridgeError: `overloaded` while more than 8 MiB wait to be sent to the host (it is not
   * keeping up) or the send queue before the first connection is full; `peer_lost` while the host is
   * lost and has not welcomed this peer again.
   */
  post(action: string, payload?: JsonValue): void;

  /**
   * `hello.actions`: serves an action to the host. Registering (or removing, with the returned
   * function) after connect sends a new `hello` so the host learns of it.
   */
  handle(action: string, handler: Handler): () => void;

  /** `event.action`: listens to events the host posts with this action. */
  on(action: string, listener: EventListener): this;
  /** Stops listening. */
  off(action: string, listener: EventListener): this;

  /**
   * Says `bye`, cancels the host's requests to us, fails our pending calls with `cancelled` and
   * closes the connection.
   */
  close(): Promise<void>;
}

/**
 * Connects a new peer to a host and resolves once the host has welcomed it.
 *
 * `endpointOrConnectionFile` is `tcp://host:port`, `ipc:///path`, or the path of a host's connection
 * file (`{"protocol": 1, "endpoint", "host", "signature_scheme", "key", "curve_server_key"?}`); a file with a
 * non-empty `key` makes every connection keyed (see {@link PeerOptions.key}), one with `curve_server_key` makes it
 * CURVE (see {@link PeerOptions.curve}).
 *
 * For example:
 * ```js
 * const peer = await connect('tcp://127.0.0.1:5555', { name: 'cli' });
 * const sum = await peer.call('add', { a: 1, b: 2 }, { timeout: 1000 });
 * ```
 */
export function connect(endpointOrConnectionFile: string, options: PeerOptions): Promise<Peer>;

/**
 * A fresh CURVE key pair in Z85 (like `zmq_curve_keypair()`): give it to {@link PeerOptions.curve} and put
 * `publicKey` on the host's allow-list. Keep `secretKey` secret.
 */
export function curveKeyPair(): { publicKey: string; secretKey: string };
