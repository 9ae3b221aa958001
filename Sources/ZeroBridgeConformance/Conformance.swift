import Synchronization
import ZeroBridge
import ZeroBridgeJobs
import ZeroBridgeSupervision

/// The conformance host's actions (protocol/SPEC.md), which fixtures and independent clients test any
/// implementation against: `echo`, `add`, `sleep`, `count`, `fail`, `callback`, `evaluate`, `emit`, `broadcast`,
/// `countJob` (a job, SPEC 7.16: the host's `configuration.jobs` says where it is journaled), `callPeer` (a named or
/// supervised peer, SPEC 10.1), `once`.
///
/// For example:
/// ```swift
/// let host = BridgeHost(configuration: .init(endpoint: "tcp://127.0.0.1:*", name: "conformance"))
/// try Conformance.install(on: host)
/// ```
public enum Conformance {
    /// The conformance host's `welcome.info` (SPEC 11): give it to the host's configuration.
    public static let info: [String: JSONValue] = ["protocol_revision": "1.6"]
    /// Who may read the conformance host's `$stats` (SPEC 11): anyone, since it serves fixtures, not secrets.
    public static let statsAccess = StatsAccess(anyone: true)

    public static func install(on host: BridgeHost) throws {
        // Quick and non-blocking: answered on the socket thread as read, without a task (handleInline).
        try host.handleInline("echo", describedAs: .init(Echo.self)) { payload, _ in payload }

        // The handlers read JSON themselves (add keeps integers exact, the others check ranges and answer in the
        // protocol's words); the types below give `$describe` their contract.
        try host.handleInline("add", describedAs: .init(Add.self)) { payload, _ in
            switch (payload["a"], payload["b"]) {
            case (.int(let a)?, .int(let b)?):
                let (sum, overflow) = a.addingReportingOverflow(b)
                return overflow ? .double(Double(a) + Double(b)) : .int(sum)
            case (.int(let a)?, .double(let b)?): return .double(Double(a) + b)
            case (.double(let a)?, .int(let b)?): return .double(a + Double(b))
            case (.double(let a)?, .double(let b)?): return .double(a + b)
            default: throw BridgeError(.invalidPayload, "add takes {\"a\": number, \"b\": number}")
            }
        }

        try host.handle("sleep", describedAs: .init(Sleep.self)) { payload, _ in
            guard let ms = payload["ms"]?.intValue, ms >= 0 else {
                throw BridgeError(.invalidPayload, "sleep takes {\"ms\": a non-negative integer}")
            }
            try await cancellableSleep(for: .milliseconds(ms))
            return ["slept_ms": .int(ms)]
        }

        try host.handle("count", describedAs: .init(Count.self)) { payload, request in
            guard let n = payload["n"]?.intValue, n >= 0 else {
                throw BridgeError(.invalidPayload, "count takes {\"n\": a non-negative integer, \"delay_ms\"?: integer}")
            }
            let delay = payload["delay_ms"]?.intValue ?? 0
            guard payload["delay_ms"] == nil || (payload["delay_ms"]?.intValue != nil && delay >= 0) else {
                throw BridgeError(.invalidPayload, "count's delay_ms is a non-negative integer")
            }
            if n > 0 {
                for i in 1...n {
                    if delay > 0 { try await cancellableSleep(for: .milliseconds(delay)) }
                    try await request.progress(["i": .int(i), "n": .int(n)])
                    // Nothing above need suspend (no progress asked for, or progress coalesced for a stalled
                    // reader): let other handlers, and other peers' requests, have the thread.
                    if delay == 0 && i % 64 == 0 { await Task.yield() }
                }
            }
            return ["n": .int(n)]
        }

        try host.handleInline("fail", describedAs: .init(Fail.self)) { payload, _ in
            guard let message = payload["message"]?.stringValue else {
                throw BridgeError(.invalidPayload, "fail takes {\"message\": string}")
            }
            throw BridgeError(.handlerError, message)
        }

        try host.handle("callback", describedAs: .init(Callback.self)) { payload, request in
            guard let action = payload["action"]?.stringValue else {
                throw BridgeError(.invalidPayload, "callback takes {\"action\": string, \"payload\": any, \"timeout_ms\"?: integer}")
            }
            let timeout = try positiveMilliseconds(payload["timeout_ms"], "callback")
            return try await caller(of: request).call(action, payload["payload"] ?? .null, timeout: timeout)
        }

        try host.handle("evaluate", describedAs: .init(Evaluate.self)) { payload, request in
            guard let script = payload["script"]?.stringValue else {
                throw BridgeError(.invalidPayload, "evaluate takes {\"script\": string, \"arguments\"?: object}")
            }
            let arguments: [String: JSONValue]
            switch payload["arguments"] {
            case nil, .null?: arguments = [:]
            case .object(let object)?: arguments = object
            default: throw BridgeError(.invalidPayload, "evaluate's arguments is an object")
            }
            return try await caller(of: request).evaluate(script, arguments: arguments)
        }

        try host.handle("emit", describedAs: .init(Emit.self)) { payload, request in
            guard let action = payload["action"]?.stringValue else {
                throw BridgeError(.invalidPayload, "emit takes {\"action\": string, \"payload\": any}")
            }
            try caller(of: request).post(action, payload["payload"] ?? .null)
            return .null
        }

        try host.handle("broadcast", describedAs: .init(Broadcast.self)) { [weak host] payload, _ in
            guard let action = payload["action"]?.stringValue, BridgeName.isValid(action) else {
                throw BridgeError(.invalidPayload, "broadcast takes {\"action\": string, \"payload\"?: any, \"topic\"?: string}")
            }
            let topic: String?
            switch payload["topic"] {
            case nil, .null?: topic = nil
            case .string(let name)? where BridgeName.isValid(name): topic = name
            default: throw BridgeError(.invalidPayload, "broadcast's topic is a string of 1 to 128 characters")
            }
            guard let host else { throw BridgeError(.handlerGone, "the host is gone") }
            let report = try await host.broadcast(action, payload["payload"] ?? .null, topic: topic)
            return ["delivered": .int(report.delivered.count), "skipped": .int(report.skipped.count)]
        }

        try host.handle("callPeer", describedAs: .init(CallPeer.self)) { [weak host] payload, _ in
            guard let name = payload["peer"]?.stringValue, BridgeName.isValid(name),
                  let action = payload["action"]?.stringValue else {
                throw BridgeError(.invalidPayload, "callPeer takes {\"peer\": name, \"action\": string, \"payload\"?: any, \"timeout_ms\"?: integer}")
            }
            let timeout = try positiveMilliseconds(payload["timeout_ms"], "callPeer")
            guard let host else { throw BridgeError(.handlerGone, "the host is gone") }
            return try await peer(named: name, on: host).call(action, payload["payload"] ?? .null, timeout: timeout)
        }

        try host.job("countJob", describedAs: .init(CountJob.self)) { payload, job in
            guard let n = payload["n"]?.intValue, n >= 0 else {
                throw BridgeError(.invalidPayload, "countJob takes {\"n\": a non-negative integer, \"delay_ms\"?: integer, \"checkpoint\"?: boolean}")
            }
            let delay = payload["delay_ms"]?.intValue ?? 0
            guard payload["delay_ms"] == nil || (payload["delay_ms"]?.intValue != nil && delay >= 0) else {
                throw BridgeError(.invalidPayload, "countJob's delay_ms is a non-negative integer")
            }
            let checkpointed: Bool
            switch payload["checkpoint"] {
            case nil: checkpointed = false
            case .bool(let value)?: checkpointed = value
            default: throw BridgeError(.invalidPayload, "countJob's checkpoint is a boolean")
            }
            // A resumed run goes on after the last step its checkpoint saved (journaled with that step's progress).
            let done = job.resumedFrom?["i"]?.intValue ?? 0
            if n > done {
                for i in (done + 1)...n {
                    if delay > 0 { try await cancellableSleep(for: .milliseconds(delay)) }
                    let progress: JSONValue = ["i": .int(i), "n": .int(n)]
                    try await job.progress(progress, checkpoint: checkpointed ? ["i": .int(i)] : nil)
                }
            }
            return ["n": .int(n)]
        }

        try host.register(OnceHandler())
    }

