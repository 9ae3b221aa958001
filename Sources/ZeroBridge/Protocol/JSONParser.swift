/// Why a JSON text was rejected, and at which byte.
struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset into the text where the problem was found.
    var offset: Int
    var reason: String

    var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// The deepest nesting `parse` accepts at most, whatever `maxDepth` asks: the parser recurses once per
    /// level, and this keeps it far inside the smallest thread stack it may run on.
    static let maxSupportedDepth = 512

    /// Parses one JSON text (RFC 8259, strictly).
    ///
    /// Rejects invalid UTF-8 (also inside strings, and `\u` escapes that leave a surrogate unpaired), trailing
    /// data after the value, arrays/objects nested deeper than `maxDepth` (the top-level container is depth 1),
    /// control characters in strings, and numbers whose value is not finite (`1e400`). An integer that does not
    /// fit `Int` becomes `.double`; `-0` is the integer 0 and `-0.0` the double -0.0. A repeated object key keeps
    /// its last value. For example:
    ///
    /// ```swift
    /// let value = try JSONValue.parse(Array(#"{"a":[1,2.5,"x"]}"#.utf8))
    /// ```
    static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes, maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Parses one JSON text; see ``parse(_:maxDepth:)-(UnsafeRawBufferPointer,_)``.
    static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        // The closure cannot carry a typed throw through withUnsafeBytes, so the outcome travels as a Result.
        let outcome: Result<JSONValue, JSONParseError> = bytes.withUnsafeBytes { raw in
            var parser = JSONParser(raw, maxDepth: maxDepth)
            return Result { () throws(JSONParseError) in try parser.parseDocument() }
        }
        return try outcome.get()
    }
}

/// A recursive-descent JSON parser over borrowed bytes. It allocates only for the values it returns (and one
/// reused scratch buffer for strings with escapes).
struct JSONParser {
    private let base: UnsafePointer<UInt8>
    private let end: Int
    private let maxDepth: Int
    /// Offset of the next unread byte.
    private(set) var position = 0
    /// Reused for strings that contain escapes.
    private var scratch: [UInt8] = []

    init(_ bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        precondition(maxDepth >= 0, "maxDepth must not be negative")
        // An empty buffer may have no base address; any valid pointer will do since nothing is read from it.
        if let address = bytes.baseAddress {
            base = address.assumingMemoryBound(to: UInt8.self)
        } else {
            base = UnsafePointer(JSONParser.emptyByte)
        }
        end = bytes.count
        self.maxDepth = min(maxDepth, JSONValue.maxSupportedDepth)
    }

    // Never written after creation; only its address is used.
    nonisolated(unsafe) private static let emptyByte: UnsafeMutablePointer<UInt8> = {
        let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return pointer
    }()

    // MARK: Documents

