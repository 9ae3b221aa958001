import Foundation

/// Decodes any `Decodable` straight from a ``JSONValue``, without going through JSON text.
///
/// The mirror of ``JSONValueEncoder``: integers of every width are range-checked (an integral double such as
/// `3.0` is accepted as an integer), `Float`/`Double` accept any number, `Bool` and `String` only their own
/// kind, `Date` an ISO-8601 string (with or without fractional seconds), `Data` bytes or base64 text, `URL` a string. Errors
/// are `DecodingError`s whose context carries the coding path. For example:
///
/// ```swift
/// struct Point: Codable { var x: Int; var y: Int }
/// let point = try JSONValueDecoder().decode(Point.self, from: ["x": 1, "y": 2])
/// ```
package struct JSONValueDecoder {
    var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    package init() {}

    package func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try ValueDecoder(value: value, codingPath: [], userInfo: userInfo).unbox(type)
    }
}

private struct IndexKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) { self.stringValue = "Index \(intValue)"; self.intValue = intValue }
    static let `super` = IndexKey(stringValue: "super")
}

private struct ValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    let storedUserInfo: [CodingUserInfoKey: any Sendable]

    init(value: JSONValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
        self.value = value
        self.codingPath = codingPath
        self.storedUserInfo = userInfo
    }

    var userInfo: [CodingUserInfoKey: Any] { storedUserInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else {
            throw ValueDecoder.mismatch([String: JSONValue].self, value, codingPath)
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self, members: members))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else {
            throw ValueDecoder.mismatch([JSONValue].self, value, codingPath)
        }
        return UnkeyedContainer(decoder: self, elements: elements)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// A decoder for a value nested under `key`.
    func child(_ value: JSONValue, key: any CodingKey) -> ValueDecoder {
        ValueDecoder(value: value, codingPath: codingPath + [key], userInfo: storedUserInfo)
    }

    // MARK: Unboxing (the value of this decoder as a given type)

    func unbox<T: Decodable>(_ type: T.Type) throws -> T {
        // Types with a fixed representation first; everything else decodes itself.
        if type == JSONValue.self { return value as! T }
        if type == Date.self { return try unboxDate() as! T }
        if type == Data.self { return try unboxData() as! T }
        if type == URL.self { return try unboxURL() as! T }
        if type == Decimal.self { return try unboxDecimal() as! T }
        return try T(from: self)
    }

    func unboxBool() throws -> Bool {
        guard case .bool(let flag) = value else { throw ValueDecoder.mismatch(Bool.self, value, codingPath) }
        return flag
    }

    func unboxString() throws -> String {
        guard case .string(let text) = value else { throw ValueDecoder.mismatch(String.self, value, codingPath) }
        return text
    }

    func unboxInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        switch value {
        case .int(let integer):
            guard let result = T(exactly: integer) else { throw outOfRange(type, "\(integer)") }
            return result
        case .double(let number):
            guard number.rounded(.towardZero) == number else {
                throw ValueDecoder.mismatch(type, value, codingPath, "Expected \(T.self) but found the non-integer number \(number)")
            }
            guard let result = T(exactly: number) else { throw outOfRange(type, "\(number)") }
            return result
        default:
            throw ValueDecoder.mismatch(type, value, codingPath)
        }
    }

    func unboxDouble() throws -> Double {
        guard let number = value.doubleValue else { throw ValueDecoder.mismatch(Double.self, value, codingPath) }
        return number
    }

    func unboxFloat() throws -> Float {
        let number = try unboxDouble()
        guard abs(number) <= Double(Float.greatestFiniteMagnitude) else { throw outOfRange(Float.self, "\(number)") }
        return Float(number)
    }

    private func unboxDate() throws -> Date {
        let text = try unboxString()
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        if let date = try? Date.ISO8601FormatStyle().parse(text) { return date }
        throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Expected an ISO-8601 date but found \"\(text.prefix(64))\""))
    }

    private func unboxData() throws -> Data {
        if case .bytes(let bytes) = value { return Data(bytes) }
        let text = try unboxString()
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Expected base64 data but found \"\(text.prefix(64))\""))
        }
        return data
    }

    private func unboxURL() throws -> URL {
        let text = try unboxString()
        guard let url = URL(string: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Expected a URL but found \"\(text.prefix(64))\""))
        }
        return url
    }

    private func unboxDecimal() throws -> Decimal {
        switch value {
        case .int(let integer): return Decimal(integer)
        case .double(let number):
            guard let decimal = Decimal(string: number.description) else { throw outOfRange(Decimal.self, "\(number)") }
            return decimal
        default: throw ValueDecoder.mismatch(Decimal.self, value, codingPath)
        }
    }

    private func outOfRange(_ type: Any.Type, _ number: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath, debugDescription: "Number \(number) does not fit in \(type)"))
    }

    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey], _ text: String? = nil) -> DecodingError {
        .typeMismatch(type, .init(codingPath: path, debugDescription: text ?? "Expected \(type) but found \(value.kindDescription)"))
    }
}

extension ValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try unboxBool() }
    func decode(_ type: String.Type) throws -> String { try unboxString() }
    func decode(_ type: Double.Type) throws -> Double { try unboxDouble() }
    func decode(_ type: Float.Type) throws -> Float { try unboxFloat() }
    func decode(_ type: Int.Type) throws -> Int { try unboxInteger(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try unboxInteger(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try unboxInteger(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try unboxInteger(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try unboxInteger(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try unboxInteger(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try unboxInteger(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try unboxInteger(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try unboxInteger(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try unboxInteger(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try unbox(type) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder
    let members: [String: JSONValue]

    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { members.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func child(_ key: Key) throws -> ValueDecoder {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for key '\(key.stringValue)'"))
        }
        return decoder.child(value, key: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).value.isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).unboxBool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).unboxString() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).unboxDouble() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).unboxFloat() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).unboxInteger(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).unboxInteger(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).unboxInteger(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).unboxInteger(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).unboxInteger(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).unboxInteger(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).unboxInteger(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).unboxInteger(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).unboxInteger(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).unboxInteger(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).unbox(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    // A missing super key decodes as null, as Foundation's JSONDecoder does.
    func superDecoder() throws -> any Decoder { decoder.child(members["super"] ?? .null, key: IndexKey.super) }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder.child(members[key.stringValue] ?? .null, key: key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: ValueDecoder
    let elements: [JSONValue]
    private(set) var currentIndex = 0

    init(decoder: ValueDecoder, elements: [JSONValue]) {
        self.decoder = decoder
        self.elements = elements
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    /// The decoder for the next element, moving past it.
    private mutating func next(_ type: Any.Type) throws -> ValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(
                codingPath: codingPath + [IndexKey(intValue: currentIndex)],
                debugDescription: "Unkeyed container is at end (\(elements.count) elements)"))
        }
        defer { currentIndex += 1 }
        return decoder.child(elements[currentIndex], key: IndexKey(intValue: currentIndex))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(JSONValue.self, .init(
                codingPath: codingPath + [IndexKey(intValue: currentIndex)],
                debugDescription: "Unkeyed container is at end (\(elements.count) elements)"))
        }
        // Only a null is consumed, so that `decodeIfPresent` can go on to decode the element.
        if elements[currentIndex].isNull { currentIndex += 1; return true }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type).unboxBool() }
    mutating func decode(_ type: String.Type) throws -> String { try next(type).unboxString() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type).unboxDouble() }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type).unboxFloat() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type).unboxInteger(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type).unboxInteger(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type).unboxInteger(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type).unboxInteger(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type).unbox(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next([String: JSONValue].self).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next([JSONValue].self).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { try next(JSONValue.self) }
}
