import Foundation
import Testing
@testable import ZeroBridge

/// Foundation's coders, as the reference for JSONValue's own Codable conformance.
enum FoundationJSON {
    static func encode<T: Encodable>(_ value: T) throws -> Data { try JSONEncoder().encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T { try JSONDecoder().decode(type, from: data) }
}

private enum Colour: String, Codable, Equatable { case red, green }
private enum Level: Int, Codable, Equatable { case low = 1, high = 9 }

private enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(width: Int, height: Int)
    case dot
}

private struct Inner: Codable, Equatable {
    var name: String
    var tags: [String]
    var score: Double?
}

private struct Outer: Codable, Equatable {
    var id: Int
    var flag: Bool
    var colour: Colour
    var level: Level
    var inner: Inner
    var list: [Inner]
    var map: [String: Int]
    var intKeys: [Int: String]
    var shapes: [Shape]
    var optional: String?
    var nestedOptional: [Int?]
    var anything: JSONValue
    var int8: Int8
    var uint64: UInt64
    var float: Float
}

private let sample = Outer(
    id: 7, flag: true, colour: .green, level: .high,
    inner: Inner(name: "a", tags: ["x", "y"], score: 0.5),
    list: [Inner(name: "b", tags: [], score: nil)],
    map: ["one": 1, "two": 2], intKeys: [1: "one"],
    shapes: [.circle(radius: 1.5), .rect(width: 2, height: 3), .dot],
    optional: nil, nestedOptional: [1, nil, 3],
    anything: ["k": [1, "v", nil]],
    int8: -128, uint64: 42, float: 0.1)

/// A class hierarchy that encodes its superclass with superEncoder.
private class Base: Codable {
    var base: Int
    init(base: Int) { self.base = base }
}

private final class Derived: Base, @unchecked Sendable {
    var extra: String
    init(base: Int, extra: String) {
        self.extra = extra
        super.init(base: base)
    }
    private enum CodingKeys: String, CodingKey { case extra }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        extra = try container.decode(String.self, forKey: .extra)
        try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(extra, forKey: .extra)
        try super.encode(to: container.superEncoder())
    }
}

/// Uses nested and unkeyed containers by hand.
private struct Matrix: Codable, Equatable {
    var rows: [[Int]]
    var meta: (String, Int)

    static func == (a: Matrix, b: Matrix) -> Bool { a.rows == b.rows && a.meta == b.meta }

    private enum Keys: String, CodingKey { case rows, meta }
    private enum MetaKeys: String, CodingKey { case label, size }

    init(rows: [[Int]], meta: (String, Int)) {
        self.rows = rows
        self.meta = meta
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        var outer = try container.nestedUnkeyedContainer(forKey: .rows)
        var rows: [[Int]] = []
        while !outer.isAtEnd {
            var inner = try outer.nestedUnkeyedContainer()
            var row: [Int] = []
            while !inner.isAtEnd { row.append(try inner.decode(Int.self)) }
            rows.append(row)
        }
        self.rows = rows
        let meta = try container.nestedContainer(keyedBy: MetaKeys.self, forKey: .meta)
        self.meta = (try meta.decode(String.self, forKey: .label), try meta.decode(Int.self, forKey: .size))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var outer = container.nestedUnkeyedContainer(forKey: .rows)
        for row in rows {
            var inner = outer.nestedUnkeyedContainer()
            for value in row { try inner.encode(value) }
        }
        var meta = container.nestedContainer(keyedBy: MetaKeys.self, forKey: .meta)
        try meta.encode(self.meta.0, forKey: .label)
        try meta.encode(self.meta.1, forKey: .size)
    }
}

@Suite("JSONValue Codable bridge", .timeLimit(.minutes(3)))
struct JSONValueCodingTests {
    let encoder = JSONValueEncoder()
    let decoder = JSONValueDecoder()

    @Test("nested structs, enums, optionals, arrays and dictionaries round trip")
    func roundTrip() throws {
        let value = try encoder.encode(sample)
        #expect(try decoder.decode(Outer.self, from: value) == sample)
        #expect(value["colour"] == "green")
        #expect(value["level"] == 9)
        #expect(value["inner"] == ["name": "a", "tags": ["x", "y"], "score": 0.5])
        #expect(value["list"] == [["name": "b", "tags": []]])  // nil optionals are left out
        #expect(value["map"] == ["one": 1, "two": 2])
        #expect(value["intKeys"] == ["1": "one"])
        #expect(value["optional"] == nil)
        #expect(value["nestedOptional"] == [1, nil, 3])
        #expect(value["anything"] == ["k": [1, "v", nil]])
        #expect(value["float"] == .double(0.1))
        #expect(value["uint64"] == 42)
    }

