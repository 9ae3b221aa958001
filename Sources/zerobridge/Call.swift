import ArgumentParser
import Foundation
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

    @OptionGroup var host: HostOptions

    @Option(help: "Give up after this many milliseconds (the host is told too).")
    var timeoutMs = 60_000

    // Unique per process: calls running at once, or one whose predecessor's session the host has not ended yet,
    // never hold each other's name (SPEC 6, Names).
    @Option(help: "The peer name to say hello with (default: zerobridge-call-<pid>).")
    var name = "zerobridge-call-\(getpid())"

    @Flag(help: "Do not ask for progress events.")
    var noProgress = false

    func validate() throws {
        guard host.isGiven else {
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
        let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
        let outcome: Result<JSONValue, BridgeError>
        var connected: BridgePeer?
        do {
            let peer = try await host.connectedPeer(name: name)
            connected = peer
            // A signal cancels the call; the call still ends with exactly one outcome.
            let call = Task { await perform(on: peer, payload) }
            let watcher = Task {
                await stop.wait()
                call.cancel()
            }
            outcome = await call.value
            watcher.cancel()
        } catch let error as BridgeError {
            outcome = .failure(error)
        }
        await connected?.close()
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

    /// Unbuffered, so each progress line shows as it comes.
    private static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}
