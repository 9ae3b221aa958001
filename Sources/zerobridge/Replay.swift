import ArgumentParser
import Foundation
import ZeroBridge
import ZeroBridgeFixtures

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run conversation fixtures against a live host: one line per conversation, a diff for each failure.",
        discussion: """
            Exits 0 when every conversation passes, 1 when one fails, 2 when the fixtures cannot be read.
            Folders are searched for conversation files (*.json holding an object); message case files are passed over.
            With --peer, runs peer conversations ("plays": "host", protocol/SPEC.md 14.3) instead: replay plays the
            host and starts the peer library's conformance peer as `COMMAND ENDPOINT [--evaluate]` for each one.
            """)

    @Argument(help: "Conversation fixture files, or folders of them.")
    var fixtures: [String]

    @Option(help: "The host's endpoint, e.g. tcp://127.0.0.1:5555.")
    var endpoint: String?

    @Option(help: "Read the host's endpoint from its connection file instead.")
    var connectionFile: String?

    @Option(help: "Run peer conversations against this conformance peer command, e.g. \"node peers/node/bin/conformance-peer.js\".")
    var peer: String?

    @Option(help: "With --peer: the peer's language, which picks $per_language values (python, node, ...).")
    var language: String?

    @Option(help: "Also write the results as JUnit XML to this file.")
    var junit: String?

    func validate() throws {
        guard [endpoint, connectionFile, peer].compactMap({ $0 }).count == 1 else {
            throw ValidationError("give exactly one of --endpoint, --connection-file (a host) and --peer (a conformance peer)")
        }
        guard (peer == nil) == (language == nil) else {
            throw ValidationError("--peer and --language go together")
        }
    }

    func run() async throws {
        let conversations: [Conversation]
        do {
            conversations = try peer == nil ? FixtureLoader.conversations(at: fixtures) : FixtureLoader.peerConversations(at: fixtures)
        } catch {
            Self.write("zerobridge replay: \(error)\n", to: .standardError)
            throw ExitCode(2)
        }
        guard !conversations.isEmpty else {
            Self.write("zerobridge replay: no conversation fixtures in \(fixtures.joined(separator: ", "))\n", to: .standardError)
            throw ExitCode(2)
        }

        let run: @Sendable (Conversation) async -> ConversationResult
        if let peer, let language {
            let runner = PeerConversationRunner(command: peer.split(separator: " ").map(String.init), language: language)
            run = { await runner.run($0) }
        } else {
            let runner = ConversationRunner(endpoint: try endpoint ?? Self.endpoint(fromConnectionFile: connectionFile!))
            run = { await runner.run($0) }
        }
        var results: [ConversationResult] = []
        let started = ContinuousClock.now
        for conversation in conversations {
            let result = await run(conversation)
            results.append(result)
            let verdict = result.passed ? "ok  " : result.notRun != nil ? "skip" : "FAIL"
            var text = "\(verdict) \(conversation.description) (\(Self.seconds(result.seconds)))\n"
            if let reason = result.notRun { text += "     not run: \(reason)\n" }
            if let failure = result.failure {
                if !conversation.file.isEmpty { text += "     in \(conversation.file)\n" }
                text += failure.description.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { "     " + $0 }.joined(separator: "\n") + "\n"
            }
            Self.write(text, to: .standardOutput)
        }
        let failed = results.filter { $0.failure != nil }.count
        let notRun = results.filter { $0.notRun != nil }.count
        let elapsed = ContinuousClock.now - started
        Self.write("\(results.count) conversations: \(results.count - failed - notRun) passed, \(failed) failed"
                   + (notRun > 0 ? ", \(notRun) not run (they restart the host)" : "") + " "
                   + "(\(Self.seconds(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)))\n",
                   to: .standardOutput)

        if let junit {
            do {
                try JUnitReport.xml(for: results).write(toFile: junit, atomically: true, encoding: .utf8)
            } catch {
                Self.write("zerobridge replay: cannot write \(junit): \(error.localizedDescription)\n", to: .standardError)
                throw ExitCode(2)
            }
        }
        if failed > 0 { throw ExitCode(1) }
    }

    /// The endpoint of a keyless host's connection file.
    static func endpoint(fromConnectionFile path: String) throws -> String {
        let file: ConnectionFile
        do {
            file = try ConnectionFile.read(path)
        } catch {
            throw ValidationError(error.message)
        }
        // Conversations are written as the wire carries them unsigned and in plaintext (SPEC 14.2).
        guard file.key == nil else {
            throw ValidationError("the connection file \(path) has a key: replay speaks unsigned, so run the host without one (serve --no-key)")
        }
        guard file.curveServerKey == nil else {
            throw ValidationError("the connection file \(path) asks for CURVE: replay speaks plaintext, so run the host without --curve")
        }
        return file.endpoint
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    /// Writes at once: the output may be a pipe to a CI log that should show progress as it happens.
    static func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(text.utf8))
    }
}
