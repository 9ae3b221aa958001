import Foundation
import ZeroBridge

/// One searchable row of the database: a CSV row, a JSON object, a Markdown section (as the ETL peer parses them).
struct Record: Codable, Sendable {
    var title: String
    /// The text the full-text index sees.
    var body: String
    /// The record as structured data (stored as JSON text).
    var fields: JSONValue?
}

extension Record {
    /// The record as `$evaluate` arguments carry it.
    var json: JSONValue {
        ["title": .string(title), "body": .string(body), "fields": fields ?? .null]
    }

    /// A record from what a script returned: an object with string `title` and `body`; nil for anything else.
    init?(json: JSONValue) {
        guard case .object(let members) = json, let title = members["title"]?.stringValue,
              let body = members["body"]?.stringValue else { return nil }
        let fields = members["fields"]
        self.init(title: title, body: body, fields: fields == .null ? nil : fields)
    }
}

/// The formats the host imports, by file extension; the ETL peer parses them.
enum FileFormat: String, Codable, Sendable {
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
