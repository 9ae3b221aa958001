import Foundation
import Testing
@testable import ZeroBridge

/// `$describe` (SPEC 7.8): schemas derived from Codable types, the canonical hash, and the catalogue on the wire.
@Suite("Describing actions: schemas from types, catalogue hashes", .timeLimit(.minutes(3)))
struct DescribeTests {
    // MARK: Schemas from types

    enum Colour: String, Codable, CaseIterable { case red, green, deepBlue = "deep_blue" }
    enum Level: Int, Codable, CaseIterable { case low = 1, high = 3 }
    enum Unlisted: String, Codable { case a, b }  // not CaseIterable: its cases cannot be listed
    enum Shape: Codable { case circle(radius: Double), square(side: Double) }  // associated values

    struct Inner: Codable { var label: String; var weight: Double? }

    struct Everything: Codable {
        var name: String
        var count: Int
        var small: UInt8
        var ratio: Double
        var flag: Bool
        var nickname: String?
        var tags: [String]
        var unique: Set<Int>
        var scores: [String: Double]
        var byNumber: [Int: String]
        var colour: Colour
        var level: Level
        var inner: Inner
        var inners: [Inner]?
        var when: Date
        var blob: Data
        var link: URL
        var id: UUID
        var amount: Decimal
        var anything: JSONValue
        enum CodingKeys: String, CodingKey {
            case name, count, small, ratio, flag, nickname, tags, unique, scores, colour, level, inner, inners, when,
                 blob, link, id, amount, anything, byNumber = "by_number"
        }
    }

