// The ZMTP 3.1 DEALER against a real libzmq ROUTER (pyzmq in a child process), over tcp and ipc,
// and against raw servers that break the protocol.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { ZmtpDealer, ZmtpError, parseEndpoint } from '../src/zmtp.js';
import { PyRouter, transports, within, delay, stopAllProcesses } from '../test-helpers/processes.js';

after(stopAllProcesses); // a failed test must not leave a child process keeping the run alive

/** Messages a dealer receives, awaited one at a time. */
function inbox(dealer) {
  const messages = [];
  const waiters = [];
  dealer.on('message', (frames) => {
    const waiter = waiters.shift();
    if (waiter) waiter(frames);
    else messages.push(frames);
  });
  return (ms = 10_000) => within(
    messages.length ? Promise.resolve(messages.shift()) : new Promise((resolve) => waiters.push(resolve)),
    ms, 'a message on the dealer');
}

function connectedDealer(endpoint, options) {
  const dealer = new ZmtpDealer(endpoint, options);
  const connected = within(once(dealer, 'connect'), 10_000, `the handshake with ${endpoint}`);
  dealer.connect();
  return { dealer, connected };
}

for (const [transport, bindEndpoint] of Object.entries(transports)) {
  describe(`ZMTP DEALER <-> pyzmq ROUTER over ${transport}`, () => {
    const cleanups = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });

    test('handshakes and routes messages both ways with an explicit routing id', async () => {
      const router = await PyRouter.start(bindEndpoint());
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint, { routingId: 'node-dealer-1' });
      cleanups.push(() => dealer.close());
      const next = inbox(dealer);
      const [info] = await connected;
      assert.equal(info.socketType, 'ROUTER');
      assert.ok(dealer.connected);

      dealer.send(['hello', Buffer.from([0, 1, 2])]);
      const received = await router.receive();
      assert.deepEqual(received.map((f) => f.toString('hex')),
        [Buffer.from('node-dealer-1').toString('hex'), Buffer.from('hello').toString('hex'), '000102']);

      router.send([Buffer.from('node-dealer-1'), Buffer.from('back'), Buffer.alloc(0)]);
      const reply = await next();
      assert.deepEqual(reply.map(String), ['back', '']);
    });

    test('a turn that read a chunk ends with turnEnd, while what it wrote is still held for its one write', async () => {
      const router = await PyRouter.start(bindEndpoint());
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint, { routingId: 'turn-end' });
      cleanups.push(() => dealer.close());
      await connected;
      const corkedAtTurnEnd = [];
      let answered = false;
      dealer.on('message', ([body]) => {
        dealer.send([`answer to ${body}`]);
        answered = true;
      });
      dealer.on('turnEnd', () => {
        corkedAtTurnEnd.push(dealer.socket.writableCorked);
        if (answered) dealer.send(['kept back to the turn\'s end']);
        answered = false;
      });
      dealer.send(['here']); // the ROUTER knows the routing id once something came from it
      assert.deepEqual((await router.receive()).map(String), ['turn-end', 'here']);
      router.send([Buffer.from('turn-end'), Buffer.from('question')]);
      assert.deepEqual((await router.receive()).map(String), ['turn-end', 'answer to question']);
      assert.deepEqual((await router.receive()).map(String), ['turn-end', 'kept back to the turn\'s end']);
      assert.ok(corkedAtTurnEnd.length >= 1 && corkedAtTurnEnd.every((corked) => corked === 1), `corked at each turnEnd: ${corkedAtTurnEnd}`);
    });

    test('a dealer without a routing id gets one from the ROUTER and is answered through it', async () => {
      const router = await PyRouter.start(bindEndpoint());
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint);
      cleanups.push(() => dealer.close());
      const next = inbox(dealer);
      await connected;
      dealer.send(['ping?']);
      const [routingId, body] = await router.receive();
      assert.ok(routingId.length > 0, 'the ROUTER assigned a routing id');
      assert.equal(body.toString(), 'ping?');
      router.send([routingId, Buffer.from('pong!')]);
      assert.deepEqual((await next()).map(String), ['pong!']);
    });

    test('carries frames of 0, 255, 256 bytes and 1 MiB (short and long frames) intact both ways', async () => {
      const router = await PyRouter.start(bindEndpoint(), { echo: true });
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint);
      cleanups.push(() => dealer.close());
      const next = inbox(dealer);
      await connected;
      const sizes = [0, 1, 255, 256, 65_536, 1024 * 1024];
      for (const size of sizes) {
        const frame = randomBytes(size);
        dealer.send([frame]);
        const [echoed] = await next();
        assert.equal(echoed.length, size);
        assert.ok(echoed.equals(frame), `a ${size}-byte frame came back intact`);
      }
      const mixed = sizes.map((size) => randomBytes(size));
      dealer.send(mixed);
      const echoed = await next();
      assert.deepEqual(echoed.map((f) => f.length), sizes);
      mixed.forEach((frame, i) => assert.ok(echoed[i].equals(frame), `frame ${i} of a mixed message`));
      const event = await router.next((e) => e.event === 'echoed' && e.sizes.length === sizes.length);
      assert.deepEqual(event.sizes, sizes, 'the ROUTER saw the same frame sizes');
    });

    test('keeps a 50-frame message together and 1000 messages in order', async () => {
      const router = await PyRouter.start(bindEndpoint(), { echo: true });
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint);
      cleanups.push(() => dealer.close());
      const next = inbox(dealer);
      await connected;
      const frames = Array.from({ length: 50 }, (_, i) => Buffer.from(`frame-${i}`));
      dealer.send(frames);
      assert.deepEqual((await next()).map(String), frames.map(String));

      for (let i = 0; i < 1000; i += 1) dealer.send([`m${i}`, 'tail']);
      for (let i = 0; i < 1000; i += 1) assert.deepEqual((await next()).map(String), [`m${i}`, 'tail']);
    });

    test('answers the ROUTER\'s ZMTP PINGs with PONGs and outlives its heartbeat timeout', async () => {
      // libzmq drops a connection that sends nothing for HEARTBEAT_TIMEOUT after a PING; only PONGs keep it.
      const router = await PyRouter.start(bindEndpoint(), { heartbeatIvl: 50, heartbeatTimeout: 200 });
      cleanups.push(() => router.stop());
      const { dealer, connected } = connectedDealer(router.endpoint);
      cleanups.push(() => dealer.close());
      const next = inbox(dealer);
      let disconnects = 0;
      dealer.on('disconnect', () => { disconnects += 1; });
      await connected;
      await delay(1200); // six heartbeat timeouts of silence from the application
      assert.ok(dealer.pingsAnswered >= 5, `answered ${dealer.pingsAnswered} PINGs`);
      assert.equal(disconnects, 0, 'the connection never dropped');
      dealer.send(['still here']);
      const [routingId, body] = await router.receive();
      assert.equal(body.toString(), 'still here');
      router.send([routingId, Buffer.from('yes')]);
      assert.deepEqual((await next()).map(String), ['yes']);
      assert.equal(router.log.events.filter((e) => e.event === 'disconnected').length, 0, 'the ROUTER never saw a disconnect');
    });

    test('reconnects after the ROUTER restarts and sends what was queued meanwhile, in order', async () => {
      const first = await PyRouter.start(bindEndpoint());
      const endpoint = first.endpoint; // the same address (tcp port or ipc path) is bound again below
      const { dealer, connected } = connectedDealer(endpoint, { reconnectIvl: 20, reconnectIvlMax: 200 });
      cleanups.push(() => dealer.close());
      await connected;
      dealer.send(['before']);
      assert.equal((await first.receive())[1].toString(), 'before');

      const disconnected = within(once(dealer, 'disconnect'), 10_000, 'the dealer to notice the restart');
      await first.stop();
      await disconnected;
      assert.equal(dealer.connected, false);
      for (let i = 0; i < 5; i += 1) dealer.send([`queued-${i}`]);

      const reconnected = within(once(dealer, 'connect'), 10_000, 'the dealer to reconnect');
      const second = await PyRouter.start(endpoint);
      cleanups.push(() => second.stop());
      await reconnected;
      for (let i = 0; i < 5; i += 1) assert.equal((await second.receive())[1].toString(), `queued-${i}`);
    });
  });
}

