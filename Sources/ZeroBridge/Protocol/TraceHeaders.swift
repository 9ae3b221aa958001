/// The W3C trace context a `request` or `event` carries (SPEC 7.18): its `traceparent` and `tracestate`, each
/// valid, or no value at all. A malformed field is ignored rather than refused, so a bad trace never costs the work.
///
/// The rules are checked here, without a dependency, because the decoder (and so the fuzzers that compile
/// `Protocol/` alone) needs them; swift-w3c-trace-context's tracestate parser is not public and lets through
/// what W3C refuses (33 members, duplicate keys, 265-character keys). `protocol/fixtures/messages/trace-context.json`
/// pins the rules in every language; this reader is checked against swift-w3c-trace-context's decoder on version 00
/// (TraceHeadersDifferentialTests), and the Python peer's copy against OpenTelemetry's.
struct TraceHeaders: Sendable, Equatable {
    /// Version `00`, 55 characters: a higher version received is kept as the version-00 reading of it.
    var traceparent: String
    /// A valid tracestate as received, or nil.
    var tracestate: String?

    /// The trace id: the 32 hex digits after the version.
    var traceID: Substring {
        let start = traceparent.utf8.index(traceparent.utf8.startIndex, offsetBy: 3)
        return traceparent[start..<traceparent.utf8.index(start, offsetBy: 32)]
    }

    /// Whether the sender sampled the trace: bit 0 of the flags, the last two hex digits of the version-00 form.
    var isSampled: Bool {
        guard let last = traceparent.utf8.last else { return false }  // lowercase hex: read as it was
        let digit = last >= UInt8(ascii: "a") ? last - UInt8(ascii: "a") + 10 : last &- UInt8(ascii: "0")
        return digit & 1 == 1
    }

    init(traceparent: String, tracestate: String? = nil) {
        self.traceparent = traceparent
        self.tracestate = tracestate
    }

    /// Reads the members as received: nil without a usable `traceparent`; a malformed `tracestate` is dropped.
    init?(traceparent: JSONValue?, tracestate: JSONValue?) {
        guard case .string(let text)? = traceparent, let parent = Self.traceparent(reading: text) else { return nil }
        self.traceparent = parent
        if case .string(let state)? = tracestate, !state.isEmpty, Self.isValidTracestate(state) {
            self.tracestate = state
        }
    }

    /// The version-00 form of a valid `traceparent`, or nil (SPEC 7.18: version not `ff`; version 00 exactly 55
    /// characters, a higher one 55 followed by nothing or `-`; ids not all zeros; lowercase hex only).
    static func traceparent(reading text: String) -> String? {
        let bytes = Array(text.utf8.prefix(56))
        guard bytes.count >= 55, bytes[2] == dash, bytes[35] == dash, bytes[52] == dash else { return nil }
        func hex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy(isLowerHex) }
        func zeros(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == UInt8(ascii: "0") } }
        guard hex(0..<2), hex(3..<35), hex(36..<52), hex(53..<55), !zeros(3..<35), !zeros(36..<52) else { return nil }
        let isVersion00 = bytes[0] == UInt8(ascii: "0") && bytes[1] == UInt8(ascii: "0")
        if isVersion00 {
            guard bytes.count == 55 else { return nil }
            return text
        }
        guard !(bytes[0] == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "f")) else { return nil }
        guard bytes.count == 55 || bytes[55] == dash else { return nil }
        return "00" + String(decoding: bytes[2..<55], as: UTF8.self)
    }

    /// Whether `text` is a W3C tracestate: at most 32 `key=value` members, commas with optional spaces or tabs
    /// around them, empty members skipped, each key once.
    static func isValidTracestate(_ text: String) -> Bool {
        var keys: [Substring.UTF8View] = []
        for rawMember in text.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            var member = rawMember[...]
            while let first = member.first, first == space || first == tab { member = member.dropFirst() }
            while let last = member.last, last == space || last == tab { member = member.dropLast() }
            if member.isEmpty { continue }
            guard let equals = member.firstIndex(of: UInt8(ascii: "=")) else { return false }
            let key = member[member.startIndex..<equals], value = member[member.index(after: equals)...]
            guard isValidKey(key), isValidValue(value) else { return false }
            guard !keys.contains(where: { $0.elementsEqual(key) }) else { return false }
            keys.append(key)
            guard keys.count <= 32 else { return false }
        }
        return true
    }

    private static func isValidKey(_ key: Substring.UTF8View) -> Bool {
        guard let at = key.firstIndex(of: UInt8(ascii: "@")) else {
            return key.count <= 256 && key.first.map(isLowerAlpha) == true && key.allSatisfy(isKeyCharacter)
        }
        let tenant = key[key.startIndex..<at], system = key[key.index(after: at)...]
        return (1...241).contains(tenant.count) && tenant.first.map { isLowerAlpha($0) || isDigit($0) } == true
            && tenant.allSatisfy(isKeyCharacter)
            && (1...14).contains(system.count) && system.first.map(isLowerAlpha) == true && system.allSatisfy(isKeyCharacter)
    }

    private static func isValidValue(_ value: Substring.UTF8View) -> Bool {
        (1...256).contains(value.count) && value.last != space
            && value.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }
    }
}

private let dash = UInt8(ascii: "-"), space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
private func isLowerHex(_ byte: UInt8) -> Bool { isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte) }
private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
private func isLowerAlpha(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) }
private func isKeyCharacter(_ byte: UInt8) -> Bool {
    isLowerAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        || byte == UInt8(ascii: "*") || byte == UInt8(ascii: "/")
}
