// CURVE (ZeroMQ RFC 26) for the Node ZMTP DEALER: the NaCl primitives in src/curve.js against published
// vectors, and the client handshake against a scripted server and against real libzmq (pyzmq).

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import {
  hsalsa20, xsalsa20Xor, poly1305, secretbox, secretboxOpen, box, boxOpen, boxBeforenm, x25519, publicKeyOf,
  generateKeyPair, z85Encode, z85Decode, curveKey, curveKeyPair,
} from '../src/curve.js';
import { ZmtpDealer } from '../src/zmtp.js';
import { transports, within } from '../test-helpers/processes.js';
import { FakeCurveServer, startCurveRouter, stopCurveProcesses } from '../test-helpers/curve.js';

after(stopCurveProcesses); // a failed test must not leave a child process keeping the run alive

const PATIENCE = 30_000; // generous bounds for a loaded 2-core machine; every wait ends on its condition

const hex = (text) => Buffer.from(text.replace(/[\s,]|0x/g, ''), 'hex');

// "Cryptography in NaCl" (D. J. Bernstein) and RFC 7748 section 6.1: Alice and Bob.
const aliceSecret = hex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
const alicePublic = hex('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a');
const bobSecret = hex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb');
const bobPublic = hex('de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f');
const sharedPoint = hex('4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742');
// NaCl's tests/core1 (HSalsa20 of the shared point), the key of tests/stream and tests/box.
const firstKey = hex('1b27556473e985d462cd51197a9a46c76009549eac6474f206c4ee0844f68389');
const naclNonce = hex('69696ee955b62b73cd62bda875fc73d68219e0036b7a0b37');
// NaCl's tests/box: the 131-byte message and the box (tag + ciphertext) Alice makes for Bob.
const naclMessage = hex(`
  be075fc53c81f2d5cf141316ebeb0c7b5228c52a4c62cbd44b66849b64244ffce5ecbaaf33bd751a1ac728d45e6c61296cdc3c01233561f41db66cce314adb310e3be8250c46f06dceea3a7fa1348057e2f6556ad6b1318a024a838f21af1fde048977eb48f59ffd4924ca1c60902e52f0a089bc76897040e082f937763848645e0705`);
const naclBox = hex(`
  f3ffc7703f9400e52a7dfb4b3d3305d98e993b9f48681273c29650ba32fc76ce48332ea7164d96a4476fb8c531a1186a
  c0dfc17c98dce87b4da7f011ec48c97271d2c20f9b928fe2270d6fb863d51738b48eeee314a7cc8ab932164548e526ae
  90224368517acfeabd6bb3732bc0e9da99832b61ca01b6de56244a9e88d5f9b37973f622a43d14a6599b1f654cb45a74e355a5`);

