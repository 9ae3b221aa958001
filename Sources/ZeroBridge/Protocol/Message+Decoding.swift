extension Message {
    /// Decodes and validates a body. On failure, the error to answer with (`bad_message`, or
    /// `unsupported_version` when `v` is an integer other than 1) and the offending id when readable.
    ///
    /// The body's own members are read in place, without building a dictionary for them; only the values of
    /// the fields the protocol defines are kept (unknown fields are checked for well-formedness, then ignored).
    static func decode(_ body: UnsafeRawBufferPointer, maxDepth: Int = 64) -> Result<Message, DecodeFailure> {
        var parser = JSONParser(body, maxDepth: maxDepth)
        var envelope = Envelope()
        do throws(JSONParseError) {
            guard parser.peekAfterWhitespace() == JSONByte.openBrace else {
                // Not an object; say whether it is JSON at all.
                var whole = JSONParser(body, maxDepth: maxDepth)
                do throws(JSONParseError) {
                    let value = try whole.parseDocument()
                    return .failure(DecodeFailure(id: nil, error: BridgeError(
                        .badMessage, "the body must be a JSON object, not \(value.kindDescription)")))
                } catch {
                    return .failure(notJSON(error))
                }
            }
            try parser.parseMembers(match: Envelope.Field.init(key:), store: { envelope[$0] = $1 })
            try parser.expectEnd()
        } catch {
            return .failure(notJSON(error))
        }
        return envelope.validate()
    }

    /// Decodes and validates a body; see ``decode(_:maxDepth:)-(UnsafeRawBufferPointer,_)``.
    static func decode(_ body: [UInt8], maxDepth: Int = 64) -> Result<Message, DecodeFailure> {
        body.withUnsafeBytes { decode($0, maxDepth: maxDepth) }
    }

    /// Validates an already parsed body, with the same rules as decoding bytes.
    static func decode(_ value: JSONValue) -> Result<Message, DecodeFailure> {
        guard case .object(let members) = value else {
            return .failure(DecodeFailure(id: nil, error: BridgeError(
                .badMessage, "the body must be a JSON object, not \(value.kindDescription)")))
        }
        var envelope = Envelope()
        for field in Envelope.Field.allCases {
            if let member = members[field.name] { envelope[field] = member }
        }
        return envelope.validate()
    }

    private static func notJSON(_ error: JSONParseError) -> DecodeFailure {
        DecodeFailure(id: nil, error: BridgeError(.badMessage, "the body is not valid JSON: \(error)"))
    }
}

extension JSONValue {
    /// "a string", "an array", ... for error messages.
    var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double: "a non-integer number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        case .bytes: "bytes"
        }
    }
}

/// The members of a body that the protocol defines, whatever the message type, before validation.
private struct Envelope {
    enum Field: Int, CaseIterable {
        case v, type, id, action, payload, timeoutMs, progress, ok, result, error, seq, peer, actions, features,
             session, resumeToken, heartbeatMs, host, limits, deadline, skipped, catalogue, topics, info, topic,
             idempotencyKey, libraryVersion, traceparent, tracestate, batch

        var name: String {
            switch self {
            case .v: "v"
            case .type: "type"
            case .id: "id"
            case .action: "action"
            case .payload: "payload"
            case .timeoutMs: "timeout_ms"
            case .progress: "progress"
            case .ok: "ok"
            case .result: "result"
            case .error: "error"
            case .seq: "seq"
            case .peer: "peer"
            case .actions: "actions"
            case .features: "features"
            case .session: "session"
            case .resumeToken: "resume_token"
            case .heartbeatMs: "heartbeat_ms"
            case .host: "host"
            case .limits: "limits"
            case .deadline: "deadline"
            case .skipped: "skipped"
            case .catalogue: "catalogue"
            case .topics: "topics"
            case .info: "info"
            case .topic: "topic"
            case .idempotencyKey: "idempotency_key"
            case .libraryVersion: "library_version"
            case .traceparent: "traceparent"
            case .tracestate: "tracestate"
            case .batch: "batch"
            }
        }

