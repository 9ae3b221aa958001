import ArgumentParser
import Foundation
import Logging
import ZeroBridge

@main
struct ZeroBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zerobridge",
        abstract: "Run and poke ZeroBridge hosts: a typed JSON message bus over ZeroMQ.",
        subcommands: [Serve.self, Call.self, Replay.self, Record.self])
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a host until SIGINT or SIGTERM; prints `zerobridge ready <endpoint>` once it listens.")

    @Flag(help: "Serve the conformance actions of protocol/SPEC.md (echo, add, sleep, count, fail, callback, evaluate, emit, once).")
    var conformance = false

    @Option(help: "Where to bind: tcp://127.0.0.1:5555 (port * picks one), ipc:///path or inproc://name.")
    var endpoint = "tcp://127.0.0.1:5555"

    @Option(help: "The host's name in welcome messages.")
    var name: String?

    @Option(help: "Write a connection file (mode 0600) here for peers to read.")
    var connectionFile: String?

    @Option(help: "Messages larger than this many bytes are answered too_large.")
    var maxMessageBytes = 1_048_576

    @Option(help: "Requests one peer may have in flight; more are answered overloaded.")
    var maxInFlight = 256

    @Option(help: "Heartbeat interval offered to peers, in milliseconds.")
    var heartbeatMs = 5000

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .warning

    func validate() throws {
        guard conformance else {
            throw ValidationError("nothing to serve: pass --conformance (services such as examples/import-host bring their own executable)")
        }
        guard maxMessageBytes > 0, maxInFlight > 0, heartbeatMs >= 50 else {
            throw ValidationError("--max-message-bytes and --max-in-flight must be positive, --heartbeat-ms at least 50")
        }
    }

    func run() async throws {
        var logger = Logger(label: "zerobridge")
        logger.logLevel = logLevel
        var configuration = BridgeHost.Configuration(endpoint: endpoint, name: name ?? "conformance")
        configuration.maxMessageBytes = maxMessageBytes
        configuration.maxInFlight = maxInFlight
        configuration.heartbeat = .milliseconds(heartbeatMs)
        configuration.connectionFile = connectionFile
        configuration.logger = logger
        let host = BridgeHost(configuration: configuration)
        try Conformance.install(on: host)
        try host.start()
        // Trap the signals before saying ready, so a stop that follows the ready line at once is not lost.
        let stop = ShutdownSignal(trapping: [SIGTERM, SIGINT])
        // One line, flushed at once: scripts and tests wait for it before connecting.
        FileHandle.standardOutput.write(Data("zerobridge ready \(host.boundEndpoint ?? endpoint)\n".utf8))
        await stop.wait()
        await host.shutdown()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
