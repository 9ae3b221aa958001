// Type declarations for `zerobridge`, the Node peer of ZeroBridge.

/**
 * A value the peer sends (SPEC 7.14): null, booleans, strings, finite numbers, `bigint`s in the signed 64-bit range
 * (written exactly, as integer literals), arrays, plain objects (prototype `Object.prototype` or null) with string keys,
 * and bytes: `Uint8Array`/`Buffer` values travel as attachment frames (`{"$attachment": i}`). A member whose value is
 * `undefined` is left out. Anything else (NaN, ±Infinity, other BigInts, `Map`, `Set`, functions, symbols, class
 * instances, `Date`, other typed arrays, objects with a `toJSON` method, an object whose only member is `$attachment`
 * (receivers read it as an attachment reference), `undefined` as an array item, cycles, nesting
 * past level 64 of the message, strings with unpaired surrogates) is refused before anything is sent, with the path of
 * its first offending part (`payload.items[3]: NaN cannot be carried in JSON`): never converted silently.
 */
export type JsonValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | JsonValue[]
  | { [key: string]: JsonValue | undefined };

/**
 * A JSON Schema (draft 2020-12) of one part of an action (SPEC 7.8): `true`/`{}` is any value. Code generators and
 * the `validate` option understand `type` (a name or a list), `properties`, `required`, `additionalProperties`,
 * `items`, `prefixItems`, `enum`, `const`, `anyOf`, `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`,
 * `maxItems`, `uniqueItems`, and the annotations `format`, `title` (names an object type), `description`, `$comment`.
 * Bytes are `{"type": "string", "contentEncoding": "base64"}`.
 */
export type JsonSchema = boolean | { [keyword: string]: unknown };

/** The version of this package (semantic versioning), the same as the Swift package's and the Python peer's. */
export declare const version: string;

/** How an action is described in the catalogue (SPEC 7.8): the options of {@link Peer.handle}. */
export interface ActionOptions {
  /** One line for people (no line breaks); default `""`. */
  doc?: string;
  /** The schema of `request.payload`; default `{}` (any value). */
  payload?: JsonSchema;
  /** The schema of `response.result`; default `{}` (any value). */
  result?: JsonSchema;
  /** The schema of `progress.payload`, for an action that reports progress; absent from the description when not given. */
  progress?: JsonSchema;
}

/** A handler with its description, as a value of {@link PeerOptions.actions}. */
export interface DescribedHandler extends ActionOptions {
  handler: Handler;
}

/** One action in a catalogue. */
export interface ActionDescription {
  name: string;
  doc: string;
  payload: JsonSchema;
  result: JsonSchema;
  progress?: JsonSchema;
}

/**
 * The result of `$describe` (SPEC 7.8): `actions` sorted by name (UTF-16 code units), reserved `$` names left out;
 * `catalogue` is the lowercase hex SHA-256 of the RFC 8785 (JSON Canonicalization Scheme) form of `actions`.
 */
export interface Catalogue {
  catalogue: string;
  actions: ActionDescription[];
}

/**
 * `error.code`: the protocol's error codes (SPEC 8). Hosts may send codes this version does not know, and handlers
 * codes of their own, so any string is accepted. From jobs (SPEC 7.16, since 1.4): `unknown_job`, the host does not
 * have the job named (never started, or finished longer ago than the host keeps jobs); `interrupted`, the job's host
 * stopped while it ran and the job had no checkpoint to resume from, so it will not run again. Since 1.6:
 * `suspended`, the host stopped gracefully while a checkpointed job ran, which resumes at its next start (attach again
 * then); `journal_full`, the job failed because the host's journal disk is full.
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
  | 'unknown_job'
  | 'interrupted'
  | 'name_taken'
  | 'suspended'
  | 'journal_full'
  /** Local only: nothing listens at the endpoint (connection refused, or no ipc socket file); connect() fails at once. */
  | 'unreachable'
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
   * `traceparent` (SPEC 7.18): the W3C trace context it arrived with, when valid (a malformed one is ignored); null
   * without one. Calls and events the handler sends, through every await, carry it.
   */
  readonly traceparent: string | null;
  /** `tracestate` (SPEC 7.18): the W3C vendor state beside `traceparent`, when valid; else null. */
  readonly tracestate: string | null;
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
   *
   * A payload that cannot be carried (SPEC 7.14, see {@link JsonValue}) fails the request: it is answered
   * `handler_error` with the path (`progress.eta: Infinity cannot be carried in JSON`), `signal` aborts, and this
   * throws that BridgeError to the handler.
   */
  progress(payload: JsonValue): boolean;
}

