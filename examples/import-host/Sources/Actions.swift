import Foundation
import ZeroBridge
import ZeroBridgeSupervision

// The import host's actions, as front-ends and the ETL peer see them on the wire. Field names are the JSON names.

/// Imports every file under a folder: the host reads each file and hands its bytes to the ETL peer (`importFile`),
/// which parses it; the host stores the records, one transaction per file, streaming progress. The result sums up
/// what was imported and what failed, file by file.
struct ImportFolder: BridgeAction {
    static let name = "importFolder"
    static let summary = "Imports every file under a folder (read here, parsed by the ETL peer), streaming progress."

    struct Payload: Codable, Sendable {
        /// The folder to import, absolute or relative to the host's working directory.
        var path: String
        var options: Options?
    }

    struct Options: Codable, Sendable {
        /// Files in flight to the ETL peer at once (default 4).
        var concurrency: Int?
        /// How long one call to the ETL peer may take, waiting for it to (re)connect included (default: the host's
        /// `--etl-timeout-ms`).
        var etlTimeoutMs: Int?
        /// A pause after each file, to watch (or cancel) an import of a small folder.
        var delayPerFileMs: Int?
        /// Opt-in: the body of a JavaScript function of `record` that returns the record to store instead
        /// (`record.title = record.title.toUpperCase(); return record`). The ETL peer runs it through `$evaluate`, so
        /// it must have been started with `--allow-evaluate`; otherwise the import is refused `not_allowed`.
        var transform: String?
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
        /// Bytes sent to the ETL peer as attachments so far (a file sent again after a lost peer counts again).
        var attachmentBytes: Int
        /// Calls to the ETL peer sent again because the peer was lost while it had them.
        var etlRetries: Int
        /// Files in flight that the ETL peer reported progress on (long files), as it parses them.
        var parsing: [FileProgress]
    }

    /// How far the ETL peer is with one file (its `importFile` progress).
    struct FileProgress: Codable, Sendable {
        var file: String
        var records: Int
        var bytesDone: Int
        var bytesTotal: Int
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
        /// Bytes sent to the ETL peer as attachments, and calls sent again after it was lost.
        var attachmentBytes: Int
        var etlRetries: Int
        /// Records stored as the opt-in transform returned them (0 without one).
        var transformed: Int
    }

    /// Why one file was not imported. `kind` is stable (tests and scripts match on it); `message` is for people.
    struct FileError: Codable, Sendable, Error {
        var file: String
        var kind: Kind
        var message: String

        enum Kind: String, Codable, Sendable, CaseIterable {
            /// Refused by the ETL peer's parser (its error code is the kind).
            case binary, csv, json, markdown
            case unsupported, unreadable, tooLarge = "too_large"
            /// No ETL peer connected within the call's timeout.
            case etlUnavailable = "etl_unavailable"
            /// The ETL peer did not answer in time, was lost on every attempt, or answered something that is not records.
            case etlFailed = "etl_failed"
            /// The opt-in transform threw, or returned something that is not a record.
            case transform

            /// The kinds the ETL peer refuses a file with, as its error code.
            static let parserKinds: Set<Kind> = [.binary, .csv, .json, .markdown]
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

/// The folders an import can name, for a front-end to offer a choice (the web page's folder list).
struct Folders: BridgeAction {
    static let name = "folders"
    static let summary = "The folders an import can name: each import root's own sub-folders, sorted."
    typealias Payload = JSONValue

    struct Result: Codable, Sendable {
        var folders: [Folder]
        /// Folders left out past ``Folders/limit``, to keep the answer small.
        var omitted: Int
    }

    struct Folder: Codable, Sendable {
        /// What `importFolder` takes as its `path`.
        var path: String
        /// The folder's own name, for a person to choose by.
        var name: String
    }

    /// The most folders one answer lists.
    static let limit = 200
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
        /// The ETL peer as this host process has seen it since it started.
        var etl: EtlStatus?
    }

    struct EtlStatus: Codable, Sendable {
        /// Its name (`--etl-peer`).
        var peer: String
        var connected: Bool
        /// How many times a peer of that name was welcomed: more than once means it was restarted (or reconnected).
        var connections: Int
        /// Files sent to it, and their bytes, sent as attachments (a retry counts again).
        var filesSent: Int
        var attachmentBytes: Int
        /// The bytes the ETL peer said it received as attachments (bytes, not base64 text), in its answers and refusals.
        var attachmentBytesReceived: Int
        /// Calls sent again because the peer was lost while it had them.
        var retriedCalls: Int
        /// `$evaluate` calls made for the opt-in transform.
        var evaluations: Int
        /// Set when the host launches the ETL peer and keeps it running (`--etl-command`).
        var supervised: Supervision?
    }

    /// What the host's supervision of the ETL peer says (SPEC 10.1).
    struct Supervision: Codable, Sendable {
        enum State: String, Codable, Sendable, CaseIterable {
            case starting, up, restarting, stopped
            case gaveUp = "gave up"
        }

        var state: State
        /// Its program's process id, while one runs.
        var pid: Int?
        /// How many times the host started it again after it exited, hung or was never welcomed.
        var restarts: Int
        /// Why the host gave up on it (it restarted too often), once it has.
        var gaveUp: String?

        init(_ state: Supervised.State, pid: Int32?, restarts: Int) {
            switch state {
            case .starting: self.state = .starting
            case .up: self.state = .up
            case .restarting: self.state = .restarting
            case .gaveUp(let reason):
                self.state = .gaveUp
                gaveUp = reason
            case .stopped: self.state = .stopped
            }
            self.pid = pid.map(Int.init)
            self.restarts = restarts
        }
    }

    struct FormatCount: Codable, Sendable {
        var files: Int
        var records: Int
    }

    struct ImportRun: Codable, Sendable {
        /// The run's number, as `catalogChanged` names it.
        var id: Int64
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

/// Broadcast on the topic `catalog` to every front-end subscribed to it when an import run ends having written to the
/// catalogue (SPEC 7.15): what the run did, and what the catalogue holds now.
struct CatalogChanged: BridgeAction {
    static let name = "catalogChanged"
    static let topic = "catalog"
    typealias Result = JSONValue

    struct Payload: Codable, Sendable {
        /// The import run (`stats.lastImport`), its folder and how it ended: `completed` or `cancelled`.
        var run: Int64
        var folder: String
        var status: String
        var filesImported: Int
        var filesFailed: Int
        var records: Int
        /// What the catalogue holds after it.
        var files: Int
        var recordsTotal: Int
    }
}

/// Served by the Node ETL peer: one file's bytes (sent as an attachment) to records.
struct ImportFile: BridgeAction {
    static let name = "importFile"
    static let summary = "One file's bytes (an attachment) to records."

    struct Payload: Codable, Sendable {
        /// The file's path relative to the imported folder, for messages and titles.
        var file: String
        var format: FileFormat
        /// `Data` is sent as an attachment frame: raw bytes, no base64.
        var bytes: Data
    }

    struct Result: Codable, Sendable {
        var records: [Record]
        /// How many bytes the peer received as an attachment (bytes, not text).
        var attachmentBytes: Int
    }

    struct Progress: Codable, Sendable {
        var records: Int
        var bytesDone: Int
        var bytesTotal: Int
    }
}
