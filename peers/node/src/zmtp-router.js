// A ZMTP 3.1 ROUTER that binds and accepts DEALERs (NULL mechanism), built on the DEALER's connection code in
// zmtp.js. It is what the fixture runner binds to play the host against a peer (src/fixtures.js); the peer
// library itself never needs it.

import net from 'node:net';
import { EventEmitter, once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { ZmtpDealer, parseEndpoint } from './zmtp.js';

/**
 * A ROUTER socket: `bind(endpoint)` (tcp://host:port with port `*` or 0 for any, or ipc:///path) resolves with the
 * endpoint actually bound. Events: `message` (routingId: Buffer, frames: Buffer[]), `connect` / `disconnect`
 * (routingId). Each accepted connection gets a fresh 5-byte routing id, as libzmq gives one.
 */
export class ZmtpRouter extends EventEmitter {
  constructor() {
    super();
    this.server = null;
    this.connections = new Map(); // routing id (hex) -> connection
    this.endpoint = null;
    this.ipcPath = null;
  }

  async bind(endpoint) {
    if (this.server) throw new Error('this ROUTER is already bound');
    const wildcard = endpoint.replace(/:\*$/, ':0');
    const address = parseEndpoint(wildcard.replace(/:0$/, ':1')); // parseEndpoint wants a concrete port
    const server = net.createServer((socket) => this.accept(socket));
    this.server = server;
    if (address.transport === 'tcp') {
      const port = Number(/:(\d+)$/.exec(wildcard)[1]);
      server.listen({ host: address.host, port });
      await once(server, 'listening');
      const bound = server.address();
      const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
      this.endpoint = `tcp://${host}:${bound.port}`;
    } else {
      server.listen({ path: address.path });
      await once(server, 'listening');
      this.ipcPath = address.path.startsWith('\0') ? null : address.path;
      this.endpoint = endpoint;
    }
    return this.endpoint;
  }

  accept(socket) {
    const routingId = Buffer.concat([Buffer.from([0]), randomBytes(4)]);
    const key = routingId.toString('hex');
    const connection = new ZmtpDealer(this.endpoint, { socketType: 'ROUTER' });
    this.connections.set(key, connection);
    connection.on('connect', () => this.emit('connect', routingId));
    connection.on('message', (frames) => this.emit('message', routingId, frames));
    connection.on('error', () => {}); // a broken connection is dropped; the DEALER redials
    connection.on('disconnect', () => {
      this.connections.delete(key);
      this.emit('disconnect', routingId);
    });
    socket.on('close', () => this.connections.delete(key));
    connection.adopt(socket);
  }

  /** Sends frames to the connection with this routing id; returns false (sending nothing) when it is gone, as ROUTER does. */
  send(routingId, frames) {
    const connection = this.connections.get(Buffer.from(routingId).toString('hex'));
    if (!connection || connection.state === 'closed') return false;
    connection.send(frames);
    return true;
  }

  async close() {
    const server = this.server;
    if (!server) return;
    this.server = null;
    const closed = new Promise((resolve) => server.close(resolve));
    await Promise.all([...this.connections.values()].map((connection) => connection.close(0)));
    this.connections.clear();
    await closed;
    if (this.ipcPath) {
      try { unlinkSync(this.ipcPath); } catch { /* already gone */ }
    }
  }
}
