import Crypto
import Foundation

/// The contract of one action, as `$describe` gives it (SPEC 7.8): a line of documentation and the JSON
/// Schemas of its payload, result and (for actions that send progress) progress.
///
/// Typed actions get theirs from their Codable types (``init(_:)``); untyped handlers may pass one by hand.
/// For example:
/// ```swift
/// try host.handle("echo", describedAs: .init(doc: "Answers with its payload.")) { payload, _ in payload }
/// ```
public struct ActionDescription: Sendable, Equatable {
    /// One line for people: what the action does (`$describe`'s `doc`; empty when the handler gave none).
    public var doc: String
    /// The JSON Schema of `request.payload`; `{}` (any value) when the action does not say.
    public var payload: JSONValue
    /// The JSON Schema of `response.result`; `{}` (any value) when the action does not say.
    public var result: JSONValue
    /// Nil for an action that sends no progress.
    public var progress: JSONValue?
    /// Served as a job (SPEC 7.16): `"job": true` in its description.
    public var isJob = false

    /// Schemas default to any value (`{}`).
    public init(doc: String = "", payload: JSONValue = [:], result: JSONValue = [:], progress: JSONValue? = nil) {
        self.doc = doc
        self.payload = payload
        self.result = result
        self.progress = progress
    }

    /// Derived from the action's types: progress is described when the action declares a `Progress` type of its own.
    public init<A: BridgeAction>(_ action: A.Type) {
        self.init(doc: A.summary, payload: JSONSchema.of(A.Payload.self), result: JSONSchema.of(A.Result.self),
                  progress: A.Progress.self == JSONValue.self ? JSONValue?.none : JSONSchema.of(A.Progress.self))
    }

    func json(name: String) -> JSONValue {
        var object: [String: JSONValue] = ["name": .string(name), "doc": .string(doc), "payload": payload, "result": result]
        if let progress { object["progress"] = progress }
        if isJob { object["job"] = true }
        return .object(object)
    }
}

/// A side's catalogue: its actions' descriptions, sorted by name, and their hash.
struct Catalogue: Sendable, Equatable {
    /// The `$describe` result's `actions`.
    let actions: JSONValue
    /// SHA-256 (hex) of the RFC 8785 form of `actions`.
    let hash: String

    init(_ descriptions: [(name: String, description: ActionDescription)]) {
        let sorted = descriptions.sorted { $0.name.utf16.lexicographicallyPrecedes($1.name.utf16) }
        actions = .array(sorted.map { $0.description.json(name: $0.name) })
        hash = Self.hash(actions.canonicalText)
    }

    /// SHA-256 (hex) of a catalogue's canonical text.
    static func hash(_ canonicalText: String) -> String {
        Signature.hex(SHA256.hash(data: Array(canonicalText.utf8)))
    }

    /// What `$describe` answers.
    var json: JSONValue { ["catalogue": .string(hash), "actions": actions] }
}

extension JSONValue {
    /// The JSON Canonicalization Scheme form (RFC 8785): no white space, members sorted by the UTF-16 code units of
    /// their names, minimal string escapes, numbers as ECMAScript writes them.
    var canonicalText: String {
        var text = ""
        writeCanonical(to: &text)
        return text
    }

    private func writeCanonical(to text: inout String) {
        switch self {
        case .null: text += "null"
        case .bool(let value): text += value ? "true" : "false"
        case .int(let value): text += String(value)
        case .double(let value): text += Self.ecmaScriptNumber(value)
        case .string(let value): Self.writeCanonical(string: value, to: &text)
        case .bytes(let bytes): Self.writeCanonical(string: Data(bytes).base64EncodedString(), to: &text)
        case .array(let items):
            text += "["
            for (index, item) in items.enumerated() {
                if index > 0 { text += "," }
                item.writeCanonical(to: &text)
            }
            text += "]"
        case .object(let members):
            text += "{"
            let names = members.keys.sorted { $0.utf16.lexicographicallyPrecedes($1.utf16) }
            for (index, name) in names.enumerated() {
                if index > 0 { text += "," }
                Self.writeCanonical(string: name, to: &text)
                text += ":"
                members[name]!.writeCanonical(to: &text)
            }
            text += "}"
        }
    }

    private static func writeCanonical(string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\u{8}": text += "\\b"
            case "\t": text += "\\t"
            case "\n": text += "\\n"
            case "\u{c}": text += "\\f"
            case "\r": text += "\\r"
            case _ where scalar.value < 0x20:
                text += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }

    /// ECMAScript's Number::toString (RFC 8785 3.2.2.3), from Swift's shortest round-trip digits.
    static func ecmaScriptNumber(_ value: Double) -> String {
        guard value != 0 else { return "0" }  // -0 too
        guard value.isFinite else { return "null" }  // never in a catalogue: JSON has no such numbers
        let sign = value < 0 ? "-" : ""
        // Swift writes the shortest digits that round-trip, as "123.45", "1e-07" or "1.5e+300".
        let written = String(describing: abs(value))
        let (mantissa, exponent): (Substring, Int) = {
            guard let e = written.firstIndex(where: { $0 == "e" || $0 == "E" }) else { return (written[...], 0) }
            return (written[..<e], Int(written[written.index(after: e)...])!)
        }()
        let point = mantissa.firstIndex(of: ".") ?? mantissa.endIndex
        var digits = String(mantissa[..<point]) + String(mantissa[point...].dropFirst())
        var n = mantissa.distance(from: mantissa.startIndex, to: point) + exponent  // value = 0.digits x 10^n
        while digits.hasPrefix("0") { digits.removeFirst(); n -= 1 }
        while digits.hasSuffix("0") { digits.removeLast() }
        let k = digits.count
        if k <= n && n <= 21 { return sign + digits + String(repeating: "0", count: n - k) }
        if 0 < n && n <= 21 {
            return sign + digits.prefix(n) + "." + digits.dropFirst(n)
        }
        if -6 < n && n <= 0 { return sign + "0." + String(repeating: "0", count: -n) + digits }
        let e = n - 1
        let exponentText = (e >= 0 ? "+" : "-") + String(abs(e))
        if k == 1 { return sign + digits + "e" + exponentText }
        return sign + digits.prefix(1) + "." + digits.dropFirst() + "e" + exponentText
    }
}
