import Foundation
@_spi(Fixtures) import ZeroBridge

/// Turns one peer session, as it passed between a peer and a host, into a conversation fixture that replays.
///
/// What the host chooses is generalised: its request ids and session ids are captured into variables (and the
/// peer's answers refer to them), error messages and date-time strings match any string, `timeout_ms` on its
/// calls any integer. Timings become generous `within_ms` bounds; the recording's own clock is not written.
/// Messages of different requests that arrive together are expected in any order (`expect_unordered`); progress
/// of a request after the peer cancelled it is skipped, not expected. How many progress events a request sends,
/// and what they say, depends on timing in most services, so progress is skipped (any number of them, in order,
/// while the request is open) rather than expected one by one; numbers with a fraction (durations, rates) match
/// any number. Heartbeats (`ping`/`pong`) are left out:
/// the runner answers the host's pings itself. For example:
/// ```swift
/// var recorder = ConversationRecorder()
/// recorder.peerSent(framesFromPeer, at: .now)
/// recorder.hostSent(framesFromHost, at: .now)
/// let text = recorder.fixture(description: "import of one folder")   // a conversation fixture
/// ```
public struct ConversationRecorder: Sendable {
    private enum Direction: Sendable { case fromPeer, fromHost }
    private var events: [(direction: Direction, frames: [[UInt8]], time: ContinuousClock.Instant)] = []

    public init() {}

    /// The name the peer gave in its `hello`, if it said hello.
    public private(set) var peerName: String?

    /// Whether the peer has sent anything yet (a recording without it is not worth a fixture).
    public var hasPeerMessages: Bool { events.contains { $0.direction == .fromPeer } }

    /// Records the frames a peer sent, without the ROUTER's routing id.
    public mutating func peerSent(_ frames: [[UInt8]], at time: ContinuousClock.Instant) {
        if frames.count >= 2, let body = try? FixtureCodec.parse(frames[1]), body["type"] == "hello",
           let name = body["peer"]?.stringValue {
            peerName = name
        }
        events.append((.fromPeer, frames, time))
    }

    /// Records the frames the host sent to the peer.
    public mutating func hostSent(_ frames: [[UInt8]], at time: ContinuousClock.Instant) {
        events.append((.fromHost, frames, time))
    }

    /// The recording as a conversation fixture (JSON text, valid against `fixtures/fixture.schema.json`).
    public func fixture(description: String) -> String {
        var builder = FixtureBuilder()
        for event in events {
            switch event.direction {
            case .fromPeer: builder.peerSent(event.frames, at: event.time)
            case .fromHost: builder.hostSent(event.frames, at: event.time)
            }
        }
        return builder.finish(description: description)
    }
}

/// The state of turning events into steps, in order.
private struct FixtureBuilder {
    private var steps: [JSONValue] = []
    /// Host messages since the peer last sent something: they may race one another.
    private var run: [(pattern: JSONValue, stream: String, time: ContinuousClock.Instant)] = []
    private var runStart: ContinuousClock.Instant?
    private var runSkip: [String] = []
    private var lastEvent: ContinuousClock.Instant?
    /// The host's request ids, by the variable that captures them.
    private var hostCalls: [String: String] = [:]
    private var sessions: [String: String] = [:]
    /// Resume tokens the host gave, by the variable that captures them.
    private var tokens: [String: String] = [:]
    /// The peer's requests not answered yet, and those of them it cancelled.
    private var outstanding: Set<String> = []
    private var cancelled: Set<String> = []
    /// Requests whose progress has been seen and whose response has not.
    private var progressing: Set<String> = []
    private var endedWithBye = false
    private var nullResponses = 0

    mutating func peerSent(_ frames: [[UInt8]], at time: ContinuousClock.Instant) {
        let body = frames.count >= 2 ? try? FixtureCodec.parse(frames[1]) : nil
        let type = body?["type"]?.stringValue
        // Heartbeats are the runner's business (it answers pings itself), not the conversation's.
        if type == "ping" || type == "pong" { return }
        flushRun()
        lastEvent = time
        endedWithBye = type == "bye"
        if let body, case .object = body, frames[0].isEmpty {
            var step: [String: JSONValue] = ["send": template(for: body, type: type)]
            if frames.count > 2 { step["attachments"] = .array(frames[2...].map(Self.frameSpec)) }
            if let refusal = FixtureCodec.refusal(of: frames[1]) {
                step["deliberately_invalid"] = .string("recorded as the peer sent it: \(refusal.message)")
            }
            steps.append(.object(step))
        } else {
            steps.append(["send_frames": .array(frames.map(Self.frameSpec))])
        }
        guard let body, FixtureCodec.refusal(of: frames[1]) == nil, let id = body["id"]?.stringValue else { return }
        switch type {
        case "request": outstanding.insert(id)
        case "cancel": cancelled.insert(id)
        default: break
        }
    }

