/**
 * The error codes of the protocol (SPEC 8), in its order. Codes are an open set: a handler may fail with a code of its
 * own, which travels unchanged, so a BridgeError's `code` may be any string; these are the ones the protocol defines.
 * `unknown_job` and `interrupted` (since 1.4) come from jobs (SPEC 7.16): a job the host does not have, and a job
 * whose host stopped while it ran and that had no checkpoint to resume from (it will not run again); `suspended` and
 * `journal_full` (since 1.6): a checkpointed job whose host stopped gracefully (it resumes at the next start: attach
 * again then), and a job that failed because the host's journal disk is full.
 */
export const ERROR_CODES = Object.freeze([
  'bad_message', 'unsupported_version', 'unknown_action', 'invalid_payload', 'handler_gone', 'handler_error', 'timeout',
  'cancelled', 'peer_lost', 'duplicate_id', 'too_large', 'overloaded', 'not_allowed', 'unauthorized', 'unknown_job',
  'interrupted', 'suspended', 'journal_full', 'name_taken', 'unreachable',
]);

/**
 * The error every ZeroBridge failure rejects with. `code` is one of the protocol's error codes
 * (`timeout`, `cancelled`, `peer_lost`, `unknown_action`, `handler_error`, `unknown_job`, `interrupted`, ...:
 * ERROR_CODES), so callers can switch on it; `data` is the error's optional `data` from the wire. connect() rejects
 * at once with `unreachable` (nothing listens), `unauthorized` (the key is refused) or `name_taken` (docs/errors.md).
 */
export class BridgeError extends Error {
  constructor(code, message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BridgeError';
    this.code = code;
    if (options.data !== undefined) this.data = options.data;
  }

  /** The wire form: `{"code", "message", "data"?}`. */
  toJSON() {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}