    @Test("agrees with Foundation's JSONEncoder")
    func matchesFoundation() throws {
        let viaFoundation = try JSONValue.parse([UInt8](FoundationJSON.encode(sample)))
        let direct = try encoder.encode(sample)
        // Foundation writes Float 0.1 as 0.1 too; everything else must match exactly.
        #expect(direct == viaFoundation)
        let back = try FoundationJSON.decode(Outer.self, from: Data(direct.serialized()))
        #expect(back == sample)
    }

    @Test("a JSONValue encodes and decodes as itself")
    func jsonValueIsItself() throws {
        let value: JSONValue = ["a": [1, 2.5, nil], "b": "c"]
        #expect(try encoder.encode(value) == value)
        #expect(try decoder.decode(JSONValue.self, from: value) == value)
        #expect(try encoder.encode([value, 3]) == [value, 3])
    }

    @Test("top-level scalars, optionals and nil")
    func scalars() throws {
        #expect(try encoder.encode(5) == 5)
        #expect(try encoder.encode("s") == "s")
        #expect(try encoder.encode(Optional<Int>.none) == nil)
        #expect(try encoder.encode(Optional(3)) == 3)
        #expect(try decoder.decode(Int?.self, from: nil) == nil)
        #expect(try decoder.decode(Int?.self, from: 4) == 4)
        #expect(try decoder.decode(Bool.self, from: true) == true)
        #expect(try decoder.decode([String: [Int]].self, from: ["a": [1]]) == ["a": [1]])
    }

    @Test("integers of every width are range-checked")
    func integerRanges() throws {
        #expect(try decoder.decode(Int8.self, from: -128) == -128)
        #expect(try decoder.decode(UInt8.self, from: 255) == 255)
        #expect(try decoder.decode(Int16.self, from: 3.0) == 3)
        #expect(try decoder.decode(UInt64.self, from: .int(Int.max)) == UInt64(Int.max))
        #expect(try decoder.decode(Int64.self, from: .int(Int.min)) == Int64.min)
        #expect(try decoder.decode(UInt32.self, from: 4_294_967_295) == UInt32.max)
        for (type, value) in [(Int8.self as any Decodable.Type, JSONValue.int(128)), (UInt8.self, -1), (UInt.self, -1),
                              (Int16.self, 40000), (UInt16.self, 70000), (Int32.self, .int(1 << 40)), (UInt32.self, -5),
                              (Int.self, 1e30)] {
            #expect(throws: DecodingError.self, "\(type) from \(value)") { try decoder.decode(type, from: value) }
        }
        #expect(throws: DecodingError.self) { try decoder.decode(Int.self, from: 2.5) }
        #expect(throws: EncodingError.self) { try encoder.encode(UInt64.max) }
        #expect(throws: EncodingError.self) { try encoder.encode(UInt(Int.max) + 1) }
        #expect(try encoder.encode([UInt8.max]) == [255])
        #expect(try encoder.encode(Int64.min) == .int(Int.min))
    }

    @Test("floating point values")
    func floatingPoint() throws {
        #expect(try decoder.decode(Double.self, from: 2) == 2.0)
        #expect(try decoder.decode(Float.self, from: 0.5) == 0.5)
        #expect(throws: DecodingError.self) { try decoder.decode(Float.self, from: 1e300) }
        #expect(throws: EncodingError.self) { try encoder.encode(Double.nan) }
        #expect(throws: EncodingError.self) { try encoder.encode([Float.infinity]) }
        #expect(try encoder.encode(Float(1.1)) == .double(1.1))
    }