    mutating func hostSent(_ frames: [[UInt8]], at time: ContinuousClock.Instant) {
        guard frames.count >= 2, let body = try? FixtureCodec.parse(frames[1]), let type = body["type"]?.stringValue else { return }
        // A host's ping, its pong to a hidden ping, and its bye when it shuts down are not what a replay checks.
        if type == "ping" || type == "pong" || type == "bye" { return }
        let id = body["id"]?.stringValue
        if type == "progress", let id, cancelled.contains(id) { return }  // may or may not come on replay: skipped
        if runStart == nil {
            runStart = lastEvent ?? time
            // Progress of requests cancelled and not yet answered may still arrive while this run is expected.
            runSkip = cancelled.intersection(outstanding).sorted()
        }
        if type == "response", let id { outstanding.remove(id) }
        lastEvent = time
        if type == "progress", let id {
            progressing.insert(id)
            return
        }
        let stream: String
        switch type {
        case "response", "progress":
            if let id { stream = "id:" + id } else { nullResponses += 1; stream = "null:\(nullResponses)" }
        case "request", "cancel": stream = "call:" + (id ?? "")
        default: stream = type
        }
        run.append((expectation(for: body, type: type), stream, time))
    }

    mutating func finish(description: String) -> String {
        flushRun()
        if !progressing.isEmpty {
            // A request still open at the end may send more progress before the conversation ends.
            steps.append(.object(["expect_nothing_ms": 100, "skip": .array(progressing.sorted().map(Self.anyProgress))]))
        }
        if endedWithBye && outstanding.isEmpty {
            steps.append(["expect_nothing_ms": 200, "note": "bye is never answered"])
        }
        var text = "{\n"
        text += "  \"format\": 1,\n"
        text += "  \"description\": \(JSONValue.string(description).description),\n"
        text += "  \"clients\": [\"peer\"],\n"
        text += "  \"steps\": [\n"
        text += steps.map { "    " + Self.writeStep($0) }.joined(separator: ",\n")
        text += "\n  ]\n}\n"
        return text
    }

    // MARK: Steps from host messages

    /// Writes the messages gathered since the peer last spoke: one `expect` each when they belong to one
    /// request (their order is the protocol's), one `expect_unordered` when several requests' messages race.
    private mutating func flushRun() {
        defer { run = []; runStart = nil }
        guard let start = runStart, !run.isEmpty else { return }
        let skip = Set(runSkip).union(progressing).sorted().map(Self.anyProgress)
        // A request's progress ends with its response.
        for message in run where message.stream.hasPrefix("id:") { progressing.remove(String(message.stream.dropFirst(3))) }
        func options(_ step: inout [String: JSONValue], waited: Duration) {
            if let within = Self.generousBound(waited) { step["within_ms"] = .int(within) }
            if !skip.isEmpty { step["skip"] = .array(skip) }
        }
        if Set(run.map(\.stream)).count == 1 {
            var previous = start
            for message in run {
                var step: [String: JSONValue] = ["expect": message.pattern]
                options(&step, waited: message.time - previous)
                previous = message.time
                steps.append(.object(step))
            }
        } else {
            var step: [String: JSONValue] = ["expect_unordered": .array(run.map { ["body": $0.pattern] })]
            options(&step, waited: run.last!.time - start)
            steps.append(.object(step))
        }
    }

    private static func anyProgress(_ id: String) -> JSONValue {
        ["v": 1, "type": "progress", "id": .string(id), "seq": ["$any": "integer"], "payload": ["$any": "value"]]
    }

    /// Three times what the recording waited, in whole seconds; nil when the default (`Step.defaultWithinMs`) is enough.
    private static func generousBound(_ waited: Duration) -> Int? {
        let milliseconds = Int(waited.components.seconds) * 1000 + Int(waited.components.attoseconds / 1_000_000_000_000_000)
        let bound = ((milliseconds * 3 + 999) / 1000) * 1000
        return bound > Step.defaultWithinMs ? min(bound, 600_000) : nil
    }

