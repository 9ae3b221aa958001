import Foundation
@_spi(Fixtures) import ZeroBridge

/// One conversation fixture (protocol/SPEC.md, section 14.2): what one or more peers send to a live host and
/// what they must receive. Load with ``FixtureLoader``; run with ``ConversationRunner``.
public struct Conversation: Sendable, CustomStringConvertible {
    /// What the conversation shows; it names the conversation's test.
    public let description: String
    /// The file it came from (empty for one made from text).
    public let file: String
    /// The peers' names, one DEALER each.
    public let clients: [String]
    /// The host limits the conversation relies on (`max_message_bytes`, `max_in_flight`), if it says.
    public let limits: [String: Int]
    /// A peer conversation (SPEC 14.3, `"plays": "host"`): the runner plays the host against a peer library,
    /// with ``PeerConversationRunner``.
    public let playsHost: Bool
    /// For a peer conversation: start the peer under test with evaluation on (`--evaluate`).
    public let evaluate: Bool

    let autoPong: Bool
    let steps: [Step]

    /// Whether it kills and restarts the host (a `restart_host` step, SPEC 14.2): it then needs a host of its own,
    /// with a journal, that the runner can restart (``ConversationRunner/init(endpoint:restartHost:)``).
    public var restartsHost: Bool {
        steps.contains { if case .restartHost = $0.action { true } else { false } }
    }

    /// Reads a conversation from JSON text, checking it against the format (the same rules as
    /// `fixtures/fixture.schema.json`, plus the ones a schema cannot say: clients named in steps exist).
    public init(json: [UInt8], file: String = "") throws(FixtureError) {
        let value: JSONValue
        do throws(BridgeError) {
            value = try FixtureCodec.parse(json, maxDepth: 512)
        } catch {
            throw FixtureError(file: file, path: "$", reason: "not JSON: \(error.message)")
        }
        try self.init(value: value, file: file)
    }

    init(value: JSONValue, file: String) throws(FixtureError) {
        let reader = FixtureReader(file: file)
        let top = try reader.object(value, "$")
        playsHost = top["plays"] != nil
        if playsHost {
            try reader.allowOnly(top, ["format", "description", "plays", "evaluate", "pings", "steps"], "$")
            guard top["plays"] == "host" else { throw reader.fail("$.plays", "must be \"host\"") }
        } else {
            try reader.allowOnly(top, ["format", "description", "clients", "pings", "limits", "steps"], "$")
        }
        guard top["format"] == 1 else { throw reader.fail("$.format", "must be 1 (the conversation format's version)") }
        description = try reader.nonEmptyString(top["description"], "$.description")
        switch top["evaluate"] {
        case nil: evaluate = false
        case .bool(let on)?: evaluate = on
        default: throw reader.fail("$.evaluate", "must be a boolean")
        }
        var clients: [String] = []
        if playsHost {
            clients = [Conversation.peerUnderTest]
        } else {
            guard let clientList = top["clients"]?.arrayValue, !clientList.isEmpty else {
                throw reader.fail("$.clients", "must be a non-empty array of client names")
            }
            for (index, item) in clientList.enumerated() {
                let name = try reader.clientName(item, "$.clients[\(index)]")
                guard !clients.contains(name) else { throw reader.fail("$.clients[\(index)]", "'\(name)' is listed twice") }
                clients.append(name)
            }
        }
        switch top["pings"] {
        case nil, "auto": autoPong = true
        case "manual": autoPong = false
        default: throw reader.fail("$.pings", "must be \"auto\" or \"manual\"")
        }
        var limits: [String: Int] = [:]
        if let limitsValue = top["limits"] {
            let members = try reader.object(limitsValue, "$.limits")
            try reader.allowOnly(members, ["max_message_bytes", "max_in_flight"], "$.limits")
            for (key, limit) in members {
                guard case .int(let number) = limit, number >= 1 else { throw reader.fail("$.limits.\(key)", "must be a positive integer") }
                limits[key] = number
            }
        }
        guard let stepList = top["steps"]?.arrayValue, !stepList.isEmpty else {
            throw reader.fail("$.steps", "must be a non-empty array of steps")
        }
        var steps: [Step] = []
        for (index, stepValue) in stepList.enumerated() {
            steps.append(try reader.step(stepValue, index: index, clients: clients, playsHost: playsHost))
        }
        self.file = file
        self.clients = clients
        self.limits = limits
        self.steps = steps
    }

    /// The one client of a peer conversation: the peer under test.
    static let peerUnderTest = "peer"
}