    @Test("Date as ISO-8601, Data as bytes (an attachment on the wire), URL as a string, Decimal as a number")
    func foundationTypes() throws {
        struct Record: Codable, Equatable {
            var when: Date
            var blob: Data
            var link: URL
            var amount: Decimal
        }
        let record = Record(when: Date(timeIntervalSince1970: 1_700_000_000.25), blob: Data([0, 1, 2, 255]),
                            link: URL(string: "https://example.com/a?b=c")!, amount: Decimal(string: "12.5")!)
        let value = try encoder.encode(record)
        #expect(value["when"] == "2023-11-14T22:13:20.250Z")
        #expect(value["blob"] == .bytes([0, 1, 2, 255]))
        #expect(value["link"] == "https://example.com/a?b=c")
        #expect(value["amount"] == 12.5)
        #expect(try decoder.decode(Record.self, from: value) == record)
        // Whole seconds are accepted too.
        let plain = try decoder.decode(Date.self, from: "2023-11-14T22:13:20Z")
        #expect(plain == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(throws: DecodingError.self) { try decoder.decode(Date.self, from: "yesterday") }
        #expect(throws: DecodingError.self) { try decoder.decode(Data.self, from: "***") }
        #expect(try decoder.decode(Data.self, from: "AAEC/w==") == Data([0, 1, 2, 255]), "base64 text is still read")
        #expect(throws: DecodingError.self) { try decoder.decode(Date.self, from: 5) }
    }

    @Test("superEncoder/superDecoder and hand-written nested containers")
    func containers() throws {
        let derived = Derived(base: 4, extra: "e")
        let value = try encoder.encode(derived)
        #expect(value == ["extra": "e", "super": ["base": 4]])
        let back = try decoder.decode(Derived.self, from: value)
        #expect(back.base == 4 && back.extra == "e")

        let matrix = Matrix(rows: [[1, 2], [], [3]], meta: ("m", 3))
        let encoded = try encoder.encode(matrix)
        #expect(encoded == ["rows": [[1, 2], [], [3]], "meta": ["label": "m", "size": 3]])
        #expect(try decoder.decode(Matrix.self, from: encoded) == matrix)
    }

    @Test("a type that encodes nothing is an empty object")
    func empty() throws {
        struct Nothing: Codable, Equatable {}
        #expect(try encoder.encode(Nothing()) == [:])
        #expect(try decoder.decode(Nothing.self, from: [:]) == Nothing())
        #expect(try encoder.encode([Nothing()]) == [[:]])
    }

    /// The coding path of a decoding error as a dotted string.
    func path(of error: any Error) -> String? {
        let context: DecodingError.Context? = switch error as? DecodingError {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): context
        case .keyNotFound(let key, let context):
            DecodingError.Context(codingPath: context.codingPath + [key], debugDescription: context.debugDescription)
        default: nil
        }
        return context?.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }

    @Test("errors carry the coding path")
    func errorPaths() throws {
        var value = try encoder.encode(sample)
        guard case .object(var members) = value else { return }
        members["list"] = [["name": "b", "tags": ["ok", 5]]]
        value = .object(members)
        do {
            _ = try decoder.decode(Outer.self, from: value)
            Issue.record("decoded a number as a String")
        } catch {
            #expect(path(of: error) == "list.[0].tags.[1]")
            guard case DecodingError.typeMismatch(let type, let context) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(type is String.Type)
            #expect(context.debugDescription.contains("found an integer"))
        }

        members["list"] = [["tags": []]]
        do {
            _ = try decoder.decode(Outer.self, from: .object(members))
            Issue.record("decoded without a required key")
        } catch {
            guard case DecodingError.keyNotFound(let key, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(key.stringValue == "name")
            #expect(path(of: error) == "list.[0].name")
        }

        do {
            _ = try decoder.decode([Int8].self, from: [1, 2, 300])
            Issue.record("decoded 300 as Int8")
        } catch {
            #expect(path(of: error) == "[2]")
        }

        #expect(throws: DecodingError.self) { try decoder.decode(Colour.self, from: "blue") }
        #expect(throws: DecodingError.self) { try decoder.decode(Inner.self, from: [1]) }
        #expect(throws: DecodingError.self) { try decoder.decode([Int].self, from: ["a": 1]) }
        #expect(throws: DecodingError.self) { try decoder.decode(String.self, from: nil) }
        #expect(throws: DecodingError.self) { try decoder.decode(Bool.self, from: 1) }
    }

    @Test("an unkeyed container past its end throws valueNotFound")
    func unkeyedEnd() {
        struct Pair: Decodable {
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                _ = try container.decode(Int.self)
                _ = try container.decode(Int.self)
            }
        }
        #expect(throws: DecodingError.self) { try decoder.decode(Pair.self, from: [1]) }
    }

    @Test("encoding errors carry the coding path")
    func encodingErrorPath() {
        struct Bad: Encodable { var values: [Double] }
        do {
            _ = try encoder.encode(["outer": Bad(values: [1, .infinity])])
            Issue.record("encoded infinity")
        } catch EncodingError.invalidValue(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["outer", "values", "1"])
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
