import ArgumentParser
import Foundation
import ZeroBridgeFixtures

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run conversation fixtures against a live host: one line per conversation, a diff for each failure.",
        discussion: """
            Exits 0 when every conversation passes, 1 when one fails, 2 when the fixtures cannot be read.
            Folders are searched for conversation files (*.json holding an object); message case files are passed over.
            """)

    @Argument(help: "Conversation fixture files, or folders of them.")
    var fixtures: [String]

    @Option(help: "The host's endpoint, e.g. tcp://127.0.0.1:5555.")
    var endpoint: String?

    @Option(help: "Read the host's endpoint from its connection file instead.")
    var connectionFile: String?

    @Option(help: "Also write the results as JUnit XML to this file.")
    var junit: String?

    func validate() throws {
        guard (endpoint == nil) != (connectionFile == nil) else {
            throw ValidationError("give the host as exactly one of --endpoint and --connection-file")
        }
    }

    func run() async throws {
        let target = try endpoint ?? Self.endpoint(fromConnectionFile: connectionFile!)
        let conversations: [Conversation]
        do {
            conversations = try FixtureLoader.conversations(at: fixtures)
        } catch {
            Self.write("zerobridge replay: \(error)\n", to: .standardError)
            throw ExitCode(2)
        }
        guard !conversations.isEmpty else {
            Self.write("zerobridge replay: no conversation fixtures in \(fixtures.joined(separator: ", "))\n", to: .standardError)
            throw ExitCode(2)
        }

        let runner = ConversationRunner(endpoint: target)
        var results: [ConversationResult] = []
        let started = ContinuousClock.now
        for conversation in conversations {
            let result = await runner.run(conversation)
            results.append(result)
            var text = "\(result.passed ? "ok  " : "FAIL") \(conversation.description) (\(Self.seconds(result.seconds)))\n"
            if let failure = result.failure {
                if !conversation.file.isEmpty { text += "     in \(conversation.file)\n" }
                text += failure.description.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { "     " + $0 }.joined(separator: "\n") + "\n"
            }
            Self.write(text, to: .standardOutput)
        }
        let failed = results.filter { !$0.passed }.count
        let elapsed = ContinuousClock.now - started
        Self.write("\(results.count) conversations: \(results.count - failed) passed, \(failed) failed "
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
        guard let data = FileManager.default.contents(atPath: path),
              let file = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw ValidationError("cannot read the connection file \(path) as a JSON object")
        }
        guard let endpoint = file["endpoint"] as? String, !endpoint.isEmpty else {
            throw ValidationError("the connection file \(path) has no endpoint")
        }
        if let key = file["key"] as? String, !key.isEmpty {
            throw ValidationError("the connection file \(path) has a key; replay cannot sign messages yet")
        }
        return endpoint
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }

    /// Writes at once: the output may be a pipe to a CI log that should show progress as it happens.
    static func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(text.utf8))
    }
}
