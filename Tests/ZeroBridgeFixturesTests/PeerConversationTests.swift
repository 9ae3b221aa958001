import Foundation
import Testing
import TestSupport
import ZeroBridgeFixtures

/// The repository's root, from this file's place in it.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// A peer library's conformance peer (SPEC 14.3) and a peer conversation, named "<language>: <description>".
struct PeerCase: Sendable, CustomTestStringConvertible {
    let language: String
    let command: [String]
    let conversation: Conversation
    var testDescription: String { "\(language): \(conversation.description)" }

    static let peers: [(language: String, command: [String])] = [
        ("node", ["node", repositoryRoot + "/peers/node/bin/conformance-peer.js"]),
        ("python", [repositoryRoot + "/.venv/bin/python", "-m", "zerobridge.conformance_peer"]),
    ]

    static let all: [PeerCase] = {
        let conversations = (try? FixtureLoader.peerConversations(at: [fixturesFolder + "/peer-conversations"])) ?? []
        return peers.flatMap { peer in conversations.map { PeerCase(language: peer.language, command: peer.command, conversation: $0) } }
    }()
}

@Suite("Peer conversations against the Python and Node conformance peers", .startsProcesses, .timeLimit(.minutes(3)))
struct PeerConversationTests {
    @Test("every peer conversation loads, and folders keep the two kinds apart")
    func peerConversationsLoad() throws {
        let peerConversations = try FixtureLoader.peerConversations(at: [fixturesFolder])
        #expect(peerConversations.count >= 21)
        #expect(peerConversations.allSatisfy { $0.playsHost })
        #expect(try FixtureLoader.conversations(at: [fixturesFolder]).allSatisfy { !$0.playsHost })
        #expect(PeerCase.all.count == peerConversations.count * PeerCase.peers.count)
        #expect(throws: FixtureError.self) { try FixtureLoader.conversations(at: [fixturesFolder + "/peer-conversations/echo.json"]) }
    }

    @Test(.timeLimit(.minutes(3)), arguments: PeerCase.all)
    func peerConversation(_ test: PeerCase) async throws {
        let result = await PeerConversationRunner(command: test.command, language: test.language).run(test.conversation)
        #expect(result.passed, "\(result.failure.map(String.init(describing:)) ?? "")")
    }
}
