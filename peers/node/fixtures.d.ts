// Type declarations for `zerobridge/fixtures`: protocol fixtures (protocol/SPEC.md, section 14) for Node.

/** A JSON value as a fixture file holds it (after `JSON.parse`). */
export type FixtureJson = null | boolean | number | string | FixtureJson[] | { [key: string]: FixtureJson };

/** How long an `expect` step waits for its message when the step gives no `within_ms`: 30 s. */
export declare const DEFAULT_WITHIN_MS: number;

/** A fixture that did not pass: the message names the step, and what was expected and what was received. */
export declare class FixtureFailure extends Error {
  constructor(message: string);
  name: 'FixtureFailure';
}

/**
 * A fixture file that does not follow the format (or uses a variable it never captured): `file` and `path` (a JSON
 * path such as `$.steps[2].expect`) say where, `reason` what is wrong.
 */
export declare class FixtureFormatError extends Error {
  constructor(file: string, jsonPath: string, reason: string);
  name: 'FixtureFormatError';
  /** The fixture file, or `""` when the error was found while a conversation ran. */
  file: string;
  /** The JSON path of the offending part. */
  path: string;
  /** What is wrong there, without the file and path. */
  reason: string;
}

/** A conversation file (SPEC 14.2 and 14.3), checked against the format. */
export interface Conversation {
  description: string;
  /** The file it was read from. */
  file: string;
  /** `'peers'`: it plays peers against a live host (14.2); `'host'`: it plays the host to a peer under test (14.3). */
  plays: 'peers' | 'host';
  /** The clients' names (`['peer']` for a peer conversation). */
  clients: string[];
  /** `'auto'`: the runner answers the host's pings itself; `'manual'`: the steps do. */
  pings: 'auto' | 'manual';
  /** The host limits the conversation needs, when it names any. */
  limits: { max_message_bytes?: number; max_in_flight?: number };
  /** Whether the peer under test must be started with `--evaluate` (peer conversations). */
  evaluate: boolean;
  /** The steps as the file wrote them (`send`, `send_frames`, `expect`, `expect_unordered`, `expect_nothing_ms`, `restart_host`). */
  steps: Array<{ [field: string]: FixtureJson }>;
}

/** One message case (SPEC 14.1): a body the wire decoder must accept or refuse. */
export interface MessageCase {
  /** The case file's name without `.json`. */
  file: string;
  group: string;
  description: string;
  /** The body (any JSON: invalid cases hold bodies of every wrong shape). */
  data: FixtureJson;
  valid: boolean;
  /** The code an invalid body is refused with (`null`: `bad_message`). */
  error: 'bad_message' | 'unsupported_version' | null;
  /** `"<file>: <group>: <case>"`, for a test name. */
  name: string;
}

/** Where and how a value differs from a pattern; `toString()` reads `"<path>: expected ..., received ..."`. */
export interface Mismatch {
  path: string;
  expected: string;
  received: string;
  toString(): string;
}

/** A peer program under test, for {@link runPeerConversation}. */
export interface PeerProgram {
  /** Picks a conversation's `$per_language` values (`'node'`, `'python'`, `'swift'`). */
  language: string;
  /** The command and its arguments; the runner appends the endpoint (and `--evaluate` when the conversation asks). */
  command: string[];
}

/**
 * The conversation in a parsed fixture (a JSON value already read, e.g. fetched by a page), checked against the format.
 * `file` names it in errors. Throws a {@link FixtureFormatError} when it is not one.
 */
export declare function conversationFrom(value: unknown, file: string): Conversation;

/** The conversation in one file, checked against the format. Throws a {@link FixtureFormatError} when it is not one. */
export declare function loadConversation(file: string): Conversation;

/**
 * The conversations in these files and folders, in path order. A folder contributes every `.json` file under it that
 * holds a conversation (case files are passed over). `plays`: `'peers'` (the default: conversations with a host),
 * `'host'` (peer conversations) or `null` (both). Throws a {@link FixtureFormatError} for a file off the format.
 */
export declare function loadConversations(paths: string[], options?: { plays?: 'peers' | 'host' | null }): Conversation[];

/** Every case of the case files (JSON arrays of groups) in these files and folders. */
export declare function loadMessageCases(paths: string[]): MessageCase[];

/** A member that is not there: what {@link match} is given for a missing member (only `$absent`, `$oneOf` and `$not` match it). */
export declare const MISSING: unique symbol;

/** Equality of JSON values: numbers by value, a boolean never equals a number, objects whatever their key order. */
export declare function jsonEqual(a: unknown, b: unknown): boolean;

/**
 * `null` when `value` matches `pattern` (SPEC 14.2, Patterns), else where and how it differs. Captures go into
 * `variables` only on a match; `at` is the JSON path reports start from (default `$`).
 */
export declare function match(
  pattern: FixtureJson,
  value: unknown,
  variables?: { [name: string]: unknown },
  at?: string,
): Mismatch | null;

/** The bytes of one frame description (`{text}`, `{base64}`, `{json}`, `{byte, count}`, `{concat}`). */
export declare function frameBytes(frame: { [field: string]: FixtureJson }): Uint8Array;

/**
 * Runs one message case through the Node wire decoder and throws a {@link FixtureFailure} if the decoder disagrees: a
 * valid body must decode and re-encode to an equal body; an invalid one must be refused with the case's code.
 */
export declare function checkMessageCase(fixtureCase: MessageCase): void;

/** Whether the conversation has a `restart_host` step, and so needs a host of its own that its runner can restart. */
export declare function restartsHost(conversation: Conversation): boolean;

/**
 * Plays the conversation's peers against the host at `endpoint`; rejects with a {@link FixtureFailure} at the first
 * failing step. `restartHost` is what a `restart_host` step calls: it kills the host, starts it again on the same
 * journal and endpoint, and resolves to the endpoint; a conversation with such a step is refused without it.
 */
export declare function runConversation(
  conversation: Conversation,
  endpoint: string,
  options?: { restartHost?: () => Promise<string> },
): Promise<void>;

/**
 * Binds a ROUTER at `bind` (default `tcp://127.0.0.1:*`), starts `program.command` with the endpoint, and plays the
 * host; rejects with a {@link FixtureFailure} (naming the peer's exit code and stderr when it exited).
 */
export declare function runPeerConversation(
  conversation: Conversation,
  program: PeerProgram,
  options?: { bind?: string },
): Promise<void>;
