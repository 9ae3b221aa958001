// Replays protocol/fixtures/conversations in the page (SPEC 14.2): each client of a conversation is one WebSocket to
// the host's /zerobridge (SPEC 3.2), unkeyed; src/conversation.js reads the steps and matches the bodies, as the
// Node runner does over ZMTP.
import { ConversationTransport, FixtureFailure, Run, conversationFrom } from '/_zerobridge/conversation.js';
import { decodeWebSocketMessage, encodeWebSocketMessage } from '/_zerobridge/websocket-frames.js';
import { SUBPROTOCOL } from '/_zerobridge/browser.js';

class WebSockets extends ConversationTransport {
  constructor(endpoint, clients, autoPong) {
    super('host', autoPong);
    this.sockets = new Map();
    this.opened = Promise.all(clients.map((client) => new Promise((resolve, reject) => {
      const socket = new WebSocket(endpoint, SUBPROTOCOL);
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
        let frames;
        try {
          frames = decodeWebSocketMessage(new Uint8Array(event.data));
        } catch (error) {
          this.fail(new FixtureFailure(`client ${client}: the host sent a WebSocket message that is not frames: ${error.message}`));
          return;
        }
        this.queue(client, frames);
      };
      this.sockets.set(client, socket);
    })));
  }

  send(client, frames) {
    this.sockets.get(client).send(encodeWebSocketMessage(frames));
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

/** Runs one parsed conversation file against the host at `endpoint`; resolves with null, or the failure's message. */
export async function replay(value, file, endpoint) {
  const conversation = conversationFrom(value, file);
  const transport = new WebSockets(endpoint, conversation.clients, conversation.pings === 'auto');
  try {
    await transport.opened;
    await new Run(conversation, transport, null).run();
    return null;
  } catch (error) {
    return `${error.name}: ${error.message}`;
  } finally {
    transport.close();
  }
}
