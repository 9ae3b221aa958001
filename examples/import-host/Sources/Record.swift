import Foundation
import ZeroBridge

/// One searchable row of the database: a CSV row, a JSON object, a Markdown section.
struct Record: Codable, Sendable {
    var title: String
    /// The text the full-text index sees.
    var body: String
    /// The record as structured data (stored as JSON text).
    var fields: JSONValue?
}

/// The formats the host knows, by file extension.
enum FileFormat: String, Sendable {
    case csv, json, markdown

    init?(fileName: String) {
        switch (fileName as NSString).pathExtension.lowercased() {
        case "csv": self = .csv
        case "json": self = .json
        case "md", "markdown": self = .markdown
        default: return nil
        }
    }
}

/// A parse failure inside one file; the import turns it into that file's error.
struct FormatError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

// MARK: Text

enum TextCheck {
    /// The bytes as text, or why they are not: binary junk (a NUL byte, or not UTF-8) is refused.
    static func decode(_ bytes: [UInt8]) throws(FormatError) -> String {
        if let nul = bytes.firstIndex(of: 0) {
            throw FormatError("binary content: a NUL byte at offset \(nul)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw FormatError("binary content: not UTF-8 text")
        }
        return text
    }
}

// MARK: CSV

/// RFC 4180 CSV: a header row, then rows with as many fields; fields may be quoted (`"a, b"`, `""` for a quote,
/// newlines inside quotes). Any row that breaks the rules fails the whole file, so a file lands whole or not at all.
enum CSVFormat {
    static func records(from text: String) throws(FormatError) -> [Record] {
        var rows = try parse(Array(text.utf8))
        guard !rows.isEmpty else { throw FormatError("empty file: no header row") }
        let header = uniqueNames(rows.removeFirst().fields)
        let titleColumn = header.firstIndex { ["title", "name"].contains($0.lowercased()) } ?? 0
        var records: [Record] = []
        records.reserveCapacity(rows.count)
        for row in rows {
            guard row.fields.count == header.count else {
                throw FormatError("line \(row.line): \(row.fields.count) field(s) where the header has \(header.count)")
            }
            var fields: [String: JSONValue] = [:]
            for (name, value) in zip(header, row.fields) { fields[name] = .string(value) }
            records.append(Record(title: row.fields[titleColumn], body: row.fields.joined(separator: " "),
                                  fields: .object(fields)))
        }
        return records
    }

    struct Row {
        var line: Int
        var fields: [String]
    }

    /// Splits the bytes into rows of fields; blank lines are skipped.
    static func parse(_ bytes: [UInt8]) throws(FormatError) -> [Row] {
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), newline = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
        var rows: [Row] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var line = 1, rowLine = 1
        var index = 0
        var quoted = false, closedQuote = false

        func endField() {
            fields.append(String(decoding: field, as: UTF8.self))
            field.removeAll(keepingCapacity: true)
            quoted = false
            closedQuote = false
        }
        func endRow() {
            endField()
            // A line with nothing on it is not a row.
            if !(fields.count == 1 && fields[0].isEmpty) { rows.append(Row(line: rowLine, fields: fields)) }
            fields.removeAll(keepingCapacity: true)
        }

        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if quoted && !closedQuote {
                if byte == quote {
                    if index < bytes.count && bytes[index] == quote {
                        field.append(quote)
                        index += 1
                    } else {
                        closedQuote = true
                    }
                } else {
                    if byte == newline { line += 1 }
                    field.append(byte)
                }
                continue
            }
            switch byte {
            case comma:
                endField()
            case newline:
                endRow()
                line += 1
                rowLine = line
            case cr where index < bytes.count && bytes[index] == newline:
                continue
            case quote where field.isEmpty && !quoted:
                quoted = true
            case quote:
                throw FormatError("line \(line): a quote inside a field that does not start with one")
            default:
                if closedQuote {
                    throw FormatError("line \(line): text after the closing quote of a field")
                }
                field.append(byte)
            }
        }
        if quoted && !closedQuote { throw FormatError("line \(rowLine): a quoted field is never closed") }
        if !field.isEmpty || !fields.isEmpty || quoted { endRow() }
        return rows
    }

    /// Header names as JSON keys: blanks get a column number, repeats a suffix.
    private static func uniqueNames(_ names: [String]) -> [String] {
        var seen: Set<String> = []
        return names.enumerated().map { index, name in
            var candidate = name.isEmpty ? "column\(index + 1)" : name
            var suffix = 2
            while seen.contains(candidate) {
                candidate = "\(name)_\(suffix)"
                suffix += 1
            }
            seen.insert(candidate)
            return candidate
        }
    }
}

// MARK: JSON

/// JSON: an array holds one record per element, an object is one record. Parsed by Foundation, which (unlike
/// RFC 8259) lets a trailing comma pass; everything else that is not JSON is refused with its position.
enum JSONFormat {
    static func records(from text: String) throws(FormatError) -> [Record] {
        let document: JSONValue
        do {
            document = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        } catch {
            throw FormatError("invalid JSON: \(describe(error, in: text))")
        }
        switch document {
        case .array(let elements): return elements.map(record)
        case .object: return [record(document)]
        default: throw FormatError("a JSON file must hold an object or an array; this one holds \(document)")
        }
    }

    private static func record(_ value: JSONValue) -> Record {
        let title = value["title"]?.stringValue ?? value["name"]?.stringValue ?? value["id"].map(plain) ?? ""
        var words: [String] = []
        collectText(value, into: &words)
        return Record(title: title, body: words.joined(separator: " "), fields: value)
    }

    /// Every string and number in the value, depth first, object members in key order.
    private static func collectText(_ value: JSONValue, into words: inout [String]) {
        switch value {
        case .string, .int, .double: words.append(plain(value))
        case .array(let elements): for element in elements { collectText(element, into: &words) }
        case .object(let members): for key in members.keys.sorted() { collectText(members[key]!, into: &words) }
        case .null, .bool, .bytes: break
        }
    }

    private static func plain(_ value: JSONValue) -> String {
        value.stringValue ?? value.description
    }

    /// JSONDecoder says only "not valid JSON"; JSONSerialization's parser also says where ("around character 16").
    private static func describe(_ error: Error, in text: String) -> String {
        do {
            _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            if let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String { return detail }
        }
        return "\(error)"
    }
}
