import Foundation
import GRDB
import ZeroBridge

/// The SQLite database of imported files and their records, with a full-text index (FTS5) over the records.
///
/// Each file is written in one transaction: its records are all there or none are. Re-importing a file
/// replaces its records.
final class Catalog: Sendable {
    let path: String
    private let pool: DatabasePool

    init(path: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            // WAL (a DatabasePool's mode) with NORMAL sync: a commit costs no fsync, and a crash still never
            // leaves a transaction half-applied.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: files and records") { db in
            try db.create(table: "file") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("path", .text).notNull().unique()
                t.column("folder", .text).notNull()
                t.column("name", .text).notNull()
                t.column("format", .text).notNull()
                t.column("bytes", .integer).notNull()
                t.column("records", .integer).notNull()
                t.column("importedAt", .text).notNull()
            }
            try db.create(table: "record") { t in
                t.autoIncrementedPrimaryKey("id")
                t.belongsTo("file", onDelete: .cascade).notNull()
                t.column("ordinal", .integer).notNull()
                t.column("title", .text).notNull()
                t.column("body", .text).notNull()
                t.column("fields", .text)
            }
        }
        migrator.registerMigration("v2: full-text index") { db in
            // Written in SQL: GRDB's FTS5 API is compiled only for SQLite builds that define SQLITE_ENABLE_FTS5.
            try db.execute(sql: """
                CREATE VIRTUAL TABLE record_fts USING fts5(
                    title, body, content='record', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
                INSERT INTO record_fts(record_fts) VALUES ('rebuild');
                CREATE TRIGGER record_fts_insert AFTER INSERT ON record BEGIN
                    INSERT INTO record_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
                END;
                CREATE TRIGGER record_fts_delete AFTER DELETE ON record BEGIN
                    INSERT INTO record_fts(record_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
                END;
                """)
        }
        migrator.registerMigration("v3: import runs") { db in
            try db.create(table: "importRun") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("folder", .text).notNull()
                t.column("status", .text).notNull()
                t.column("filesTotal", .integer).notNull()
                t.column("filesImported", .integer).notNull().defaults(to: 0)
                t.column("filesFailed", .integer).notNull().defaults(to: 0)
                t.column("records", .integer).notNull().defaults(to: 0)
                t.column("startedAt", .text).notNull()
                t.column("finishedAt", .text)
            }
        }
        return migrator
    }

    // MARK: Writing

    struct ImportedFile: Sendable {
        var path: String
        var folder: String
        var name: String
        var format: FileFormat
        var bytes: Int
        var records: [Record]
    }

    /// Replaces the file's records with these, in one transaction.
    func store(_ file: ImportedFile) async throws {
        try await pool.write { db in
            if let old = try Int64.fetchOne(db, sql: "SELECT id FROM file WHERE path = ?", arguments: [file.path]) {
                // Records first, so the FTS trigger sees each one go.
                try db.execute(sql: "DELETE FROM record WHERE fileId = ?", arguments: [old])
                try db.execute(sql: "DELETE FROM file WHERE id = ?", arguments: [old])
            }
            try db.execute(
                sql: "INSERT INTO file (path, folder, name, format, bytes, records, importedAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [file.path, file.folder, file.name, file.format.rawValue, file.bytes, file.records.count,
                            Self.timestamp()])
            let fileID = db.lastInsertedRowID
            let insert = try db.cachedStatement(
                sql: "INSERT INTO record (fileId, ordinal, title, body, fields) VALUES (?, ?, ?, ?, ?)")
            for (ordinal, record) in file.records.enumerated() {
                try insert.execute(arguments: [fileID, ordinal, record.title, record.body, record.fields?.description])
            }
        }
    }

    func beginRun(folder: String, filesTotal: Int) throws -> Int64 {
        try pool.write { db in
            try db.execute(sql: "INSERT INTO importRun (folder, status, filesTotal, startedAt) VALUES (?, 'running', ?, ?)",
                           arguments: [folder, filesTotal, Self.timestamp()])
            return db.lastInsertedRowID
        }
    }

    /// Records how a run ended. Synchronous on purpose: it must also run in a cancelled task.
    func finishRun(_ id: Int64, status: String, imported: Int, failed: Int, records: Int) throws {
        try pool.write { db in
            try db.execute(sql: """
                UPDATE importRun SET status = ?, filesImported = ?, filesFailed = ?, records = ?, finishedAt = ?
                WHERE id = ?
                """, arguments: [status, imported, failed, records, Self.timestamp(), id])
        }
    }

    // MARK: Reading

    func search(_ payload: Search.Payload) async throws -> Search.Result {
        let match = payload.raw == true ? payload.query : try Self.matchExpression(for: payload.query)
        let limit = min(max(payload.limit ?? 10, 1), 1000)
        do {
            return try await pool.read { db in
                let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM record_fts WHERE record_fts MATCH ?",
                                             arguments: [match]) ?? 0
                let rows = try Row.fetchAll(db, sql: """
                    SELECT file.name, file.format, record.ordinal, record.title,
                           snippet(record_fts, 1, '[', ']', '…', 12) AS snippet
                    FROM record_fts
                    JOIN record ON record.id = record_fts.rowid
                    JOIN file ON file.id = record.fileId
                    WHERE record_fts MATCH ?
                    ORDER BY bm25(record_fts), record.id
                    LIMIT ?
                    """, arguments: [match, limit])
                let hits = rows.map { row in
                    Search.Hit(file: row["name"], format: row["format"], record: row["ordinal"], title: row["title"],
                               snippet: row["snippet"])
                }
                return Search.Result(query: payload.query, total: total, hits: hits)
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            // A raw query FTS5 cannot read: the caller's mistake, not the host's.
            throw BridgeError(.invalidPayload, "not a valid full-text query: \(error.message ?? "\(error)")")
        }
    }

    /// The words of a plain query, each quoted so that FTS5 operators in it are taken literally; `word*` stays a prefix.
    static func matchExpression(for query: String) throws -> String {
        let words = query.split(whereSeparator: { $0.isWhitespace }).compactMap { word -> String? in
            let prefix = word.hasSuffix("*")
            let bare = word.filter { $0.isLetter || $0.isNumber }
            guard !bare.isEmpty else { return nil }
            return "\"\(bare)\"" + (prefix ? "*" : "")
        }
        guard !words.isEmpty else {
            throw BridgeError(.invalidPayload, "the query '\(query)' has no words to search for")
        }
        return words.joined(separator: " ")
    }

    func stats() async throws -> Stats.Result {
        try await pool.read { [path] db in
            let totals = try Row.fetchOne(db, sql: """
                SELECT count(*) AS files, coalesce(sum(records), 0) AS records, coalesce(sum(bytes), 0) AS bytes FROM file
                """)!
            var formats: [String: Stats.FormatCount] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT format, count(*) AS files, sum(records) AS records FROM file GROUP BY format") {
                formats[row["format"]] = Stats.FormatCount(files: row["files"], records: row["records"])
            }
            let runs = try Int.fetchOne(db, sql: "SELECT count(*) FROM importRun") ?? 0
            let last = try Row.fetchOne(db, sql: "SELECT * FROM importRun ORDER BY id DESC LIMIT 1").map { row in
                Stats.ImportRun(id: row["id"], folder: row["folder"], status: row["status"], filesTotal: row["filesTotal"],
                                filesImported: row["filesImported"], filesFailed: row["filesFailed"],
                                records: row["records"], startedAt: row["startedAt"], finishedAt: row["finishedAt"])
            }
            return Stats.Result(database: path, files: totals["files"], records: totals["records"],
                                bytes: totals["bytes"], formats: formats, imports: runs, lastImport: last)
        }
    }

    private static func timestamp() -> String {
        Date.now.formatted(.iso8601)
    }
}
