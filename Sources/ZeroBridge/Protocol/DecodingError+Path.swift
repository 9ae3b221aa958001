import Foundation

/// A typed action's payload (result, progress) that does not decode, said as the Python and Node peers say a schema
/// mismatch: `payload.name: expected a string, got 5`, rather than `DecodingError`'s own text.
extension DecodingError {
    /// This error as `<path>: expected <what>, got <what was there>`, the path starting at `root` in `value`.
    func pathDescription(in value: JSONValue, root: String) -> String {
        switch self {
        case .typeMismatch(let type, let context):
            let found = value.member(at: context.codingPath)
            return "\(Self.path(root, context.codingPath)): expected \(Self.words(for: type)), got \(found.map(Self.describe) ?? "nothing")"
        case .valueNotFound(let type, let context):
            return "\(Self.path(root, context.codingPath)): expected \(Self.words(for: type)), got null"
        case .keyNotFound(let key, let context):
            return "\(Self.path(root, context.codingPath)): the required member \"\(key.stringValue)\" is missing"
        case .dataCorrupted(let context):
            return "\(Self.path(root, context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(root): \(self)"
        }
    }

    private static func path(_ root: String, _ codingPath: [any CodingKey]) -> String {
        codingPath.reduce(root) { path, key in
            key.intValue.map { "\(path)[\($0)]" } ?? "\(path).\(key.stringValue)"
        }
    }

    private static func words(for type: Any.Type) -> String {
        switch type {
        case is String.Type, is URL.Type, is Date.Type: "a string"
        case is Bool.Type: "a boolean"
        case is any BinaryInteger.Type: "an integer"
        case is any BinaryFloatingPoint.Type, is Decimal.Type: "a number"
        case is Data.Type: "bytes (or base64 text)"
        case is [JSONValue].Type: "an array"
        case is [String: JSONValue].Type: "an object"
        default: "\(type)"
        }
    }

    /// What was there, as the Python and Node validators say it: `5`, `the string "2"`, `an object`.
    private static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .int, .double: value.description
        case .string(let text):
            "the string \(JSONValue.string(text.count <= 40 ? text : String(text.prefix(37)) + "...").description)"
        case .bytes(let bytes): "\(bytes.count) bytes"
        case .array(let items): "an array of \(items.count) items"
        case .object: "an object"
        }
    }
}

extension JSONValue {
    /// The value at a decoder's coding path, if there is one.
    fileprivate func member(at codingPath: [any CodingKey]) -> JSONValue? {
        var current = self
        for key in codingPath {
            switch current {
            case .array(let items):
                guard let index = key.intValue, items.indices.contains(index) else { return nil }
                current = items[index]
            case .object(let members):
                guard let member = members[key.stringValue] else { return nil }
                current = member
            default:
                return nil
            }
        }
        return current
    }
}