        /// Matches a key's UTF-8 bytes by length and content, without making a String.
        init?(key: UnsafeBufferPointer<UInt8>) {
            @inline(__always) func equals(_ literal: StaticString) -> Bool {
                memcmpEqual(key, literal)
            }
            switch key.count {
            case 1: if key[0] == UInt8(ascii: "v") { self = .v; return }
            case 2:
                if equals("id") { self = .id; return }
                if equals("ok") { self = .ok; return }
            case 3: if equals("seq") { self = .seq; return }
            case 4:
                if equals("type") { self = .type; return }
                if equals("info") { self = .info; return }
                if equals("peer") { self = .peer; return }
                if equals("host") { self = .host; return }
            case 5:
                if equals("error") { self = .error; return }
                if equals("topic") { self = .topic; return }
                if equals("batch") { self = .batch; return }
            case 6:
                if equals("action") { self = .action; return }
                if equals("topics") { self = .topics; return }
                if equals("result") { self = .result; return }
                if equals("limits") { self = .limits; return }
            case 7:
                if equals("payload") { self = .payload; return }
                if equals("actions") { self = .actions; return }
                if equals("session") { self = .session; return }
                if equals("skipped") { self = .skipped; return }
            case 8:
                if equals("progress") { self = .progress; return }
                if equals("features") { self = .features; return }
                if equals("deadline") { self = .deadline; return }
            case 9: if equals("catalogue") { self = .catalogue; return }
            case 10:
                if equals("timeout_ms") { self = .timeoutMs; return }
                if equals("tracestate") { self = .tracestate; return }
            case 11: if equals("traceparent") { self = .traceparent; return }
            case 12:
                if equals("heartbeat_ms") { self = .heartbeatMs; return }
                if equals("resume_token") { self = .resumeToken; return }
            case 15:
                if equals("idempotency_key") { self = .idempotencyKey; return }
                if equals("library_version") { self = .libraryVersion; return }
            default: break
            }
            return nil
        }
    }

    // Stored one by one rather than in an array: decoding a body then allocates nothing for the envelope.
    private var v, type, id, action, payload, timeoutMs, progress, ok, result, error, seq, peer, actions,
                features, session, resumeToken, heartbeatMs, host, limits, deadline, skipped, catalogue, topics, info, topic,
                idempotencyKey, libraryVersion, traceparent, tracestate, batch: JSONValue?

    subscript(field: Field) -> JSONValue? {
        get {
            switch field {
            case .v: v
            case .type: type
            case .id: id
            case .action: action
            case .payload: payload
            case .timeoutMs: timeoutMs
            case .progress: progress
            case .ok: ok
            case .result: result
            case .error: error
            case .seq: seq
            case .peer: peer
            case .actions: actions
            case .features: features
            case .session: session
            case .resumeToken: resumeToken
            case .heartbeatMs: heartbeatMs
            case .host: host
            case .limits: limits
            case .deadline: deadline
            case .skipped: skipped
            case .catalogue: catalogue
            case .topics: topics
            case .info: info
            case .topic: topic
            case .idempotencyKey: idempotencyKey
            case .libraryVersion: libraryVersion
            case .traceparent: traceparent
            case .tracestate: tracestate
            case .batch: batch
            }
        }
        set {
            switch field {
            case .v: v = newValue
            case .type: type = newValue
            case .id: id = newValue
            case .action: action = newValue
            case .payload: payload = newValue
            case .timeoutMs: timeoutMs = newValue
            case .progress: progress = newValue
            case .ok: ok = newValue
            case .result: result = newValue
            case .error: error = newValue
            case .seq: seq = newValue
            case .peer: peer = newValue
            case .actions: actions = newValue
            case .features: features = newValue
            case .session: session = newValue
            case .resumeToken: resumeToken = newValue
            case .heartbeatMs: heartbeatMs = newValue
            case .host: host = newValue
            case .limits: limits = newValue
            case .deadline: deadline = newValue
            case .skipped: skipped = newValue
            case .catalogue: catalogue = newValue
            case .topics: topics = newValue
            case .info: info = newValue
            case .topic: topic = newValue
            case .idempotencyKey: idempotencyKey = newValue
            case .libraryVersion: libraryVersion = newValue
            case .traceparent: traceparent = newValue
            case .tracestate: tracestate = newValue
            case .batch: batch = newValue
            }
        }
    }