/// A fixture file that does not follow the format: which file, where in it (a JSON path), and why.
public struct FixtureError: Error, Sendable, CustomStringConvertible {
    public var file: String
    public var path: String
    public var reason: String

    public var description: String {
        // A file-level problem has no JSON path; say only the file then.
        let place = [file, path].filter { !$0.isEmpty }.joined(separator: ": ")
        return "\(place): \(reason)"
    }
}

/// One step of a conversation, checked when loaded.
struct Step: Sendable {
    enum Action: Sendable {
        case send(body: JSONValue, attachments: [JSONValue], repeatCount: Int?)
        case sendFrames([JSONValue])
        case expect(pattern: JSONValue, withinMs: Int, skip: [JSONValue], repeatCount: Int?)
        case expectUnordered(items: [(pattern: JSONValue, repeatCount: Int?)], withinMs: Int, skip: [JSONValue])
        case expectNothing(ms: Int, skip: [JSONValue])
        /// Kill the host (SIGKILL) and start it again on its journal; every client gets a fresh socket.
        case restartHost
    }

    var action: Action
    var client: String
    var note: String?
    /// The step as written, for reports.
    var source: JSONValue

    var kindName: String {
        switch action {
        case .send: "send"
        case .sendFrames: "send_frames"
        case .expect: "expect"
        case .expectUnordered: "expect_unordered"
        case .expectNothing: "expect_nothing_ms"
        case .restartHost: "restart_host"
        }
    }

    static let defaultWithinMs = 30000
}

/// Reads fixture JSON, failing with the path of the first thing that does not follow the format.
struct FixtureReader {
    let file: String

    func fail(_ path: String, _ reason: String) -> FixtureError { FixtureError(file: file, path: path, reason: reason) }

    func object(_ value: JSONValue, _ path: String) throws(FixtureError) -> [String: JSONValue] {
        guard case .object(let members) = value else { throw fail(path, "must be an object") }
        return members
    }

