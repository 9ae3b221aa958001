import Foundation
import Testing
import ZeroBridge
import ZeroBridgeConformance
import TestSupport
import ZeroBridgeFixtures

/// protocol/fixtures, found from this file's place in the repository (Tests/ZeroBridgeFixturesTests/ -> the root).
let fixturesFolder = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("protocol/fixtures").path

/// A conversation as a test argument, named by its description.
struct ConversationCase: Sendable, CustomTestStringConvertible {
    let conversation: Conversation
    var testDescription: String { conversation.description }

    /// Every conversation fixture but those that restart the host, which need a host process of their own
    /// (zerobridgeTests' `RestartConversationTests` runs them); a file that does not load fails `allConversationsLoad`.
    static let all: [ConversationCase] = {
        ((try? FixtureLoader.conversations(at: [fixturesFolder + "/conversations"])) ?? [])
            .filter { !$0.restartsHost }.map(ConversationCase.init)
    }()
}

/// The in-process conformance host the conversations run against, with the limits they assume, started once.
let conformanceHost: BridgeHost = {
    var configuration = BridgeHost.Configuration(endpoint: "tcp://127.0.0.1:*", name: "conformance")
    configuration.maxMessageBytes = 1_048_576
    configuration.maxInFlight = 256
    configuration.info = Conformance.info
    configuration.statsAccess = Conformance.statsAccess
    let host = BridgeHost(configuration: configuration)
    try! Conformance.install(on: host)
    try! host.start()
    return host
}()

@Suite("Conversation fixtures against the conformance host", .timeLimit(.minutes(3)))
struct ConversationFixtureTests {
    @Test("every conversation fixture loads")
    func allConversationsLoad() throws {
        let conversations = try FixtureLoader.conversations(at: [fixturesFolder + "/conversations"])
        #expect(conversations.count >= 38)
        #expect(ConversationCase.all.count == conversations.filter { !$0.restartsHost }.count)
        #expect(conversations.contains { $0.restartsHost })
    }

    @Test(arguments: ConversationCase.all)
    func conversation(_ test: ConversationCase) async throws {
        let result = await ConversationRunner(endpoint: conformanceHost.boundEndpoint!).run(test.conversation)
        let account = result.failure.map(String.init(describing:)) ?? ""
        #expect(result.passed, "\(account)")
        #expect(result.duration < patience)
    }
}
