import Testing
@testable import ZeroBridge

struct WriteCase: Sendable, CustomTestStringConvertible {
    var value: JSONValue
    var text: String
    var testDescription: String { text }
}

@Suite("JSONValue", .timeLimit(.minutes(3)))
struct JSONValueTests {
    @Test("numbers are equal by value: 3 == 3.0")
    func numericEquality() {
        #expect(JSONValue.int(3) == .double(3.0))
        #expect(JSONValue.double(3.0) == .int(3))
        #expect(JSONValue.int(3).hashValue == JSONValue.double(3.0).hashValue)
        #expect(JSONValue.int(0) == .double(-0.0))
        #expect(JSONValue.int(3) != .double(3.5))
        #expect(JSONValue.int(1) != .bool(true))
        #expect(JSONValue.int(1) != .string("1"))
        // No rounding: 2^53 + 1 is not the double 2^53.
        #expect(JSONValue.int(9_007_199_254_740_993) != .double(9_007_199_254_740_992))
        #expect(JSONValue.double(1e300) != .int(Int.max))
        let set: Set<JSONValue> = [3, 3.0, [1, 2.0], [1.0, 2], ["a": 1], ["a": 1.0]]
        #expect(set.count == 3)
    }

    @Test("containers compare element-wise and by value")
    func containerEquality() {
        #expect(JSONValue.array([1, 2]) == [1.0, 2.0])
        #expect(JSONValue.array([1, 2]) != [2, 1])
        #expect(JSONValue.object(["a": 1, "b": [true]]) == ["b": [true], "a": 1.0])
        #expect(JSONValue.object(["a": 1]) != ["a": 1, "b": nil])
    }

    @Test("literals build the matching cases")
    func literals() {
        let value: JSONValue = ["n": nil, "b": true, "i": 1, "d": 1.5, "s": "x", "a": [1], "o": ["k": "v"]]
        #expect(value["n"] == .null)
        #expect(value["b"] == .bool(true))
        #expect(value["i"] == .int(1))
        #expect(value["d"] == .double(1.5))
        #expect(value["s"] == .string("x"))
        #expect(value["a"] == .array([.int(1)]))
        #expect(value["o"] == .object(["k": .string("v")]))
        let repeated: JSONValue = ["k": 1, "k": 2]
        #expect(repeated == ["k": 2])
    }

    @Test("accessors")
    func accessors() {
        let value: JSONValue = ["list": [10, "x"], "flag": false, "half": 0.5, "whole": 4.0, "name": "zb"]
        #expect(value["list"]?[0]?.intValue == 10)
        #expect(value["list"]?[1]?.stringValue == "x")
        #expect(value["list"]?[2] == nil)
        #expect(value["list"]?[-1] == nil)
        #expect(value["missing"] == nil)
        #expect(value["flag"]?.boolValue == false)
        #expect(value["half"]?.intValue == nil)
        #expect(value["half"]?.doubleValue == 0.5)
        #expect(value["whole"]?.intValue == 4)
        #expect(value["list"]?[0]?.doubleValue == 10)
        #expect(value["name"]?.stringValue == "zb")
        #expect(value["name"]?.intValue == nil)
        #expect(value["list"]?.arrayValue?.count == 2)
        #expect(value.objectValue?.count == 5)
        #expect(value[0] == nil)
        #expect(JSONValue.string("a")["a"] == nil)
        #expect(JSONValue.null.isNull)
        #expect(JSONValue.double(1e300).intValue == nil)
    }

