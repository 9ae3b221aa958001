import ArgumentParser
import Foundation
import Logging
import ZeroBridge
import ZeroBridgeConformance
import ZeroBridgeSupervision
import ZeroBridgePrometheus
import ZeroMQ

@main
struct ZeroBridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zerobridge",
        abstract: "Run and poke ZeroBridge hosts: a typed JSON message bus over ZeroMQ.",
        version: zeroBridgeVersion,
        subcommands: [Serve.self, Call.self, Top.self, Types.self, Replay.self, Record.self])
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a host until SIGINT or SIGTERM; prints `zerobridge ready <endpoint>` once it listens.")

    @Flag(help: "Serve the conformance actions of protocol/SPEC.md (echo, add, sleep, count, fail, callback, evaluate, emit, broadcast, countJob, callPeer, once).")
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

    @Option(help: "Requests and events all peers together may have in flight; more are answered overloaded.")
    var maxInFlightTotal = 16_384

    @Option(help: "Heartbeat interval offered to peers, in milliseconds.")
    var heartbeatMs = 5000

    @Option(help: "Sessions kept at once; a new connection's first message past it is answered overloaded.")
    var maxSessions = 10_000

    @Option(help: "How long a named session whose connection closed waits to be resumed, in milliseconds (at most; 3 heartbeats if shorter).")
    var sessionGraceMs = 30_000

    @Option(help: "Connections kept open at once (newly accepted ones past it are shed); by default the open-file limit less a quarter (at least 64).")
    var maxConnections: Int?

    @Option(help: "Journal jobs (SPEC 7.16) in this SQLite file, created when missing, so that they survive a restart; without it, in memory.")
    var journal: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .warning

    @Flag(help: "With --connection-file: run without a connection key (by default a new key goes into the file, and every message must be signed with it: SPEC 3.1).")
    var noKey = false

    @Flag(help: "Require CURVE encryption (SPEC 2.1). The host's public key goes into the connection file.")
    var curve = false

    @Option(help: "The host's CURVE secret key (Z85, 40 characters) in this file; created (mode 0600) with a new key when missing. Implies --curve. Without it, a new key each run.")
    var curveSecretKeyFile: String?

    @Option(name: .customLong("peer"), help: ArgumentHelp(
        "Launch a peer and keep it running (SPEC 10.1): NAME is the name it says hello with, COMMAND runs as /bin/sh -c 'exec COMMAND'. Repeatable.",
        discussion: "The peer finds the host through ZEROBRIDGE_CONNECTION_FILE and ZEROBRIDGE_PEER_NAME in its environment, never its command line. It is restarted when it exits, hangs or is not welcomed within 10 s (backoff 0.25 s doubling to 8 s; after 5 restarts within 60 s the host gives up on it), and stopped on shutdown (bye, 5 s, SIGTERM, 5 s, SIGKILL). Its output goes to the log (stdout at info, stderr at warning).",
        valueName: "NAME=COMMAND"))
    var peers: [String] = []

    @Option(help: ArgumentHelp(
        "Also accept WebSocket connections (browser peers, SPEC 2.2) on HOST:PORT, e.g. 127.0.0.1:8080 (port 0 picks one).",
        discussion: "The connection key is then required by default, and prints `zerobridge websocket ws://HOST:PORT/zerobridge` before the ready line.",
        valueName: "HOST:PORT"))
    var ws: String?

    @Option(help: "With --ws: serve this folder (a Vite or Svelte build output as it is) at /, with the bridge's configuration injected into each HTML page; prints `zerobridge page URL`.")
    var webRoot: String?

    @Option(name: .customLong("allow-origin"), help: "With --ws: an origin allowed beside the host's own (e.g. http://localhost:5173 for a dev server). Repeatable.")
    var allowedOrigins: [String] = []

    @Option(help: "With --ws: close a connection that has not upgraded to WebSocket when it completes no request within this many milliseconds (SPEC 2.2).")
    var wsIdleTimeoutMs = 10_000

    @Option(help: "With --ws: the most connections not yet upgraded to WebSocket at once; one past it is closed at once (SPEC 2.2).")
    var wsMaxPending = 256

    @Flag(help: "With --ws and --no-key: open sessions on WebSocket connections without a key (tests and development only: any local process and any allowed page can then use the host).")
    var wsAllowUnkeyed = false

    @Option(help: ArgumentHelp(
        "Serve Prometheus metrics over HTTP (GET /metrics) at PORT on loopback, or at HOST:PORT (0 picks a port).",
        discussion: "The address is printed to stderr as `zerobridge metrics http://HOST:PORT/metrics` before the ready line.",
        valueName: "[HOST:]PORT"))
    var metrics: String?

    @Option(help: "Only peers whose CURVE public keys (Z85, one a line; a line starting with # that is not a key is a comment) are in this file may connect. Implies --curve.")
    var allowPeerKeys: String?

    func validate() throws {
        guard conformance || webRoot != nil else {
            throw ValidationError("nothing to serve: pass --conformance or --web-root (services such as examples/import-host bring their own executable)")
        }
        guard ws != nil || (webRoot == nil && allowedOrigins.isEmpty && !wsAllowUnkeyed) else {
            throw ValidationError("--web-root, --allow-origin and --ws-allow-unkeyed go with --ws HOST:PORT")
        }
        _ = try webSocketOptions()
        guard maxMessageBytes > 0, maxInFlight > 0, maxInFlightTotal > 0, heartbeatMs >= 50 else {
            throw ValidationError("--max-message-bytes, --max-in-flight and --max-in-flight-total must be positive, --heartbeat-ms at least 50")
        }
        guard maxSessions > 0, sessionGraceMs >= 0, (maxConnections ?? 1) > 0 else {
            throw ValidationError("--max-sessions and --max-connections must be positive, --session-grace-ms not negative")
        }
        _ = try supervisedPeers()
        if let metrics {
            do { _ = try MetricsEndpoint.ListenAddress.parse(metrics) } catch { throw ValidationError("--metrics: \(error)") }
        }
    }

    /// The --peer NAME=COMMAND options, each a line of shell (``SupervisedPeer/shell(name:command:)``).
    func supervisedPeers() throws -> [SupervisedPeer] {
        try peers.map { option in
            guard let equals = option.firstIndex(of: "="), case let name = String(option[..<equals]),
                  (1...128).contains(name.count), case let command = String(option[option.index(after: equals)...]),
                  !command.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ValidationError("--peer takes NAME=COMMAND (a name of 1 to 128 characters, and a command), not '\(option)'")
            }
            return .shell(name: name, command: command)
        }
    }

    /// --ws HOST:PORT and what goes with it; nil without --ws.
    func webSocketOptions() throws -> WebSocketOptions? {
        guard let ws else { return nil }
        guard let colon = ws.lastIndex(of: ":"), let port = Int(ws[ws.index(after: colon)...]), (0...65535).contains(port),
              case let host = ws[..<colon].trimmingCharacters(in: CharacterSet(charactersIn: "[]")), !host.isEmpty else {
            throw ValidationError("--ws takes HOST:PORT, such as 127.0.0.1:8080 or [::1]:0, not '\(ws)'")
        }
        for origin in allowedOrigins where URL(string: origin)?.host == nil || !(origin.hasPrefix("http://") || origin.hasPrefix("https://")) {
            throw ValidationError("--allow-origin takes an origin such as http://localhost:5173, not '\(origin)'")
        }
        guard wsIdleTimeoutMs > 0, wsMaxPending > 0 else {
            throw ValidationError("--ws-idle-timeout-ms and --ws-max-pending must be positive")
        }
        var options = WebSocketOptions(host: host, port: port, webRoot: webRoot, allowedOrigins: allowedOrigins)
        options.allowsUnkeyedConnections = wsAllowUnkeyed
        options.idleTimeout = .milliseconds(wsIdleTimeoutMs)
        options.maxPendingConnections = wsMaxPending
        return options
    }

    func run() async throws {
        var logger = Logger(label: "zerobridge")
        logger.logLevel = logLevel
        var configuration = BridgeHost.Configuration(endpoint: endpoint, name: name ?? "conformance")
        configuration.maxMessageBytes = maxMessageBytes
        configuration.maxInFlight = maxInFlight
        configuration.maxInFlightTotal = maxInFlightTotal
        configuration.info = Conformance.info
        configuration.heartbeat = .milliseconds(heartbeatMs)
        configuration.maxSessions = maxSessions
        configuration.sessionGrace = .milliseconds(sessionGraceMs)
        configuration.maxConnections = maxConnections
        configuration.connectionFile = connectionFile
        configuration.logger = logger
        if let journal { configuration.jobs.journal = .file(journal) }
        configuration.webSocket = try webSocketOptions()
        configuration.statsAccess = Conformance.statsAccess
        // Bootstrapped before the host is made: the host makes its metric objects once, against the backend it finds.
        var metricsEndpoint: MetricsEndpoint?
        if let metrics { metricsEndpoint = try await MetricsEndpoint.bootstrapAndStart(at: metrics, announcingAs: "zerobridge") }
        if noKey { configuration.signing = .none }
        if curve || curveSecretKeyFile != nil || allowPeerKeys != nil {
            let keyPair = try curveSecretKeyFile.map(CurveKeys.load(orCreate:)) ?? CurveKeyPair.generate()
            configuration.curve = .init(keyPair: keyPair, allowedPeerKeys: try allowPeerKeys.map(CurveKeys.allowList(in:)))
            FileHandle.standardError.write(Data("zerobridge: CURVE server key \(keyPair.publicKey)\n".utf8))
        }
        let host = BridgeHost(configuration: configuration)
        if conformance { try Conformance.install(on: host) }
        for peer in try supervisedPeers() { try host.supervise(peer) }
        try host.start()
        // Trap the signals before saying ready, so a stop that follows the ready line at once is not lost.
        let stop = ShutdownSignal(trapping: [SIGTERM, SIGINT])
        // Before the ready line, so that whoever waits for it knows them all.
        if let endpoint = host.webSocketEndpoint { FileHandle.standardOutput.write(Data("zerobridge websocket \(endpoint)\n".utf8)) }
        if let page = host.pageURL { FileHandle.standardOutput.write(Data("zerobridge page \(page)\n".utf8)) }
        // One line, flushed at once: scripts and tests wait for it before connecting.
        FileHandle.standardOutput.write(Data("zerobridge ready \(host.boundEndpoint ?? endpoint)\n".utf8))
        await stop.wait()
        await host.shutdown()
        await metricsEndpoint?.stop()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// CURVE key files for `serve`: a secret key kept between runs, and an allow-list of peer keys.
enum CurveKeys {
    static func load(orCreate path: String) throws -> CurveKeyPair {
        guard FileManager.default.fileExists(atPath: path) else {
            let keyPair = try CurveKeyPair.generate()
            do {
                try SecretFile.write(Array((keyPair.secretKey + "\n").utf8), to: path)
            } catch {
                throw ValidationError("cannot create the CURVE secret key file: \(error)")
            }
            return keyPair
        }
        let bytes: [UInt8]
        do {
            bytes = try SecretFile.read(path, what: "CURVE secret key file")
        } catch {
            throw ValidationError(error.description)
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard isKey(text), let publicKey = try? CurveKeyPair.publicKey(forSecretKey: text) else {
            throw ValidationError("\(path) does not hold a CURVE secret key (40 characters of Z85)")
        }
        return CurveKeyPair(publicKey: publicKey, secretKey: text)
    }

    static func allowList(in path: String) throws -> Set<String> {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("cannot read the allow-list \(path)")
        }
        var keys = Set<String>()
        // '#' is a Z85 character, so a comment is a line that starts with '#' and is not a key, or what follows a
        // key after white space.
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard let first = line.split(whereSeparator: \.isWhitespace).first.map(String.init) else { continue }
            if isKey(first) {
                keys.insert(first)
            } else if !first.hasPrefix("#") {
                throw ValidationError("\(path):\(number + 1): not a CURVE public key (40 characters of Z85)")
            }
        }
        return keys
    }

    static func isKey(_ text: String) -> Bool { text.utf8.count == 40 && (try? Z85.decode(text)) != nil }
}