    private static func caller(of request: BridgeRequest) throws -> RemotePeer {
        guard let peer = request.peer else { throw BridgeError(.peerLost, "the requesting peer is gone") }
        return peer
    }

    /// The peer `callPeer` calls: the supervised one of that name (its calls wait for it through a restart), else the
    /// named peer connected now; one that is neither is `peer_lost` at once.
    private static func peer(named name: String, on host: BridgeHost) throws -> any BridgeCaller {
        if let supervised = host.supervised(named: name) { return supervised }
        guard let peer = host.peers.first(where: { $0.name == name }) else {
            throw BridgeError(.peerLost, "no peer named '\(name)' is connected, and the host supervises none by that name")
        }
        return peer
    }

    private static func positiveMilliseconds(_ value: JSONValue?, _ action: String) throws -> Duration? {
        guard let value, value != .null else { return nil }
        guard let ms = value.intValue, ms > 0 else {
            throw BridgeError(.invalidPayload, "\(action)'s timeout_ms is a positive integer")
        }
        return .milliseconds(ms)
    }
}

// The contracts of the conformance actions (SPEC 11), for `$describe`.
extension Conformance {
    enum Echo: BridgeAction {
        static let name = "echo"
        static let summary = "Answers with its payload."
        typealias Payload = JSONValue
        typealias Result = JSONValue
    }

