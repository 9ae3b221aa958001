// A scripted host for the peer's tests: a pyzmq ROUTER whose every move the test makes by hand, so
// that tests can play a host that is silent, slow, rude or broken.

import { PyRouter } from './processes.js';

export class FakeHost {
  static async start(bindEndpoint, options) {
    return new FakeHost(await PyRouter.start(bindEndpoint, options));
  }

  constructor(router) {
    this.router = router;
    this.endpoint = router.endpoint;
    this.routingId = null; // of the last peer heard from
  }

  /** The next message whose body matches `predicate`: `{ routingId, body, frames }` (others stay queued). */
  async next(predicate = () => true, ms = 10_000, what = 'a matching message') {
    const decode = (event) => {
      const frames = event.frames.map((f) => Buffer.from(f, 'base64'));
      let body = null;
      try {
        body = JSON.parse(frames[2].toString('utf8'));
      } catch {
        // not JSON: only a predicate that looks at raw frames can match it
      }
      return { routingId: frames[0], signature: frames[1], body, frames: frames.slice(1) };
    };
    const event = await this.router.next((e) => e.event === 'recv' && predicate(decode(e).body, decode(e)), ms, what);
    const message = decode(event);
    this.routingId = message.routingId;
    return message;
  }

  nextOfType(type, ms) {
    return this.next((body) => body?.type === type, ms, `a ${type}`);
  }

  /** Sends a body (an object, or a string/Buffer taken as raw body bytes) with an empty signature. */
  send(body, { routingId = this.routingId, attachments = [] } = {}) {
    const bytes = typeof body === 'string' || Buffer.isBuffer(body) ? Buffer.from(body) : Buffer.from(JSON.stringify(body));
    this.router.send([routingId, Buffer.alloc(0), bytes, ...attachments]);
  }

  /** Sends exactly these frames after the routing id. */
  sendFrames(frames, routingId = this.routingId) {
    this.router.send([routingId, ...frames]);
  }

  welcomeBody(overrides = {}) {
    return {
      v: 1,
      type: 'welcome',
      host: 'fake',
      session: `s-${Math.random().toString(16).slice(2, 10)}`,
      actions: ['echo'],
      heartbeat_ms: 5000,
      limits: { max_message_bytes: 1048576, max_in_flight: 256 },
      ...overrides,
    };
  }

  /**
   * Waits for a hello and answers it with a welcome; returns the hello body once the peer has taken
   * the welcome (a ping sent after it is answered), since a peer that lost its host refuses calls until
   * it is welcomed again. A peer that meanwhile says hello on a fresh connection is welcomed there.
   */
  async welcome(overrides = {}) {
    let hello = await this.nextOfType('hello');
    for (;;) {
      this.send(this.welcomeBody(overrides));
      this.send({ v: 1, type: 'ping' });
      const { routingId } = hello;
      const reply = await this.next((body, message) => body?.type === 'hello' || (body?.type === 'pong' && message.routingId.equals(routingId)),
        10_000, 'the pong that shows the welcome was taken');
      if (reply.body.type === 'pong') return hello.body;
      hello = reply;
    }
  }

  stop() {
    return this.router.stop();
  }
}