describe('the NaCl primitives (src/curve.js) against published vectors', () => {
  test('X25519 through node:crypto: RFC 7748 section 6.1 (public keys and the shared secret both ways)', () => {
    assert.deepEqual(publicKeyOf(aliceSecret), alicePublic);
    assert.deepEqual(publicKeyOf(bobSecret), bobPublic);
    assert.deepEqual(x25519(aliceSecret, bobPublic), sharedPoint);
    assert.deepEqual(x25519(bobSecret, alicePublic), sharedPoint);
  });

  test('X25519: RFC 7748 section 5.2, first vector', () => {
    const scalar = hex('a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4');
    const u = hex('e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c');
    assert.deepEqual(x25519(scalar, u), hex('c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552'));
  });

  test('HSalsa20: NaCl core1 (the box key of Alice and Bob)', () => {
    assert.deepEqual(hsalsa20(sharedPoint, Buffer.alloc(16)), firstKey);
    assert.deepEqual(boxBeforenm(bobPublic, aliceSecret), firstKey);
    assert.deepEqual(boxBeforenm(alicePublic, bobSecret), firstKey);
  });

  test('XSalsa20: NaCl stream (SHA-256 of the first 4 MiB of key stream)', () => {
    const stream = xsalsa20Xor(firstKey, naclNonce, Buffer.alloc(4_194_304));
    assert.equal(createHash('sha256').update(stream).digest('hex'), '662b9d0e3463029156069b12f918691a98f7dfb2ca0393c96bbfc6b1fbd630a2');
  });

  test('XSalsa20 is its own inverse and any prefix of the stream is the same stream', () => {
    const data = randomBytes(1000);
    const encrypted = xsalsa20Xor(firstKey, naclNonce, data);
    assert.deepEqual(xsalsa20Xor(firstKey, naclNonce, encrypted), data);
    assert.deepEqual(xsalsa20Xor(firstKey, naclNonce, data.subarray(0, 77)), encrypted.subarray(0, 77));
  });

  test('Poly1305: RFC 8439 section 2.5.2 and the "Jabberwocky" vector (A.3 #4)', () => {
    assert.equal(poly1305(hex('85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b'),
      Buffer.from('Cryptographic Forum Research Group')).toString('hex'), 'a8061dc1305136c6c22b8baf0c0127a9');
    const jabberwocky = Buffer.from("'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\n"
      + 'All mimsy were the borogoves,\nAnd the mome raths outgrabe.');
    assert.equal(poly1305(hex('1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0'), jabberwocky).toString('hex'),
      '4541669a7eaaee61e708dc7cbcc5eb62');
  });

  test('Poly1305: RFC 8439 appendix A.3 edge cases #1 and #5-#11 (reduction and carries)', () => {
    const zero16 = '00000000000000000000000000000000';
    const cases = [
      [zero16 + zero16, zero16.repeat(4), zero16],
      ['02' + '00'.repeat(15) + zero16, 'ff'.repeat(16), '03' + '00'.repeat(15)],
      ['02' + '00'.repeat(15) + 'ff'.repeat(16), '02' + '00'.repeat(15), '03' + '00'.repeat(15)],
      ['01' + '00'.repeat(15) + zero16, 'ff'.repeat(16) + 'f0' + 'ff'.repeat(15) + '11' + '00'.repeat(15), '05' + '00'.repeat(15)],
      ['01' + '00'.repeat(15) + zero16, 'ff'.repeat(16) + 'fb' + 'fe'.repeat(15) + '01'.repeat(16), zero16],
      ['02' + '00'.repeat(15) + zero16, 'fd' + 'ff'.repeat(15), 'fa' + 'ff'.repeat(15)],
      ['0100000000000000040000000000000000000000000000000000000000000000',
        'e33594d7505e43b900000000000000003394d7505e4379cd010000000000000000000000000000000000000000000000'
        + '01000000000000000000000000000000', '14000000000000005500000000000000'],
      ['0100000000000000040000000000000000000000000000000000000000000000',
        'e33594d7505e43b900000000000000003394d7505e4379cd010000000000000000000000000000000000000000000000',
        '13000000000000000000000000000000'],
    ];
    for (const [key, message, tag] of cases) {
      assert.equal(poly1305(hex(key), hex(message)).toString('hex'), tag, `key ${key}`);
    }
  });

  test('Poly1305 agrees with a BigInt transcription of its definition on random keys and lengths', () => {
    const p = (1n << 130n) - 5n;
    const le = (bytes) => bytes.reduceRight((acc, b) => (acc << 8n) | BigInt(b), 0n);
    const reference = (key, message) => {
      const r = le(key.subarray(0, 16)) & 0x0ffffffc0ffffffc0ffffffc0fffffffn;
      let h = 0n;
      for (let at = 0; at < message.length; at += 16) {
        const chunk = message.subarray(at, at + 16);
        h = ((h + le(chunk) + (1n << BigInt(8 * chunk.length))) * r) % p;
      }
      let tag = (h + le(key.subarray(16))) & ((1n << 128n) - 1n);
      const out = Buffer.alloc(16);
      for (let i = 0; i < 16; i++, tag >>= 8n) out[i] = Number(tag & 0xffn);
      return out;
    };
    for (let i = 0; i < 300; i++) {
      const key = i % 10 === 0 ? Buffer.alloc(32, 0xff) : randomBytes(32);
      const message = i % 7 === 0 ? Buffer.alloc(i, 0xff) : randomBytes(i % 150);
      assert.deepEqual(poly1305(key, message), reference(key, message), `length ${message.length}`);
    }
  });

  test('crypto_box: NaCl tests/box (Alice to Bob), opened by Bob, and the precomputed-key path agrees', () => {
    assert.deepEqual(box(naclMessage, naclNonce, bobPublic, aliceSecret), naclBox);
    assert.deepEqual(secretbox(naclMessage, naclNonce, firstKey), naclBox);
    assert.deepEqual(boxOpen(naclBox, naclNonce, alicePublic, bobSecret), naclMessage);
    assert.deepEqual(secretboxOpen(naclBox, naclNonce, firstKey), naclMessage);
    // The tag is NaCl's tests/onetimeauth vector: Poly1305 under the first 32 bytes of key stream.
    const authKey = xsalsa20Xor(firstKey, naclNonce, Buffer.alloc(32));
    assert.deepEqual(poly1305(authKey, naclBox.subarray(16)), naclBox.subarray(0, 16));
  });

  test('crypto_box refuses a small-order public key (NaCl / libsodium tests/box)', () => {
    const smallOrder = hex('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800');
    assert.throws(() => box(naclMessage, naclNonce, smallOrder, aliceSecret), RangeError);
    assert.equal(boxOpen(naclBox, naclNonce, smallOrder, bobSecret), null);
    assert.equal(boxOpen(naclBox, naclNonce, Buffer.alloc(32), bobSecret), null);
  });

  test('boxes round-trip at every size class (empty, one block, > 64 KiB) with fresh key pairs', () => {
    const alice = generateKeyPair();
    const bob = generateKeyPair();
    for (const size of [0, 1, 31, 32, 33, 63, 64, 65, 1000, 70_000]) {
      const message = randomBytes(size);
      const nonce = randomBytes(24);
      const sealed = box(message, nonce, bob.publicKey, alice.secretKey);
      assert.equal(sealed.length, size + 16);
      assert.deepEqual(boxOpen(sealed, nonce, alice.publicKey, bob.secretKey), message);
    }
  });

  test('a box altered anywhere, or opened with another nonce or key, does not open', () => {
    const alice = generateKeyPair();
    const bob = generateKeyPair();
    const eve = generateKeyPair();
    const nonce = randomBytes(24);
    const message = Buffer.from('attack at dawn, bring the 64 zero bytes and the cookie');
    const sealed = box(message, nonce, bob.publicKey, alice.secretKey);
    for (let i = 0; i < sealed.length; i++) {
      for (const bit of [0x01, 0x80]) {
        const tampered = Buffer.from(sealed);
        tampered[i] ^= bit;
        assert.equal(boxOpen(tampered, nonce, alice.publicKey, bob.secretKey), null, `byte ${i} bit ${bit}`);
      }
    }
    assert.equal(boxOpen(sealed.subarray(0, sealed.length - 1), nonce, alice.publicKey, bob.secretKey), null);
    assert.equal(boxOpen(sealed.subarray(0, 15), nonce, alice.publicKey, bob.secretKey), null);
    const otherNonce = Buffer.from(nonce);
    otherNonce[23] ^= 1;
    assert.equal(boxOpen(sealed, otherNonce, alice.publicKey, bob.secretKey), null);
    assert.equal(boxOpen(sealed, nonce, eve.publicKey, bob.secretKey), null, 'not from Eve');
    assert.equal(boxOpen(sealed, nonce, alice.publicKey, eve.secretKey), null, 'not for Eve');
  });

  test('Z85: the RFC 32 test case, round trips, and malformed text refused', () => {
    assert.equal(z85Encode(hex('864fd26fb559f75b')), 'HelloWorld');
    assert.deepEqual(z85Decode('HelloWorld'), hex('864fd26fb559f75b'));
    assert.equal(z85Encode(Buffer.alloc(0)), '');
    assert.equal(z85Encode(Buffer.alloc(4)), '00000');
    assert.equal(z85Encode(Buffer.alloc(4, 0xff)), '%nSc0');
    for (let i = 0; i < 50; i++) {
      const data = randomBytes(4 * (i % 12));
      assert.deepEqual(z85Decode(z85Encode(data)), data);
    }
    assert.throws(() => z85Encode(Buffer.alloc(3)), RangeError);
    assert.throws(() => z85Decode('Hell'), RangeError);
    assert.throws(() => z85Decode('Hello Worl'), RangeError, 'a space is not Z85');
    assert.throws(() => z85Decode('Hello\u00e9orld'), RangeError);
    assert.throws(() => z85Decode('%nSc1'), RangeError, 'more than 32 bits');
  });

  test('CURVE keys: Z85 key pairs like zmq_curve_keypair(), and curveKey() takes Z85 or 32 bytes only', () => {
    const pair = curveKeyPair();
    assert.equal(pair.publicKey.length, 40);
    assert.equal(pair.secretKey.length, 40);
    assert.deepEqual(publicKeyOf(z85Decode(pair.secretKey)), z85Decode(pair.publicKey));
    assert.deepEqual(curveKey(pair.publicKey), z85Decode(pair.publicKey));
    assert.deepEqual(curveKey(new Uint8Array(32).fill(7)), Buffer.alloc(32, 7));
    assert.throws(() => curveKey(pair.publicKey.slice(1)), TypeError);
    assert.throws(() => curveKey(Buffer.alloc(31)), TypeError);
    assert.throws(() => curveKey(undefined, 'curve.serverKey'), /curve\.serverKey/);
  });
});