    @Test("every covered Codable shape becomes its JSON Schema, with JSON (coding key) names and required members")
    func everyShape() {
        let schema = JSONSchema.of(Everything.self)
        #expect(schema["type"] == "object")
        #expect(schema["title"] == "Everything")
        let properties = schema["properties"]!
        #expect(properties["name"] == ["type": "string"])
        #expect(properties["count"] == ["type": "integer"])
        #expect(properties["small"] == ["type": "integer", "minimum": 0, "maximum": 255])
        #expect(properties["ratio"] == ["type": "number"])
        #expect(properties["flag"] == ["type": "boolean"])
        #expect(properties["nickname"] == ["anyOf": [["type": "string"], ["type": "null"]]])
        #expect(properties["tags"] == ["type": "array", "items": ["type": "string"]])
        #expect(properties["unique"] == ["type": "array", "items": ["type": "integer"], "uniqueItems": true])
        #expect(properties["scores"] == ["type": "object", "additionalProperties": ["type": "number"]])
        #expect(properties["by_number"] == ["type": "object", "additionalProperties": ["type": "string"]])
        #expect(properties["colour"] == ["enum": ["red", "green", "deep_blue"]])
        #expect(properties["level"] == ["enum": [1, 3]])
        let inner: JSONValue = ["type": "object", "title": "Inner",
                                "properties": ["label": ["type": "string"],
                                               "weight": ["anyOf": [["type": "number"], ["type": "null"]]]],
                                "required": ["label"]]
        #expect(properties["inner"] == inner)
        #expect(properties["inners"] == ["anyOf": [["type": "array", "items": inner], ["type": "null"]]])
        #expect(properties["when"] == ["type": "string", "format": "date-time"])
        #expect(properties["blob"] == ["type": "string", "contentEncoding": "base64"])
        #expect(properties["link"] == ["type": "string", "format": "uri"])
        #expect(properties["id"] == ["type": "string", "format": "uuid"])
        #expect(properties["amount"] == ["type": "number"])
        #expect(properties["anything"] == [:])
        let required = Set(schema["required"]!.arrayValue!.compactMap(\.stringValue))
        #expect(required == ["name", "count", "small", "ratio", "flag", "tags", "unique", "scores", "by_number",
                             "colour", "level", "inner", "when", "blob", "link", "id", "amount", "anything"])
    }

    @Test("top-level shapes: scalars, optionals, arrays of structs")
    func topLevel() {
        #expect(JSONSchema.of(Int.self) == ["type": "integer"])
        #expect(JSONSchema.of(String?.self) == ["anyOf": [["type": "string"], ["type": "null"]]])
        #expect(JSONSchema.of([Colour].self) == ["type": "array", "items": ["enum": ["red", "green", "deep_blue"]]])
        #expect(JSONSchema.of(JSONValue.self) == [:])
    }

    struct Node: Codable { var value: Int; var children: [Node] }
    struct Holder: Codable { var shape: Shape }
    struct HoldsUnlisted: Codable { var choice: Unlisted }

    @Test("what cannot be followed is any value, with a $comment saying why, never a crash")
    func notDerivable() {
        for schema in [JSONSchema.of(Node.self), JSONSchema.of(Holder.self), JSONSchema.of(HoldsUnlisted.self),
                       JSONSchema.of([Int8: String].self)] {
            #expect(schema["$comment"]?.stringValue?.isEmpty == false, "\(schema)")
            #expect(schema["type"] == nil)
        }
        #expect(JSONSchema.of(Node.self)["$comment"]?.stringValue?.contains("contains itself") == true)
    }

    /// The escape hatch: a value written by hand-written Codable as a "major.minor" string.
    struct Version: Codable, BridgeSchemaProviding {
        static let bridgeSchema: JSONValue = ["type": "string", "description": "major.minor", "examples": ["1.0"]]
        var major: Int, minor: Int
        init(from decoder: any Decoder) throws {
            let parts = try decoder.singleValueContainer().decode(String.self).split(separator: ".").compactMap { Int($0) }
            guard parts.count == 2 else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not major.minor")) }
            (major, minor) = (parts[0], parts[1])
        }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode("\(major).\(minor)")
        }
    }
    struct Release: Codable { var version: Version; var notes: String }

    @Test("BridgeSchemaProviding states the schema of a custom Codable, also inside other types")
    func escapeHatch() {
        // Tracing alone would decode "" and fail; the schema's example decodes, so Release can be described.
        #expect(JSONSchema.of(Version.self) == Version.bridgeSchema)
        #expect(JSONSchema.of(Release.self)["properties"] == ["version": Version.bridgeSchema, "notes": ["type": "string"]])
        struct Percent: Codable, BridgeSchemaProviding {
            static let bridgeSchema: JSONValue = ["type": "integer", "minimum": 0, "maximum": 100]
            var value: Int
            init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(Int.self) }
            func encode(to encoder: any Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(value) }
        }
        struct Battery: Codable { var charge: Percent }
        #expect(JSONSchema.of(Battery.self)["properties"]?["charge"] == ["type": "integer", "minimum": 0, "maximum": 100])
    }

    // MARK: Canonical form and hash

    static let canonicalCases: [JSONValue] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("protocol/fixtures/catalogues/canonical.json")
        return try! JSONValue.parse(Array(try! Data(contentsOf: url))).arrayValue!
    }()

    @Test("every case of fixtures/catalogues/canonical.json: RFC 8785 text and its SHA-256")
    func canonicalCases() {
        for item in Self.canonicalCases {
            let text = item["value"]!.canonicalText
            #expect(text == item["canonical"]!.stringValue!, "\(item["name"]!)")
            #expect(Catalogue.hash(text) == item["sha256"]!.stringValue!, "\(item["name"]!)")
        }
    }

    @Test("numbers as ECMAScript writes them")
    func ecmaScriptNumbers() {
        let cases: [(Double, String)] = [(0.1, "0.1"), (-0.5, "-0.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
                                         (1.5e300, "1.5e+300"), (1e-7, "1e-7"), (1e-6, "0.000001"), (123.456, "123.456"),
                                         (5e-324, "5e-324"), (-0.0, "0"), (2.5e-10, "2.5e-10"), (1234.5678e10, "12345678000000")]
        for (value, text) in cases { #expect(JSONValue.ecmaScriptNumber(value) == text, "\(value)") }
    }

    // MARK: On the wire

    struct Greet: BridgeAction {
        static let name = "greet"
        static let summary = "Says hello."
        struct Payload: Codable, Sendable { var who: String }
        typealias Result = String
    }

    struct Tick: BridgeAction {
        static let name = "tick"
        typealias Payload = JSONValue
        typealias Result = Int
        struct Progress: Codable, Sendable { var step: Int }
    }

    @Test("the host's $describe matches its welcome's hash, lists typed and untyped actions, and follows changes")
    func hostCatalogue() async throws {
        let host = try startConformanceHost()
        try host.handle(Greet.self) { payload, _ in "hello, \(payload.who)" }
        let peer = try await connectPeer(host)
        let catalogue = try await peer.describe()
        #expect(peer.welcome?.catalogue == catalogue["catalogue"]?.stringValue)
        let actions = catalogue["actions"]!.arrayValue!
        #expect(actions.map { $0["name"]!.stringValue! } ==
                ["add", "broadcast", "callPeer", "callback", "count", "countJob", "echo", "emit", "evaluate", "fail", "greet", "once", "sleep"])
        #expect(actions[5]["job"] == true)
        #expect(actions[10] == ["name": "greet", "doc": "Says hello.", "result": ["type": "string"],
                               "payload": ["type": "object", "title": "Payload", "properties": ["who": ["type": "string"]],
                                           "required": ["who"]]])

        // A new handler changes the catalogue: the next welcome says so.
        try host.handle(Tick.self) { _, request in 1 }
        let changed = try await peer.describe()
        #expect(changed["catalogue"] != catalogue["catalogue"])
        #expect(changed["actions"]!.arrayValue!.first { $0["name"] == "tick" }?["progress"]
                == ["type": "object", "title": "Progress", "properties": ["step": ["type": "integer"]], "required": ["step"]])
        #expect(host.removeHandler(for: Tick.self))
        #expect(try await peer.describe() == catalogue)
        await peer.close()
        await host.shutdown()
    }

    @Test("a Swift peer describes its own actions and sends the hash in hello; the host keeps it in the peer's info")
    func peerCatalogue() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host, name: "describing") { peer in
            try peer.handle(Greet.self) { payload, _ in "hi \(payload.who)" }
        }
        let remote = try await host.peer(named: "describing", waitingUpTo: patience)
        let catalogue = try await remote.describe()
        #expect(catalogue["actions"]!.arrayValue!.map { $0["name"]! } == ["greet"])
        #expect(remote.info.catalogue == catalogue["catalogue"]?.stringValue)
        #expect(remote.info.catalogue?.count == 64)
        await peer.close()
        await host.shutdown()
    }
}
