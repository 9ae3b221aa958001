import ArgumentParser
import Foundation
import Logging
import ZeroBridge

/// `zerobridge call ACTION JSON`: pokes any host by hand, as a named peer.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call an action on a host: prints each progress event, then the result.",
        discussion: """
            Output, one JSON value per line: `progress <payload>` for each progress event, then the result. \
            A failed call prints `error <code>: <message>` to stderr and exits with 1 (130 after Ctrl-C, \
            which cancels the call). For example:
              zerobridge call count '{"n": 3}' --endpoint tcp://127.0.0.1:5555
              zerobridge call stats --connection-file .demo/import-host.json
            """)

    @Argument(help: "The action to call.")
    var action: String

    @Argument(help: "The payload, as JSON.")
    var payload = "null"

    @Option(help: "The host's endpoint, e.g. tcp://127.0.0.1:5555 or ipc:///tmp/host.sock.")
    var endpoint: String?

    @Option(help: "Read the host's endpoint, key and CURVE server key from its connection file instead.")
    var connectionFile: String?

    @Option(help: "Give up after this many milliseconds (the host is told too).")
    var timeoutMs = 60_000

    // Unique per process: calls running at once, or one whose predecessor's session the host has not ended yet,
    // never hold each other's name (SPEC 6, Names).
    @Option(help: "The peer name to say hello with (default: zerobridge-call-<pid>).")
    var name = "zerobridge-call-\(getpid())"

    @Flag(help: "Do not ask for progress events.")
    var noProgress = false

    func validate() throws {
        guard (endpoint == nil) != (connectionFile == nil) else {
            throw ValidationError("give the host as exactly one of --endpoint or --connection-file")
        }
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
    }

    func run() async throws {
        let payload: JSONValue
        do {
            payload = try JSONDecoder().decode(JSONValue.self, from: Data(self.payload.utf8))
        } catch {
            throw ValidationError("the payload is not JSON: \(self.payload)")
        }
        var logger = Logger(label: "zerobridge.call")
        logger.logLevel = .error
        var configuration = try peerConfiguration()
        configuration.logger = logger
        let peer = try BridgePeer(configuration: configuration)
        let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
        let outcome: Result<JSONValue, BridgeError>
        do {
            try await peer.connect(timeout: .seconds(5))
            // A signal cancels the call; the call still ends with exactly one outcome.
            let call = Task { await perform(on: peer, payload) }
            let watcher = Task {
                await stop.wait()
                call.cancel()
            }
            outcome = await call.value
            watcher.cancel()
        } catch let error as BridgeError {
            outcome = .failure(BridgeError(error.code, "no welcome from \(configuration.endpoint): \(error.message)"))
        }
        await peer.close()
        switch outcome {
        case .success(let result):
            Self.write("\(result)\n")
        case .failure(let error):
            FileHandle.standardError.write(Data("error \(error.code): \(error.message)\n".utf8))
            throw ExitCode(error.code == .cancelled ? 130 : 1)
        }
    }

    private func perform(on peer: BridgePeer, _ payload: JSONValue) async -> Result<JSONValue, BridgeError> {
        var printProgress: (@Sendable (JSONValue) -> Void)?
        if !noProgress {
            printProgress = { (event: JSONValue) in Self.write("progress \(event)\n") }
        }
        let timeout = Duration.milliseconds(timeoutMs)
        do {
            let result: JSONValue = try await peer.call(action, payload, timeout: timeout, onProgress: printProgress)
            return .success(result)
        } catch let error as BridgeError {
            return .failure(error)
        } catch is CancellationError {
            return .failure(BridgeError(.cancelled, "interrupted"))
        } catch {
            return .failure(BridgeError(.handlerError, "\(error)"))
        }
    }

    /// From --endpoint, or from a connection file with its key and CURVE server key (SPEC 10).
    private func peerConfiguration() throws -> BridgePeer.Configuration {
        if let endpoint { return BridgePeer.Configuration(endpoint: endpoint, name: name) }
        do {
            return try BridgePeer.Configuration(connectionFile: ConnectionFile.read(connectionFile!), name: name)
        } catch let error as BridgeError {
            throw ValidationError(error.message)
        }
    }

    /// Unbuffered, so each progress line shows as it comes.
    private static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
