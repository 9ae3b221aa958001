extension Message {
    /// The body as compact JSON bytes, `"v":1` and `"type"` first, then the type's fields in the protocol's
    /// order. Optional fields that are absent (and `"progress"` when false) are left out.
    func encoded() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(estimatedSize)
        write(to: &buffer)
        return buffer
    }

    /// Appends the body's JSON to `buffer`; see ``encoded()``. Bytes values are written as base64 text.
    func write(to buffer: inout [UInt8]) {
        var asText = AttachmentCollector(collects: false)
        write(to: &buffer, attachments: &asText)
    }

    /// Appends the body's JSON to `buffer`; bytes values go to `attachments` as it collects them.
    func write(to buffer: inout [UInt8], attachments: inout AttachmentCollector) {
        // The envelope is written field by field, never through a JSONValue object: this is the hot path.
        JSONWriter.append(#"{"v":1,"type":"#, to: &buffer)
        switch self {
        case .request(let request):
            JSONWriter.append(#""request","id":"#, to: &buffer)
            JSONWriter.append(string: request.id, to: &buffer)
            JSONWriter.append(#","action":"#, to: &buffer)
            JSONWriter.append(string: request.action, to: &buffer)
            JSONWriter.append(#","payload":"#, to: &buffer)
            request.payload.write(to: &buffer, attachments: &attachments)
            if let timeoutMs = request.timeoutMs {
                JSONWriter.append(#","timeout_ms":"#, to: &buffer)
                JSONWriter.append(timeoutMs, to: &buffer)
            }
            if let deadline = request.deadline {
                JSONWriter.append(#","deadline":"#, to: &buffer)
                JSONWriter.append(deadline, to: &buffer)
            }
            if request.wantsProgress { JSONWriter.append(#","progress":true"#, to: &buffer) }
            if let key = request.idempotencyKey {
                JSONWriter.append(#","idempotency_key":"#, to: &buffer)
                JSONWriter.append(string: key, to: &buffer)
            }
            if let trace = request.trace { trace.write(to: &buffer) }
        case .response(let response):
            JSONWriter.append(#""response","id":"#, to: &buffer)
            if let id = response.id { JSONWriter.append(string: id, to: &buffer) } else { JSONWriter.append("null", to: &buffer) }
            switch response.outcome {
            case .success(let result):
                JSONWriter.append(#","ok":true,"result":"#, to: &buffer)
                result.write(to: &buffer, attachments: &attachments)
            case .failure(let error):
                JSONWriter.append(#","ok":false,"error":{"code":"#, to: &buffer)
                JSONWriter.append(string: error.code.rawValue, to: &buffer)
                JSONWriter.append(#","message":"#, to: &buffer)
                JSONWriter.append(string: error.message, to: &buffer)
                if let data = error.data {
                    JSONWriter.append(#","data":"#, to: &buffer)
                    data.write(to: &buffer, attachments: &attachments)
                }
                buffer.append(JSONByte.closeBrace)
            }
        case .progress(let progress):
            JSONWriter.append(#""progress","id":"#, to: &buffer)
            JSONWriter.append(string: progress.id, to: &buffer)
            JSONWriter.append(#","seq":"#, to: &buffer)
            JSONWriter.append(progress.seq, to: &buffer)
            JSONWriter.append(#","payload":"#, to: &buffer)
            progress.payload.write(to: &buffer, attachments: &attachments)
            if let skipped = progress.skipped {
                JSONWriter.append(#","skipped":"#, to: &buffer)
                JSONWriter.append(skipped, to: &buffer)
            }
        case .event(let event):
            JSONWriter.append(#""event","action":"#, to: &buffer)
            JSONWriter.append(string: event.action, to: &buffer)
            JSONWriter.append(#","payload":"#, to: &buffer)
            event.payload.write(to: &buffer, attachments: &attachments)
            if let topic = event.topic {
                JSONWriter.append(#","topic":"#, to: &buffer)
                JSONWriter.append(string: topic, to: &buffer)
            }
            if let trace = event.trace { trace.write(to: &buffer) }
        case .cancel(let id):
            JSONWriter.append(#""cancel","id":"#, to: &buffer)
            JSONWriter.append(string: id, to: &buffer)
        case .hello(let hello):
            JSONWriter.append(#""hello","peer":"#, to: &buffer)
            JSONWriter.append(string: hello.peer, to: &buffer)
            JSONWriter.append(#","actions":"#, to: &buffer)
            Message.write(strings: hello.actions, to: &buffer)
            JSONWriter.append(#","features":"#, to: &buffer)
            Message.write(strings: hello.features, to: &buffer)
            if let session = hello.session {
                JSONWriter.append(#","session":"#, to: &buffer)
                JSONWriter.append(string: session, to: &buffer)
            }
            if let token = hello.resumeToken {
                JSONWriter.append(#","resume_token":"#, to: &buffer)
                JSONWriter.append(string: token, to: &buffer)
            }
            if let heartbeatMs = hello.heartbeatMs {
                JSONWriter.append(#","heartbeat_ms":"#, to: &buffer)
                JSONWriter.append(heartbeatMs, to: &buffer)
            }
            if let catalogue = hello.catalogue {
                JSONWriter.append(#","catalogue":"#, to: &buffer)
                JSONWriter.append(string: catalogue, to: &buffer)
            }
            if !hello.topics.isEmpty {
                JSONWriter.append(#","topics":"#, to: &buffer)
                Message.write(strings: hello.topics, to: &buffer)
            }
        case .welcome(let welcome):
            JSONWriter.append(#""welcome","host":"#, to: &buffer)
            JSONWriter.append(string: welcome.host, to: &buffer)
            JSONWriter.append(#","session":"#, to: &buffer)
            JSONWriter.append(string: welcome.session, to: &buffer)
            if let token = welcome.resumeToken {
                JSONWriter.append(#","resume_token":"#, to: &buffer)
                JSONWriter.append(string: token, to: &buffer)
            }
            JSONWriter.append(#","actions":"#, to: &buffer)
            Message.write(strings: welcome.actions, to: &buffer)
            JSONWriter.append(#","heartbeat_ms":"#, to: &buffer)
            JSONWriter.append(welcome.heartbeatMs, to: &buffer)
            JSONWriter.append(#","limits":{"max_message_bytes":"#, to: &buffer)
            JSONWriter.append(welcome.maxMessageBytes, to: &buffer)
            JSONWriter.append(#","max_in_flight":"#, to: &buffer)
            JSONWriter.append(welcome.maxInFlight, to: &buffer)
            buffer.append(JSONByte.closeBrace)
            if let catalogue = welcome.catalogue {
                JSONWriter.append(#","catalogue":"#, to: &buffer)
                JSONWriter.append(string: catalogue, to: &buffer)
            }
            if let info = welcome.info {
                JSONWriter.append(#","info":"#, to: &buffer)
                info.write(to: &buffer, attachments: &attachments)
            }
            if let libraryVersion = welcome.libraryVersion {
                JSONWriter.append(#","library_version":"#, to: &buffer)
                JSONWriter.append(string: libraryVersion, to: &buffer)
            }
            if welcome.batch { JSONWriter.append(#","batch":true"#, to: &buffer) }
        case .ping: JSONWriter.append(#""ping""#, to: &buffer)
        case .pong: JSONWriter.append(#""pong""#, to: &buffer)
        case .bye: JSONWriter.append(#""bye""#, to: &buffer)
        }
        buffer.append(JSONByte.closeBrace)
    }

    private static func write(strings: [String], to buffer: inout [UInt8]) {
        buffer.append(JSONByte.openBracket)
        for (index, string) in strings.enumerated() {
            if index > 0 { buffer.append(JSONByte.comma) }
            JSONWriter.append(string: string, to: &buffer)
        }
        buffer.append(JSONByte.closeBracket)
    }

    /// Enough for the envelope and a small payload, so most bodies are written without regrowing (a request with
    /// a payload of ~100 bytes is ~210 bytes).
    var estimatedSize: Int {
        switch self {
        case .ping, .pong, .bye: 32
        default: 256
        }
    }

    /// The body as a JSON value, with exactly the members ``encoded()`` writes (for fixtures and diffs).
    var json: JSONValue {
        var members: [String: JSONValue] = ["v": 1, "type": .string(kind.rawValue)]
        switch self {
        case .request(let request):
            members["id"] = .string(request.id)
            members["action"] = .string(request.action)
            members["payload"] = request.payload
            if let timeoutMs = request.timeoutMs { members["timeout_ms"] = .int(timeoutMs) }
            if let deadline = request.deadline { members["deadline"] = .int(deadline) }
            if request.wantsProgress { members["progress"] = true }
            if let key = request.idempotencyKey { members["idempotency_key"] = .string(key) }
            request.trace?.add(to: &members)
        case .response(let response):
            members["id"] = response.id.map(JSONValue.string) ?? .null
            switch response.outcome {
            case .success(let result):
                members["ok"] = true
                members["result"] = result
            case .failure(let error):
                members["ok"] = false
                var object: [String: JSONValue] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
                if let data = error.data { object["data"] = data }
                members["error"] = .object(object)
            }
        case .progress(let progress):
            members["id"] = .string(progress.id)
            members["seq"] = .int(progress.seq)
            members["payload"] = progress.payload
            if let skipped = progress.skipped { members["skipped"] = .int(skipped) }
        case .event(let event):
            members["action"] = .string(event.action)
            members["payload"] = event.payload
            if let topic = event.topic { members["topic"] = .string(topic) }
            event.trace?.add(to: &members)
        case .cancel(let id):
            members["id"] = .string(id)
        case .hello(let hello):
            members["peer"] = .string(hello.peer)
            members["actions"] = .array(hello.actions.map(JSONValue.string))
            members["features"] = .array(hello.features.map(JSONValue.string))
            if let session = hello.session { members["session"] = .string(session) }
            if let heartbeatMs = hello.heartbeatMs { members["heartbeat_ms"] = .int(heartbeatMs) }
            if let catalogue = hello.catalogue { members["catalogue"] = .string(catalogue) }
            if !hello.topics.isEmpty { members["topics"] = .array(hello.topics.map(JSONValue.string)) }
        case .welcome(let welcome):
            members["host"] = .string(welcome.host)
            members["session"] = .string(welcome.session)
            members["actions"] = .array(welcome.actions.map(JSONValue.string))
            members["heartbeat_ms"] = .int(welcome.heartbeatMs)
            members["limits"] = ["max_message_bytes": .int(welcome.maxMessageBytes),
                                 "max_in_flight": .int(welcome.maxInFlight)]
            if let catalogue = welcome.catalogue { members["catalogue"] = .string(catalogue) }
            if let info = welcome.info { members["info"] = info }
            if let libraryVersion = welcome.libraryVersion { members["library_version"] = .string(libraryVersion) }
            if welcome.batch { members["batch"] = true }
        case .ping, .pong, .bye:
            break
        }
        return .object(members)
    }
}

extension TraceHeaders {
    fileprivate func write(to buffer: inout [UInt8]) {
        JSONWriter.append(#","traceparent":"#, to: &buffer)
        JSONWriter.append(string: traceparent, to: &buffer)
        if let tracestate {
            JSONWriter.append(#","tracestate":"#, to: &buffer)
            JSONWriter.append(string: tracestate, to: &buffer)
        }
    }

    fileprivate func add(to members: inout [String: JSONValue]) {
        members["traceparent"] = .string(traceparent)
        if let tracestate { members["tracestate"] = .string(tracestate) }
    }
}
