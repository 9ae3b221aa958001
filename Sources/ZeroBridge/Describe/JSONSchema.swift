import Foundation

/// A type that states its own JSON Schema: the escape hatch for a custom `Codable` whose JSON shape cannot be
/// seen by decoding it (see ``JSONSchema/of(_:)``).
///
/// To describe the types that contain it, a value of it is decoded from the schema's `default`, else its first
/// `examples` item, else the simplest value the schema accepts; give one when that would not decode.
/// For example, a value written as a "major.minor" string by hand-written `Codable`:
/// ```swift
/// struct Version: Codable, BridgeSchemaProviding {
///     static let bridgeSchema: JSONValue = ["type": "string", "description": "major.minor", "examples": ["1.0"]]
///     ...
/// }
/// ```
public protocol BridgeSchemaProviding {
    /// The schema `$describe` shows for the type, in place of the one ``JSONSchema/of(_:)`` would derive.
    static var bridgeSchema: JSONValue { get }
}

extension JSONValue: BridgeSchemaProviding {
    /// Any JSON value.
    public static var bridgeSchema: JSONValue { [:] }
}

/// JSON Schemas (draft 2020-12, the keywords SPEC 7.8 lists) derived from `Decodable` types, for `$describe`.
///
/// The schema describes the JSON that `JSONValueDecoder` reads (and `JSONValueEncoder` writes) for the type.
/// Structs and classes with synthesized or hand-written `init(from:)` over keyed containers, optionals,
/// arrays, sets, dictionaries with `String` or `Int` keys, nested types, enums with raw values that are
/// `CaseIterable`, `Date`, `Data`, `URL`, `UUID`, `Decimal` and every integer and floating-point type are covered.
/// A type whose decoding cannot be followed (enums with associated values, raw-value enums that are not
/// `CaseIterable`, initializers that validate their input) is described as any value (`{}`) with a `$comment`
/// saying why, unless it conforms to ``BridgeSchemaProviding``.
public enum JSONSchema {
    /// The schema of the JSON that `type` decodes from; any value (`{}`, with a `$comment` saying why) for a type
    /// whose decoding cannot be followed.
    public static func of<T: Decodable>(_ type: T.Type) -> JSONValue {
        if let provider = type as? any BridgeSchemaProviding.Type { return provider.bridgeSchema }
        let tracer = SchemaTracer()
        do {
            return try tracer.trace(type).schema
        } catch {
            return ["$comment": .string("not derivable from \(T.self): \(error)")]
        }
    }
}

/// Decodes a type from a decoder that records what is asked of it instead of reading JSON. Each value decoded
/// is a sample (zero, empty, first case) so that the type's own `init(from:)` can run to its end.
final class SchemaTracer {
    /// Types being traced, outermost first: a type met again inside itself is recursive.
    private var tracing: [ObjectIdentifier] = []

    func trace<T: Decodable>(_ type: T.Type) throws -> (schema: JSONValue, sample: T) {
        if let leaf = Self.leaf(type) { return (leaf.schema, leaf.sample as! T) }
        if let shaped = type as? any SchemaShaped.Type {
            let (schema, sample) = try shaped.traced(by: self)
            return (schema, sample as! T)
        }
        if let enumeration = type as? any (CaseIterable & RawRepresentable).Type,
           let traced = Self.cases(enumeration) {
            return (traced.schema, traced.sample as! T)
        }
        if let provider = type as? any BridgeSchemaProviding.Type {
            let schema = provider.bridgeSchema
            return (schema, try JSONValueDecoder().decode(T.self, from: Self.sample(of: schema)))
        }
        let id = ObjectIdentifier(type)
        guard !tracing.contains(id) else {
            throw SchemaTracingError("\(T.self) contains itself; give it BridgeSchemaProviding")
        }
        tracing.append(id)
        defer { tracing.removeLast() }
        let recording = Recording()
        let sample = try T(from: TracingDecoder(tracer: self, recording: recording))
        return (recording.schema(title: String(describing: T.self)), sample)
    }

    /// The schema only, for the element types of containers.
    func schema<T: Decodable>(_ type: T.Type) throws -> JSONValue { try trace(type).schema }

