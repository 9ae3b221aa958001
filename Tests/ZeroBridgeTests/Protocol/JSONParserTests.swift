import Testing
@testable import ZeroBridge

/// Parses `text` as UTF-8 JSON.
func parseJSON(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
    try JSONValue.parse(Array(text.utf8), maxDepth: maxDepth)
}

/// The parse error for `bytes`, or nil when they parse.
func parseFailure(_ bytes: [UInt8], maxDepth: Int = 64) -> JSONParseError? {
    do {
        _ = try JSONValue.parse(bytes, maxDepth: maxDepth)
        return nil
    } catch {
        return error
    }
}

struct ParseCase: Sendable, CustomTestStringConvertible {
    var text: String
    var expected: JSONValue
    var testDescription: String { text }
}

struct BadBytes: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    /// A fragment of the error's reason.
    var reason: String
    var testDescription: String { name }

    init(_ name: String, _ bytes: [UInt8], _ reason: String) {
        self.name = name
        self.bytes = bytes
        self.reason = reason
    }

    init(_ text: String, _ reason: String) {
        self.init(text, Array(text.utf8), reason)
    }
}

@Suite("JSON parser", .timeLimit(.minutes(3)))
struct JSONParserTests {
    @Test("parses every kind of value", arguments: [
        ParseCase(text: "null", expected: .null),
        ParseCase(text: "true", expected: .bool(true)),
        ParseCase(text: "false", expected: .bool(false)),
        ParseCase(text: #""hi""#, expected: .string("hi")),
        ParseCase(text: #""""#, expected: .string("")),
        ParseCase(text: "[]", expected: .array([])),
        ParseCase(text: "{}", expected: .object([:])),
        ParseCase(text: #"[1,"a",null,true,[{}]]"#, expected: [1, "a", nil, true, [[:]]]),
        ParseCase(text: #"{"a":{"b":[1,2]},"c":"d"}"#, expected: ["a": ["b": [1, 2]], "c": "d"]),
        ParseCase(text: " \t\r\n{ \"a\" : [ 1 , 2 ] } \n", expected: ["a": [1, 2]]),
        // Past the room made when a second member shows (three), and a comma after whitespace.
        ParseCase(text: #"{"a":1 ,"b":2,"c":3,"d":{"e":4},"f":5,"g":6,"h":7}"#,
                  expected: ["a": 1, "b": 2, "c": 3, "d": ["e": 4], "f": 5, "g": 6, "h": 7]),
    ])
    func parsesValues(_ example: ParseCase) throws {
        #expect(try parseJSON(example.text) == example.expected)
    }

    @Test("integers stay integers and big ones become doubles", arguments: [
        ParseCase(text: "0", expected: .int(0)),
        ParseCase(text: "-0", expected: .int(0)),
        ParseCase(text: "42", expected: .int(42)),
        ParseCase(text: "-17", expected: .int(-17)),
        ParseCase(text: "9223372036854775807", expected: .int(Int.max)),
        ParseCase(text: "-9223372036854775808", expected: .int(Int.min)),
        ParseCase(text: "9223372036854775808", expected: .double(9223372036854775808)),
        ParseCase(text: "-9223372036854775809", expected: .double(-9223372036854775809)),
        ParseCase(text: "123456789012345678901234567890", expected: .double(1.2345678901234568e29)),
    ])
    func integers(_ example: ParseCase) throws {
        let value = try parseJSON(example.text)
        #expect(value == example.expected)
        // Same case, not only equal by value.
        switch (value, example.expected) {
        case (.int, .int), (.double, .double): break
        default: Issue.record("\(example.text) parsed as \(value), expected \(example.expected)")
        }
    }

    @Test("fractions and exponents are doubles", arguments: [
        ParseCase(text: "1.5", expected: .double(1.5)),
        ParseCase(text: "-0.25", expected: .double(-0.25)),
        ParseCase(text: "1e2", expected: .double(100)),
        ParseCase(text: "1E+2", expected: .double(100)),
        ParseCase(text: "2.5e-3", expected: .double(0.0025)),
        ParseCase(text: "1.0", expected: .double(1)),
        ParseCase(text: "0.1", expected: .double(0.1)),
        ParseCase(text: "1.7976931348623157e308", expected: .double(.greatestFiniteMagnitude)),
        ParseCase(text: "5e-324", expected: .double(.leastNonzeroMagnitude)),
        ParseCase(text: "1e-400", expected: .double(0)),
    ])
    func doubles(_ example: ParseCase) throws {
        let value = try parseJSON(example.text)
        guard case .double(let number) = value, case .double(let expected) = example.expected else {
            Issue.record("\(example.text) parsed as \(value)")
            return
        }
        #expect(number.bitPattern == expected.bitPattern)
    }

    @Test("-0.0 keeps its sign")
    func negativeZero() throws {
        guard case .double(let number) = try parseJSON("-0.0") else {
            Issue.record("-0.0 is not a double")
            return
        }
        #expect(number == 0 && number.sign == .minus)
    }

    @Test("rejects malformed and non-finite numbers", arguments: [
        BadBytes("01", "leading zeros"),
        BadBytes("-01", "leading zeros"),
        BadBytes("1.", "digit after '.'"),
        BadBytes(".5", "expected a JSON value"),
        BadBytes("-", "digit after '-'"),
        BadBytes("+1", "expected a JSON value"),
        BadBytes("1e", "exponent"),
        BadBytes("1e+", "exponent"),
        BadBytes("0x10", "after the JSON value"),
        BadBytes("NaN", "expected a JSON value"),
        BadBytes("Infinity", "expected a JSON value"),
        BadBytes("1e400", "out of range"),
        BadBytes("-1e400", "out of range"),
        BadBytes("[" + String(repeating: "9", count: 400) + "]", "out of range"),
    ])
    func badNumbers(_ example: BadBytes) {
        let failure = parseFailure(example.bytes)
        #expect(failure?.reason.contains(example.reason) == true, "\(String(describing: failure))")
    }

    @Test("decodes every string escape")
    func escapes() throws {
        let text = #""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC\ud83d\ude00\u0000""#
        #expect(try parseJSON(text) == .string("\"\\/\u{08}\u{0C}\n\r\tAé€😀\u{0}"))
    }

    @Test("escapes mixed with raw UTF-8 and plain text")
    func mixedEscapes() throws {
        #expect(try parseJSON(#""héllo\n wörld 😀 \u00e9""#) == .string("héllo\n wörld 😀 é"))
        #expect(try parseJSON(#"{"k\u0065y":"v"}"#) == ["key": "v"])
    }

    @Test("rejects bad escapes and raw control characters", arguments: [
        BadBytes(#""\x""#, "invalid escape"),
        BadBytes(#""\u12x""#, "hex digit"),
        BadBytes(#""\u12"#, "truncated"),
        BadBytes(#""\uZZZZ""#, "hex digit"),
        BadBytes(#""\ud800""#, "unpaired surrogate"),
        BadBytes(#""\udc00""#, "unpaired surrogate"),
        BadBytes(#""\ud800\u0041""#, "unpaired surrogate"),
        BadBytes(#""\ud800\ud800""#, "unpaired surrogate"),
        BadBytes("\"a\nb\"", "control character"),
        BadBytes("\"a\u{1F}\"", "control character"),
        BadBytes("\"tab\there\"", "control character"),
        BadBytes("\"abc", "unterminated string"),
        BadBytes("\"abc\\", "unterminated string"),
        BadBytes("\"a\\nb", "unterminated string"),
    ])
    func badStrings(_ example: BadBytes) {
        let failure = parseFailure(example.bytes)
        #expect(failure?.reason.contains(example.reason) == true, "\(String(describing: failure))")
    }

    @Test("accepts well-formed UTF-8 of every length")
    func validUTF8() throws {
        let samples = ["é", "€", "😀", "👩‍👩‍👧", "\u{10FFFF}", "\u{7F}", "\u{80}", "\u{7FF}", "\u{800}", "\u{FFFF}", "\u{10000}"]
        for sample in samples {
            #expect(try parseJSON("\"\(sample)\"") == .string(sample))
            #expect(try parseJSON("{\"\(sample)\":1}") == [sample: 1])
        }
    }

    /// Wraps raw bytes in quotes: a string whose content is `bytes`.
    static func quoted(_ bytes: [UInt8]) -> [UInt8] { [0x22] + bytes + [0x22] }

    @Test("rejects ill-formed UTF-8 in strings", arguments: [
        BadBytes("lone continuation byte", quoted([0x80]), "invalid UTF-8"),
        BadBytes("0xFF", quoted([0x61, 0xFF]), "invalid UTF-8"),
        BadBytes("0xF5 lead", quoted([0xF5, 0x80, 0x80, 0x80]), "invalid UTF-8"),
        BadBytes("overlong '/' (C0 AF)", quoted([0xC0, 0xAF]), "invalid UTF-8"),
        BadBytes("overlong C1", quoted([0xC1, 0xBF]), "invalid UTF-8"),
        BadBytes("overlong 3-byte (E0 80 AF)", quoted([0xE0, 0x80, 0xAF]), "invalid UTF-8"),
        BadBytes("overlong 4-byte (F0 80 80 AF)", quoted([0xF0, 0x80, 0x80, 0xAF]), "invalid UTF-8"),
        BadBytes("encoded surrogate (ED A0 80)", quoted([0xED, 0xA0, 0x80]), "invalid UTF-8"),
        BadBytes("encoded surrogate pair", quoted([0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]), "invalid UTF-8"),
        BadBytes("above U+10FFFF (F4 90 80 80)", quoted([0xF4, 0x90, 0x80, 0x80]), "invalid UTF-8"),
        BadBytes("truncated 3-byte sequence", quoted([0xE2, 0x82]), "invalid UTF-8"),
        BadBytes("truncated 4-byte sequence before ASCII", quoted([0xF0, 0x9F, 0x98, 0x41]), "invalid UTF-8"),
        BadBytes("bad continuation", quoted([0xC3, 0x28]), "invalid UTF-8"),
        BadBytes("invalid UTF-8 after an escape", Array(#""\n"#.utf8) + [0xFF, 0x22], "invalid UTF-8"),
        BadBytes("invalid UTF-8 in a key", [0x7B] + quoted([0xC0, 0x80]) + Array(":1}".utf8), "invalid UTF-8"),
        BadBytes("invalid byte outside strings", [0x5B, 0xFF, 0x5D], "expected a JSON value"),
        BadBytes("byte order mark", [0xEF, 0xBB, 0xBF, 0x31], "expected a JSON value"),
    ])
    func invalidUTF8(_ example: BadBytes) {
        let failure = parseFailure(example.bytes)
        #expect(failure?.reason.contains(example.reason) == true, "\(String(describing: failure))")
    }

    @Test("the UTF-8 error points at the offending byte")
    func utf8Offset() {
        #expect(parseFailure(Self.quoted([0x61, 0x62, 0xFF]))?.offset == 3)
    }

    static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }

    @Test("nesting 64 deep is accepted, 65 rejected")
    func depthLimit() throws {
        #expect(throws: Never.self) { try parseJSON(Self.nestedArrays(64)) }
        #expect(throws: Never.self) { try parseJSON(Self.nestedObjects(64)) }
        #expect(parseFailure(Array(Self.nestedArrays(65).utf8))?.reason.contains("nested deeper than 64") == true)
        #expect(parseFailure(Array(Self.nestedObjects(65).utf8))?.reason.contains("nested deeper than 64") == true)
    }

    @Test("maxDepth is honoured")
    func customDepth() throws {
        #expect(throws: Never.self) { try parseJSON("[[1]]", maxDepth: 2) }
        #expect(parseFailure(Array("[[[1]]]".utf8), maxDepth: 2) != nil)
        #expect(try parseJSON("1", maxDepth: 0) == 1)
        #expect(parseFailure(Array("[]".utf8), maxDepth: 0) != nil)
    }

    @Test("100000 open brackets are rejected without exhausting the stack")
    func hugeNesting() {
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        let failure = parseFailure(bytes)
        #expect(failure?.reason.contains("nested deeper") == true)
        #expect(failure?.offset == 64)
        // Also when the caller asks for more depth than the parser supports.
        #expect(parseFailure(bytes, maxDepth: 1_000_000)?.reason.contains("nested deeper than 512") == true)
    }

    @Test("rejects incomplete and extra input", arguments: [
        BadBytes("", "end of input"),
        BadBytes("   ", "end of input"),
        BadBytes("1 2", "after the JSON value"),
        BadBytes("{} x", "after the JSON value"),
        BadBytes("[]]", "after the JSON value"),
        BadBytes("[1,]", "expected a JSON value"),
        BadBytes("[1 2]", "expected ',' or ']'"),
        BadBytes("[1", "unterminated array"),
        BadBytes(#"{"a":1,}"#, "expected a string key"),
        BadBytes(#"{"a" 1}"#, "expected ':'"),
        BadBytes(#"{"a":1"#, "unterminated object"),
        BadBytes(#"{"a":1 "b":2}"#, "expected ',' or '}'"),
        BadBytes("{a:1}", "expected a string key"),
        BadBytes("tru", "invalid literal"),
        BadBytes("nul", "invalid literal"),
        BadBytes("True", "expected a JSON value"),
        BadBytes("'a'", "expected a JSON value"),
        BadBytes("[1]\u{0}", "after the JSON value"),
    ])
    func structuralErrors(_ example: BadBytes) {
        let failure = parseFailure(example.bytes)
        #expect(failure?.reason.contains(example.reason) == true, "\(String(describing: failure))")
    }

    @Test("errors report the byte offset")
    func offsets() {
        #expect(parseFailure(Array("[1,]".utf8))?.offset == 3)
        #expect(parseFailure(Array(#"{"a":tru}"#.utf8))?.offset == 5)
        #expect(parseFailure(Array("1 2".utf8))?.offset == 2)
    }

    @Test("a repeated key keeps its last value")
    func duplicateKeys() throws {
        #expect(try parseJSON(#"{"a":1,"b":2,"a":3}"#) == ["a": 3, "b": 2])
    }

    @Test("parses from a raw buffer, including an empty one")
    func rawBuffer() throws {
        let bytes = Array(#"{"x":[1,2]}"#.utf8)
        let value = try bytes.withUnsafeBytes { raw throws(JSONParseError) in try JSONValue.parse(raw) }
        #expect(value == ["x": [1, 2]])
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(empty) }
    }
}
