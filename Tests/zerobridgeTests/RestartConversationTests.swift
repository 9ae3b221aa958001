import Foundation
import Synchronization
import Testing
import ZeroBridgeFixtures

/// Conversations with a `restart_host` step (SPEC 14.2): each gets a `zerobridge serve --conformance` process of its
/// own with a journal file, which the runner kills with SIGKILL and starts again on the same journal and endpoint.
@Suite("conversations that restart the host", .startsProcesses, .timeLimit(.minutes(3)))
struct RestartConversationTests {
    static let restarting: [Conversation] = {
        ((try? FixtureLoader.conversations(at: [conversationsFolder])) ?? []).filter(\.restartsHost)
    }()

    @Test("the fixtures have conversations that restart the host")
    func thereAreSome() {
        #expect(!Self.restarting.isEmpty)
    }

    @Test(arguments: Self.restarting.map(\.description))
    func conversation(_ description: String) async throws {
        let conversation = try #require(Self.restarting.first { $0.description == description })
        let host = try RestartableHost(journal: try temporaryFolder() + "/journal.sqlite", limits: conversation.limits)
        defer { host.stop() }
        let result = await ConversationRunner(endpoint: try host.start(), restartHost: { try host.restart() }).run(conversation)
        #expect(result.passed, "\(result.failure.map(String.init(describing:)) ?? "")\nhost stderr:\n\(host.errors)")
    }

    @Test("a runner that cannot restart the host reports such a conversation not run, and replay counts it apart")
    func notRunWithoutARestart() async throws {
        let conversation = try #require(Self.restarting.first)
        let result = await ConversationRunner(endpoint: "tcp://127.0.0.1:1").run(conversation)
        #expect(!result.passed && result.failure == nil)
        #expect(result.notRun?.contains("restart_host") == true)

        let folder = try temporaryFolder()
        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*"], in: folder)
        defer { serve.process.terminate() }
        let endpoint = try #require(try await serve.line(startingWith: "zerobridge ready ")).split(separator: " ")[2]
        let junit = folder + "/report.xml"
        let replay = try await runZerobridge(["replay", conversationsFolder + "/echo.json", conversation.file,
                                              "--endpoint", String(endpoint), "--junit", junit])
        #expect(replay.status == 0, "\(replay.output)\(replay.errors)")
        #expect(replay.output.contains("2 conversations: 1 passed, 0 failed, 1 not run"))
        #expect(replay.output.contains("skip "))
        #expect(JUnitSummary.parse(junit)?.suiteAttributes["skipped"] == "1")
    }
}

/// A conformance host process on a journal, that can be killed and started again on the same endpoint. Blocking:
/// it is called from the conversation runner's own thread.
final class RestartableHost: Sendable {
    private let journal: String
    private let flags: [String]
    private let current = Mutex<ZerobridgeProcess?>(nil)
    private let endpoint = Mutex<String?>(nil)

    init(journal: String, limits: [String: Int]) throws {
        self.journal = journal
        flags = limits.sorted { $0.key < $1.key }.flatMap { ["--" + $0.key.replacingOccurrences(of: "_", with: "-"), String($0.value)] }
    }

    var errors: String { current.withLock { $0?.errors ?? "" } }

    /// Starts the host on a fresh port; returns its endpoint.
    func start() throws -> String { try launch(on: "tcp://127.0.0.1:*") }

    /// SIGKILL, then the same flags on the same journal and endpoint.
    func restart() throws -> String {
        if let process = current.withLock({ $0 })?.process {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return try launch(on: try #require(endpoint.withLock { $0 }))
    }

    func stop() {
        current.withLock { $0 }?.process.terminate()
    }

    private func launch(on bind: String) throws -> String {
        let process = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", bind, "--journal", journal] + flags,
                                            in: try temporaryFolder())
        current.withLock { $0 = process }
        let deadline = ContinuousClock.now + patience
        while ContinuousClock.now < deadline {
            if let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("zerobridge ready ") }) {
                let bound = String(line.dropFirst("zerobridge ready ".count))
                endpoint.withLock { $0 = bound }
                return bound
            }
            guard process.process.isRunning else { break }
            usleep(10_000)
        }
        throw RestartError(description: "the host did not say ready: \(process.errors)")
    }

    struct RestartError: Error, CustomStringConvertible { var description: String }
}