    private static func leaf(_ type: Any.Type) -> (schema: JSONValue, sample: Any)? {
        switch type {
        case is String.Type: return (["type": "string"], "")
        case is Bool.Type: return (["type": "boolean"], false)
        case is Int.Type: return (["type": "integer"], 0 as Int)
        case is Int64.Type: return (["type": "integer"], 0 as Int64)
        case is Int32.Type: return (bounded(Int32.min, Int32.max), 0 as Int32)
        case is Int16.Type: return (bounded(Int16.min, Int16.max), 0 as Int16)
        case is Int8.Type: return (bounded(Int8.min, Int8.max), 0 as Int8)
        case is UInt.Type: return (["type": "integer", "minimum": 0], 0 as UInt)
        case is UInt64.Type: return (["type": "integer", "minimum": 0], 0 as UInt64)
        case is UInt32.Type: return (bounded(UInt32.min, UInt32.max), 0 as UInt32)
        case is UInt16.Type: return (bounded(UInt16.min, UInt16.max), 0 as UInt16)
        case is UInt8.Type: return (bounded(UInt8.min, UInt8.max), 0 as UInt8)
        case is Double.Type: return (["type": "number"], 0.0 as Double)
        case is Float.Type: return (["type": "number"], 0.0 as Float)
        case is Decimal.Type: return (["type": "number"], Decimal(0))
        case is Date.Type: return (["type": "string", "format": "date-time"], Date(timeIntervalSince1970: 0))
        case is Data.Type: return (["type": "string", "contentEncoding": "base64"], Data())
        case is URL.Type: return (["type": "string", "format": "uri"], URL(string: "https://example.invalid/")!)
        case is UUID.Type: return (["type": "string", "format": "uuid"], UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        default: return nil
        }
    }

    private static func bounded<I: FixedWidthInteger>(_ min: I, _ max: I) -> JSONValue {
        ["type": "integer", "minimum": .int(Int(min)), "maximum": .int(Int(max))]
    }

    /// An enum with raw values: the values of all its cases, the first one as the sample.
    private static func cases<E: CaseIterable & RawRepresentable>(_ type: E.Type) -> (schema: JSONValue, sample: Any)? {
        let values = type.allCases.compactMap { value -> JSONValue? in
            switch value.rawValue {
            case let text as String: return .string(text)
            case let number as Int: return .int(number)
            case let number as Double: return .double(number)
            default: return nil
            }
        }
        guard let first = type.allCases.first, values.count == type.allCases.count else { return nil }
        return (["enum": .array(values)], first)
    }

    /// The simplest JSON value a schema accepts, for decoding a sample of a type that states its own schema.
    static func sample(of schema: JSONValue) -> JSONValue {
        if let given = schema["default"] { return given }
        if case .array(let examples)? = schema["examples"], let first = examples.first { return first }
        if let constant = schema["const"] { return constant }
        if case .array(let values)? = schema["enum"], let first = values.first { return first }
        if case .array(let options)? = schema["anyOf"], let first = options.first { return sample(of: first) }
        let type: String? = switch schema["type"] {
        case .string(let name)?: name
        case .array(let names)?: names.first?.stringValue
        default: nil
        }
        switch type {
        case "string": return .string("")
        case "integer", "number": return .int(Int(schema["minimum"]?.intValue ?? 0))
        case "boolean": return .bool(false)
        case "array": return .array([])
        case "object":
            var object: [String: JSONValue] = [:]
            if case .array(let required)? = schema["required"] {
                for case .string(let name) in required { object[name] = sample(of: schema["properties"]?[name] ?? [:]) }
            }
            return .object(object)
        default: return .null
        }
    }
}

struct SchemaTracingError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A schema that also accepts null (any value already does).
private func nullable(_ schema: JSONValue) -> JSONValue {
    schema == [:] ? schema : ["anyOf": [schema, ["type": "null"]]]
}

/// Containers whose schema follows from their element types without decoding any element.
protocol SchemaShaped {
    static func traced(by tracer: SchemaTracer) throws -> (schema: JSONValue, sample: Any)
}

extension Optional: SchemaShaped where Wrapped: Decodable {
    static func traced(by tracer: SchemaTracer) throws -> (schema: JSONValue, sample: Any) {
        (nullable(try tracer.schema(Wrapped.self)), Wrapped?.none as Any)
    }
}

extension Array: SchemaShaped where Element: Decodable {
    static func traced(by tracer: SchemaTracer) throws -> (schema: JSONValue, sample: Any) {
        (["type": "array", "items": try tracer.schema(Element.self)], [Element]())
    }
}

extension Set: SchemaShaped where Element: Decodable {
    static func traced(by tracer: SchemaTracer) throws -> (schema: JSONValue, sample: Any) {
        (["type": "array", "items": try tracer.schema(Element.self), "uniqueItems": true], Set<Element>())
    }
}

extension Dictionary: SchemaShaped where Value: Decodable, Key: Decodable {
    static func traced(by tracer: SchemaTracer) throws -> (schema: JSONValue, sample: Any) {
        // Codable writes String- and Int-keyed dictionaries as objects, any other key type as a flat array.
        guard Key.self == String.self || Key.self == Int.self else {
            throw SchemaTracingError("a dictionary with \(Key.self) keys is written as an array of keys and values")
        }
        return (["type": "object", "additionalProperties": try tracer.schema(Value.self)], [Key: Value]())
    }
}

/// What the decoding of one value asked for: an object's members, an array's items, or one single value.
private final class Recording {
    enum Shape { case unknown, object, array, single(JSONValue) }
    var shape = Shape.unknown
    var properties: [(name: String, schema: JSONValue, required: Bool)] = []
    var items: [JSONValue] = []