    private mutating func expectation(for body: JSONValue, type: String) -> JSONValue {
        var pattern: [String: JSONValue] = ["v": 1, "type": .string(type)]
        let anyString: JSONValue = ["$any": "string"]
        switch type {
        case "welcome":
            for key in ["host", "heartbeat_ms", "limits"] { if let value = body[key] { pattern[key] = Self.general(value) } }
            if let session = body["session"]?.stringValue { pattern["session"] = sessionPattern(session) }
            if let token = body["resume_token"]?.stringValue { pattern["resume_token"] = tokenPattern(token) }
            if let actions = body["actions"]?.arrayValue { pattern["actions"] = ["$unordered": .array(actions)] }
        case "request":
            if let id = body["id"]?.stringValue {
                let name = "host_call_\(hostCalls.count + 1)"
                hostCalls[id] = name
                pattern["id"] = ["$capture": .string(name)]
            }
            for key in ["action", "payload", "progress"] { if let value = body[key] { pattern[key] = Self.general(value) } }
            if body["timeout_ms"] != nil { pattern["timeout_ms"] = ["$any": "integer"] }
        case "cancel":
            if let id = body["id"]?.stringValue { pattern["id"] = hostCalls[id].map { ["$var": .string($0)] } ?? .string(id) }
        case "response":
            pattern["id"] = body["id"] ?? .null
            pattern["ok"] = body["ok"] ?? .null
            if let result = body["result"] { pattern["result"] = Self.general(result) }
            if let error = body["error"] {
                // Error messages are human text: the code is what a conversation checks.
                pattern["error"] = ["code": error["code"] ?? anyString, "message": anyString]
            }
        default:
            for (key, value) in body.objectValue ?? [:] where key != "v" && key != "type" { pattern[key] = Self.general(value) }
        }
        return .object(pattern)
    }

    /// A resume token is a secret: a recording captures it and never writes it down.
    private mutating func tokenPattern(_ token: String) -> JSONValue {
        if let name = tokens[token] { return ["$var": .string(name)] }
        let name = tokens.isEmpty ? "resume_token" : "resume_token_\(tokens.count + 1)"
        tokens[token] = name
        return ["$capture": .string(name)]
    }

    private mutating func sessionPattern(_ session: String) -> JSONValue {
        if let name = sessions[session] { return ["$var": .string(name)] }
        let name = sessions.isEmpty ? "session" : "session_\(sessions.count + 1)"
        sessions[session] = name
        return ["$capture": .string(name)]
    }

    /// A received value as a pattern: itself, except date-times (any string) and objects with `$` keys, which a
    /// pattern must take literally.
    private static func general(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text):
            return text.wholeMatch(of: /\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?/) != nil ? ["$any": "string"] : value
        case .double(let number) where number.rounded(.towardZero) != number:
            return ["$any": "number"]  // a measurement (seconds, a rate): it differs on every run
        case .array(let items):
            return .array(items.map(general))
        case .object(let members):
            if members.keys.contains(where: { $0.hasPrefix("$") }) { return ["$literal": value] }
            return .object(members.mapValues(general))
        default:
            return value
        }
    }

    // MARK: Steps from peer messages

    /// The body the peer sent, with the host's ids it answers and sessions it resumes as variables.
    private func template(for body: JSONValue, type: String?) -> JSONValue {
        guard case .object(var members) = body else { return body }
        if type == "response" || type == "progress", let id = members["id"]?.stringValue, let name = hostCalls[id] {
            members["id"] = ["$var": .string(name)]
        }
        if type == "hello", let session = members["session"]?.stringValue, let name = sessions[session] {
            members["session"] = ["$var": .string(name)]
        }
        if type == "hello", let token = members["resume_token"]?.stringValue {
            // A token this recording did not see given out resumes nothing on replay either; it is not written down.
            members["resume_token"] = tokens[token].map { ["$var": .string($0)] } ?? .string(String(repeating: "0", count: 64))
        }
        return .object(members.mapValues(Self.literalWhereNeeded))
    }

    /// Objects with `$` keys, which a sent body may only hold inside `$literal`.
    private static func literalWhereNeeded(_ value: JSONValue) -> JSONValue {
        if Pattern.matcher(value)?.key == "$var" { return value }
        switch value {
        case .array(let items): return .array(items.map(literalWhereNeeded))
        case .object(let members):
            if members.keys.contains(where: { $0.hasPrefix("$") }) { return ["$literal": value] }
            return .object(members.mapValues(literalWhereNeeded))
        default: return value
        }
    }

    private static func frameSpec(_ bytes: [UInt8]) -> JSONValue {
        if bytes.count >= 16, let first = bytes.first, bytes.allSatisfy({ $0 == first }) {
            return ["byte": .int(Int(first)), "count": .int(bytes.count)]
        }
        if let text = String(validating: bytes, as: UTF8.self) { return ["text": .string(text)] }
        return ["base64": .string(Data(bytes).base64EncodedString())]
    }

    /// One step on one line, its kind first (as the hand-written fixtures read).
    private static func writeStep(_ step: JSONValue) -> String {
        guard case .object(let members) = step else { return JSONText.write(step) }
        let kinds = ["send", "send_frames", "expect", "expect_unordered", "expect_nothing_ms"]
        let order = kinds.filter { members[$0] != nil } + members.keys.filter { !kinds.contains($0) }.sorted()
        return "{" + order.map { "\(JSONValue.string($0).description): \(JSONText.write(members[$0]!))" }.joined(separator: ", ") + "}"
    }
}