/** What an event listener learns about the event it runs for. */
export interface EventContext {
  /** `event.action`. */
  readonly action: string;
  /**
   * `event.topic`: the topic the host broadcast the event on (SPEC 7.15); null for an event without one (a broadcast to
   * every peer, an event sent to this peer alone, or a host older than 1.3). The host decides who gets what: an event
   * on a topic this peer has just unsubscribed from can still arrive (it was broadcast before the host had the hello).
   */
  readonly topic: string | null;
  /**
   * `traceparent` (SPEC 7.18): the W3C trace context it arrived with, when valid (a malformed one is ignored); null
   * without one. Calls and events the handler sends, through every await, carry it.
   */
  readonly traceparent: string | null;
  /** `tracestate` (SPEC 7.18): the W3C vendor state beside `traceparent`, when valid; else null. */
  readonly tracestate: string | null;
  /**
   * Aborted (reason: a BridgeError `peer_lost` or `cancelled`) when the session ends while the
   * listener still runs: the host is lost, or the peer is closed.
   */
  readonly signal: AbortSignal;
}

/**
 * Serves one action for the host: its return (or awaited) value is `response.result` (`undefined` is null). A result
 * that cannot be carried (SPEC 7.14, see {@link JsonValue}) is answered `handler_error` naming its path
 * (`result.tags: a Map cannot be carried in JSON ...`), as is a thrown BridgeError whose `data` cannot be.
 */
export type Handler = (payload: any, context: RequestContext) => unknown | Promise<unknown>;

/**
 * Runs an `$evaluate` script somewhere other than this process (see `evaluate`): `script` is the body of an async
 * function whose parameters are the names in `args`. What it returns (or resolves to) is the result; what it throws
 * is the error the host gets.
 */
export type Evaluator = (script: string, args: Record<string, unknown>, context: RequestContext) => unknown;

/**
 * Receives `event.payload` of events the host posts with that `event.action`. Until the promise it
 * returns settles, the event counts toward `maxInFlight`.
 */
export type EventListener = (payload: any, context: EventContext) => void | Promise<void>;

/** What every request takes: its deadline and a way to cancel it. */
export interface RequestOptions {
  /**
   * Milliseconds: `request.timeout_ms` and `request.deadline` (`Date.now()` + timeout): the call fails with
   * `timeout` at this deadline, whatever the host does, and the host does not start it once the
   * deadline has passed. Defaults to the peer's `timeout` (30000 unless set: SPEC 7.3, one default).
   * `Infinity` waits without a limit, and the request carries neither field (`null` is accepted for the same).
   */
  timeout?: number | null;
  /**
   * Aborting sends `cancel` and rejects the call with code `cancelled`, or `timeout` when the signal is
   * `AbortSignal.timeout(ms)`'s (its reason a `TimeoutError`); the signal's reason is the error's `cause`.
   */
  signal?: AbortSignal;
}

export interface CallOptions extends RequestOptions {
  /**
   * `request.idempotency_key` (SPEC 7.16, since 1.4): for an action the host serves as a job, names the job, per
   * action. A call repeating a key the host still has attaches to the job that key started (its progress again, then
   * its outcome) instead of running the action again; the payload of the repeat is not compared with the first. The
   * host records the key before the handler starts, so a retry after a lost response, a reconnect or a host restart
   * never runs the work twice. Actions not served as jobs ignore it. 1..128 characters (code points) without unpaired
   * surrogates, else the call rejects with a TypeError, nothing sent.
   */
  idempotencyKey?: string;
}

