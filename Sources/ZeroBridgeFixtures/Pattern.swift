import Foundation
import ZeroBridge

/// Why a received value does not match a pattern: where (a JSON path), what was expected, what came.
struct Mismatch: Sendable, CustomStringConvertible {
    var path: String
    var expected: String
    var received: String

    var description: String { "\(path): expected \(expected), got \(received)" }
}

/// A fixture that uses something it has not defined (a `$var` before its `$capture`): the fixture's fault.
struct FixtureFault: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// Captured values, by variable name.
typealias Variables = [String: JSONValue]

/// The matching language of conversation fixtures (protocol/SPEC.md, section 14.2, "Patterns").
enum Pattern {
    static let anyTypes: Set<String> = ["value", "string", "number", "integer", "boolean", "null", "array", "object"]

    /// The matcher's key and argument when `value` is an object with exactly one key that starts with `$`.
    static func matcher(_ value: JSONValue) -> (key: String, argument: JSONValue)? {
        guard case .object(let members) = value, members.count == 1, let (key, argument) = members.first,
              key.hasPrefix("$") else { return nil }
        return (key, argument)
    }

    /// Matches a received value (nil: a missing member) against a pattern. On success the captures are kept in
    /// `variables`; on failure `variables` is left as it was.
    static func match(_ pattern: JSONValue, _ value: JSONValue?, path: String = "$",
                      variables: inout Variables) throws(FixtureFault) -> Mismatch? {
        var trial = variables
        let mismatch = try matchKeepingCaptures(pattern, value, path, &trial)
        if mismatch == nil { variables = trial }
        return mismatch
    }

    private static func matchKeepingCaptures(_ pattern: JSONValue, _ value: JSONValue?, _ path: String,
                                             _ variables: inout Variables) throws(FixtureFault) -> Mismatch? {
        if let (key, argument) = matcher(pattern) {
            return try matchMatcher(key, argument, pattern, value, path, &variables)
        }
        guard let value else { return Mismatch(path: path, expected: JSONText.short(pattern), received: JSONText.short(nil)) }
        switch pattern {
        case .object(let members):
            guard case .object(let received) = value else {
                return Mismatch(path: path, expected: "an object", received: JSONText.short(value))
            }
            for key in JSONText.keysInReadingOrder(members.keys) {
                if let mismatch = try matchKeepingCaptures(members[key]!, received[key], JSONText.path(path, key: key), &variables) {
                    return mismatch
                }
            }
            return nil
        case .array(let items):
            guard case .array(let received) = value else {
                return Mismatch(path: path, expected: "an array of \(items.count)", received: JSONText.short(value))
            }
            guard received.count == items.count else {
                return Mismatch(path: path, expected: "an array of \(items.count) (\(JSONText.short(pattern, limit: 80)))",
                                received: "\(received.count): \(JSONText.short(value, limit: 80))")
            }
            for index in items.indices {
                if let mismatch = try matchKeepingCaptures(items[index], received[index], JSONText.path(path, index: index), &variables) {
                    return mismatch
                }
            }
            return nil
        default:
            // Numbers by value (3 matches 3.0); a boolean never equals a number.
            return pattern == value ? nil : Mismatch(path: path, expected: JSONText.short(pattern), received: JSONText.short(value))
        }
    }

    private static func matchMatcher(_ key: String, _ argument: JSONValue, _ pattern: JSONValue, _ value: JSONValue?,
                                     _ path: String, _ variables: inout Variables) throws(FixtureFault) -> Mismatch? {
        func missing() -> Mismatch { Mismatch(path: path, expected: JSONText.short(pattern), received: JSONText.short(nil)) }
        switch key {
        case "$any":
            guard let value else { return missing() }
            let type = argument.stringValue ?? "value"
            return hasType(value, type) ? nil
                : Mismatch(path: path, expected: type == "value" ? "any value" : "any \(type)", received: JSONText.short(value))
        case "$absent":
            return value == nil ? nil : Mismatch(path: path, expected: "no such member", received: JSONText.short(value))
        case "$oneOf":
            var reasons: [String] = []
            for alternative in argument.arrayValue ?? [] {
                var trial = variables
                guard let mismatch = try matchKeepingCaptures(alternative, value, path, &trial) else {
                    variables = trial
                    return nil
                }
                reasons.append(mismatch.description)
            }
            return Mismatch(path: path, expected: "one of \(reasons.count) alternatives [\(reasons.joined(separator: "; "))]",
                            received: JSONText.short(value))
        case "$not":
            var trial = variables
            if try matchKeepingCaptures(argument, value, path, &trial) == nil {
                return Mismatch(path: path, expected: "anything but \(JSONText.short(argument))", received: JSONText.short(value))
            }
            return nil
        case "$capture":
            guard let value else { return missing() }
            variables[argument.stringValue ?? ""] = value
            return nil
        case "$var":
            let name = argument.stringValue ?? ""
            guard let captured = variables[name] else {
                throw FixtureFault(description: "$var \"\(name)\" is used before any $capture of that name")
            }
            guard let value else { return missing() }
            return value == captured ? nil
                : Mismatch(path: path, expected: "\(JSONText.short(captured)) (the value of $var \"\(name)\")", received: JSONText.short(value))
        case "$exact":
            guard let value else { return missing() }
            guard case .object(let received) = value, case .object(let listed) = argument else {
                return Mismatch(path: path, expected: "an object", received: JSONText.short(value))
            }
            if let extra = received.keys.sorted().first(where: { listed[$0] == nil }) {
                return Mismatch(path: JSONText.path(path, key: extra), expected: "no such member ($exact)", received: JSONText.short(received[extra]))
            }
            return try matchKeepingCaptures(argument, value, path, &variables)
        case "$unordered":
            guard let value else { return missing() }
            let patterns = argument.arrayValue ?? []
            guard case .array(let received) = value, received.count == patterns.count else {
                return Mismatch(path: path, expected: "an array of \(patterns.count) in any order (\(JSONText.short(argument, limit: 80)))",
                                received: JSONText.short(value))
            }
            var left = Array(patterns.indices)
            for (index, item) in received.enumerated() {
                var taken: Int?
                for position in left.indices {
                    var trial = variables
                    if try matchKeepingCaptures(patterns[left[position]], item, JSONText.path(path, index: index), &trial) == nil {
                        variables = trial
                        taken = position
                        break
                    }
                }
                guard let taken else {
                    return Mismatch(path: JSONText.path(path, index: index),
                                    expected: "one of the items left: \(JSONText.short(.array(left.map { patterns[$0] }), limit: 100))",
                                    received: JSONText.short(item))
                }
                left.remove(at: taken)
            }
            return nil
        case "$literal":
            guard let value else { return missing() }
            return value == argument ? nil : Mismatch(path: path, expected: JSONText.short(argument), received: JSONText.short(value))
        default:
            throw FixtureFault(description: "\(key) is not a matcher")
        }
    }