    func allowOnly(_ members: [String: JSONValue], _ allowed: Set<String>, _ path: String) throws(FixtureError) {
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw fail(JSONText.path(path, key: unknown), "is not a field of this object (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    func nonEmptyString(_ value: JSONValue?, _ path: String) throws(FixtureError) -> String {
        guard let text = value?.stringValue, !text.isEmpty else { throw fail(path, "must be a non-empty string") }
        return text
    }

    func clientName(_ value: JSONValue?, _ path: String) throws(FixtureError) -> String {
        guard let name = value?.stringValue, name.wholeMatch(of: /[a-z][a-z0-9_-]{0,31}/) != nil else {
            throw fail(path, "must be a client name (a lowercase letter, then up to 31 of a-z, 0-9, _ and -)")
        }
        return name
    }

    func integer(_ value: JSONValue?, _ path: String, in range: ClosedRange<Int>) throws(FixtureError) -> Int? {
        guard let value else { return nil }
        guard case .int(let number) = value, range.contains(number) else {
            throw fail(path, "must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func step(_ value: JSONValue, index: Int, clients: [String], playsHost: Bool = false) throws(FixtureError) -> Step {
        let path = "$.steps[\(index)]"
        let members = try object(value, path)
        let kinds = ["send", "send_frames", "expect", "expect_unordered", "expect_nothing_ms", "restart_host"]
            .filter { members[$0] != nil }
        guard kinds.count == 1, let kind = kinds.first else {
            throw fail(path, "must have exactly one of send, send_frames, expect, expect_unordered, expect_nothing_ms, restart_host")
        }
        if kind == "restart_host" {
            guard !playsHost else { throw fail("\(path).restart_host", "a peer conversation has no host to restart") }
            guard members["restart_host"] == "kill" else { throw fail("\(path).restart_host", "must be \"kill\"") }
        }
        let options: [String: Set<String>] = [
            "send": ["client", "repeat", "attachments", "deliberately_invalid"],
            "send_frames": ["client"],
            "expect": ["client", "within_ms", "skip", "repeat"],
            "expect_unordered": ["client", "within_ms", "skip"],
            "expect_nothing_ms": ["client", "skip"],
            "restart_host": [],
        ]
        try allowOnly(members, options[kind]!.union([kind, "note"]), path)

        var client = clients[0]
        if playsHost, members["client"] != nil {
            throw fail("\(path).client", "a peer conversation has one peer under test: steps name no client")
        }
        if let named = members["client"] {
            client = try clientName(named, "\(path).client")
            guard clients.contains(client) else { throw fail("\(path).client", "'\(client)' is not one of the conversation's clients") }
        }
        var note: String?
        if let noteValue = members["note"] {
            guard let text = noteValue.stringValue else { throw fail("\(path).note", "must be a string") }
            note = text
        }
        if let reason = members["deliberately_invalid"], reason.stringValue?.isEmpty != false {
            throw fail("\(path).deliberately_invalid", "must be a non-empty string saying why the body is invalid")
        }
        // nil when the step has no repeat: only repeated steps replace {{i}}.
        let repeatCount = try integer(members["repeat"], "\(path).repeat", in: 1...100_000)
        let withinMs = try integer(members["within_ms"], "\(path).within_ms", in: 1...600_000) ?? Step.defaultWithinMs
        var skip: [JSONValue] = []
        if let skipValue = members["skip"] {
            guard let list = skipValue.arrayValue, !list.isEmpty else { throw fail("\(path).skip", "must be a non-empty array of patterns") }
            for (itemIndex, item) in list.enumerated() {
                try messagePattern(item, "\(path).skip[\(itemIndex)]")
            }
            skip = list
        }

        let action: Step.Action
        switch kind {
        case "send":
            let body = members["send"]!
            guard case .object = body else { throw fail("\(path).send", "must be an object (a message body)") }
            try template(body, "\(path).send", perLanguage: playsHost)
            var attachments: [JSONValue] = []
            if let list = members["attachments"] {
                guard let frames = list.arrayValue else { throw fail("\(path).attachments", "must be an array of frames") }
                for (frameIndex, frameValue) in frames.enumerated() { try frame(frameValue, "\(path).attachments[\(frameIndex)]") }
                attachments = frames
            }
            action = .send(body: body, attachments: attachments, repeatCount: repeatCount)
        case "send_frames":
            guard let frames = members["send_frames"]?.arrayValue, !frames.isEmpty else {
                throw fail("\(path).send_frames", "must be a non-empty array of frames")
            }
            for (frameIndex, frameValue) in frames.enumerated() { try frame(frameValue, "\(path).send_frames[\(frameIndex)]") }
            action = .sendFrames(frames)
        case "expect":
            let pattern = members["expect"]!
            try messagePattern(pattern, "\(path).expect")
            action = .expect(pattern: pattern, withinMs: withinMs, skip: skip, repeatCount: repeatCount)
        case "expect_unordered":
            guard let list = members["expect_unordered"]?.arrayValue, !list.isEmpty else {
                throw fail("\(path).expect_unordered", "must be a non-empty array of {\"body\": pattern, \"repeat\"?: n}")
            }
            var items: [(pattern: JSONValue, repeatCount: Int?)] = []
            for (itemIndex, itemValue) in list.enumerated() {
                let itemPath = "\(path).expect_unordered[\(itemIndex)]"
                let item = try object(itemValue, itemPath)
                try allowOnly(item, ["body", "repeat"], itemPath)
                guard let body = item["body"] else { throw fail(itemPath, "needs a body pattern") }
                try messagePattern(body, "\(itemPath).body")
                items.append((body, try integer(item["repeat"], "\(itemPath).repeat", in: 1...100_000)))
            }
            action = .expectUnordered(items: items, withinMs: withinMs, skip: skip)
        case "restart_host":
            action = .restartHost
        default:
            guard let ms = try integer(members["expect_nothing_ms"], "\(path).expect_nothing_ms", in: 1...600_000) else {
                throw fail("\(path).expect_nothing_ms", "must be an integer from 1 to 600000")
            }
            action = .expectNothing(ms: ms, skip: skip)
        }
        return Step(action: action, client: client, note: note, source: value)
    }

    /// A frame: exactly one of text, base64, json, byte+count, concat.
    func frame(_ value: JSONValue, _ path: String) throws(FixtureError) {
        let members = try object(value, path)
        switch Set(members.keys) {
        case ["text"]:
            guard members["text"]?.stringValue != nil else { throw fail("\(path).text", "must be a string") }
        case ["base64"]:
            guard let text = members["base64"]?.stringValue, Data(base64Encoded: text) != nil else {
                throw fail("\(path).base64", "must be standard base64 with padding")
            }
        case ["json"]:
            break
        case ["byte", "count"]:
            _ = try integer(members["byte"], "\(path).byte", in: 0...255)
            _ = try integer(members["count"], "\(path).count", in: 0...67_108_864)
        case ["concat"]:
            guard let parts = members["concat"]?.arrayValue else { throw fail("\(path).concat", "must be an array of frames") }
            for (index, part) in parts.enumerated() { try frame(part, "\(path).concat[\(index)]") }
        default:
            throw fail(path, "a frame is one of {\"text\"}, {\"base64\"}, {\"json\"}, {\"byte\", \"count\"}, {\"concat\"}")
        }
    }

    /// A sent body: JSON whose only `$` objects are `{"$var": name}` and `{"$literal": x}`.
    /// `perLanguage`: peer conversations may also say `{"$per_language": {language: template}}`.
    func template(_ value: JSONValue, _ path: String, perLanguage: Bool = false) throws(FixtureError) {
        switch value {
        case .object(let members):
            if let (key, argument) = Pattern.matcher(value) {
                switch key {
                case "$var": try variableName(argument, "\(path).$var")
                case "$literal": break
                case "$per_language" where perLanguage:
                    guard case .object(let languages) = argument, !languages.isEmpty else {
                        throw fail("\(path).$per_language", "must be an object of templates by language")
                    }
                    for (language, member) in languages {
                        let memberPath = JSONText.path("\(path).$per_language", key: language)
                        _ = try clientName(.string(language), memberPath)
                        try template(member, memberPath, perLanguage: true)
                    }
                default:
                    let allowed = perLanguage ? "$var, $literal and $per_language" : "$var and $literal"
                    throw fail(path, "\(key) is not a template; a sent body may use only \(allowed)")
                }
                return
            }
            for (key, member) in members {
                if key.hasPrefix("$") { throw fail(JSONText.path(path, key: key), "keys starting with $ must be wrapped in {\"$literal\": ...}") }
                try template(member, JSONText.path(path, key: key), perLanguage: perLanguage)
            }
        case .array(let items):
            for (index, item) in items.enumerated() { try template(item, JSONText.path(path, index: index), perLanguage: perLanguage) }
        default:
            break
        }
    }

    /// A pattern for a whole body: an object pattern or a matcher.
    func messagePattern(_ value: JSONValue, _ path: String) throws(FixtureError) {
        guard case .object = value else { throw fail(path, "must be an object pattern or a matcher") }
        try pattern(value, path)
    }

    func pattern(_ value: JSONValue, _ path: String) throws(FixtureError) {
        switch value {
        case .object(let members):
            if let (key, argument) = Pattern.matcher(value) {
                let argumentPath = "\(path).\(key)"
                switch key {
                case "$any":
                    guard let type = argument.stringValue, Pattern.anyTypes.contains(type) else {
                        throw fail(argumentPath, "must be one of \(Pattern.anyTypes.sorted().joined(separator: ", "))")
                    }
                case "$absent":
                    guard argument == .bool(true) else { throw fail(argumentPath, "must be true") }
                case "$oneOf":
                    guard let alternatives = argument.arrayValue, !alternatives.isEmpty else {
                        throw fail(argumentPath, "must be a non-empty array of patterns")
                    }
                    for (index, alternative) in alternatives.enumerated() { try pattern(alternative, "\(argumentPath)[\(index)]") }
                case "$not":
                    try pattern(argument, argumentPath)
                case "$capture", "$var":
                    try variableName(argument, argumentPath)
                case "$exact":
                    guard case .object(let inner) = argument, Pattern.matcher(argument) == nil else {
                        throw fail(argumentPath, "must be an object pattern")
                    }
                    for (innerKey, member) in inner { try pattern(member, JSONText.path(argumentPath, key: innerKey)) }
                case "$unordered":
                    guard let items = argument.arrayValue else { throw fail(argumentPath, "must be an array of patterns") }
                    for (index, item) in items.enumerated() { try pattern(item, "\(argumentPath)[\(index)]") }
                case "$literal":
                    break
                default:
                    throw fail(path, "\(key) is not a matcher")
                }
                return
            }
            for (key, member) in members {
                if key.hasPrefix("$") { throw fail(JSONText.path(path, key: key), "only a matcher (an object with one key) may use a $ key") }
                try pattern(member, JSONText.path(path, key: key))
            }
        case .array(let items):
            for (index, item) in items.enumerated() { try pattern(item, JSONText.path(path, index: index)) }
        default:
            break
        }
    }

    func variableName(_ value: JSONValue, _ path: String) throws(FixtureError) {
        guard let name = value.stringValue, name.wholeMatch(of: /[A-Za-z_][A-Za-z0-9_]{0,63}/) != nil else {
            throw fail(path, "must be a variable name (a letter or _, then up to 63 letters, digits or _)")
        }
    }
}
