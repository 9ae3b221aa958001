import ZeroBridge

/// JSON text for people: compact, with `v`, `type` and `id` first and the other keys sorted, so a body reads the
/// way the fixtures are written. (The wire encoding is `JSONValue.description`; this is only for reports and
/// for the fixtures the recorder writes.)
enum JSONText {
    private static let leadingKeys = ["format", "description", "v", "type", "id"]

    static func keysInReadingOrder(_ keys: some Collection<String>) -> [String] {
        let leading = leadingKeys.filter { keys.contains($0) }
        return leading + keys.filter { !leadingKeys.contains($0) }.sorted()
    }

    static func write(_ value: JSONValue) -> String {
        var text = ""
        write(value, to: &text)
        return text
    }

    /// The value, cut with an ellipsis when longer than `limit` characters (for one-line mismatch reports).
    static func short(_ value: JSONValue?, limit: Int = 160) -> String {
        guard let value else { return "nothing (the member is missing)" }
        let text = write(value)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }

    static func write(_ value: JSONValue, to text: inout String) {
        switch value {
        case .object(let members):
            text += "{"
            for (index, key) in keysInReadingOrder(members.keys).enumerated() {
                if index > 0 { text += ", " }
                text += JSONValue.string(key).description
                text += ": "
                write(members[key]!, to: &text)
            }
            text += "}"
        case .array(let items):
            text += "["
            for (index, item) in items.enumerated() {
                if index > 0 { text += ", " }
                write(item, to: &text)
            }
            text += "]"
        default:
            text += value.description
        }
    }

    /// A JSON path for reports: `$.error.code`, `$.result[2]`, `$["odd key"]`.
    static func path(_ base: String, key: String) -> String {
        let plain = key.first.map { $0.isLetter || $0 == "_" } == true
            && key.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
        return plain ? "\(base).\(key)" : "\(base)[\(JSONValue.string(key).description)]"
    }

    static func path(_ base: String, index: Int) -> String { "\(base)[\(index)]" }
}