/** A raw server that plays a broken ZMTP peer: `onConnection(socket)` decides what it sends. */
async function rawServer(transport, onConnection) {
  const server = net.createServer(onConnection);
  const connections = [];
  server.on('connection', (socket) => {
    connections.push(socket);
    socket.on('error', () => {});
  });
  let endpoint;
  if (transport === 'tcp') {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    endpoint = `tcp://127.0.0.1:${server.address().port}`;
  } else {
    endpoint = transports.ipc();
    server.listen(endpoint.slice('ipc://'.length));
    await once(server, 'listening');
  }
  return {
    endpoint,
    connections,
    close: () => {
      for (const socket of connections) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

function validGreeting(mechanism = 'NULL') {
  const greeting = Buffer.alloc(64);
  greeting[0] = 0xff;
  greeting[9] = 0x7f;
  greeting[10] = 3;
  greeting[11] = 1;
  greeting.write(mechanism, 12, 'ascii');
  return greeting;
}

function command(name, data = Buffer.alloc(0)) {
  const body = Buffer.concat([Buffer.from([name.length]), Buffer.from(name), data]);
  return Buffer.concat([Buffer.from([0x04, body.length]), body]);
}

function readyWith(socketType) {
  const name = Buffer.from('Socket-Type');
  const value = Buffer.from(socketType);
  const size = Buffer.alloc(4);
  size.writeUInt32BE(value.length);
  return command('READY', Buffer.concat([Buffer.from([name.length]), name, size, value]));
}

const brokenPeers = [
  ['sends garbage instead of a greeting', (socket) => socket.write('HTTP/1.1 400 Bad Request\r\n\r\n'), /invalid greeting/],
  ['sends a ZMTP 2.0 greeting', (socket) => {
    const greeting = validGreeting();
    greeting[10] = 1;
    socket.write(greeting.subarray(0, 12));
  }, /unsupported ZMTP version 1/],
  ['asks for the PLAIN mechanism', (socket) => socket.write(validGreeting('PLAIN')), /PLAIN/],
  ['sends frames with reserved flag bits', (socket) => socket.write(Buffer.concat([validGreeting(), Buffer.from([0xf0, 0x00])])), /reserved bits/],
  ['sends a message before READY', (socket) => socket.write(Buffer.concat([validGreeting(), Buffer.from([0x00, 0x01, 0x41])])), /before the handshake/],
  ['answers with an ERROR command', (socket) => socket.write(Buffer.concat([validGreeting(), command('ERROR', Buffer.from('\x0bgo away now'))])), /ERROR "go away now"/],
  ['claims to be a PUB socket', (socket) => socket.write(Buffer.concat([validGreeting(), readyWith('PUB')])), /cannot talk to a PUB/],
  ['sends truncated READY metadata', (socket) => socket.write(Buffer.concat([validGreeting(), command('READY', Buffer.from([11, 0x53]))])), /malformed READY/],
  ['announces a frame larger than allowed', (socket) => {
    const header = Buffer.alloc(9);
    header[0] = 0x02;
    header.writeBigUInt64BE(1n << 40n, 1);
    socket.write(Buffer.concat([validGreeting(), readyWith('ROUTER'), header]));
  }, /exceeds/, { handshakes: true }],
  ['says nothing at all', () => {}, /no ZMTP handshake .* within 300 ms/],
];

for (const transport of ['tcp', 'ipc']) {
  describe(`ZMTP DEALER against broken peers over ${transport}`, () => {
    for (const [what, behave, expected, { handshakes = false } = {}] of brokenPeers) {
      test(`reports a clear error and retries when the other side ${what}`, async () => {
        const server = await rawServer(transport, behave);
        const dealer = new ZmtpDealer(server.endpoint, { handshakeTimeout: 300, reconnectIvl: 10 });
        const errors = [];
        const twoErrors = within(new Promise((resolve) => {
          dealer.on('error', (error) => {
            errors.push(error);
            if (errors.length === 2) resolve();
          });
        }), 10_000, 'two connection errors');
        let connects = 0;
        dealer.on('connect', () => { connects += 1; });
        dealer.connect();
        try {
          await twoErrors; // a second attempt after the first failure: the dealer keeps going
          assert.ok(errors[0] instanceof ZmtpError);
          assert.match(errors[0].message, expected);
          if (handshakes) assert.equal(connects, 2, 'each attempt completed the handshake before the bad frame');
          else assert.equal(connects, 0, 'never reported a connection');
          assert.ok(server.connections.length >= 2, 'reconnected after the failure');
        } finally {
          await dealer.close();
          await server.close();
        }
      });
    }
  });
}

describe('ZMTP DEALER basics', () => {
  test('queues a bounded number of messages while disconnected', async () => {
    const dealer = new ZmtpDealer('tcp://127.0.0.1:1', { sendQueueLimit: 3 });
    dealer.connect();
    for (let i = 0; i < 3; i += 1) dealer.send([`m${i}`]);
    assert.throws(() => dealer.send(['one too many']), (error) => error instanceof ZmtpError && error.code === 'EAGAIN');
    await dealer.close();
    assert.throws(() => dealer.send(['after close']), (error) => error.code === 'ECLOSED');
  });

  test('rejects frames that are not bytes and empty messages', async () => {
    const dealer = new ZmtpDealer('tcp://127.0.0.1:1');
    assert.throws(() => dealer.send([]), TypeError);
    assert.throws(() => dealer.send([42]), TypeError);
    assert.throws(() => new ZmtpDealer('tcp://127.0.0.1:1', { routingId: Buffer.from([0, 1]) }), TypeError);
    await dealer.close();
  });

  test('parses tcp and ipc endpoints and refuses others with the endpoint in the message', () => {
    assert.deepEqual(parseEndpoint('tcp://127.0.0.1:5555'), { transport: 'tcp', host: '127.0.0.1', port: 5555 });
    assert.deepEqual(parseEndpoint('tcp://[::1]:80'), { transport: 'tcp', host: '::1', port: 80 });
    assert.deepEqual(parseEndpoint('tcp://localhost:1'), { transport: 'tcp', host: 'localhost', port: 1 });
    assert.deepEqual(parseEndpoint('ipc:///tmp/x.sock'), { transport: 'ipc', path: '/tmp/x.sock' });
    assert.deepEqual(parseEndpoint('ipc://@abstract'), { transport: 'ipc', path: '\0abstract' });
    for (const bad of ['tcp://127.0.0.1', 'tcp://*:5555', 'tcp://h:0', 'tcp://h:70000', 'inproc://x', 'ipc://', '127.0.0.1:5', '']) {
      assert.throws(() => parseEndpoint(bad), (error) => error instanceof TypeError && error.message.includes(JSON.stringify(bad).slice(1, -1)), bad);
    }
  });
});