    static func hasType(_ value: JSONValue, _ type: String) -> Bool {
        switch (type, value) {
        case ("value", _): true
        case ("string", .string), ("boolean", .bool), ("null", .null), ("array", .array), ("object", .object): true
        case ("number", .int), ("number", .double): true
        case ("integer", .int): true
        case ("integer", .double(let number)): number.isFinite && number.rounded() == number
        default: false
        }
    }
}

/// Turning written steps into what is sent and expected: `{{i}}` in repeated steps, `$var`/`$literal` in bodies,
/// and frames.
enum Template {
    /// Replaces `{{i}}` in every string value (not keys, not inside `$literal`) by `index`.
    static func substituteIndex(_ value: JSONValue, _ index: Int) -> JSONValue {
        switch value {
        case .string(let text):
            return text.contains("{{i}}") ? .string(text.replacingOccurrences(of: "{{i}}", with: String(index))) : value
        case .array(let items):
            return .array(items.map { substituteIndex($0, index) })
        case .object(let members):
            if let (key, _) = Pattern.matcher(value), key == "$literal" { return value }
            return .object(members.mapValues { substituteIndex($0, index) })
        default:
            return value
        }
    }

    /// The body to send: `{"$var": name}` replaced by the captured value, `{"$literal": x}` by x, and (in peer
    /// conversations) `{"$per_language": {...}}` by the value for the peer's language.
    static func fill(_ value: JSONValue, _ variables: Variables, language: String? = nil) throws(FixtureFault) -> JSONValue {
        if let (key, argument) = Pattern.matcher(value) {
            switch key {
            case "$literal":
                return argument
            case "$per_language":
                guard let language else { throw FixtureFault(description: "$per_language needs the peer's language") }
                guard let chosen = argument[language] else {
                    throw FixtureFault(description: "$per_language has no value for \"\(language)\"")
                }
                return try fill(chosen, variables, language: language)
            case "$var":
                let name = argument.stringValue ?? ""
                guard let captured = variables[name] else {
                    throw FixtureFault(description: "$var \"\(name)\" is used before any $capture of that name")
                }
                return captured
            default:
                throw FixtureFault(description: "\(key) cannot be sent; wrap it in {\"$literal\": ...}")
            }
        }
        switch value {
        case .array(let items):
            var filled: [JSONValue] = []
            for item in items { filled.append(try fill(item, variables, language: language)) }
            return .array(filled)
        case .object(let members):
            var filled: [String: JSONValue] = [:]
            for (key, member) in members { filled[key] = try fill(member, variables, language: language) }
            return .object(filled)
        default:
            return value
        }
    }

    /// A frame's bytes (checked when the fixture was loaded).
    static func bytes(of frame: JSONValue) -> [UInt8] {
        if let text = frame["text"]?.stringValue { return Array(text.utf8) }
        if let base64 = frame["base64"]?.stringValue { return [UInt8](Data(base64Encoded: base64) ?? Data()) }
        if let json = frame["json"] { return Array(json.description.utf8) }
        if let byte = frame["byte"]?.intValue, let count = frame["count"]?.intValue {
            return [UInt8](repeating: UInt8(clamping: byte), count: count)
        }
        if let parts = frame["concat"]?.arrayValue { return parts.flatMap(bytes(of:)) }
        return []
    }
}
