import Foundation

/// Encodes any `Encodable` straight into a ``JSONValue``, without going through JSON text.
///
/// Representations: integers as `.int` (an unsigned value above `Int.max` is an error), `Float`/`Double` as
/// `.double` (non-finite is an error: JSON has no NaN or infinity), `Date` as an ISO-8601 string with
/// fractional seconds in UTC, `Data` as `.bytes` (an attachment on the wire), `URL` as its absolute string, `Decimal` as a number, `nil` as
/// `null` (keyed optionals are omitted, as synthesized `Codable` does), and a `JSONValue` as itself.
/// For example:
///
/// ```swift
/// struct Point: Codable { var x: Int; var y: Int }
/// let value = try JSONValueEncoder().encode(Point(x: 1, y: 2))   // ["x": 1, "y": 2]
/// ```
package struct JSONValueEncoder {
    var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    package init() {}

    package func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        try JSONValueEncoder.box(value, codingPath: [], userInfo: userInfo)
    }

    /// Encodes one value, handling the types with a fixed representation before asking the value to encode itself.
    fileprivate static func box<T: Encodable>(_ value: T, codingPath: [any CodingKey],
                                              userInfo: [CodingUserInfoKey: any Sendable]) throws -> JSONValue {
        // Compare types rather than cast the value: a failed dynamic cast per nested value would be the slow part.
        if T.self == JSONValue.self { return value as! JSONValue }
        if T.self == Date.self { return .string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(value as! Date)) }
        if T.self == Data.self { return .bytes(Array(value as! Data)) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == Decimal.self { return try box(decimal: value as! Decimal, codingPath: codingPath) }
        let encoder = ValueEncoder(codingPath: codingPath, userInfo: userInfo)
        try value.encode(to: encoder)
        return encoder.node.value
    }

    private static func box(decimal: Decimal, codingPath: [any CodingKey]) throws -> JSONValue {
        guard decimal.isFinite else {
            throw EncodingError.invalidValue(decimal, .init(codingPath: codingPath, debugDescription: "Decimal \(decimal) is not a finite number"))
        }
        if let integer = Int(decimal.description) { return .int(integer) }
        guard let number = Double(decimal.description) else {
            throw EncodingError.invalidValue(decimal, .init(codingPath: codingPath, debugDescription: "Decimal \(decimal) is not representable"))
        }
        return .double(number)
    }
}

/// A value under construction. Containers hand out nodes for nested values, and the tree is flattened into a
/// JSONValue once encoding is done.
private final class EncodingNode {
    enum Content {
        /// Nothing encoded yet; an empty object if it stays that way (what a type with no properties encodes).
        case empty
        case value(JSONValue)
        case object([String: EncodingNode])
        case array([EncodingNode])
    }

    var content: Content = .empty

    init() {}
    init(_ value: JSONValue) { content = .value(value) }

    var value: JSONValue {
        switch content {
        case .empty: .object([:])
        case .value(let value): value
        case .object(let members): .object(members.mapValues(\.value))
        case .array(let elements): .array(elements.map(\.value))
        }
    }
}

private struct StringKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { self.stringValue = String(intValue); self.intValue = intValue }
    static let `super` = StringKey(stringValue: "super")
}

private final class ValueEncoder: Encoder {
    let codingPath: [any CodingKey]
    let storedUserInfo: [CodingUserInfoKey: any Sendable]
    let node: EncodingNode