    func property(_ name: String, _ schema: JSONValue, required: Bool) {
        shape = .object
        if let index = properties.firstIndex(where: { $0.name == name }) {
            properties[index] = (name, schema, required || properties[index].required)
        } else {
            properties.append((name, schema, required))
        }
    }

    func schema(title: String) -> JSONValue {
        switch shape {
        case .unknown:
            return ["$comment": .string("\(title) decodes nothing")]
        case .single(let schema):
            return schema
        case .object:
            var members: [String: JSONValue] = [:]
            for property in properties { members[property.name] = property.schema }
            let required = properties.filter(\.required).map { JSONValue.string($0.name) }
            return ["type": "object", "title": .string(title), "properties": .object(members), "required": .array(required)]
        case .array:
            guard let first = items.first else { return ["type": "array"] }
            if items.allSatisfy({ $0 == first }) { return ["type": "array", "items": first] }
            return ["type": "array", "prefixItems": .array(items), "minItems": .int(items.count), "maxItems": .int(items.count)]
        }
    }
}

private struct TracingDecoder: Decoder {
    let tracer: SchemaTracer
    let recording: Recording
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if case .unknown = recording.shape { recording.shape = .object }
        return KeyedDecodingContainer(KeyedTracer(tracer: tracer, recording: recording, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        recording.shape = .array
        return UnkeyedTracer(tracer: tracer, recording: recording, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleTracer(tracer: tracer, recording: recording, codingPath: codingPath)
    }
}

private struct KeyedTracer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let tracer: SchemaTracer
    let recording: Recording
    var codingPath: [any CodingKey]
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decode(type, key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try optional(type, key) }

    // Every primitive overload goes through the generic one (the defaults would count optionals as required).
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decode(type as Bool.Type, key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decode(type as String.Type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decode(type as Double.Type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decode(type as Float.Type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decode(type as Int.Type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decode(type as Int8.Type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decode(type as Int16.Type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decode(type as Int32.Type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decode(type as Int64.Type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decode(type as UInt.Type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decode(type as UInt8.Type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decode(type as UInt16.Type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decode(type as UInt32.Type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decode(type as UInt64.Type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional(type, key) }

    private func decode<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        let (schema, sample) = try tracer.trace(type)
        recording.property(key.stringValue, schema, required: true)
        return sample
    }

    /// Absent or null both read as nil.
    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        recording.property(key.stringValue, nullable(try tracer.schema(type)), required: false)
        return nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let nested = Recording()
        nested.shape = .object
        defer { recording.property(key.stringValue, nested.schema(title: key.stringValue), required: true) }
        return KeyedDecodingContainer(KeyedTracer<NestedKey>(tracer: tracer, recording: nested, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw SchemaTracingError("a nested unkeyed container under '\(key.stringValue)' cannot be followed")
    }

    func superDecoder() throws -> any Decoder { TracingDecoder(tracer: tracer, recording: recording, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try superDecoder() }
}

private struct UnkeyedTracer: UnkeyedDecodingContainer {
    let tracer: SchemaTracer
    let recording: Recording
    var codingPath: [any CodingKey]
    var count: Int? { nil }
    // One item is enough to learn the item type; a decoder that loops until the end stops after it.
    var isAtEnd: Bool { currentIndex > 0 }
    var currentIndex = 0

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try item(type) }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try item(type) }
    mutating func decode(_ type: String.Type) throws -> String { try item(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try item(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try item(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try item(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try item(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try item(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try item(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try item(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try item(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try item(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try item(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try item(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try item(type) }

    private mutating func item<T: Decodable>(_ type: T.Type) throws -> T {
        let (schema, sample) = try tracer.trace(type)
        recording.items.append(schema)
        currentIndex += 1
        return sample
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        throw SchemaTracingError("a keyed container nested in an array cannot be followed")
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw SchemaTracingError("an array nested in an array cannot be followed")
    }

    mutating func superDecoder() throws -> any Decoder { TracingDecoder(tracer: tracer, recording: recording, codingPath: codingPath) }
}

private struct SingleTracer: SingleValueDecodingContainer {
    let tracer: SchemaTracer
    let recording: Recording
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(type) }

    func decode(_ type: Bool.Type) throws -> Bool { try value(type) }
    func decode(_ type: String.Type) throws -> String { try value(type) }
    func decode(_ type: Double.Type) throws -> Double { try value(type) }
    func decode(_ type: Float.Type) throws -> Float { try value(type) }
    func decode(_ type: Int.Type) throws -> Int { try value(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try value(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try value(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try value(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try value(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try value(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value(type) }

    private func value<T: Decodable>(_ type: T.Type) throws -> T {
        let (schema, sample) = try tracer.trace(type)
        recording.shape = .single(schema)
        return sample
    }
}