/** A call with progress, from {@link Peer.stream}. */
export interface StreamingCall<Progress = any, Result = any> {
  /**
   * `progress.payload` of each progress message, in `seq` order; ends when the call ends. Leaving a `for await` loop
   * over it early (`break`, `return`, a throw) cancels the call (`cancel` is sent; `result` rejects with `cancelled`).
   */
  readonly progress: AsyncIterable<Progress>;
  /** `response.result`; rejects with a BridgeError like {@link Peer.call}. */
  readonly result: Promise<Result>;
  /**
   * The sum of `progress.skipped` so far: payloads the host coalesced away because this peer was not
   * reading fast enough (for an attach: progress the job's journal no longer held). `progress` still yields every
   * message that arrived, in order.
   */
  readonly skipped: number;
  /**
   * `progress.seq` of the last payload `progress` has yielded: 0 before any (for {@link Peer.attachJob}, its
   * `afterSeq`). Progress that arrived but was not taken from `progress` yet is not counted, so a reader of a job that
   * attaches again with `afterSeq: stream.lastSeq` (after a disconnect, a restart, a `break`) gets exactly the progress
   * it has not taken, each once and in order. For an attach the numbers are the job's own (SPEC 7.2, 7.16).
   */
  readonly lastSeq: number;
}

/**
 * `job.state` (SPEC 7.16): `running` (or `suspended`, since 1.6: a graceful stop cut it and the host's next start
 * resumes it from its checkpoint), then one of the four final states.
 */
export type JobState = 'running' | 'suspended' | 'succeeded' | 'failed' | 'cancelled' | 'interrupted';

/**
 * A job record (`schema/job.schema.json`), as {@link Peer.startJob}, {@link Peer.cancelJob} and {@link Peer.listJobs}
 * resolve with it: the wire's snake_case fields in camelCase (`last_seq` -> `lastSeq`, `created_ms` -> `createdMs`,
 * `finished_ms` -> `finishedMs`), the others under their wire names. Optional fields are absent when the host sent
 * none. A record never carries the result: attach to get it.
 */
export interface JobRecord {
  /** `job`: the job's id, chosen by the host (ZeroBridge: 32 lowercase hex digits), never reused. */
  readonly job: string;
  /** `action`: the action the job runs. */
  readonly action: string;
  /** `key`: its idempotency key, when it was started with one. */
  readonly key?: string;
  /** `state`. */
  readonly state: JobState;
  /** `last_seq`: the `seq` of its latest progress; 0 before any. */
  readonly lastSeq: number;
  /** `runs`: how many times its handler was started; more than 1 only for a job resumed from a checkpoint. */
  readonly runs: number;
  /** `created_ms`: when it was started, Unix time in milliseconds. */
  readonly createdMs: number;
  /** `finished_ms`: when it reached its final state (present in every final state, never while running). */
  readonly finishedMs?: number;
  /** `error`: why it ended, in `failed`, `cancelled` and `interrupted` (as in a response: `interrupted` for the last). */
  readonly error?: { code: BridgeErrorCode; message: string; data?: JsonValue };
  /** `created` ({@link Peer.startJob} only): true when this request started the job, false when its key named one. */
  readonly created?: boolean;
}

/** Which job: by its id, or by the action and idempotency key it was started with (keys are per action). */
export type JobSelector = { job: string } | { action: string; key: string };

export interface StartJobOptions extends RequestOptions {
  /**
   * The job's idempotency key (1..128 characters): when the host still has a job of this action started with it
   * (running or finished), that job's record is the answer (`created: false`) and nothing new starts.
   */
  key?: string;
}

export interface AttachJobOptions extends RequestOptions {
  /**
   * `after_seq`: the last `seq` already seen (default 0: from the first progress). Progress with a higher `seq` comes,
   * in order and each once: first what the journal holds, then the live progress. Pass a stream's
   * {@link StreamingCall.lastSeq} to carry on where it stopped. Progress at or below it, which a host does not send, is
   * dropped (and logged) like any progress whose `seq` is not above the last.
   */
  afterSeq?: number;
  /**
   * Milliseconds, as for a call, but the default is **`Infinity`**: an attach waits for its job however long it
   * runs (the peer's `timeout` option does not apply). Give one to stop waiting: the attach then fails with `timeout`
   * (and, like an abort, leaves the job running).
   */
  timeout?: number | null;
  /** Aborting detaches: the attach rejects with `cancelled`, and the job runs on (cancel it with {@link Peer.cancelJob}). */
  signal?: AbortSignal;
}

/** A `$job.list` filter: every field given must match. */
export interface JobFilter {
  /** Only jobs of this action. */
  action?: string;
  /** Only jobs in this state. */
  state?: JobState;
  /** Only this job. */
  job?: string;
  /** At most this many records, 1..1000 (default 100). */
  limit?: number;
}

