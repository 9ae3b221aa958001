import Foundation
import Logging
import Synchronization
import Testing
@_exported import TestSupport
import ZeroMQ
@testable import ZeroBridge
import ZeroBridgeConformance

/// A host serving the conformance actions on a fresh endpoint, stopped by the test.
func startConformanceHost(
    transport: String = "ipc", configure: (inout BridgeHost.Configuration) -> Void = { _ in }
) throws -> BridgeHost {
    var configuration = BridgeHost.Configuration(endpoint: freshEndpoint(transport), name: "conformance")
    configuration.maxMessageBytes = 1 << 20
    configuration.maxInFlight = 256
    configuration.info = Conformance.info
    configure(&configuration)
    let host = BridgeHost(configuration: configuration)
    try Conformance.install(on: host)
    try host.start()
    return host
}

func freshEndpoint(_ transport: String) -> String {
    switch transport {
    case "tcp": return "tcp://127.0.0.1:*"
    case "inproc": return "inproc://bridge-test-\(UUID().uuidString.prefix(8))"
    default: return "ipc://\(scratchDirectory)bridge-test-\(UUID().uuidString.prefix(8)).sock"
    }
}

/// A Swift peer connected to `host`.
func connectPeer(_ host: BridgeHost, name: String = "swift-peer", heartbeat: Duration? = nil,
                 setUp: (BridgePeer) throws -> Void = { _ in }) async throws -> BridgePeer {
    var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: name)
    configuration.heartbeat = heartbeat
    configuration.context = host.configuration.context
    let peer = try BridgePeer(configuration: configuration)
    try setUp(peer)
    try await peer.connect(timeout: patience)
    return peer
}

/// A bare DEALER speaking the protocol by hand, for what the libraries would never send.
final class RawPeer: @unchecked Sendable {
    let socket: Socket

    init(_ endpoint: String, context: Context? = nil, curve: BridgePeer.Curve? = nil) throws {
        socket = try Socket(.dealer, context: context ?? Context())
        try socket.set(.linger(milliseconds: 0))
        if let curve {
            try socket.set(.curveServerKey(curve.serverKey), .curvePublicKey(curve.keyPair.publicKey),
                           .curveSecretKey(curve.keyPair.secretKey))
        }
        try socket.connect(endpoint)
    }

    func send(_ body: JSONValue) throws { try sendFrames([[], body.serialized()]) }
    func sendText(_ text: String) throws { try sendFrames([[], Array(text.utf8)]) }
    func sendFrames(_ frames: [[UInt8]]) throws { try socket.send(frames) }

    /// The next body, or nil when nothing came within `timeout`. It polls rather than blocks, so that waiting
    /// tests do not hold the cooperative threads the host's handlers need.
    func receive(timeout: Duration = patience) async throws -> JSONValue? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let frames = try socket.receiveBytes(dontWait: true) {
                #expect(frames.count == 2, "a host message is [signature, body]")
                #expect(frames[0].isEmpty)
                return try JSONValue.parse(frames[1])
            }
            try await Task.sleep(for: .milliseconds(1))
        }
        return nil
    }

    /// The next body that is not a heartbeat.
    func receiveSkippingPings(timeout: Duration = patience) async throws -> JSONValue? {
        while let body = try await receive(timeout: timeout) {
            if body["type"] == "ping" { try send(["v": 1, "type": "pong"]); continue }
            return body
        }
        return nil
    }

    func request(_ id: String, _ action: String, _ payload: JSONValue = nil, extra: [String: JSONValue] = [:]) throws {
        var body: [String: JSONValue] = ["v": 1, "type": "request", "id": .string(id), "action": .string(action), "payload": payload]
        body.merge(extra) { $1 }
        try send(.object(body))
    }

    func hello(_ name: String, actions: [String] = [], heartbeatMs: Int? = nil) async throws -> JSONValue? {
        var body: [String: JSONValue] = ["v": 1, "type": "hello", "peer": .string(name),
                                         "actions": .array(actions.map(JSONValue.string)), "features": []]
        if let heartbeatMs { body["heartbeat_ms"] = .int(heartbeatMs) }
        try send(.object(body))
        return try await receiveSkippingPings()
    }
}

extension JSONValue {
    var errorCode: String? { self["error"]?["code"]?.stringValue }
}

/// Runs `body` with the error it throws, failing the test when it throws none.
func bridgeError(_ body: () async throws -> Void) async -> BridgeError? {
    do {
        try await body()
        Issue.record("expected a BridgeError, got success")
        return nil
    } catch let error as BridgeError {
        return error
    } catch {
        Issue.record("expected a BridgeError, got \(error)")
        return nil
    }
}

/// A bare ROUTER playing a host by hand, with a Swift peer connected to it: for hosts that misbehave (stay silent,
/// say bye) in ways the real one never would.
final class RawHost: @unchecked Sendable {
    let router: Socket
    let peer: BridgePeer

    init(peerName: String) throws {
        let context = try Context()
        router = try Socket(.router, context: context)
        try router.set(.linger(milliseconds: 0), .receiveTimeout(milliseconds: patienceMilliseconds))
        try router.bind(freshEndpoint("ipc"))
        var configuration = BridgePeer.Configuration(endpoint: try router.lastEndpoint, name: peerName)
        configuration.context = context
        peer = try BridgePeer(configuration: configuration)
    }

    /// The next message as [routing id, signature, body...], from any connection, or only from one other than
    /// `connection` (a peer that reconnected); nil after a minute.
    func receive(otherThan connection: [UInt8]? = nil) async throws -> [[UInt8]]? {
        try await onOwnThread { [router] in
            while let message = try router.receiveBytes() {
                if message[0] != connection { return message }
            }
            return nil
        }
    }

    func send(_ body: JSONValue, to connection: [UInt8]) throws {
        try router.send([connection, [], body.serialized()])
    }

    func welcome(_ connection: [UInt8], session: String, token: String? = nil) throws {
        var welcome: [String: JSONValue] = ["v": 1, "type": "welcome", "host": "raw", "session": .string(session), "actions": [],
                                            "heartbeat_ms": 60000, "limits": ["max_message_bytes": 1000, "max_in_flight": 10]]
        if let token { welcome["resume_token"] = .string(token) }
        try send(.object(welcome), to: connection)
    }
}

/// A logger whose lines (message and metadata, at every level) a test can read.
final class CapturedLog: @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { _ in Handler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt) {
            let all = self.metadata.merging(metadata ?? [:]) { $1 }
            log.lines.withLock { $0.append("\(level) \(message) \(all)") }
        }
    }
}