// --- the client handshake --------------------------------------------------------------------

/** Resolves once `check()` is truthy (re-checked every 10 ms), or fails naming `what` after `ms`. */
function eventually(check, what, ms = PATIENCE) {
  return within(new Promise((resolve) => {
    const poll = () => {
      const value = check();
      if (value) resolve(value);
      else setTimeout(poll, 10);
    };
    poll();
  }), ms, what);
}

/** A dealer that records what it reports: `messages`, `errors`, `connects`. */
function recordingDealer(endpoint, options) {
  const dealer = new ZmtpDealer(endpoint, { reconnectIvl: 50, reconnectIvlMax: 500, ...options });
  dealer.messages = [];
  dealer.errors = [];
  dealer.connects = [];
  dealer.on('message', (frames) => dealer.messages.push(frames));
  dealer.on('error', (error) => dealer.errors.push(error));
  dealer.on('connect', (info) => dealer.connects.push(info));
  return dealer;
}

const strings = (frames) => frames.map((f) => f.toString());

describe('the CURVE client handshake (src/zmtp.js) against a scripted CurveZMQ server', () => {
  const server = curveKeyPair();
  const client = curveKeyPair();
  const cleanups = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  async function setUp(options = {}, dealerOptions = {}) {
    const fake = await FakeCurveServer.start({ secretKey: server.secretKey, publicKey: server.publicKey, ...options });
    cleanups.push(() => fake.close());
    const dealer = recordingDealer(fake.endpoint, { curve: { serverKey: server.publicKey, ...client }, ...dealerOptions });
    cleanups.push(() => dealer.close(0));
    return { fake, dealer };
  }

  test('HELLO, WELCOME, INITIATE (vouching for our key, DEALER metadata), READY, then MESSAGE boxes both ways', async () => {
    const { fake, dealer } = await setUp({}, { routingId: 'curve-1' });
    const ready = fake.nextReady();
    dealer.connect();
    dealer.send(['queued before the handshake']);
    const connection = await ready;
    await eventually(() => dealer.connects.length === 1, 'the connect event');
    assert.equal(dealer.connects[0].mechanism, 'CURVE');
    assert.equal(dealer.connects[0].socketType, 'ROUTER');

    const [greeting, hello, initiate] = connection.log;
    assert.deepEqual(greeting, { kind: 'greeting', mechanism: 'CURVE' });
    assert.equal(hello.name, 'HELLO');
    assert.equal(hello.size, 200);
    assert.deepEqual(hello.version, [1, 0]);
    assert.deepEqual(hello.padding, Buffer.alloc(72));
    assert.equal(hello.nonce, 1n);
    assert.ok(hello.signatureOpens, 'the HELLO signature is Box[64 zeros](C\'->S)');
    assert.equal(initiate.name, 'INITIATE');
    assert.equal(initiate.nonce, 2n);
    assert.ok(initiate.vouched, 'the vouch is Box[C\' + S](C->S\')');
    assert.equal(initiate.metadata['Socket-Type'].toString(), 'DEALER');
    assert.equal(initiate.metadata.Identity.toString(), 'curve-1');
    assert.equal(z85Encode(connection.clientKey), client.publicKey);
    assert.equal(dealer.curvePublicKey, client.publicKey);

    const big = randomBytes(70_000);
    dealer.send(['a', '', big]);
    await eventually(() => connection.log.filter((e) => e.kind === 'message').length === 4, 'four sealed frames');
    const sealed = connection.log.filter((e) => e.kind === 'message');
    assert.deepEqual(sealed.map((e) => e.nonce), [3n, 4n, 5n, 6n], 'short nonces keep increasing after INITIATE');
    assert.deepEqual(sealed.map((e) => e.flags), [0, 1, 1, 0], 'MORE travels inside the box');
    assert.equal(sealed[0].payload.toString(), 'queued before the handshake');
    assert.deepEqual(sealed[3].payload, big);

    connection.sendMessage(['x', '', 'z']);
    await eventually(() => dealer.messages.length === 1, 'a message from the server');
    assert.deepEqual(strings(dealer.messages[0]), ['x', '', 'z']);
    assert.deepEqual(dealer.errors, []);
  });

  test('without a secretKey the dealer makes its own key pair; without a routing id, no Identity is sent', async () => {
    const fake = await FakeCurveServer.start({ secretKey: server.secretKey, publicKey: server.publicKey });
    cleanups.push(() => fake.close());
    const dealer = recordingDealer(fake.endpoint, { curve: { serverKey: z85Decode(server.publicKey) } });
    cleanups.push(() => dealer.close(0));
    const ready = fake.nextReady();
    dealer.connect();
    const connection = await ready;
    assert.notEqual(dealer.curvePublicKey, client.publicKey);
    assert.equal(z85Encode(connection.clientKey), dealer.curvePublicKey);
    assert.deepEqual(Object.keys(connection.metadata), ['Socket-Type']);
  });

  test('a server that cannot prove the pinned key is refused (EAUTH): no INITIATE, nothing queued is sent', async () => {
    const impostor = curveKeyPair();
    const { fake, dealer } = await setUp({ impostorSecretKey: impostor.secretKey });
    dealer.connect();
    dealer.send(['for the real host only']);
    await eventually(() => dealer.errors.length >= 2, 'two refused attempts');
    for (const error of dealer.errors) {
      assert.equal(error.code, 'EAUTH');
      assert.match(error.message, /could not prove it holds the secret key of curve\.serverKey/);
    }
    assert.equal(dealer.connects.length, 0);
    assert.equal(dealer.connected, false);
    for (const connection of fake.connections.slice(0, 2)) {
      await within(connection.closed, PATIENCE, 'the refused connection to close');
      assert.deepEqual(connection.log.map((e) => e.name ?? e.kind), ['greeting', 'HELLO'], 'only the greeting and HELLO were sent');
    }
  });

  test('an ERROR after HELLO is surfaced with its reason (EREFUSED), and nothing more is sent', async () => {
    const { fake, dealer } = await setUp({ errorAfter: 'hello', errorReason: 'go away' });
    dealer.connect();
    dealer.send(['never']);
    await eventually(() => dealer.errors.length >= 1, 'the refusal');
    assert.equal(dealer.errors[0].code, 'EREFUSED');
    assert.equal(dealer.errors[0].reason, 'go away');
    assert.match(dealer.errors[0].message, /ERROR "go away"/);
    await within(fake.connections[0].closed, PATIENCE, 'the refused connection to close');
    assert.deepEqual(fake.connections[0].log.map((e) => e.name ?? e.kind), ['greeting', 'HELLO']);
  });

  test('an ERROR after INITIATE (a refused client key) is surfaced, and no message is sent', async () => {
    const { fake, dealer } = await setUp({ errorAfter: 'initiate', errorReason: '400' });
    dealer.connect();
    dealer.send(['never']);
    await eventually(() => dealer.errors.length >= 1, 'the refusal');
    assert.equal(dealer.errors[0].code, 'EREFUSED');
    assert.equal(dealer.errors[0].reason, '400');
    await within(fake.connections[0].closed, PATIENCE, 'the refused connection to close');
    assert.deepEqual(fake.connections[0].log.map((e) => e.name ?? e.kind), ['greeting', 'HELLO', 'INITIATE']);
    assert.equal(dealer.connects.length, 0);
  });

  test('a server that closes after our INITIATE refused our key (EREFUSED), and the error names it', async () => {
    const { fake, dealer } = await setUp({ closeAfterInitiate: true });
    dealer.connect();
    await eventually(() => dealer.errors.length >= 1, 'the refusal');
    assert.equal(dealer.errors[0].code, 'EREFUSED');
    assert.ok(dealer.errors[0].message.includes(`it did not accept our key ${client.publicKey}`), dealer.errors[0].message);
    assert.deepEqual(fake.connections[0].log.map((e) => e.name ?? e.kind), ['greeting', 'HELLO', 'INITIATE']);
    assert.equal(dealer.connects.length, 0);
  });

  test('a MESSAGE whose short nonce does not increase drops the connection (EPROTO); what came before is delivered', async () => {
    const { fake, dealer } = await setUp();
    let ready = fake.nextReady();
    dealer.connect();
    let connection = await ready;
    ready = fake.nextReady(); // the dealer redials after each failure
    connection.sendBox(0, Buffer.from('one'), { nonce: 5 });
    connection.sendBox(0, Buffer.from('replayed'), { nonce: 5 });
    await eventually(() => dealer.errors.length === 1, 'the replay to be refused');
    assert.equal(dealer.errors[0].code, 'EPROTO');
    assert.match(dealer.errors[0].message, /short nonce 5 after 5/);
    await within(connection.closed, PATIENCE, 'the connection to drop');

    connection = await ready;
    connection.sendBox(0, Buffer.from('two'), { nonce: 7 });
    connection.sendBox(0, Buffer.from('older'), { nonce: 6 });
    await eventually(() => dealer.errors.length === 2, 'the lower nonce to be refused');
    assert.match(dealer.errors[1].message, /short nonce 6 after 7/);
    await within(connection.closed, PATIENCE, 'the connection to drop');
    assert.deepEqual(dealer.messages.map(strings), [['one'], ['two']]);
  });

  test('a MESSAGE box that does not open (altered) drops the connection (EAUTH) and delivers nothing of it', async () => {
    const { fake, dealer } = await setUp();
    const ready = fake.nextReady();
    dealer.connect();
    const connection = await ready;
    connection.sendMessage(['intact']);
    connection.sendBox(0, Buffer.from('altered on the way'), { tamper: true });
    await eventually(() => dealer.errors.length === 1, 'the altered box to be refused');
    assert.equal(dealer.errors[0].code, 'EAUTH');
    assert.match(dealer.errors[0].message, /does not open/);
    await within(connection.closed, PATIENCE, 'the connection to drop');
    assert.deepEqual(dealer.messages.map(strings), [['intact']]);
  });

  test('after the handshake a clear-text frame is refused, and a sealed ERROR command is surfaced', async () => {
    const { fake, dealer } = await setUp();
    let ready = fake.nextReady();
    dealer.connect();
    let connection = await ready;
    ready = fake.nextReady();
    connection.sendRaw(Buffer.from([0, 5, ...Buffer.from('plain')]));
    await eventually(() => dealer.errors.length === 1, 'the clear frame to be refused');
    assert.equal(dealer.errors[0].code, 'EPROTO');
    assert.match(dealer.errors[0].message, /other than a CURVE MESSAGE/);
    await within(connection.closed, PATIENCE, 'the connection to drop');

    connection = await ready;
    connection.sendBox(0x02, Buffer.concat([Buffer.from('\x05ERROR\x0bshutting up', 'latin1')]));
    await eventually(() => dealer.errors.length === 2, 'the sealed ERROR');
    assert.equal(dealer.errors[1].code, 'EREFUSED');
    assert.equal(dealer.errors[1].reason, 'shutting up');
    assert.deepEqual(dealer.messages, []);
  });

  test('a server that closes after our HELLO (wrong pinned key) is reported once per attempt; closing then stays closed', async () => {
    const other = curveKeyPair();
    const fake = await FakeCurveServer.start({ secretKey: server.secretKey, publicKey: server.publicKey });
    cleanups.push(() => fake.close());
    const dealer = recordingDealer(fake.endpoint, { curve: { serverKey: other.publicKey, ...client } });
    cleanups.push(() => dealer.close(0));
    const closed = new Promise((resolve) => dealer.once('close', resolve)); // events.once would reject on 'error'
    dealer.once('error', () => dealer.close(0)); // as a caller giving up on a host that is not the one it pinned
    dealer.connect();
    await within(closed, PATIENCE, 'the dealer to close');
    assert.equal(dealer.errors.length, 1);
    assert.equal(dealer.errors[0].code, 'EAUTH');
    assert.ok(dealer.errors[0].message.includes(`closed the connection after our CURVE HELLO: is curve.serverKey ${other.publicKey} its key?`),
      dealer.errors[0].message);
    assert.equal(dealer.state, 'closed', 'no redial after close() from the error listener');
    assert.equal(fake.connections.length, 1);
    assert.deepEqual(fake.connections[0].log.map((e) => e.name ?? e.kind), ['greeting', 'HELLO']);
    assert.equal(fake.connections[0].log[1].signatureOpens, false);
  });

  test('a server offering another mechanism (NULL) is refused with only our greeting sent', async () => {
    const { fake, dealer } = await setUp({ mechanism: 'NULL' });
    dealer.connect();
    dealer.send(['never in plaintext']);
    await eventually(() => dealer.errors.length >= 1, 'the refusal');
    assert.equal(dealer.errors[0].code, 'EAUTH');
    assert.match(dealer.errors[0].message, /"NULL" security mechanism, not CURVE/);
    await within(fake.connections[0].closed, PATIENCE, 'the connection to drop');
    assert.deepEqual(fake.connections[0].log.map((e) => e.name ?? e.kind), ['greeting']);
  });

  test('bad curve options are refused when the socket is made', () => {
    const endpoint = 'tcp://127.0.0.1:1';
    assert.throws(() => new ZmtpDealer(endpoint, { curve: {} }), /curve\.serverKey must be/);
    assert.throws(() => new ZmtpDealer(endpoint, { curve: { serverKey: 'short' } }), /40 Z85 characters/);
    assert.throws(() => new ZmtpDealer(endpoint, { curve: { serverKey: server.publicKey, publicKey: client.publicKey } }),
      /needs its curve\.secretKey/);
    assert.throws(() => new ZmtpDealer(endpoint, { curve: { serverKey: server.publicKey, publicKey: server.publicKey, secretKey: client.secretKey } }),
      /not the public key of curve\.secretKey/);
    assert.throws(() => new ZmtpDealer(endpoint, { curve: { serverKey: server.publicKey }, socketType: 'ROUTER' }), /client \(DEALER\) side only/);
    assert.throws(() => new ZmtpDealer(endpoint, { curve: 'key' }), /curve must be an object/);
    assert.equal(new ZmtpDealer(endpoint).curvePublicKey, null);
    assert.equal(new ZmtpDealer(endpoint).mechanism, 'NULL');
  });
});