export interface PeerOptions {
  /**
   * `hello.peer`: this peer's name (1..128 characters). When not given: the connection file's `peer`, else, for a peer
   * connected without an endpoint, the environment variable `ZEROBRIDGE_PEER_NAME`; with neither it is a TypeError.
   * A name that differs from the file's `peer` is allowed, but a host that launched this peer (SPEC 10.1) waits for
   * the file's name.
   */
  name?: string;
  /**
   * `hello.actions`: handlers the host may call, by action name (more via {@link Peer.handle}). A value is a handler,
   * or `{ handler, doc?, payload?, result?, progress? }` to describe it in the catalogue as handle()'s options do.
   */
  actions?: Record<string, Handler | DescribedHandler> | Map<string, Handler | DescribedHandler>;
  /**
   * `hello.topics`: the broadcast topics to subscribe to from the start (SPEC 7.15; more via {@link Peer.subscribe}).
   * Each is 1..128 characters; repeats count once. Default: none.
   */
  topics?: Iterable<string>;
  /**
   * `hello.features` gets `"evaluate"`: lets the host run JavaScript in this process through
   * `$evaluate`. Off by default (`$evaluate` is answered `not_allowed`). Read the README first.
   * Without CURVE it holds for the first host that welcomed this peer only: after losing that host the
   * peer says `hello` without the feature and answers `$evaluate` with `not_allowed` (SPEC 2.1).
   * A function turns it on and runs each script instead of this process (a sandbox, for example a child process
   * under Node's permission model): it gets the script, its arguments and the request's context, and its value is
   * the result.
   */
  evaluate?: boolean | Evaluator;
  /**
   * `hello.heartbeat_ms`: the heartbeat interval this peer asks for (default 5000). The host's
   * `welcome.heartbeat_ms` is the one used.
   */
  heartbeatMs?: number;
  /**
   * Milliseconds: the default `timeout_ms` of calls and streams (default 30000, SPEC 7.3, as in Swift and Python).
   * `Infinity` (or `null`): no limit, and calls without a timeout of their own carry no `timeout_ms` nor `deadline`.
   */
  timeout?: number | null;
  /**
   * Milliseconds connect() waits for the welcome (default 10000, as in Swift and Python; `Infinity` or `null`: no
   * limit). What is known at once fails at once instead: `unreachable`, `unauthorized`, `name_taken`.
   */
  connectTimeout?: number | null;
  /**
   * While the host refuses the name (`name_taken`: another live session holds it, say this program's previous run),
   * say `hello` again every second until the connect timeout instead of rejecting at once (default false).
   */
  waitForName?: boolean;
  /**
   * Check payloads against the host's schemas before sending them (SPEC 7.14; default false). Once welcomed, the peer
   * fetches the host's catalogue with `$describe` (connect() resolves after it), and fetches it again when a later
   * `welcome.catalogue` differs from it. A call, stream or event whose payload does not match the payload schema of
   * its action fails at once with `invalid_payload`, nothing sent, its message naming the path and what was expected
   * (`payload.b: expected a number, got the string "2"`); `error.data` is `{ path }`. Actions the catalogue does not
   * describe, and every action of a host that does not serve `$describe` (logged once), are not checked. Calls and
   * streams made while a fetch is in flight wait for it (within their timeout); events are checked against the
   * catalogue in hand.
   */
  validate?: boolean;
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
/** The `close` event of a {@link Peer}: `reason` is what {@link Peer.closed} resolves with. */
export interface PeerCloseEvent extends Event {
  readonly reason: string;
}

/** The `error` event of a {@link Peer}: a failure outside any call (the host lost, a transport failure). */
export interface PeerErrorEvent extends Event {
  readonly error: BridgeError;
}

/**
 * A peer is an `EventTarget`: `close` once it is closed (whatever closed it), `error` for a failure outside any call.
 *
 * For example:
 * ```js
 * peer.addEventListener('error', (event) => console.warn(event.error.code, event.error.message));
 * peer.addEventListener('close', (event) => console.log('closed:', event.reason), { once: true });
 * ```
 */
export class Peer extends EventTarget {
  addEventListener(type: 'close', listener: (event: PeerCloseEvent) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: 'error', listener: (event: PeerErrorEvent) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  /** Without an endpoint: a peer launched by a host, as {@link connect} says. */
  constructor(options?: PeerOptions);
  constructor(endpointOrConnectionFile: string | undefined, options?: PeerOptions);

  /**
   * Connects, sends `hello` and resolves once the host's `welcome` arrives. Rejects at once with `unreachable` when
   * nothing listens at the endpoint, `unauthorized` when the host refuses the key, `name_taken` when another live
   * session holds the name (unless `waitForName`), and a TypeError for `127.0.0.1:5599` without `tcp://`; otherwise
   * with `timeout` at the `connectTimeout` option (docs/errors.md).
   * With CURVE, rejects at once with `unauthorized` when the host refuses this peer's key (its message
   * names {@link Peer.curvePublicKey} and the allow-list) or does not prove it holds the server key.
   * With `validate`, resolves once the host's catalogue is fetched too (or the host turned out not to serve it).
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
  /**
   * `welcome.catalogue`: the hash of the host's catalogue (SPEC 7.8) as of its last welcome, 64 lowercase hex digits;
   * null before a welcome, and when the host sent none (older than protocol 1.3). Compare it with a hash kept from
   * {@link Peer.describe} to learn whether the host's contract changed.
   */
  readonly hostCatalogue: string | null;
  /**
   * `welcome.info`: the context the host's configuration gives every peer (its version, platform, features; SPEC 5,
   * since 1.3), as of its last welcome: an object, opaque to the protocol. Null before a welcome, and when the welcome
   * had none. The conformance host's is `{ protocol_revision: '1.4' }`.
   */
  readonly hostInfo: { [key: string]: any } | null;
  /**
   * `welcome.library_version`: the version of the ZeroBridge library the host runs (SPEC 5, decision 43), the same
   * string as this package's {@link version} when both are of one release; informative only. Null before a welcome,
   * and from hosts that do not send it.
   */
  readonly hostLibraryVersion: string | null;
  /**
   * `hello.topics`: the broadcast topics this peer subscribes to (SPEC 7.15), sorted (by UTF-16 code units), as its
   * next `hello` sends them. A copy: change the set with {@link Peer.subscribe} and {@link Peer.unsubscribe}.
   */
  readonly topics: string[];
  /** `welcome.heartbeat_ms` once welcomed (before: the interval asked for). */
  readonly heartbeatMs: number;
  /** `welcome.limits`. */
  readonly limits: { max_message_bytes: number; max_in_flight: number } | null;
  /** True while a session is in force: welcomed, and the host not lost since. */
  readonly connected: boolean;
  /**
   * Resolves (never rejects) once the peer is closed, with why: `'the program closed the peer'` after
   * {@link Peer.close}, `'connecting failed: ...'` when {@link Peer.connect} failed, or `'lost the host: ...'`
   * (`... the host said bye`, `... nothing heard for 900 ms (heartbeat 300 ms)`, `... the connection to the host at
   * ENDPOINT broke`) for a peer launched by a host (connected without an endpoint, SPEC 10.1): once welcomed, such a
   * peer ends with its host, closing instead of reconnecting when its host says `bye` or is lost, and its program
   * should then exit. A peer given an endpoint or a connection file reconnects instead, and stays open.
   */
  readonly closed: Promise<string>;
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
   * Batches (SPEC 3.3) on ZeroMQ connections, keyed or not, since the peer started, for diagnostics: `read` from the
   * host, `sent` to it (only once a connection's `welcome` said `"batch": true`).
   */
  readonly batches: { readonly read: number; readonly sent: number };

  /**
   * `request.action`: calls an action on the host and resolves with `response.result`.
   * Rejects with a BridgeError: the host's error code, or `timeout`, `cancelled`, `peer_lost`,
   * `too_large`, `overloaded`. While the host is lost (silent, said bye, connection broken) and has
   * not welcomed this peer again, rejects at once with `peer_lost`. While more than 8 MiB wait to be
   * sent to the host, the request waits for room, up to its timeout. A payload that cannot be carried
   * (see {@link JsonValue}), or with `validate` does not match the host's schema, rejects at once with
   * `invalid_payload` naming its path (`error.data` is `{ path }`), nothing sent.
   */
  call<Result = any>(action: string, payload?: JsonValue, options?: CallOptions): Promise<Result>;

  /** `request.progress`: like call(), asking the host for progress messages. */
  stream<Progress = any, Result = any>(action: string, payload?: JsonValue, options?: CallOptions): StreamingCall<Progress, Result>;

  /**
   * `$job.start` (SPEC 7.16): starts `action` as a job with `payload` and resolves at once with its record
   * (`created: true`), without waiting for it to run. With `key`, a job of this action the host still has under that
   * key is the answer instead (`created: false`; its payload is not compared). Rejects like {@link Peer.call}:
   * `invalid_payload` when the host does not serve `action` as a job, `overloaded` over the host's bound on running
   * jobs, `unknown_action` from a host without jobs, `bad_message` when the answer is not a job record; a TypeError for
   * an action or key that is not 1..128 characters. (The `validate` option does not check a job's payload; the host
   * does.)
   *
   * For example:
   * ```js
   * const { job } = await peer.startJob('importFile', { path: '/data' }, { key: 'import-2026-11-24' });
   * ```
   */
  startJob(action: string, payload?: JsonValue, options?: StartJobOptions): Promise<JobRecord>;

  /**
   * `$job.attach` with progress (SPEC 7.16): a stream of the job's progress with `seq` above `afterSeq` (journaled
   * progress first, then live, each once and in order, never coalesced), then its outcome as `result`: the job's result
   * when it succeeded, else a BridgeError with its code (the handler's own, `handler_error`, `cancelled`, `interrupted`).
   * A finished job answers at once, after the progress asked for. `unknown_job` when the host does not have it.
   *
   * **The default timeout is none** (`Infinity`), not the 30 s of calls: a job may run long. **Aborting only
   * detaches**: the attach rejects with `cancelled`, the host ends that request, and the job runs on; so do a timeout,
   * closing the peer and losing the host. Only {@link Peer.cancelJob} stops a job. An invalid selector or `afterSeq`
   * rejects `result` with a TypeError, nothing sent.
   *
   * For example:
   * ```js
   * const call = peer.attachJob({ job }, { afterSeq: seen });
   * for await (const p of call.progress) { show(p); seen = call.lastSeq; }
   * console.log(await call.result);
   * ```
   */
  attachJob<Progress = any, Result = any>(selector: JobSelector, options?: AttachJobOptions): StreamingCall<Progress, Result>;

  /**
   * `$job.cancel` (SPEC 7.16): cancels a running job (its handler is cancelled; every attach to it is answered with
   * its outcome, `cancelled` unless the handler finished first) and resolves with its record. A finished job is left
   * as it is. Rejects with `unknown_job` when the host does not have it.
   */
  cancelJob(selector: JobSelector, options?: RequestOptions): Promise<JobRecord>;

  /**
   * `$job.list` (SPEC 7.16): the caller's own jobs that match `filter` (a job belongs to its starter's CURVE key, else
   * its peer name: an anonymous peer lists none), newest first, at most `limit` (default 100). A
   * filter the host would refuse (a state not in {@link JobState}, a limit outside 1..1000) rejects with a TypeError.
   */
  listJobs(filter?: JobFilter, options?: RequestOptions): Promise<JobRecord[]>;

  /**
   * `event.action`: posts a fire-and-forget event to the host (no response, not even an error).
   * Throws a BridgeError: `overloaded` while more than 8 MiB wait to be sent to the host (it is not
   * keeping up) or the send queue before the first connection is full; `peer_lost` while the host is
   * lost and has not welcomed this peer again; `invalid_payload` (synchronously, like the others, nothing sent) for
   * a payload that cannot be carried or, with `validate`, does not match the schema of the host's action of that name.
   */
  post(action: string, payload?: JsonValue): void;

  /**
   * `$describe` (SPEC 7.8): fetches the host's catalogue, the contract of every action it serves. Rejects like
   * {@link Peer.call} (`unknown_action` from a host older than protocol 1.3), and with `bad_message` when the result is
   * not a catalogue. With `validate`, payloads are checked against the catalogue fetched from then on.
   */
  describe(options?: RequestOptions): Promise<Catalogue>;

  /**
   * `hello.actions`: serves an action to the host, described in this peer's catalogue (`$describe`, SPEC 7.8) by
   * `options` (`doc` one line; schemas default to `{}`; `progress` only when given). Registering (or removing, with the
   * returned function) after connect sends a new `hello`, with the new `catalogue` hash, so the host learns of it.
   * Throws a TypeError for a reserved (`$`) or malformed name, a handler that is not a function, a `doc` with line
   * breaks, or a schema that is not JSON.
   */
  handle(action: string, handler: Handler, options?: ActionOptions): () => void;

  /**
   * `hello.topics`: subscribes to broadcast topics (SPEC 7.15): the host's broadcasts on them reach this peer's
   * listeners (of the broadcast's action), with `context.topic` set. A change to the set is announced as a change of
   * handlers is: by a new `hello` carrying the whole set, one for all the changes made in one turn, before anything
   * sent after them; before connect(), or while the host is lost, the next `hello` carries it. The set is this peer's,
   * kept across reconnects and sessions. Throws a TypeError, changing nothing, for a topic that is not a string of
   * 1..128 characters (without unpaired surrogates).
   */
  subscribe(...topics: string[]): this;
  /** Unsubscribes from broadcast topics, announced as {@link Peer.subscribe} is; topics not subscribed to are ignored. */
  unsubscribe(...topics: string[]): this;

  /** `event.action`: listens to events the host posts with this action. */
  on(action: string, listener: EventListener): this;
  /** Stops listening. */
  off(action: string, listener: EventListener): this;

  /**
   * Says `bye`, cancels the host's requests to us, fails our pending calls with `cancelled` and
   * closes the connection; {@link Peer.closed} then resolves. A closed peer stays closed: its calls fail with
   * `cancelled`, saying why it closed.
   */
  close(): Promise<void>;
}

/**
 * Connects a new peer to a host and resolves once the host has welcomed it.
 *
 * `endpointOrConnectionFile` is `tcp://host:port`, `ipc:///path`, or the path of a host's connection
 * file (`{"protocol": 1, "endpoint", "host", "signature_scheme", "key", "curve_server_key"?}`); a file with a
 * non-empty `key` makes every connection keyed (see {@link PeerOptions.key}), one with `curve_server_key` makes it
 * CURVE (see {@link PeerOptions.curve}), one with `peer` names this peer (see {@link PeerOptions.name}).
 *
 * Without an endpoint (`connect()`, `connect(options)` or `connect(undefined, options)`) it is a peer launched by a
 * host (SPEC 10.1): the connection file is the one the environment variable `ZEROBRIDGE_CONNECTION_FILE` names, and
 * the name, unless `options.name` gives one, is the file's `peer`, else `ZEROBRIDGE_PEER_NAME`. Without
 * `ZEROBRIDGE_CONNECTION_FILE` it rejects at once with a TypeError saying what to set. (`options.key` is refused then:
 * the file brings its own key.) Such a peer ends with its host: see {@link Peer.closed}.
 *
 * For example:
 * ```js
 * const peer = await connect('tcp://127.0.0.1:5555', { name: 'cli' });
 * const sum = await peer.call('add', { a: 1, b: 2 }, { timeout: 1000 });
 * ```
 */
export function connect(options?: PeerOptions): Promise<Peer>;
export function connect(endpointOrConnectionFile: string | undefined, options?: PeerOptions): Promise<Peer>;

/**
 * A fresh CURVE key pair in Z85 (like `zmq_curve_keypair()`): give it to {@link PeerOptions.curve} and put
 * `publicKey` on the host's allow-list. Keep `secretKey` secret.
 */
export function curveKeyPair(): { publicKey: string; secretKey: string };

/** A W3C trace context (SPEC 7.18): `traceparent`, and `tracestate` when there is one. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/**
 * Runs `fn` with `trace` current, so the requests and events it sends (through every await) carry `traceparent` and
 * `tracestate` (SPEC 7.18): for a front-end continuing a trace it received. Handlers need nothing of the kind: the
 * trace a request or event arrived with is current while its handler runs. Throws a TypeError for a `traceparent`
 * that is not valid; a `tracestate` that is not valid is left out.
 */
export function withTrace<T>(trace: TraceContext, fn: () => T): T;

/** The trace context a request or event sent now would carry, or null outside any trace. */
export function currentTrace(): TraceContext | null;
