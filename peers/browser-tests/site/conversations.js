// Replays protocol/fixtures/conversations in the page (SPEC 14.2): each client of a conversation is one WebSocket to
// the host's /zerobridge (SPEC 3.2), unkeyed, over batches when the host selects them (since 1.9: each message a
// batch of its own, each batch from the host read in order), or offering zerobridge.1 alone; src/conversation.js
// reads the steps and matches the bodies, as the Node runner does over ZMTP. And protocol/fixtures/websocket-frames.json, through the same check as
// Node's runner.
import { ConversationTransport, FixtureFailure, Run, conversationFrom } from '/_zerobridge/conversation.js';
import {
  BATCH_SUBPROTOCOL, SUBPROTOCOL, decodeWebSocketBatch, decodeWebSocketMessage, encodeWebSocketBatch, encodeWebSocketMessage,
} from '/_zerobridge/websocket-frames.js';
import { checkWebSocketFrameCase } from '/_zerobridge/websocket-frame-cases.js';

class WebSockets extends ConversationTransport {
  constructor(endpoint, clients, autoPong, offered) {
    super('host', autoPong);
    this.sockets = new Map();
    this.opened = Promise.all(clients.map((client) => new Promise((resolve, reject) => {
      const socket = new WebSocket(endpoint, offered);
      socket.binaryType = 'arraybuffer';
      socket.onopen = resolve;
      socket.onclose = (event) => {
        reject(new FixtureFailure(`client ${client}: the WebSocket closed (code ${event.code})`));
        this.closedEarly ??= event.code;
      };
      socket.onmessage = (event) => {
        if (typeof event.data === 'string') {
          this.fail(new FixtureFailure(`client ${client}: the host sent a text WebSocket message`));
          return;
        }
        let messages;
        try {
          messages = socket.protocol === BATCH_SUBPROTOCOL ? decodeWebSocketBatch(event.data) : [decodeWebSocketMessage(event.data)];
          for (const message of messages) if (message instanceof Error) throw message;
        } catch (error) {
          this.fail(new FixtureFailure(`client ${client}: the host sent a WebSocket message that is not frames: ${error.message}`));
          return;
        }
        for (const frames of messages) this.queue(client, frames);
      };
      this.sockets.set(client, socket);
    })));
  }

  send(client, frames) {
    const socket = this.sockets.get(client);
    socket.send(socket.protocol === BATCH_SUBPROTOCOL ? encodeWebSocketBatch([frames]) : encodeWebSocketMessage(frames));
  }

  /** The subprotocol each client's WebSocket got, by client. */
  get subprotocols() {
    return Object.fromEntries([...this.sockets].map(([client, socket]) => [client, socket.protocol]));
  }

  async restart() {
    throw new FixtureFailure('restart_host is not run in the page (it needs a host the runner can kill)');
  }

  close() {
    for (const socket of this.sockets.values()) {
      socket.onclose = null;
      socket.close();
    }
  }
}

/**
 * Runs one parsed conversation file against the host at `endpoint`, each client offering `batches` (SPEC 3.2) or
 * not; resolves with `{failure, subprotocols}`: null or the failure's message, and the subprotocol each client's
 * WebSocket got.
 */
export async function replay(value, file, endpoint, batches = true) {
  const conversation = conversationFrom(value, file);
  const offered = batches ? [BATCH_SUBPROTOCOL, SUBPROTOCOL] : [SUBPROTOCOL];
  const transport = new WebSockets(endpoint, conversation.clients, conversation.pings === 'auto', offered);
  try {
    await transport.opened;
    await new Run(conversation, transport, null).run();
    return { failure: null, subprotocols: transport.subprotocols };
  } catch (error) {
    return { failure: `${error.name}: ${error.message}`, subprotocols: transport.subprotocols };
  } finally {
    transport.close();
  }
}

/** Runs protocol/fixtures/websocket-frames.json's cases through the page's codec: `{name: failure message or null}`. */
export function checkWebSocketFrames(cases) {
  return Object.fromEntries(cases.map((fixtureCase) => {
    try {
      checkWebSocketFrameCase(fixtureCase);
      return [fixtureCase.name, null];
    } catch (error) {
      return [fixtureCase.name, `${error.name}: ${error.message}`];
    }
  }));
}