    enum Add: BridgeAction {
        static let name = "add"
        static let summary = "Adds two numbers; the sum is an integer when both are and it fits in 64 bits."
        struct Payload: Codable, Sendable { var a: Double; var b: Double }
        typealias Result = Double
    }

    enum Sleep: BridgeAction {
        static let name = "sleep"
        static let summary = "Waits ms milliseconds; honours cancel and timeouts."
        struct Payload: Codable, Sendable { var ms: UInt64 }
        struct Result: Codable, Sendable {
            var sleptMs: UInt64
            enum CodingKeys: String, CodingKey { case sleptMs = "slept_ms" }
        }
    }

    enum Count: BridgeAction {
        static let name = "count"
        static let summary = "Counts from 1 to n, a progress event each, waiting delay_ms before each."
        struct Payload: Codable, Sendable {
            var n: UInt64
            var delayMs: UInt64?
            enum CodingKeys: String, CodingKey { case n, delayMs = "delay_ms" }
        }
        struct Progress: Codable, Sendable { var i: UInt64; var n: UInt64 }
        struct Result: Codable, Sendable { var n: UInt64 }
    }

    enum CountJob: BridgeAction {
        static let name = "countJob"
        static let summary = "A job: counts from 1 to n, a progress event each, waiting delay_ms before each; checkpoint resumes it after a restart."
        struct Payload: Codable, Sendable {
            var n: UInt64
            var delayMs: UInt64?
            var checkpoint: Bool?
            enum CodingKeys: String, CodingKey { case n, delayMs = "delay_ms", checkpoint }
        }
        struct Progress: Codable, Sendable { var i: UInt64; var n: UInt64 }
        struct Result: Codable, Sendable { var n: UInt64 }
    }

    enum Fail: BridgeAction {
        static let name = "fail"
        static let summary = "Fails with handler_error and the given message."
        struct Payload: Codable, Sendable { var message: String }
        typealias Result = JSONValue
    }

    enum Callback: BridgeAction {
        static let name = "callback"
        static let summary = "Calls action on the requesting peer and answers with that call's outcome."
        struct Payload: Codable, Sendable {
            var action: String
            var payload: JSONValue?
            var timeoutMs: UInt64?
            enum CodingKeys: String, CodingKey { case action, payload, timeoutMs = "timeout_ms" }
        }
        typealias Result = JSONValue
    }

    enum CallPeer: BridgeAction {
        static let name = "callPeer"
        static let summary = "Calls action on the named peer (a supervised one is waited for through a restart) and answers with that call's outcome."
        struct Payload: Codable, Sendable {
            var peer: String
            var action: String
            var payload: JSONValue?
            var timeoutMs: UInt64?
            enum CodingKeys: String, CodingKey { case peer, action, payload, timeoutMs = "timeout_ms" }
        }
        typealias Result = JSONValue
    }

    enum Evaluate: BridgeAction {
        static let name = "evaluate"
        static let summary = "Asks the requesting peer to evaluate a script ($evaluate) and answers with its value."
        struct Payload: Codable, Sendable { var script: String; var arguments: [String: JSONValue]? }
        typealias Result = JSONValue
    }

    enum Broadcast: BridgeAction {
        static let name = "broadcast"
        static let summary = "Broadcasts the event action with payload to every named peer, or to those subscribed to topic."
        struct Payload: Codable, Sendable { var action: String; var payload: JSONValue?; var topic: String? }
        struct Result: Codable, Sendable { var delivered: UInt64; var skipped: UInt64 }
    }

    enum Emit: BridgeAction {
        static let name = "emit"
        static let summary = "Sends the event action with payload to the requesting peer."
        struct Payload: Codable, Sendable { var action: String; var payload: JSONValue? }
        typealias Result = JSONValue
    }
}

/// The `once` action: the handler keeps itself alive (the host holds it only weakly) and lets go after its
/// first call, so every later call finds the weakly registered handler gone.
private final class OnceHandler: BridgeHandler {
    enum Action: BridgeAction {
        static let name = "once"
        static let summary = "Succeeds on its first call on this host process; later calls find its handler released."
        typealias Payload = JSONValue
        typealias Result = JSONValue
    }

    private let keepAlive = Mutex<OnceHandler?>(nil)

    init() { keepAlive.withLock { $0 = self } }

    func handle(_ payload: JSONValue, request: BridgeRequest) async throws -> JSONValue {
        keepAlive.withLock { $0 = nil }
        return ["called": true]
    }
}
