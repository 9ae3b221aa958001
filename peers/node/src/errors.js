/**
 * The error every ZeroBridge failure rejects with. `code` is one of the protocol's error codes
 * (`timeout`, `cancelled`, `peer_lost`, `unknown_action`, `handler_error`, ...), so callers can
 * switch on it; `data` is the error's optional `data` from the wire. connect() rejects with
 * `name_taken` when the host refused the peer's name (held by another live session) until its timeout.
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