    /// The trace context, when usable: a malformed one is ignored, never refused (SPEC 7.18).
    private var trace: TraceHeaders? {
        traceparent == nil ? nil : TraceHeaders(traceparent: traceparent, tracestate: tracestate)
    }

    /// The id to echo when the message is rejected: readable only as a string of 1 to 128 characters.
    private var echoID: String? {
        if case .string(let id)? = self[.id], Message.isValidName(id) { return id }
        return nil
    }

    func validate() -> Result<Message, DecodeFailure> {
        do throws(BridgeError) {
            return .success(try message())
        } catch {
            return .failure(DecodeFailure(id: echoID, error: error))
        }
    }

    private func message() throws(BridgeError) -> Message {
        switch self[.v] {
        case .int(1)?: break
        case .int(let version)?:
            throw BridgeError(.unsupportedVersion, "protocol version \(version) is not supported (only version 1 is)")
        case nil: throw bad("field 'v' is missing (it must be the integer 1)")
        case let other?: throw bad("field 'v' must be the integer 1, not \(other.kindDescription)")
        }
        let kind: Message.Kind
        switch self[.type] {
        case .string(let name)?:
            guard let known = Message.Kind(rawValue: name) else {
                throw bad("unknown message type '\(name.prefix(64))' (field 'type' must be one of "
                          + Message.Kind.allCases.map(\.rawValue).joined(separator: ", ") + ")")
            }
            kind = known
        case nil: throw bad("field 'type' is missing")
        case let other?: throw bad("field 'type' must be a string, not \(other.kindDescription)")
        }

        switch kind {
        case .request:
            return .request(.init(id: try name(.id), action: try name(.action), payload: self[.payload] ?? .null,
                                  timeoutMs: try positiveInteger(.timeoutMs), deadline: try nonNegativeInteger(.deadline),
                                  wantsProgress: try boolean(.progress) ?? false,
                                  idempotencyKey: try optionalName(.idempotencyKey), trace: trace))
        case .response:
            // A null id is the answer to a message whose id could not be read, so only an error may carry it.
            let id: String? = if case .null? = self[.id] { nil } else { try name(.id, orNull: true) }
            if try Envelope.required(boolean(.ok), .ok, "true or false") {
                guard let id else {
                    throw bad("field 'id' must be a string of 1 to \(Message.maxNameLength) characters when 'ok' is true "
                              + "(only an error response may have a null id)")
                }
                guard self[.error] == nil else { throw bad("a response with \"ok\": true must not have an 'error' field") }
                return .response(.init(id: id, outcome: .success(self[.result] ?? .null)))
            }
            guard self[.result] == nil else { throw bad("a response with \"ok\": false must not have a 'result' field") }
            return .response(.init(id: id, outcome: .failure(try errorObject())))
        case .progress:
            return .progress(.init(id: try name(.id), seq: try Envelope.required(positiveInteger(.seq), .seq, "a positive integer"),
                                   payload: self[.payload] ?? .null, skipped: try positiveInteger(.skipped)))
        case .event:
            return .event(.init(action: try name(.action), payload: self[.payload] ?? .null, topic: try optionalName(.topic),
                                trace: trace))
        case .cancel:
            return .cancel(id: try name(.id))
        case .hello:
            return .hello(.init(peer: try name(.peer), actions: try names(.actions) ?? [],
                                features: try names(.features) ?? [], session: try optionalName(.session),
                                resumeToken: try validResumeToken(), heartbeatMs: try positiveInteger(.heartbeatMs),
                                catalogue: try catalogueHash(), topics: try names(.topics) ?? []))
        case .welcome:
            return .welcome(.init(host: try name(.host), session: try name(.session), resumeToken: try validResumeToken(),
                                  actions: try Envelope.required(names(.actions), .actions, "an array of names"),
                                  heartbeatMs: try Envelope.required(positiveInteger(.heartbeatMs), .heartbeatMs, "a positive integer"),
                                  maxMessageBytes: try limit("max_message_bytes"),
                                  maxInFlight: try limit("max_in_flight"), catalogue: try catalogueHash(),
                                  info: try infoObject(), libraryVersion: try optionalName(.libraryVersion),
                                  batch: try readsBatches()))
        case .ping: return .ping
        case .pong: return .pong
        case .bye: return .bye
        }
    }