    init(codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable], node: EncodingNode = EncodingNode()) {
        self.codingPath = codingPath
        self.storedUserInfo = userInfo
        self.node = node
    }

    var userInfo: [CodingUserInfoKey: Any] { storedUserInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Asking twice (as a subclass and its superclass may) keeps filling the same object.
        if case .object = node.content {} else { node.content = .object([:]) }
        return KeyedEncodingContainer(KeyedContainer<Key>(encoder: self, node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = node.content {} else { node.content = .array([]) }
        return UnkeyedContainer(encoder: self, node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(encoder: self, codingPath: codingPath)
    }

    func box<T: Encodable>(_ value: T, at path: [any CodingKey]) throws -> JSONValue {
        try JSONValueEncoder.box(value, codingPath: path, userInfo: storedUserInfo)
    }

    static func number(_ value: some BinaryInteger, at path: [any CodingKey]) throws -> JSONValue {
        guard let integer = Int(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "\(value) does not fit in a JSON integer (Int)"))
        }
        return .int(integer)
    }

    static func number(_ value: Double, at path: [any CodingKey]) throws -> JSONValue {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "\(value) is not a finite number; JSON cannot express it"))
        }
        return .double(value)
    }

    static func number(_ value: Float, at path: [any CodingKey]) throws -> JSONValue {
        // Through the float's shortest text, so 0.1 as Float becomes 0.1 rather than 0.10000000149011612.
        guard value.isFinite else { return try number(Double(value), at: path) }
        return .double(Double(value.description) ?? Double(value))
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: ValueEncoder
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func set(_ value: JSONValue, for key: Key) { set(EncodingNode(value), for: key.stringValue) }

    private func set(_ child: EncodingNode, for key: String) {
        guard case .object(var members) = node.content else { return }
        node.content = .empty  // let go of the storage so the mutation below does not copy it
        members[key] = child
        node.content = .object(members)
    }

    private func path(_ key: some CodingKey) -> [any CodingKey] { codingPath + [key] }

    mutating func encodeNil(forKey key: Key) throws { set(.null, for: key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(.bool(value), for: key) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(.string(value), for: key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(.int(value), for: key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(.int(Int(value)), for: key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(.int(Int(value)), for: key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(.int(Int(value)), for: key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(.int(Int(value)), for: key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(.int(Int(value)), for: key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(try ValueEncoder.number(value, at: path(key)), for: key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(try encoder.box(value, at: path(key)), for: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = EncodingNode()
        child.content = .object([:])
        set(child, for: key.stringValue)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, node: child, codingPath: path(key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = EncodingNode()
        child.content = .array([])
        set(child, for: key.stringValue)
        return UnkeyedContainer(encoder: encoder, node: child, codingPath: path(key))
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: StringKey.super) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: some CodingKey) -> any Encoder {
        let child = EncodingNode()
        set(child, for: key.stringValue)
        return ValueEncoder(codingPath: path(key), userInfo: encoder.storedUserInfo, node: child)
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: ValueEncoder
    let node: EncodingNode
    let codingPath: [any CodingKey]

    var count: Int {
        if case .array(let elements) = node.content { return elements.count }
        return 0
    }

    private func append(_ child: EncodingNode) {
        guard case .array(var elements) = node.content else { return }
        node.content = .empty  // let go of the storage so the append below does not copy it
        elements.append(child)
        node.content = .array(elements)
    }

    private func append(_ value: JSONValue) { append(EncodingNode(value)) }
    private var nextPath: [any CodingKey] { codingPath + [StringKey(intValue: count)] }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: Float) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: Int) throws { append(.int(value)) }
    mutating func encode(_ value: Int8) throws { append(.int(Int(value))) }
    mutating func encode(_ value: Int16) throws { append(.int(Int(value))) }
    mutating func encode(_ value: Int32) throws { append(.int(Int(value))) }
    mutating func encode(_ value: Int64) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: UInt) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: UInt8) throws { append(.int(Int(value))) }
    mutating func encode(_ value: UInt16) throws { append(.int(Int(value))) }
    mutating func encode(_ value: UInt32) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode(_ value: UInt64) throws { append(try ValueEncoder.number(value, at: nextPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws { append(try encoder.box(value, at: nextPath)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = EncodingNode()
        child.content = .object([:])
        append(child)
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(encoder: encoder, node: child, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = EncodingNode()
        child.content = .array([])
        append(child)
        return UnkeyedContainer(encoder: encoder, node: child, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        let child = EncodingNode()
        append(child)
        return ValueEncoder(codingPath: path, userInfo: encoder.storedUserInfo, node: child)
    }
}

private struct SingleValueContainer: SingleValueEncodingContainer {
    let encoder: ValueEncoder
    let codingPath: [any CodingKey]

    private func set(_ value: JSONValue) { encoder.node.content = .value(value) }

    mutating func encodeNil() throws { set(.null) }
    mutating func encode(_ value: Bool) throws { set(.bool(value)) }
    mutating func encode(_ value: String) throws { set(.string(value)) }
    mutating func encode(_ value: Double) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: Float) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: Int) throws { set(.int(value)) }
    mutating func encode(_ value: Int8) throws { set(.int(Int(value))) }
    mutating func encode(_ value: Int16) throws { set(.int(Int(value))) }
    mutating func encode(_ value: Int32) throws { set(.int(Int(value))) }
    mutating func encode(_ value: Int64) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: UInt) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: UInt8) throws { set(.int(Int(value))) }
    mutating func encode(_ value: UInt16) throws { set(.int(Int(value))) }
    mutating func encode(_ value: UInt32) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode(_ value: UInt64) throws { set(try ValueEncoder.number(value, at: codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws { set(try encoder.box(value, at: codingPath)) }
}
