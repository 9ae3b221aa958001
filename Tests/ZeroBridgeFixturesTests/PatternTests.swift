import Testing
@_spi(Fixtures) import ZeroBridge
@testable import ZeroBridgeFixtures

func json(_ text: String) -> JSONValue { try! FixtureCodec.parse(Array(text.utf8), maxDepth: 512) }

/// One row of the matching table: a pattern, a received value (nil: a missing member) and whether they match.
struct MatchCase: Sendable, CustomTestStringConvertible {
    let pattern: String
    let value: String?
    let matches: Bool
    var testDescription: String { "\(pattern) \(matches ? "matches" : "does not match") \(value ?? "a missing member")" }
}

@Suite("Patterns (SPEC 14.2)", .timeLimit(.minutes(3)))
struct PatternTests {
    static let table: [MatchCase] = [
        .init(pattern: "3", value: "3.0", matches: true),
        .init(pattern: "3", value: "3.5", matches: false),
        .init(pattern: "true", value: "1", matches: false),
        .init(pattern: "null", value: "null", matches: true),
        .init(pattern: "null", value: nil, matches: false),
        .init(pattern: #""a""#, value: #""a""#, matches: true),
        .init(pattern: "[1, 2]", value: "[1, 2]", matches: true),
        .init(pattern: "[1, 2]", value: "[2, 1]", matches: false),
        .init(pattern: "[1]", value: "[1, 2]", matches: false),
        .init(pattern: #"{"a": 1}"#, value: #"{"a": 1, "b": 2}"#, matches: true),
        .init(pattern: #"{"a": 1, "c": 3}"#, value: #"{"a": 1}"#, matches: false),
        .init(pattern: #"{"$any": "integer"}"#, value: "4.0", matches: true),
        .init(pattern: #"{"$any": "integer"}"#, value: "4.5", matches: false),
        .init(pattern: #"{"$any": "number"}"#, value: "4.5", matches: true),
        .init(pattern: #"{"$any": "string"}"#, value: "4", matches: false),
        .init(pattern: #"{"$any": "boolean"}"#, value: "false", matches: true),
        .init(pattern: #"{"$any": "null"}"#, value: "null", matches: true),
        .init(pattern: #"{"$any": "array"}"#, value: "{}", matches: false),
        .init(pattern: #"{"$any": "object"}"#, value: "{}", matches: true),
        .init(pattern: #"{"$any": "value"}"#, value: "null", matches: true),
        .init(pattern: #"{"$any": "value"}"#, value: nil, matches: false),
        .init(pattern: #"{"$absent": true}"#, value: nil, matches: true),
        .init(pattern: #"{"$absent": true}"#, value: "null", matches: false),
        .init(pattern: #"{"$oneOf": [null, {"$absent": true}]}"#, value: nil, matches: true),
        .init(pattern: #"{"$oneOf": [null, {"$absent": true}]}"#, value: "null", matches: true),
        .init(pattern: #"{"$oneOf": [null, {"$absent": true}]}"#, value: "0", matches: false),
        .init(pattern: #"{"$not": "x"}"#, value: #""y""#, matches: true),
        .init(pattern: #"{"$not": "x"}"#, value: #""x""#, matches: false),
        .init(pattern: #"{"$not": "x"}"#, value: nil, matches: true),
        .init(pattern: #"{"$not": {"$absent": true}}"#, value: nil, matches: false),
        .init(pattern: #"{"$exact": {"a": 1}}"#, value: #"{"a": 1}"#, matches: true),
        .init(pattern: #"{"$exact": {"a": 1}}"#, value: #"{"a": 1, "b": 2}"#, matches: false),
        .init(pattern: #"{"$exact": {"a": 1, "b": {"$absent": true}}}"#, value: #"{"a": 1}"#, matches: true),
        .init(pattern: #"{"$unordered": [1, 2, 3]}"#, value: "[3, 1, 2]", matches: true),
        .init(pattern: #"{"$unordered": [1, 2]}"#, value: "[1, 1]", matches: false),
        .init(pattern: #"{"$unordered": [1, {"$any": "integer"}]}"#, value: "[5, 1]", matches: true),
        .init(pattern: #"{"$literal": {"$attachment": 0}}"#, value: #"{"$attachment": 0}"#, matches: true),
        .init(pattern: #"{"$literal": {"$any": "string"}}"#, value: #""x""#, matches: false),
        .init(pattern: #"{"$capture": "x"}"#, value: "[1]", matches: true),
        .init(pattern: #"{"$capture": "x"}"#, value: nil, matches: false),
    ]

    @Test(arguments: table)
    func matching(_ row: MatchCase) throws {
        var variables: Variables = [:]
        let mismatch = try Pattern.match(json(row.pattern), row.value.map(json), variables: &variables)
        #expect((mismatch == nil) == row.matches, "\(mismatch.map(String.init(describing:)) ?? "matched")")
    }

    @Test("a mismatch names the JSON path of the field, with expected and received values")
    func mismatchPath() throws {
        var variables: Variables = [:]
        let pattern = json(#"{"v": 1, "type": "response", "error": {"code": "timeout"}, "list": [1, {"odd key": 2}]}"#)
        let code = try Pattern.match(pattern, json(#"{"v": 1, "type": "response", "error": {"code": "cancelled"}}"#), variables: &variables)
        #expect(code?.description == #"$.error.code: expected "timeout", got "cancelled""#)
        let odd = try Pattern.match(pattern, json(#"{"v": 1, "type": "response", "error": {"code": "timeout"}, "list": [1, {"odd key": 3}]}"#),
                                    variables: &variables)
        #expect(odd?.description == #"$.list[1]["odd key"]: expected 2, got 3"#)
        let missing = try Pattern.match(json(#"{"id": "a"}"#), json("{}"), variables: &variables)
        #expect(missing?.description == #"$.id: expected "a", got nothing (the member is missing)"#)
    }

    @Test("captures are kept on a match, forgotten when the pattern fails, and $var compares with them")
    func captures() throws {
        var variables: Variables = [:]
        #expect(try Pattern.match(json(#"{"id": {"$capture": "call"}, "ok": true}"#), json(#"{"id": "h1", "ok": false}"#),
                                  variables: &variables) != nil)
        #expect(variables.isEmpty, "the failed pattern's capture is forgotten")
        #expect(try Pattern.match(json(#"{"$oneOf": [{"a": {"$capture": "x"}, "b": 1}, {"a": {"$capture": "y"}}]}"#),
                                  json(#"{"a": 5, "b": 2}"#), variables: &variables) == nil)
        #expect(variables == ["y": 5], "only the alternative that matched keeps its capture")
        #expect(try Pattern.match(json(#"{"$var": "y"}"#), json("5.0"), variables: &variables) == nil)
        #expect(try Pattern.match(json(#"{"$not": {"$var": "y"}}"#), json("5"), variables: &variables) != nil)
        #expect(throws: FixtureFault.self) { try Pattern.match(json(#"{"$var": "never"}"#), json("1"), variables: &variables) }
    }

    @Test("templates: {{i}} in string values only (not keys, not $literal), $var and $literal filled in")
    func templates() throws {
        let written = json(#"{"id": "hold-{{i}}", "{{i}}": "{{i}}{{i}}", "raw": {"$literal": "{{i}}"}, "list": ["x{{i}}"]}"#)
        #expect(Template.substituteIndex(written, 7) == json(#"{"id": "hold-7", "{{i}}": "77", "raw": {"$literal": "{{i}}"}, "list": ["x7"]}"#))
        let filled = try Template.fill(json(#"{"id": {"$var": "call"}, "payload": {"$literal": {"$attachment": 0}}}"#), ["call": "h9"])
        #expect(filled == json(#"{"id": "h9", "payload": {"$attachment": 0}}"#))
        #expect(throws: FixtureFault.self) { try Template.fill(json(#"{"id": {"$var": "missing"}}"#), [:]) }
    }

    @Test("frames: text, base64, json, byte runs and concatenations")
    func frames() {
        #expect(Template.bytes(of: json(#"{"text": "hé"}"#)) == Array("hé".utf8))
        #expect(Template.bytes(of: json(#"{"base64": "AAEC"}"#)) == [0, 1, 2])
        #expect(Template.bytes(of: json(#"{"json": {"a": [1]}}"#)) == Array(#"{"a":[1]}"#.utf8))
        #expect(Template.bytes(of: json(#"{"byte": 120, "count": 3}"#)) == Array("xxx".utf8))
        #expect(Template.bytes(of: json(#"{"concat": [{"text": "a"}, {"byte": 98, "count": 2}]}"#)) == Array("abb".utf8))
    }
}