    // MARK: Field rules (each reader returns nil when the field is absent)

    private func bad(_ message: String) -> BridgeError { BridgeError(.badMessage, message) }

    /// The field's value as read, which must be present. (It takes the value, not a reader: passing `boolean` or
    /// `positiveInteger` made a heap copy of the whole envelope for every message that has such a field.)
    private static func required<T>(_ value: T?, _ field: Field, _ rule: String) throws(BridgeError) -> T {
        guard let value else { throw BridgeError(.badMessage, "field '\(field.name)' is missing (it must be \(rule))") }
        return value
    }

    /// A required string of 1 to 128 characters (id, action, peer, host, session). `orNull` only changes the wording.
    private func name(_ field: Field, orNull: Bool = false) throws(BridgeError) -> String {
        guard let text = try optionalName(field, orNull: orNull) else {
            throw bad("field '\(field.name)' is missing (it must be \(Envelope.nameRule)\(orNull ? " or null" : ""))")
        }
        return text
    }

    private static let nameRule = "a string of 1 to \(Message.maxNameLength) characters"

    /// `resume_token`: 64 lowercase hex digits when present. The value is never quoted in the error: it is a secret.
    private func validResumeToken() throws(BridgeError) -> String? {
        guard let value = self[.resumeToken] else { return nil }
        guard case .string(let text) = value, ResumeToken.isWellFormed(text) else {
            throw bad("field 'resume_token' must be a string of 64 lowercase hex digits")
        }
        return text
    }

    /// `info`: an object when present (SPEC 5, welcome).
    /// `welcome.batch` (SPEC 3.3): a boolean when present; absent is false.
    private func readsBatches() throws(BridgeError) -> Bool {
        guard let value = self[.batch] else { return false }
        guard case .bool(let reads) = value else { throw bad("field 'batch' must be a boolean, not \(Envelope.describe(value))") }
        return reads
    }

    private func infoObject() throws(BridgeError) -> JSONValue? {
        guard let value = self[.info] else { return nil }
        guard case .object = value else { throw bad("field 'info' must be an object, not \(Envelope.describe(value))") }
        return value
    }

    /// `catalogue`: the hash of a catalogue (SPEC 7.8), 64 lowercase hex digits when present.
    private func catalogueHash() throws(BridgeError) -> String? {
        guard let value = self[.catalogue] else { return nil }
        guard case .string(let text) = value, ResumeToken.isWellFormed(text) else {
            throw bad("field 'catalogue' must be a string of 64 lowercase hex digits, not \(Envelope.describe(value))")
        }
        return text
    }

    private func optionalName(_ field: Field, orNull: Bool = false) throws(BridgeError) -> String? {
        guard let value = self[field] else { return nil }
        guard case .string(let text) = value, Message.isValidName(text) else {
            throw bad("field '\(field.name)' must be \(Envelope.nameRule)\(orNull ? " or null" : ""), not \(Envelope.describe(value))")
        }
        return text
    }

