// A TypeScript program using both entry points as an app would; test/types.test.js type-checks it with tsc --strict.
import { connect, BridgeError, Peer, version, curveKeyPair, type RequestContext } from 'zerobridge';
import {
  DEFAULT_WITHIN_MS, FixtureFailure, FixtureFormatError, MISSING, checkMessageCase, frameBytes, jsonEqual,
  loadConversation, loadConversations, loadMessageCases, match, restartsHost, runConversation, runPeerConversation,
  type Conversation, type MessageCase, type Mismatch,
} from 'zerobridge/fixtures';

export async function greet(endpoint: string): Promise<string> {
  const peer: Peer = await connect(endpoint, { name: 'typed' });
  peer.handle('shout', (payload: { text: string }, context: RequestContext) => `${payload.text}!${context.id}`);
  try {
    const reply = await peer.call<string>('greet', { name: 'Ada' });
    const counting = peer.stream<{ done: number }, number>('count', { to: 3 });
    for await (const step of counting.progress) if (step.done > 1) break;
    await counting.result.catch(() => undefined);
    return String(reply);
  } catch (error) {
    if (error instanceof BridgeError) return `${error.code}: ${error.message}`;
    throw error;
  } finally {
    await peer.close();
  }
}

export async function conformance(fixtures: string, endpoint: string): Promise<string[]> {
  const failures: string[] = [`zerobridge ${version}`, curveKeyPair().publicKey];
  const conversations: Conversation[] = loadConversations([`${fixtures}/conversations`]);
  conversations.push(loadConversation(`${fixtures}/conversations/hello.json`));
  for (const conversation of conversations) {
    if (restartsHost(conversation)) continue;
    try {
      await runConversation(conversation, endpoint, { restartHost: async () => endpoint });
    } catch (error) {
      if (error instanceof FixtureFailure || error instanceof FixtureFormatError) failures.push(error.message);
      else throw error;
    }
  }
  for (const conversation of loadConversations([`${fixtures}/peer-conversations`], { plays: 'host' })) {
    await runPeerConversation(conversation, { language: 'node', command: ['node', 'conformance-peer.js'] }, { bind: 'tcp://127.0.0.1:*' });
  }
  const cases: MessageCase[] = loadMessageCases([`${fixtures}/messages`]);
  for (const fixtureCase of cases) checkMessageCase(fixtureCase);
  const differs: Mismatch | null = match({ $any: 'string' }, MISSING, {}, '$');
  if (differs !== null) failures.push(`${differs.path}: ${differs.toString()}`);
  const bytes: Uint8Array = frameBytes({ text: 'hi' });
  failures.push(String(jsonEqual(bytes.length, 2)), String(DEFAULT_WITHIN_MS));
  return failures;
}
