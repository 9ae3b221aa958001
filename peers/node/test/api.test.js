// The package as users import it, and its declarations kept in step with the code.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const declarations = readFileSync(`${packageDir}/index.d.ts`, 'utf8');

test('the package resolves by its name through "exports" and has exactly the declared exports', async () => {
  const zerobridge = await import('zerobridge');
  assert.deepEqual(Object.keys(zerobridge).sort(), ['BridgeError', 'Peer', 'connect', 'currentTrace', 'curveKeyPair', 'version', 'withTrace']);
  assert.match(declarations, /export declare const version: string;/);
  for (const name of ['BridgeError', 'Peer']) assert.match(declarations, new RegExp(`export class ${name}\\b`));
  for (const name of ['connect', 'curveKeyPair', 'withTrace', 'currentTrace']) assert.match(declarations, new RegExp(`export function ${name}[<(]`));
  const pkg = JSON.parse(readFileSync(`${packageDir}/package.json`, 'utf8'));
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.types, './index.d.ts');
  assert.deepEqual(pkg.dependencies ?? {}, {});
});

test('every public Peer member is declared', async () => {
  const { Peer } = await import('zerobridge');
  const peerDeclaration = declarations.slice(declarations.indexOf('export class Peer'));
  for (const method of ['connect', 'call', 'stream', 'startJob', 'attachJob', 'cancelJob', 'listJobs', 'post', 'describe', 'handle', 'on', 'off', 'close']) {
    assert.equal(typeof Peer.prototype[method], 'function', method);
    assert.match(peerDeclaration, new RegExp(`\\n  ${method}(<[^>]*>)?\\(`), `${method} is declared`);
  }
  const peer = new Peer('tcp://127.0.0.1:9', { name: 'api' });
  for (const field of ['endpoint', 'name', 'session', 'host', 'hostActions', 'hostCatalogue', 'hostLibraryVersion', 'heartbeatMs', 'limits', 'connected', 'closed', 'rejectedMessages', 'batches', 'curvePublicKey']) {
    assert.ok(field in peer, `${field} exists`);
    assert.match(peerDeclaration, new RegExp(`readonly ${field}:`), `${field} is declared`);
  }
  await peer.close();
  assert.equal(await peer.closed, 'the program closed the peer');
});

test('BridgeError is an Error with a string code, data and a wire form', async () => {
  const { BridgeError } = await import('zerobridge');
  const error = new BridgeError('invalid_payload', 'a is missing', { data: { field: 'a' } });
  assert.ok(error instanceof Error);
  assert.equal(error.name, 'BridgeError');
  assert.equal(error.code, 'invalid_payload');
  assert.deepEqual(error.data, { field: 'a' });
  assert.deepEqual(JSON.parse(JSON.stringify(error)), { code: 'invalid_payload', message: 'a is missing', data: { field: 'a' } });
  assert.deepEqual(new BridgeError('timeout', 'late').toJSON(), { code: 'timeout', message: 'late' });
});
