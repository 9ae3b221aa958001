// The host's side of keyed connections (SPEC 3.1, and its batches: 3.3), for the tests: the fixture's host cases and the scripted hosts
// that sign and check like a real one. The peer never plays this side, so it lives here, on src/signing.js.

import { mac, macMatches, parseSignature, signMessage, bodyType } from '../src/signing.js';

const CLOCK_BOUND_MS = 300_000n;
const REMEMBERED_MS = 600_000n;

/**
 * Channels by connection (any string naming one), opened by signed hellos whose nonces are never accepted twice: an
 * opening's nonce is remembered for 600 s (its clock must be within 300 s of ours), at most `capacity` of them; one
 * forgotten early raises a floor that refuses every opening not later than it.
 */
export class KeyedHost {
  constructor(key, { now = () => Date.now(), capacity = 65_536 } = {}) {
    this.key = key;
    this.now = now;
    this.capacity = capacity;
    this.nonces = new Map(); // nonce -> ms, in the order accepted
    this.floor = -1n;
    this.channels = new Map(); // connection -> { nonce, sent, received }
    this.clockSkewMs = null; // of the last message, when refused for its clock alone (SPEC 3.1)
  }

  /** Why a message that arrived on `connection` is refused, or null when it is accepted. `frames` are frames 1..n. */
  receive(connection, frame0, frames) {
    this.clockSkewMs = null;
    const parsed = parseSignature(frame0);
    const channel = this.channels.get(connection);
    if (channel) {
      if (parsed === null) return frame0.length === 0 ? 'no signature' : 'not a signature';
      if (parsed.counter === undefined) return 'a second opening on a connection whose channel is open';
      if (parsed.counter <= channel.received) return 'counter replayed or out of order';
      const kind = parsed.batch ? 'p2h-batch' : 'p2h'; // SPEC 3.3: a batch's own kind, so neither passes for the other
      if (!macMatches(parsed.mac, mac(this.key, kind, channel.nonce, parsed.counter, frames))) return 'wrong signature';
      channel.received = parsed.counter;
      return null;
    }
    if (parsed?.nonce === undefined) return 'the first message of a keyed connection must be a signed hello';
    if (!macMatches(parsed.mac, mac(this.key, 'hello', parsed.nonce, parsed.ms, frames))) return 'wrong signature';
    if (bodyType(frames[0]) !== 'hello') return 'an opening signature on a message that is not hello';
    const now = BigInt(this.now());
    this.forget(now - REMEMBERED_MS);
    const skew = parsed.ms > now ? parsed.ms - now : now - parsed.ms;
    if (skew > CLOCK_BOUND_MS) {
      this.clockSkewMs = Number(parsed.ms - now);
      return 'the opening\'s clock is more than 300 s from ours';
    }
    if (parsed.ms <= this.floor || this.nonces.has(parsed.nonce)) return 'an opening replayed';
    this.nonces.set(parsed.nonce, parsed.ms);
    for (const [nonce, ms] of this.nonces) {
      if (this.nonces.size <= this.capacity) break;
      this.nonces.delete(nonce);
      if (ms > this.floor) this.floor = ms;
    }
    this.channels.set(connection, { nonce: parsed.nonce, sent: 0n, received: 0n });
    return null;
  }

  /** Openings older than the clock bound are refused by it anyway: their nonces need not be kept. */
  forget(cutoff) {
    for (const [nonce, ms] of this.nonces) {
      if (ms >= cutoff) return;
      this.nonces.delete(nonce);
    }
  }

  /**
   * Frame 0 for the next message to `connection` (frames 1..n), or with `batch` for the next batch (`frames` its one
   * frame, SPEC 3.3); throws while the connection has no channel.
   */
  sign(connection, frames, { batch = false } = {}) {
    const channel = this.channels.get(connection);
    if (!channel) throw new Error(`connection ${connection} has no channel: nothing can be signed for it yet`);
    channel.sent += 1n;
    return signMessage(this.key, batch ? 'h2p-batch' : 'h2p', channel.nonce, channel.sent, frames);
  }

  /** The channel of `connection` (its nonce and counters), or undefined. */
  channel(connection) {
    return this.channels.get(connection);
  }
}