    @Test("writes compact JSON", arguments: [
        WriteCase(value: nil, text: "null"),
        WriteCase(value: true, text: "true"),
        WriteCase(value: false, text: "false"),
        WriteCase(value: 0, text: "0"),
        WriteCase(value: 7, text: "7"),
        WriteCase(value: -42, text: "-42"),
        WriteCase(value: 1234567890, text: "1234567890"),
        WriteCase(value: .int(Int.max), text: "9223372036854775807"),
        WriteCase(value: .int(Int.min), text: "-9223372036854775808"),
        WriteCase(value: 3.0, text: "3.0"),
        WriteCase(value: 0.1, text: "0.1"),
        WriteCase(value: -2.5, text: "-2.5"),
        WriteCase(value: 1e-7, text: "1e-07"),
        WriteCase(value: 1e16, text: "1e+16"),
        WriteCase(value: .double(-0.0), text: "-0.0"),
        WriteCase(value: .double(.nan), text: "null"),
        WriteCase(value: .double(.infinity), text: "null"),
        WriteCase(value: "", text: #""""#),
        WriteCase(value: [], text: "[]"),
        WriteCase(value: [:], text: "{}"),
        WriteCase(value: [1, [2, [3]], "x"], text: #"[1,[2,[3]],"x"]"#),
        WriteCase(value: ["b": 1, "a": [true, nil], "c": ["z": 1, "y": 2]], text: #"{"a":[true,null],"b":1,"c":{"y":2,"z":1}}"#),
    ])
    func writes(_ example: WriteCase) {
        #expect(String(decoding: example.value.serialized(), as: UTF8.self) == example.text)
        #expect(example.value.description == example.text)
    }

    @Test("an object's members are written in key order, below and above the size sorted in place", arguments: [2, 3, 15, 16, 17, 40])
    func writesMembersInKeyOrder(_ count: Int) {
        var generator = SplitMix64(seed: UInt64(count))
        let alphabet = Array("aAzZ09_-é€😀 ").map(String.init)
        var members: [String: JSONValue] = [:]
        while members.count < count {
            let length = Int(generator.next() % 6) + 1
            let key = (0 ..< length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }.joined()
            members[key] = .int(members.count)
        }
        let expected = "{" + members.sorted { $0.key < $1.key }
            .map { "\(JSONValue.string($0.key)):\($0.value)" }.joined(separator: ",") + "}"
        #expect(JSONValue.object(members).description == expected)
    }

    @Test("escapes strings per RFC 8259 and keeps other UTF-8 as is")
    func writesEscapes() throws {
        let value = JSONValue.string("q\"b\\s/\n\r\t\u{08}\u{0C}\u{0}\u{1F}\u{7F}é€😀")
        let text = String(decoding: value.serialized(), as: UTF8.self)
        #expect(text == #""q\"b\\s/\n\r\t\b\f\u0000\u001f"# + "\u{7F}é€😀\"")
        #expect(try JSONValue.parse(value.serialized()) == value)
    }

    @Test("write appends to what the buffer holds")
    func appends() {
        var buffer = Array("x=".utf8)
        JSONValue.array([1, "a"]).write(to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == #"x=[1,"a"]"#)
    }

    @Test("parse(write(v)) == v, doubles bit for bit")
    func roundTrips() throws {
        var generator = SplitMix64(seed: 42)
        for _ in 0 ..< 2000 {
            let number = Double(bitPattern: generator.next())
            guard number.isFinite else { continue }
            let parsed = try JSONValue.parse(JSONValue.double(number).serialized())
            guard case .double(let back) = parsed else {
                Issue.record("\(number) came back as \(parsed)")
                continue
            }
            #expect(back.bitPattern == number.bitPattern)
        }
        for _ in 0 ..< 200 {
            let integer = Int(bitPattern: UInt(generator.next()))
            #expect(try JSONValue.parse(JSONValue.int(integer).serialized()) == .int(integer))
        }
        let nested: JSONValue = ["a": [1, 2.5, "three", ["four": nil]], "b": ["c": [true, false]], "é😀": "\u{1}"]
        #expect(try JSONValue.parse(nested.serialized()) == nested)
    }

    @Test("Codable through Foundation's JSON coders")
    func foundationCodable() throws {
        let value: JSONValue = ["a": [1, 2.5, "x", nil, true], "b": ["c": "d"]]
        let data = try FoundationJSON.encode(value)
        #expect(try FoundationJSON.decode(JSONValue.self, from: data) == value)
    }
}

/// A small deterministic generator, so that "random" inputs are the same on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