    /// What a value that is not a valid name is, for error messages.
    private static func describe(_ value: JSONValue) -> String {
        guard case .string(let text) = value else { return value.kindDescription }
        return text.isEmpty ? "an empty string" : "a string of \(text.unicodeScalars.count) characters"
    }

    private func positiveInteger(_ field: Field) throws(BridgeError) -> Int? {
        try Envelope.positiveInteger(self[field], named: field.name)
    }

    private static func positiveInteger(_ value: JSONValue?, named name: String) throws(BridgeError) -> Int? {
        guard let value else { return nil }
        guard case .int(let number) = value, number >= 1 else {
            let found = if case .int(let number) = value { "\(number)" } else { value.kindDescription }
            throw BridgeError(.badMessage, "field '\(name)' must be a positive integer, not \(found)")
        }
        return number
    }

    private func nonNegativeInteger(_ field: Field) throws(BridgeError) -> Int? {
        guard let value = self[field] else { return nil }
        guard case .int(let number) = value, number >= 0 else {
            let found = if case .int(let number) = value { "\(number)" } else { value.kindDescription }
            throw bad("field '\(field.name)' must be a non-negative integer, not \(found)")
        }
        return number
    }

    private func boolean(_ field: Field) throws(BridgeError) -> Bool? {
        guard let value = self[field] else { return nil }
        guard case .bool(let flag) = value else {
            throw bad("field '\(field.name)' must be true or false, not \(value.kindDescription)")
        }
        return flag
    }

    /// An array of names (each a string of 1 to 128 characters).
    private func names(_ field: Field) throws(BridgeError) -> [String]? {
        guard let value = self[field] else { return nil }
        let rule = "an array of strings of 1 to \(Message.maxNameLength) characters"
        guard case .array(let elements) = value else {
            throw bad("field '\(field.name)' must be \(rule), not \(value.kindDescription)")
        }
        var names: [String] = []
        names.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard case .string(let name) = element, Message.isValidName(name) else {
                throw bad("field '\(field.name)' must be \(rule), but element \(index) is \(Envelope.describe(element))")
            }
            names.append(name)
        }
        return names
    }

    /// A response's `error`: `{"code": string, "message": string, "data"?: any}`.
    private func errorObject() throws(BridgeError) -> BridgeError {
        guard let value = self[.error] else {
            throw bad("field 'error' is missing (a response with \"ok\": false needs an error object)")
        }
        guard case .object(let members) = value else {
            throw bad("field 'error' must be an object, not \(value.kindDescription)")
        }
        guard case .string(let code)? = members["code"], Message.isValidName(code) else {
            throw bad("field 'error.code' must be \(Envelope.nameRule), not \(members["code"].map(Envelope.describe) ?? "missing")")
        }
        guard case .string(let message)? = members["message"] else {
            throw bad("field 'error.message' must be a string, not \(members["message"]?.kindDescription ?? "missing")")
        }
        return BridgeError(.init(rawValue: code), message, data: members["data"])
    }

    /// One member of a welcome's `limits` object, a positive integer.
    private func limit(_ member: String) throws(BridgeError) -> Int {
        guard let value = self[.limits] else {
            throw bad("field 'limits' is missing (it must be an object with max_message_bytes and max_in_flight)")
        }
        guard case .object(let members) = value else {
            throw bad("field 'limits' must be an object, not \(value.kindDescription)")
        }
        guard let number = try Envelope.positiveInteger(members[member], named: "limits.\(member)") else {
            throw bad("field 'limits.\(member)' is missing (it must be a positive integer)")
        }
        return number
    }
}

@inline(__always)
private func memcmpEqual(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
    let count = literal.utf8CodeUnitCount
    guard bytes.count == count else { return false }
    let other = literal.utf8Start
    for index in 0 ..< count where bytes[index] != other[index] { return false }
    return true
}