    /// One value, surrounded by optional whitespace, and nothing else.
    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue(depth: 0)
        try expectEnd()
        return value
    }

    /// Fails unless only whitespace remains.
    mutating func expectEnd() throws(JSONParseError) {
        skipWhitespace()
        if position < end { throw failure("unexpected data after the JSON value") }
    }

    // MARK: Bytes

    @inline(__always) private func byte(at offset: Int) -> UInt8 { base[offset] }

    /// The next byte after whitespace, without consuming it; nil at the end of input.
    @inline(__always) mutating func peekAfterWhitespace() -> UInt8? {
        skipWhitespace()
        return position < end ? base[position] : nil
    }

    @inline(__always) mutating func skipWhitespace() {
        while position < end {
            switch base[position] {
            case JSONByte.space, JSONByte.tab, JSONByte.lineFeed, JSONByte.carriageReturn: position += 1
            default: return
            }
        }
    }

    /// Consumes `expected` after optional whitespace, or fails with `reason`.
    @inline(__always) mutating func expect(_ expected: UInt8, _ reason: @autoclosure () -> String) throws(JSONParseError) {
        skipWhitespace()
        guard position < end, base[position] == expected else { throw failure(reason()) }
        position += 1
    }

    func failure(_ reason: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? position, reason: reason)
    }

    private func describeByte(at offset: Int) -> String {
        guard offset < end else { return "end of input" }
        let b = base[offset]
        if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        return "byte 0x" + String(b, radix: 16, uppercase: true)
    }

    // MARK: Values

    /// Parses the value starting after optional whitespace. `depth` is the number of containers around it.
    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard position < end else { throw failure("expected a JSON value but found end of input") }
        switch base[position] {
        case JSONByte.quote: return .string(try parseString())
        case JSONByte.openBrace: return try parseObject(depth: depth + 1)
        case JSONByte.openBracket: return try parseArray(depth: depth + 1)
        case JSONByte.letterT: try parseLiteral("true"); return .bool(true)
        case JSONByte.letterF: try parseLiteral("false"); return .bool(false)
        case JSONByte.letterN: try parseLiteral("null"); return .null
        case JSONByte.minus, JSONByte.zero ... JSONByte.nine: return try parseNumber()
        default: throw failure("expected a JSON value but found \(describeByte(at: position))")
        }
    }

    private mutating func parseLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let start = literal.utf8Start
        guard end - position >= count else { throw failure("invalid literal (expected '\(literal)')") }
        for k in 0 ..< count where base[position + k] != start[k] {
            throw failure("invalid literal (expected '\(literal)')")
        }
        position += count
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw failure("arrays and objects nested deeper than \(maxDepth) levels") }
        position += 1  // [
        var elements: [JSONValue] = []
        if peekAfterWhitespace() == JSONByte.closeBracket {
            position += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard position < end else { throw failure("unterminated array (expected ',' or ']')") }
            switch base[position] {
            case JSONByte.comma: position += 1
            case JSONByte.closeBracket: position += 1; return .array(elements)
            default: throw failure("expected ',' or ']' in array but found \(describeByte(at: position))")
            }
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw failure("arrays and objects nested deeper than \(maxDepth) levels") }
        position += 1  // {
        var members: [String: JSONValue] = [:]
        if peekAfterWhitespace() == JSONByte.closeBrace {
            position += 1
            return .object(members)
        }
        while true {
            guard peekAfterWhitespace() == JSONByte.quote else {
                throw failure("expected a string key in object but found \(describeByte(at: position))")
            }
            let key = try parseString()
            try expect(JSONByte.colon, "expected ':' after an object key")
            let value = try parseValue(depth: depth)
            if members.isEmpty, peekAfterWhitespace() == JSONByte.comma {
                // More members follow: room for three at once, the size growing from one would reach after the
                // second (the same memory), without the first table and its rehash. (Made new: `reserveCapacity`
                // looked up the storage's generic metadata at run time, every object.)
                members = Dictionary(minimumCapacity: 3)
            }
            members[key] = value
            skipWhitespace()
            guard position < end else { throw failure("unterminated object (expected ',' or '}')") }
            switch base[position] {
            case JSONByte.comma: position += 1
            case JSONByte.closeBrace: position += 1; return .object(members)
            default: throw failure("expected ',' or '}' in object but found \(describeByte(at: position))")
            }
        }
    }

    /// Streams the members of the object starting at `position` (depth 1) without building it: `match` maps a
    /// key's UTF-8 bytes to a slot (nil to ignore the member, whose value is still parsed and checked), and
    /// `store` receives each matched member's value, in order (so a repeated key's last value wins).
    mutating func parseMembers<Slot>(match: (UnsafeBufferPointer<UInt8>) -> Slot?,
                                     store: (Slot, JSONValue) -> Void) throws(JSONParseError) {
        guard 1 <= maxDepth else { throw failure("arrays and objects nested deeper than \(maxDepth) levels") }
        position += 1  // {
        if peekAfterWhitespace() == JSONByte.closeBrace {
            position += 1
            return
        }
        while true {
            guard peekAfterWhitespace() == JSONByte.quote else {
                throw failure("expected a string key in object but found \(describeByte(at: position))")
            }
            let slot = try parseKey(match)
            try expect(JSONByte.colon, "expected ':' after an object key")
            let value = try parseValue(depth: 1)
            if let slot { store(slot, value) }
            skipWhitespace()
            guard position < end else { throw failure("unterminated object (expected ',' or '}')") }
            switch base[position] {
            case JSONByte.comma: position += 1
            case JSONByte.closeBrace: position += 1; return
            default: throw failure("expected ',' or '}' in object but found \(describeByte(at: position))")
            }
        }
    }

    /// Reads the key at `position` and maps it with `match`; plain ASCII keys are matched in place.
    private mutating func parseKey<Slot>(_ match: (UnsafeBufferPointer<UInt8>) -> Slot?) throws(JSONParseError) -> Slot? {
        let start = position + 1
        var index = start
        while index < end {
            let b = base[index]
            if b == JSONByte.quote {
                position = index + 1
                return match(UnsafeBufferPointer(start: base + start, count: index - start))
            }
            if b == JSONByte.backslash || b < 0x20 || b >= 0x80 { break }
            index += 1
        }
        var key = try parseString()
        return key.withUTF8(match)
    }

    // MARK: Strings

    /// Parses a string whose opening quote is at `position`.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = position + 1
        var index = start
        var ascii = true
        // Fast path: no escapes. Quote and backslash never occur inside a multi-byte UTF-8 sequence, so bytes
        // from 0x80 up need no attention here; they are validated once the string's extent is known.
        while index < end {
            let b = base[index]
            if b == JSONByte.quote {
                position = index + 1
                return try makeString(UnsafeBufferPointer(start: base + start, count: index - start),
                                      ascii: ascii, offset: start)
            }
            if b == JSONByte.backslash { break }
            if b < 0x20 { throw failure("control character (byte 0x\(String(b, radix: 16))) in string", at: index) }
            if b >= 0x80 { ascii = false }
            index += 1
        }
        guard index < end else { throw failure("unterminated string", at: start - 1) }
        return try parseEscapedString(start: start, firstEscape: index, ascii: ascii)
    }

    private mutating func parseEscapedString(start: Int, firstEscape: Int, ascii: Bool) throws(JSONParseError) -> String {
        var ascii = ascii
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: base + start, count: firstEscape - start))
        var index = firstEscape
        while index < end {
            let b = base[index]
            switch b {
            case JSONByte.quote:
                position = index + 1
                let result = scratch.withUnsafeBufferPointer { buffer in
                    Result { () throws(JSONParseError) in try makeString(buffer, ascii: ascii, offset: start) }
                }
                return try result.get()
            case JSONByte.backslash:
                guard index + 1 < end else { throw failure("unterminated string", at: start - 1) }
                let escape = base[index + 1]
                index += 2
                switch escape {
                case JSONByte.quote: scratch.append(JSONByte.quote)
                case JSONByte.backslash: scratch.append(JSONByte.backslash)
                case JSONByte.slash: scratch.append(JSONByte.slash)
                case JSONByte.letterB: scratch.append(0x08)
                case JSONByte.letterF: scratch.append(0x0C)
                case JSONByte.letterN: scratch.append(JSONByte.lineFeed)
                case JSONByte.letterR: scratch.append(JSONByte.carriageReturn)
                case JSONByte.letterT: scratch.append(JSONByte.tab)
                case JSONByte.letterU:
                    let scalar = try parseUnicodeEscape(at: &index)
                    if scalar.value >= 0x80 { ascii = false }
                    appendUTF8(scalar, to: &scratch)
                default:
                    throw failure("invalid escape '\\\(Character(Unicode.Scalar(escape)))' in string", at: index - 2)
                }
            default:
                if b < 0x20 { throw failure("control character (byte 0x\(String(b, radix: 16))) in string", at: index) }
                if b >= 0x80 { ascii = false }
                scratch.append(b)
                index += 1
            }
        }
        throw failure("unterminated string", at: start - 1)
    }

    /// Reads the 4 hex digits of a `\u` escape at `index` (just after the `u`), and a second escape when the
    /// first is a high surrogate. Lone surrogates are errors: they cannot be encoded as UTF-8.
    private func parseUnicodeEscape(at index: inout Int) throws(JSONParseError) -> Unicode.Scalar {
        let escapeStart = index - 2
        let first = try hex4(at: index)
        index += 4
        switch first {
        case 0xD800 ... 0xDBFF:
            guard index + 6 <= end, base[index] == JSONByte.backslash, base[index + 1] == JSONByte.letterU else {
                throw failure("unpaired surrogate escape \\u\(String(first, radix: 16, uppercase: true))", at: escapeStart)
            }
            let second = try hex4(at: index + 2)
            guard (0xDC00 ... 0xDFFF).contains(second) else {
                throw failure("unpaired surrogate escape \\u\(String(first, radix: 16, uppercase: true))", at: escapeStart)
            }
            index += 6
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))!
        case 0xDC00 ... 0xDFFF:
            throw failure("unpaired surrogate escape \\u\(String(first, radix: 16, uppercase: true))", at: escapeStart)
        default:
            return Unicode.Scalar(first)!
        }
    }

    private func hex4(at index: Int) throws(JSONParseError) -> UInt32 {
        guard index + 4 <= end else { throw failure("truncated \\u escape", at: index - 2) }
        var value: UInt32 = 0
        for k in 0 ..< 4 {
            let b = base[index + k]
            let digit: UInt8
            switch b {
            case JSONByte.zero ... JSONByte.nine: digit = b - JSONByte.zero
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw failure("invalid hex digit in \\u escape", at: index + k)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
        let v = scalar.value
        switch v {
        case 0 ..< 0x80:
            buffer.append(UInt8(v))
        case 0x80 ..< 0x800:
            buffer.append(UInt8(0xC0 | v >> 6))
            buffer.append(UInt8(0x80 | v & 0x3F))
        case 0x800 ..< 0x10000:
            buffer.append(UInt8(0xE0 | v >> 12))
            buffer.append(UInt8(0x80 | v >> 6 & 0x3F))
            buffer.append(UInt8(0x80 | v & 0x3F))
        default:
            buffer.append(UInt8(0xF0 | v >> 18))
            buffer.append(UInt8(0x80 | v >> 12 & 0x3F))
            buffer.append(UInt8(0x80 | v >> 6 & 0x3F))
            buffer.append(UInt8(0x80 | v & 0x3F))
        }
    }

    /// Builds the String only after checking the bytes: ASCII needs no check; anything else must be valid
    /// UTF-8 (no overlong forms, no encoded surrogates, nothing above U+10FFFF).
    private func makeString(_ bytes: UnsafeBufferPointer<UInt8>, ascii: Bool, offset: Int) throws(JSONParseError) -> String {
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        if let invalidAt = JSONParser.firstInvalidUTF8(bytes) {
            throw failure("invalid UTF-8 in string", at: offset + invalidAt)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The index of the first byte that does not start (or continue) a well-formed UTF-8 sequence, per
    /// Unicode's table of well-formed byte sequences; nil when all is well-formed.
    static func firstInvalidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0
        let n = bytes.count
        while i < n {
            let b0 = bytes[i]
            if b0 < 0x80 { i += 1; continue }
            let length: Int
            var low: UInt8 = 0x80, high: UInt8 = 0xBF  // the allowed range of the second byte
            switch b0 {
            case 0xC2 ... 0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0  // no overlong 3-byte forms
            case 0xE1 ... 0xEC, 0xEE ... 0xEF: length = 3
            case 0xED: length = 3; high = 0x9F  // no UTF-16 surrogates
            case 0xF0: length = 4; low = 0x90  // no overlong 4-byte forms
            case 0xF1 ... 0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F  // nothing above U+10FFFF
            default: return i  // continuation byte without a lead, C0/C1 (overlong), F5...FF
            }
            guard i + length <= n else { return i }
            let b1 = bytes[i + 1]
            guard b1 >= low && b1 <= high else { return i }
            for k in 2 ..< max(2, length) where bytes[i + k] & 0xC0 != 0x80 { return i }
            i += length
        }
        return nil
    }

    // MARK: Numbers

    /// Parses a number per RFC 8259's grammar. Integers that fit `Int` are parsed exactly here; the rest go
    /// through the C library's correctly rounded conversion.
    private mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = position
        var index = position
        let negative = base[index] == JSONByte.minus
        if negative { index += 1 }
        guard index < end, base[index] >= JSONByte.zero, base[index] <= JSONByte.nine else {
            throw failure("invalid number: expected a digit after '-'", at: index)
        }
        // Accumulate negatively so that Int.min is representable.
        var accumulated = 0
        var overflow = false
        if base[index] == JSONByte.zero {
            index += 1
            if index < end, base[index] >= JSONByte.zero, base[index] <= JSONByte.nine {
                throw failure("invalid number: leading zeros are not allowed", at: start)
            }
        } else {
            while index < end, base[index] >= JSONByte.zero, base[index] <= JSONByte.nine {
                if !overflow {
                    let (times10, o1) = accumulated.multipliedReportingOverflow(by: 10)
                    let (next, o2) = times10.subtractingReportingOverflow(Int(base[index] - JSONByte.zero))
                    if o1 || o2 { overflow = true } else { accumulated = next }
                }
                index += 1
            }
        }
        var integral = true
        if index < end, base[index] == JSONByte.period {
            integral = false
            index += 1
            let digitsStart = index
            while index < end, base[index] >= JSONByte.zero, base[index] <= JSONByte.nine { index += 1 }
            if index == digitsStart { throw failure("invalid number: expected a digit after '.'", at: index) }
        }
        if index < end, base[index] == JSONByte.letterE || base[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < end, base[index] == JSONByte.plus || base[index] == JSONByte.minus { index += 1 }
            let digitsStart = index
            while index < end, base[index] >= JSONByte.zero, base[index] <= JSONByte.nine { index += 1 }
            if index == digitsStart { throw failure("invalid number: expected a digit in the exponent", at: index) }
        }
        position = index
        if integral && !overflow {
            if negative { return .int(accumulated) }
            if accumulated != .min { return .int(-accumulated) }  // -Int.min does not fit
        }
        let text = String(decoding: UnsafeBufferPointer(start: base + start, count: index - start), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw failure("number out of range: \(text.prefix(40))", at: start)
        }
        return .double(value)
    }
}

/// The ASCII bytes that JSON's grammar names.
enum JSONByte {
    static let tab: UInt8 = UInt8(ascii: "\t")
    static let lineFeed: UInt8 = UInt8(ascii: "\n")
    static let carriageReturn: UInt8 = UInt8(ascii: "\r")
    static let space: UInt8 = UInt8(ascii: " ")
    static let quote: UInt8 = UInt8(ascii: "\"")
    static let plus: UInt8 = UInt8(ascii: "+")
    static let comma: UInt8 = UInt8(ascii: ",")
    static let minus: UInt8 = UInt8(ascii: "-")
    static let period: UInt8 = UInt8(ascii: ".")
    static let slash: UInt8 = UInt8(ascii: "/")
    static let zero: UInt8 = UInt8(ascii: "0")
    static let nine: UInt8 = UInt8(ascii: "9")
    static let colon: UInt8 = UInt8(ascii: ":")
    static let openBracket: UInt8 = UInt8(ascii: "[")
    static let backslash: UInt8 = UInt8(ascii: "\\")
    static let closeBracket: UInt8 = UInt8(ascii: "]")
    static let letterB: UInt8 = UInt8(ascii: "b")
    static let letterE: UInt8 = UInt8(ascii: "e")
    static let letterF: UInt8 = UInt8(ascii: "f")
    static let letterN: UInt8 = UInt8(ascii: "n")
    static let letterR: UInt8 = UInt8(ascii: "r")
    static let letterT: UInt8 = UInt8(ascii: "t")
    static let letterU: UInt8 = UInt8(ascii: "u")
    static let openBrace: UInt8 = UInt8(ascii: "{")
    static let closeBrace: UInt8 = UInt8(ascii: "}")
}
