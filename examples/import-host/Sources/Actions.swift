import ZeroBridge

// The import host's actions, as front-ends and the ETL peer see them on the wire. Field names are the JSON names.

/// Imports every file under a folder (CSV and JSON parsed here, Markdown by the ETL peer), one transaction per
/// file, streaming progress; the result sums up what was imported and what failed, file by file.
struct ImportFolder: BridgeAction {
    static let name = "importFolder"
    static let summary = "Imports every file under a folder (CSV and JSON here, Markdown by the ETL peer), streaming progress."

    struct Payload: Codable, Sendable {
        /// The folder to import, absolute or relative to the host's working directory.
        var path: String
        var options: Options?
    }

    struct Options: Codable, Sendable {
        /// Files parsed at once (default 4): CSV and JSON use the CPU, Markdown waits on the ETL peer.
        var concurrency: Int?
        /// How long one `parseMarkdown` call to the ETL peer may take (default: the host's `--etl-timeout-ms`).
        var etlTimeoutMs: Int?
        /// A pause after each file, to watch (or cancel) an import of a small folder.
        var delayPerFileMs: Int?
    }

    struct Progress: Codable, Sendable {
        var filesDone: Int
        var filesTotal: Int
        var filesFailed: Int
        var records: Int
        var bytes: Int
        /// The file just finished (relative to the folder).
        var currentFile: String?
        var elapsedSeconds: Double
        var filesPerSecond: Double
        var recordsPerSecond: Double
    }

    struct Result: Codable, Sendable {
        var folder: String
        var database: String
        var filesTotal: Int
        var filesImported: Int
        var filesFailed: Int
        var records: Int
        var bytes: Int
        var seconds: Double
        var filesPerSecond: Double
        var recordsPerSecond: Double
        /// Files that were not imported and why, sorted by file; at most ``FolderImport/maxReportedErrors``.
        var errors: [FileError]
        /// Failed files left out of ``errors`` to keep the answer small.
        var errorsOmitted: Int
    }

    /// Why one file was not imported. `kind` is stable (tests and scripts match on it); `message` is for people.
    struct FileError: Codable, Sendable, Error {
        var file: String
        var kind: Kind
        var message: String

        enum Kind: String, Codable, Sendable, CaseIterable {
            case binary, csv, json, markdown, unsupported, unreadable, tooLarge = "too_large"
            /// No ETL peer is connected to parse Markdown.
            case etlUnavailable = "etl_unavailable"
            /// The ETL peer did not answer in time, went away, or answered something that is not records.
            case etlFailed = "etl_failed"
        }
    }
}

/// Full-text search over the imported records (SQLite FTS5, best matches first).
struct Search: BridgeAction {
    static let name = "search"
    static let summary = "Full-text search over the imported records, best matches first."

    struct Payload: Codable, Sendable {
        /// Words to find, all of them (`word*` matches a prefix). With `raw`, an FTS5 query as is.
        var query: String
        var limit: Int?
        var raw: Bool?
    }

    struct Result: Codable, Sendable {
        var query: String
        /// How many records match in all.
        var total: Int
        var hits: [Hit]
    }

    struct Hit: Codable, Sendable {
        var file: String
        var format: String
        /// The record's position in its file, from 0.
        var record: Int
        var title: String
        /// The matching text with the matched words in [brackets].
        var snippet: String
    }
}

/// What the database holds.
struct Stats: BridgeAction {
    static let name = "stats"
    static let summary = "What the database holds: files, records and bytes by format, and the last import."
    typealias Payload = JSONValue

    struct Result: Codable, Sendable {
        var database: String
        var files: Int
        var records: Int
        var bytes: Int
        var formats: [String: FormatCount]
        var imports: Int
        var lastImport: ImportRun?
    }

    struct FormatCount: Codable, Sendable {
        var files: Int
        var records: Int
    }

    struct ImportRun: Codable, Sendable {
        var folder: String
        /// `running`, `completed` or `cancelled`.
        var status: String
        var filesTotal: Int
        var filesImported: Int
        var filesFailed: Int
        var records: Int
        var startedAt: String
        var finishedAt: String?
    }
}

/// Served by the Node ETL peer: Markdown with front-matter -> records (one per section).
struct ParseMarkdown: BridgeAction {
    static let name = "parseMarkdown"
    static let summary = "Markdown with front matter to records, one per section."

    struct Payload: Codable, Sendable {
        /// The file's path relative to the imported folder, for messages.
        var file: String
        var text: String
    }

    struct Result: Codable, Sendable {
        var records: [Record]
    }
}
