import Foundation

/// Any JSON value: the untyped payload of a request, result, progress or event.
///
/// Numbers compare and hash by value, so `.int(3) == .double(3.0)`; integers stay integers when written
/// (`3`), doubles keep a fraction (`3.0`). For example:
///
/// ```swift
/// let payload: JSONValue = ["path": "/data", "limit": 10, "tags": ["a", "b"], "dry": false]
/// payload["limit"]?.intValue   // 10
/// payload.description          // {"dry":false,"limit":10,"path":"/data","tags":["a","b"]}
/// ```
public enum JSONValue: Sendable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer (a number written without a fraction or exponent, within `Int`'s range).
    case int(Int)
    /// Any other finite number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not kept.
    case object([String: JSONValue])
    /// Raw bytes. In a message they travel as an attachment frame, which the body refers to as
    /// `{"$attachment": i}`; written as JSON text outside a message, they become a base64 string.
    case bytes([UInt8])
}

// MARK: - Equality and hashing (numbers by value)

extension JSONValue: Hashable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        // Exact comparison: 2^53 + 1 is not equal to the double 2^53.
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Int(exactly: b) == a
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        case let (.bytes(a), .bytes(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b): hasher.combine(1 as UInt8); hasher.combine(b)
        case .int(let i): hasher.combine(2 as UInt8); hasher.combine(i)
        case .double(let d):
            // An integral double hashes like the equal Int so that equal values hash alike.
            if let i = Int(exactly: d) {
                hasher.combine(2 as UInt8); hasher.combine(i)
            } else {
                hasher.combine(3 as UInt8); hasher.combine(d)
            }
        case .string(let s): hasher.combine(4 as UInt8); hasher.combine(s)
        case .array(let a): hasher.combine(5 as UInt8); hasher.combine(a)
        case .object(let o): hasher.combine(6 as UInt8); hasher.combine(o)
        case .bytes(let b): hasher.combine(7 as UInt8); hasher.combine(b)
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        // Last wins for a repeated key, as in parsed JSON.
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Convenience accessors

extension JSONValue {
    /// The member named `key` of an object; nil for a missing key or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array; nil when out of bounds or when this is not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The boolean, or nil for anything else.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The integer, also from a double with no fraction that fits in `Int`.
    public var intValue: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d): return Int(exactly: d)
        default: return nil
        }
    }

    /// The number as a double, from an int or a double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// The string, or nil for anything else.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The array's items, or nil for anything else.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The object's members, or nil for anything else.
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The bytes of an attachment, or nil for anything else.
    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }
}

// MARK: - Text

extension JSONValue: CustomStringConvertible {
    /// The value as compact JSON text (object keys sorted).
    public var description: String {
        String(decoding: serialized(), as: UTF8.self)
    }
}

// MARK: - Codable (for any Encoder/Decoder; JSONValueEncoder/Decoder pass it through unchanged)

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let b = try? container.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? container.decode(Int.self) {
            self = .int(i)
        } else if let d = try? container.decode(Double.self) {
            self = .double(d)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let a = try? container.decode([JSONValue].self) {
            self = .array(a)
        } else if let o = try? container.decode([String: JSONValue].self) {
            self = .object(o)
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not a JSON value")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .int(let i): try container.encode(i)
        case .double(let d): try container.encode(d)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        case .bytes(let b): try container.encode(Data(b))
        }
    }
}