// --- interop with libzmq ------------------------------------------------------------------------

for (const [transport, bindEndpoint] of Object.entries(transports)) {
  describe(`CURVE DEALER <-> libzmq ROUTER with CURVE_SERVER=1 (pyzmq) over ${transport}`, () => {
    const server = curveKeyPair();
    const client = curveKeyPair();
    const cleanups = [];
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup();
    });

    async function router(options = {}) {
      const started = await startCurveRouter(bindEndpoint(), { secretKey: server.secretKey, ...options });
      cleanups.push(() => started.stop());
      return started;
    }

    function dealer(endpoint, options) {
      const made = recordingDealer(endpoint, options);
      cleanups.push(() => made.close(0));
      made.connect();
      return made;
    }

    test('handshakes and gets every multipart message echoed intact and in order (empty, 64 KiB+ and 1 MiB frames)', async () => {
      const echo = await router({ echo: true });
      assert.equal(echo.publicKey, server.publicKey, 'libzmq derives the same public key from our Z85 secret key');
      const node = dealer(echo.endpoint, { curve: { serverKey: server.publicKey, ...client }, routingId: `curve-${transport}` });
      const sent = [
        [Buffer.from('hello'), Buffer.alloc(0), Buffer.from('world')],
        [Buffer.alloc(0)],
        [randomBytes(65_536 + 1)],
        [randomBytes(70_000), Buffer.alloc(0), randomBytes(255), randomBytes(256)],
        [randomBytes(1 << 20), Buffer.from('tail')],
      ];
      for (let i = 0; i < 100; i++) sent.push([Buffer.from(`message ${i}`)]);
      for (const frames of sent) node.send(frames);
      await eventually(() => node.messages.length === sent.length, `${sent.length} echoes`);
      node.messages.forEach((frames, i) => assert.deepEqual(frames, sent[i], `message ${i}`));
      assert.equal(node.connects[0].mechanism, 'CURVE');
      assert.deepEqual(node.errors, []);
    });

    test('the ROUTER addresses the dealer by routing id and reads what it sends, both ways intact', async () => {
      const py = await router();
      const node = dealer(py.endpoint, { curve: { serverKey: server.publicKey, ...client }, routingId: 'node-curve' });
      node.send(['up', Buffer.from([0, 1, 2, 255])]);
      const [routingId, ...frames] = await py.receive(PATIENCE);
      assert.equal(routingId.toString(), 'node-curve');
      assert.deepEqual(frames, [Buffer.from('up'), Buffer.from([0, 1, 2, 255])]);
      const big = randomBytes(100_000);
      py.send([routingId, Buffer.from('down'), Buffer.alloc(0), big]);
      await eventually(() => node.messages.length === 1, 'the message from the ROUTER');
      assert.deepEqual(node.messages[0], [Buffer.from('down'), Buffer.alloc(0), big]);
    });

    test('a wrong server key fails the handshake: nothing is delivered and the dealer reports EAUTH', async () => {
      const py = await router();
      const other = curveKeyPair();
      const node = dealer(py.endpoint, { curve: { serverKey: other.publicKey, ...client }, routingId: 'wrong-key' });
      node.send(['must not arrive']);
      await py.next((e) => e.event.startsWith('handshake_failed'), PATIENCE, 'a failed handshake');
      await py.next((e) => e.event.startsWith('handshake_failed'), PATIENCE, 'a second failed handshake (the redial)');
      await eventually(() => node.errors.length >= 2, 'two EAUTH errors');
      for (const error of node.errors) {
        assert.equal(error.code, 'EAUTH');
        assert.match(error.message, /closed the connection after our CURVE HELLO/);
      }
      assert.equal(node.connects.length, 0);
      assert.ok(!py.log.events.some((e) => e.event === 'recv' || e.event === 'handshake'), 'nothing reached the ROUTER');
    });

    test('with a ZAP allow-list a listed client key is admitted and an unlisted one refused (400), nothing delivered', async () => {
      const py = await router({ allow: [client.publicKey] });
      const listed = dealer(py.endpoint, { curve: { serverKey: server.publicKey, ...client }, routingId: 'listed' });
      listed.send(['let me in']);
      const received = await py.next((e) => e.event === 'recv', PATIENCE, 'the listed client\'s message');
      assert.equal(Buffer.from(received.frames[0], 'base64').toString(), 'listed');
      assert.equal(received.user_id, client.publicKey, 'ZAP authenticated our long-term key');

      const stranger = curveKeyPair();
      const unlisted = dealer(py.endpoint, { curve: { serverKey: server.publicKey, ...stranger }, routingId: 'unlisted' });
      unlisted.send(['let me in too']);
      const refused = await py.next((e) => e.event === 'handshake_failed_auth', PATIENCE, 'the ZAP refusal');
      assert.equal(refused.value, 400);
      await eventually(() => unlisted.errors.length >= 1, 'the refusal at the dealer');
      assert.equal(unlisted.errors[0].code, 'EREFUSED');
      assert.equal(unlisted.errors[0].reason, '400');
      assert.equal(unlisted.connects.length, 0);
      assert.ok(!py.log.events.some((e) => e.event === 'recv'), 'nothing from the unlisted client reached the ROUTER');
      assert.equal(listed.connected, true);
    });

    test('answers libzmq heartbeats inside MESSAGE boxes and stays connected', async () => {
      const py = await router({ echo: true, heartbeatIvl: 100, heartbeatTimeout: 3000 });
      const node = dealer(py.endpoint, { curve: { serverKey: server.publicKey, ...client } });
      await eventually(() => node.pingsAnswered >= 5, 'five PINGs answered');
      node.send(['still here']);
      await eventually(() => node.messages.length === 1, 'the echo');
      assert.deepEqual(strings(node.messages[0]), ['still here']);
      assert.ok(!py.log.events.some((e) => e.event === 'disconnected'), 'libzmq never dropped us');
      assert.equal(node.connects.length, 1);
    });
  });
}
