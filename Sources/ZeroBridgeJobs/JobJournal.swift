import ZeroBridge
import Foundation
import GRDB
import Synchronization

/// Where a host keeps its jobs (SPEC 7.16): a SQLite database (GRDB) with one row per job and one per progress
/// message. Writes go through GRDB's serial writer, so a job's progress is committed in `seq` order and a reader
/// of the journal never sees a gap that later fills.
///
/// A file journal is in WAL mode with `synchronous=NORMAL` (every commit survives the process being killed; an OS
/// crash may lose the latest ones) or `FULL` (an fsync per commit), readable by its owner only (0600), and locked
/// for one host process at a time through the file itself: two hosts recovering each other's jobs would run a job
/// twice at once. Every error about the journal names its file.
final class JobJournal: Sendable {
    private let writer: any DatabaseWriter
    /// Held for the life of the journal (file journals): the kernel releases it when the process dies.
    private let lock: JournalLock?
    /// How errors name the journal: its path, or that it is in memory.
    let name: String
    let maxProgressPerJob: Int

    init(_ location: BridgeHost.JobsConfiguration.Journal, durability: BridgeHost.JobsConfiguration.Durability,
         maxProgressPerJob: Int) throws {
        self.maxProgressPerJob = maxProgressPerJob
        var configuration = Configuration()
        configuration.label = "zerobridge.jobs"
        let synchronous = durability == .full ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(synchronous)") }
        switch location {
        case .inMemory:
            name = "the in-memory job journal"
            lock = nil
            writer = try DatabaseQueue(configuration: configuration)
        case .file(let path):
            name = "the job journal \(path)"
            let lock = try JournalLock(path)
            self.lock = lock
            do {
                writer = try DatabasePool(path: path, configuration: configuration)
            } catch let error as DatabaseError where Self.isDamage(error) {
                throw JournalError(description: "\(name) is damaged (\(error)): move it aside, or restore it")
            } catch {
                throw JournalError(description: "\(name) cannot be opened: \(error)")
            }
            try lock.checkStillNames(path, writer)
        }
        do {
            try Self.checkIntact(writer)
        } catch let error as JournalError {
            throw JournalError(description: "\(name) is damaged (\(error.description)): move it aside, or restore it")
        } catch let error as DatabaseError where Self.isDamage(error) {
            throw JournalError(description: "\(name) is damaged (\(error)): move it aside, or restore it")
        } catch {
            throw JournalError(description: "\(name) cannot be read: \(error)")
        }
        do {
            try Self.reclaimingSpace(writer)
            try Self.migrator.migrate(writer)
        } catch {
            throw JournalError(description: "\(name) cannot be prepared: \(error)")
        }
    }

    private static func isDamage(_ error: DatabaseError) -> Bool {
        [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode)
    }

    /// `PRAGMA quick_check`: a damaged page is refused at start, not found by a job later.
    private static func checkIntact(_ writer: any DatabaseWriter) throws {
        let problems = try writer.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check(8)") }
        guard problems == ["ok"] else { throw JournalError(description: "quick_check: " + problems.joined(separator: "; ")) }
    }

    /// `auto_vacuum=INCREMENTAL`, so that the space retention frees goes back to the disk (``purge(finishedBefore:)``).
    /// A journal made without it is rebuilt once (`VACUUM`).
    private static func reclaimingSpace(_ writer: any DatabaseWriter) throws {
        try writer.writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 else { return }
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute(sql: "VACUUM")
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: jobs") { db in
            try db.execute(sql: """
                CREATE TABLE job (
                    id TEXT PRIMARY KEY NOT NULL,
                    action TEXT NOT NULL,
                    key TEXT,
                    state TEXT NOT NULL,
                    payload BLOB NOT NULL,
                    lastSeq INTEGER NOT NULL DEFAULT 0,
                    runs INTEGER NOT NULL DEFAULT 1,
                    createdMs INTEGER NOT NULL,
                    finishedMs INTEGER,
                    result BLOB,
                    errorCode TEXT,
                    errorMessage TEXT,
                    errorData BLOB,
                    checkpoint BLOB
                );
                CREATE UNIQUE INDEX jobByKey ON job(action, key) WHERE key IS NOT NULL;
                CREATE INDEX jobByState ON job(state);
                CREATE INDEX jobByFinish ON job(finishedMs) WHERE finishedMs IS NOT NULL;
                CREATE TABLE jobProgress (
                    job TEXT NOT NULL REFERENCES job(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    PRIMARY KEY (job, seq)
                ) WITHOUT ROWID;
                """)
        }
        // Jobs belong to who started them (SPEC 7.16): keys are per action and owner. Jobs of older journals belong
        // to the anonymous owner ('').
        migrator.registerMigration("v2: owners") { db in
            try db.execute(sql: """
                ALTER TABLE job ADD COLUMN owner TEXT NOT NULL DEFAULT '';
                DROP INDEX jobByKey;
                CREATE UNIQUE INDEX jobByKey ON job(action, owner, key) WHERE key IS NOT NULL;
                CREATE INDEX jobByOwner ON job(owner, createdMs);
                """)
        }
        return migrator
    }

    /// After a graceful shutdown: another host (in this process too) may open the journal. The lock is dropped, but
    /// its descriptor is closed only with the journal: closing any descriptor of the file would drop the process's
    /// POSIX locks on it, SQLite's own among them, while a straggling handler may still write.
    func release() {
        // A journal stopped cleanly is one file: what the WAL holds is written back first.
        _ = try? writer.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        lock?.unlock()
    }

    /// Writes through GRDB's writer, saying what went wrong in the journal's own words: a full disk is
    /// `journal_full`, anything else names the file.
    private func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await writer.write(updates)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            throw BridgeError(.journalFull, "\(name) could not be written: its disk is full")
        } catch let error as DatabaseError {
            throw JournalError(description: "\(name) could not be written: \(error)")
        }
    }

    private func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await writer.read(value)
        } catch let error as DatabaseError {
            throw JournalError(description: "\(name) could not be read: \(error)")
        }
    }

    // MARK: Jobs

    /// How many jobs the journal holds in each state (`$stats`, SPEC 7.8): states without jobs left out.
    func countsByState() async throws -> [String: Int] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM job GROUP BY state")
                .reduce(into: [:]) { counts, row in counts[row["state"]] = row["n"] }
        }
    }

    /// The job of `action` that `owner` started with `key`, if the journal has it: keys are per owner (SPEC 7.16).
    func job(action: String, key: String, owner: String) async throws -> JobRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM job WHERE action = ? AND owner = ? AND key = ?",
                             arguments: [action, owner, key])
                .map(JobRecord.init(row:))
        }
    }

    func job(id: String) async throws -> JobRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM job WHERE id = ?", arguments: [id]).map(JobRecord.init(row:))
        }
    }

    enum Insertion {
        case created(JobRecord)
        /// The key named a job the journal already has.
        case existing(JobRecord)
    }

    /// Records a new running job, unless `key` names one already: both in one transaction, so one key never
    /// starts two jobs (SPEC 7.16).
    func insert(id: String, action: String, key: String?, owner: String, payload: JSONValue,
                nowMs: Int) async throws -> Insertion {
        let stored = StoredJSON.encode(payload)
        return try await write { db in
            if let key, let row = try Row.fetchOne(db, sql: "SELECT * FROM job WHERE action = ? AND owner = ? AND key = ?",
                                                   arguments: [action, owner, key]) {
                return .existing(try JobRecord(row: row))
            }
            try db.execute(sql: """
                INSERT INTO job (id, action, key, owner, state, payload, createdMs) VALUES (?, ?, ?, ?, 'running', ?, ?)
                """, arguments: [id, action, key, owner, stored, nowMs])
            return .created(JobRecord(id: id, action: action, key: key, owner: owner, state: .running, lastSeq: 0,
                                      runs: 1, createdMs: nowMs, finishedMs: nil, error: nil))
        }
    }

    /// Appends one progress message (and the handler's checkpoint, in the same transaction) and returns its seq.
    /// Beyond ``maxProgressPerJob`` the oldest are pruned, a batch at a time.
    func appendProgress(job id: String, payload: JSONValue, checkpoint: JSONValue?) async throws -> Int {
        let stored = StoredJSON.encode(payload)
        let storedCheckpoint = checkpoint.map(StoredJSON.encode)
        let keep = maxProgressPerJob
        return try await write { db in
            guard let seq = try Int.fetchOne(db, sql: "SELECT lastSeq + 1 FROM job WHERE id = ? AND state = 'running'",
                                             arguments: [id]) else {
                throw CancellationError()  // the job ended (cancelled) meanwhile: its handler is being cancelled
            }
            try db.execute(sql: "INSERT INTO jobProgress (job, seq, payload) VALUES (?, ?, ?)", arguments: [id, seq, stored])
            if let storedCheckpoint {
                try db.execute(sql: "UPDATE job SET lastSeq = ?, checkpoint = ? WHERE id = ?",
                               arguments: [seq, storedCheckpoint, id])
            } else {
                try db.execute(sql: "UPDATE job SET lastSeq = ? WHERE id = ?", arguments: [seq, id])
            }
            let batch = max(1, keep / 64)
            if seq > keep, seq % batch == 0 {
                try db.execute(sql: "DELETE FROM jobProgress WHERE job = ? AND seq <= ?", arguments: [id, seq - keep])
            }
            return seq
        }
    }

    func saveCheckpoint(job id: String, _ checkpoint: JSONValue) async throws {
        let stored = StoredJSON.encode(checkpoint)
        try await write { db in
            try db.execute(sql: "UPDATE job SET checkpoint = ? WHERE id = ? AND state = 'running'", arguments: [stored, id])
        }
    }

    /// Whether the job saved a checkpoint (a running one is resumed from it by the next start).
    func hasCheckpoint(job id: String) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT checkpoint IS NOT NULL FROM job WHERE id = ?", arguments: [id]) ?? false
        }
    }

    /// Progress of a job after `seq`, oldest first, at most `limit`.
    func progress(job id: String, after seq: Int, limit: Int) async throws -> [(seq: Int, payload: JSONValue)] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT seq, payload FROM jobProgress WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?",
                             arguments: [id, seq, limit])
                .map { row in (row["seq"], try StoredJSON.decode(row["payload"])) }
        }
    }

    /// Records a job's end, if it is still running (a cancel may have ended it first); returns whether it did.
    @discardableResult
    func finish(job id: String, _ outcome: Result<JSONValue, BridgeError>, nowMs: Int) async throws -> Bool {
        try await write { db in try Self.recordOutcome(db, job: id, outcome, nowMs: nowMs) }
    }

    private static func recordOutcome(_ db: Database, job id: String, _ outcome: Result<JSONValue, BridgeError>,
                                      nowMs: Int) throws -> Bool {
        switch outcome {
        case .success(let result):
            try db.execute(sql: """
                UPDATE job SET state = 'succeeded', result = ?, finishedMs = ?, checkpoint = NULL
                WHERE id = ? AND state IN ('running', 'suspended')
                """, arguments: [StoredJSON.encode(result), nowMs, id])
        case .failure(let error):
            try db.execute(sql: """
                UPDATE job SET state = ?, errorCode = ?, errorMessage = ?, errorData = ?, finishedMs = ?,
                    checkpoint = NULL
                WHERE id = ? AND state IN ('running', 'suspended')
                """, arguments: [JobRecord.State(ending: error).rawValue, error.code.rawValue, error.message,
                                 error.data.map(StoredJSON.encode), nowMs, id])
        }
        return db.changesCount > 0
    }

    /// What a finished job answers: its result, or its error. Nil while it runs or when unknown.
    func outcome(job id: String) async throws -> Result<JSONValue, BridgeError>? {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT state, result, errorCode, errorMessage, errorData FROM job WHERE id = ?",
                                             arguments: [id]) else { return nil }
            switch JobRecord.State(rawValue: row["state"]) {
            case .succeeded?: return .success(try (row["result"] as Data?).map(StoredJSON.decode) ?? .null)
            case .running?, nil: return nil
            case .suspended?: return .failure(JobRecord.suspension)
            default: return .failure(try JobRecord.error(from: row) ?? BridgeError(.handlerError, ""))
            }
        }
    }

    struct Filter: Sendable {
        var action: String?
        var state: JobRecord.State?
        var job: String?
        /// Only the jobs of this owner (SPEC 7.16: a peer lists its own jobs).
        var owner: String?
        var limit: Int
    }

    /// Jobs that match, newest first.
    func list(_ filter: Filter) async throws -> [JobRecord] {
        var clauses: [String] = []
        var values: StatementArguments = []
        if let action = filter.action { clauses.append("action = ?"); values += [action] }
        if let state = filter.state { clauses.append("state = ?"); values += [state.rawValue] }
        if let job = filter.job { clauses.append("id = ?"); values += [job] }
        if let owner = filter.owner { clauses.append("owner = ?"); values += [owner] }
        values += [filter.limit]
        let arguments = values
        let whereClause = clauses.isEmpty ? "" : "WHERE " + clauses.joined(separator: " AND ")
        let sql = "SELECT * FROM job \(whereClause) ORDER BY createdMs DESC, rowid DESC LIMIT ?"
        return try await read { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map(JobRecord.init(row:))
        }
    }

    /// The database's pages, and those on its free list (for tests of retention).
    func pageCounts() async throws -> (total: Int, free: Int) {
        try await read { db in
            (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0, try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0)
        }
    }

    // MARK: Restarts and retention

    struct Resumable {
        let record: JobRecord
        let payload: JSONValue
        let checkpoint: JSONValue
    }

    /// At a host's start, in one transaction: each job a killed host left running either counts one more run and
    /// is returned, to be resumed from its checkpoint, or ends `interrupted` (SPEC 7.16). Synchronous: the host
    /// serves nothing until it is done.
    func recover(canResume: (String) -> Bool, nowMs: Int) throws -> [Resumable] {
        do {
            return try recoverRunning(canResume: canResume, nowMs: nowMs)
        } catch let error as DatabaseError {
            throw JournalError(description: "\(name): its jobs could not be recovered: \(error)")
        }
    }

    private func recoverRunning(canResume: (String) -> Bool, nowMs: Int) throws -> [Resumable] {
        try writer.write { db in
            var resumable: [Resumable] = []
            // `suspended`: a graceful stop left it to this start; `running`: a killed host did.
            for row in try Row.fetchAll(db, sql: "SELECT * FROM job WHERE state IN ('running', 'suspended')") {
                let record = try JobRecord(row: row)
                if let checkpoint = row["checkpoint"] as Data?, canResume(record.action) {
                    try db.execute(sql: "UPDATE job SET runs = runs + 1, state = 'running' WHERE id = ?",
                                   arguments: [record.id])
                    var resumed = record
                    resumed.runs += 1
                    resumed.state = .running
                    resumable.append(Resumable(record: resumed, payload: try StoredJSON.decode(row["payload"]),
                                               checkpoint: try StoredJSON.decode(checkpoint)))
                } else {
                    let why = row["checkpoint"] as Data? == nil
                        ? "the host stopped while the job ran, and it had no checkpoint to resume from"
                        : "the host stopped while the job ran, and no longer serves '\(record.action)' as a job"
                    _ = try Self.recordOutcome(db, job: record.id, .failure(BridgeError(.interrupted, why)), nowMs: nowMs)
                }
            }
            return resumable
        }
    }

    /// A graceful shutdown, in one transaction: running jobs without a checkpoint end `interrupted`; checkpointed
    /// ones are `suspended`, to be resumed by the next start (SPEC 7.16).
    func suspendOrInterruptRunning(nowMs: Int) async throws {
        try await write { db in
            try db.execute(sql: """
                UPDATE job SET state = 'interrupted', errorCode = 'interrupted',
                    errorMessage = 'the host shut down while the job ran, and it had no checkpoint to resume from',
                    finishedMs = ?
                WHERE state = 'running' AND checkpoint IS NULL
                """, arguments: [nowMs])
            try db.execute(sql: "UPDATE job SET state = 'suspended' WHERE state = 'running'")
        }
    }

    /// Forgets jobs that finished before `cutoffMs`, with their progress, and gives the pages they held back to the
    /// disk (`incremental_vacuum`; the journal is `auto_vacuum=INCREMENTAL`).
    func purge(finishedBefore cutoffMs: Int) async throws {
        try await write { db in
            try db.execute(sql: "DELETE FROM jobProgress WHERE job IN (SELECT id FROM job WHERE finishedMs < ?)", arguments: [cutoffMs])
            try db.execute(sql: "DELETE FROM job WHERE finishedMs < ?", arguments: [cutoffMs])
            try db.execute(sql: "PRAGMA incremental_vacuum")
        }
    }
}

/// What the journal says of one job: the record `$job.start`, `$job.cancel` and `$job.list` answer with
/// (`protocol/schema/job.schema.json`).
public struct JobRecord: Sendable, Hashable {
    /// Where a job is in its life: `running` (or `suspended`), then one of the four final states.
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// `suspended`: a graceful stop cut it; it resumes from its checkpoint at the host's next start.
        case running, suspended, succeeded, failed, cancelled, interrupted

        /// The final state a failed job ends in.
        init(ending error: BridgeError) {
            switch error.code {
            case .cancelled: self = .cancelled
            case .interrupted: self = .interrupted
            default: self = .failed
            }
        }
    }

    /// The job's id, given by the host; attach to it or cancel it by this.
    public var id: String
    /// The action it runs.
    public var action: String
    /// The idempotency key its starter gave, if any: a second start with it attaches instead.
    public var key: String?
    /// Who started it (SPEC 7.16): `curve:` and the starter's CURVE key, `name:` and its peer name, or empty for an
    /// anonymous peer. Never sent: it decides who may list, attach to and cancel the job.
    var owner: String
    /// Where the job is in its life.
    public var state: State
    /// The `seq` of its latest progress; 0 before any.
    public var lastSeq: Int
    /// How many times its handler was started: more than 1 only for a job resumed from a checkpoint.
    public var runs: Int
    /// When it was started, in milliseconds since 1970 (UTC).
    public var createdMs: Int
    /// When it ended, in milliseconds since 1970 (UTC); nil while it runs.
    public var finishedMs: Int?
    /// Why it failed, was cancelled or was interrupted.
    public var error: BridgeError?

    init(id: String, action: String, key: String?, owner: String = "", state: State, lastSeq: Int, runs: Int,
         createdMs: Int, finishedMs: Int?, error: BridgeError?) {
        self.id = id
        self.action = action
        self.key = key
        self.owner = owner
        self.state = state
        self.lastSeq = lastSeq
        self.runs = runs
        self.createdMs = createdMs
        self.finishedMs = finishedMs
        self.error = error
    }

    init(row: Row) throws {
        self.init(id: row["id"], action: row["action"], key: row["key"], owner: row["owner"] ?? "",
                  state: State(rawValue: row["state"]) ?? .failed, lastSeq: row["lastSeq"], runs: row["runs"],
                  createdMs: row["createdMs"], finishedMs: row["finishedMs"], error: try Self.error(from: row))
    }

    /// What a caller attached to a suspended job is answered.
    static let suspension = BridgeError(.suspended, "the host stopped while the job ran; it resumes from its checkpoint when the host starts again: attach again then")

    static func error(from row: Row) throws -> BridgeError? {
        guard let code: String = row["errorCode"] else { return nil }
        return BridgeError(.init(code), row["errorMessage"] ?? "", data: try (row["errorData"] as Data?).map(StoredJSON.decode))
    }

    /// The record as the protocol writes it.
    var json: JSONValue {
        var object: [String: JSONValue] = [
            "job": .string(id), "action": .string(action), "state": .string(state.rawValue),
            "last_seq": .int(lastSeq), "runs": .int(runs), "created_ms": .int(createdMs),
        ]
        if let key { object["key"] = .string(key) }
        if let finishedMs { object["finished_ms"] = .int(finishedMs) }
        if let error {
            var body: [String: JSONValue] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
            if let data = error.data { body["data"] = data }
            object["error"] = .object(body)
        }
        return .object(object)
    }
}

/// JSON values as the journal stores them: compact JSON text, or, for a value holding bytes, a NUL byte (which no
/// JSON text starts with) then the text and each byte string, length-prefixed, referred to as `{"$attachment": i}`
/// as in a message.
enum StoredJSON {
    static func encode(_ value: JSONValue) -> Data {
        let (text, attachments) = value.textAndAttachments
        guard !attachments.isEmpty else { return Data(text) }
        var data = Data([0])
        for part in [text] + attachments {
            withUnsafeBytes(of: UInt64(part.count).littleEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: part)
        }
        return data
    }

    static func decode(_ data: Data) throws -> JSONValue {
        let bytes = [UInt8](data)
        guard bytes.first == 0 else { return try JSONValue(text: bytes, attachments: []) }
        var parts: [[UInt8]] = []
        var index = 1
        while index + 8 <= bytes.count {
            let length = bytes[index ..< index + 8].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            index += 8
            guard length >= 0, index + length <= bytes.count else { break }
            parts.append(Array(bytes[index ..< index + length]))
            index += length
        }
        guard index == bytes.count, let text = parts.first else {
            throw JournalError(description: "a value in the journal is damaged")
        }
        return try JSONValue(text: text, attachments: Array(parts.dropFirst()))
    }
}

/// An exclusive `flock` on the journal file itself, so two host processes never share one, whatever path names it:
/// a symbolic link, or a file with more than one hard link, is refused (its other name would have its own `-wal`),
/// and the file SQLite opened is checked to be the locked one (device and inode). A new journal is created 0600.
final class JournalLock: Sendable {
    private let held: Mutex<Int32?>

    init(_ path: String) throws {
        // A -wal or -shm beside it that is a link is refused too: SQLite would follow it.
        for companion in [path + "-wal", path + "-shm"] {
            var status = stat()
            if lstat(companion, &status) == 0 { try Self.checkOneName(companion, status, journal: path) }
        }
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let why = errno == ELOOP ? "it is a symbolic link: name the file itself" : String(cString: strerror(errno))
            held = Mutex(nil)
            throw JournalError(description: "the job journal \(path) cannot be opened: \(why)")
        }
        held = Mutex(descriptor)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            release()
            throw JournalError(description: "the job journal \(path) cannot be examined: \(String(cString: strerror(errno)))")
        }
        do { try Self.checkOneName(path, status, journal: path) } catch { release(); throw error }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            release()
            throw JournalError(description: "the job journal \(path) is in use by another host process (it is locked)")
        }
        // Its data is the jobs' payloads and results: the owner's alone, and so are the -wal and -shm SQLite makes
        // with the database's mode.
        if status.st_mode & 0o077 != 0 { fchmod(descriptor, 0o600) }
    }

    private static func checkOneName(_ file: String, _ status: stat, journal: String) throws {
        if status.st_mode & S_IFMT == S_IFLNK {
            throw JournalError(description: "the job journal \(journal) is refused: \(file) is a symbolic link")
        }
        if status.st_mode & S_IFMT != S_IFREG {
            throw JournalError(description: "the job journal \(journal) is refused: \(file) is not a regular file")
        }
        if status.st_nlink > 1 {
            throw JournalError(description: "the job journal \(journal) is refused: \(file) has \(status.st_nlink) hard links, "
                               + "and another name would bypass its lock")
        }
    }

    /// The path still names the locked file once SQLite has opened it (nothing swapped it in between).
    func checkStillNames(_ path: String, _ writer: any DatabaseWriter) throws {
        var named = stat()
        var locked = stat()
        let descriptor = held.withLock { $0 } ?? -1
        guard stat(path, &named) == 0, fstat(descriptor, &locked) == 0,
              named.st_dev == locked.st_dev, named.st_ino == locked.st_ino else {
            try? writer.close()
            release()
            throw JournalError(description: "the job journal \(path) was replaced while it was being opened")
        }
    }

    /// Lets another host take the journal (this one has shut down).
    func unlock() {
        if let descriptor = held.withLock({ $0 }) { flock(descriptor, LOCK_UN) }
    }

    /// Closes the descriptor (which drops the lock too).
    func release() {
        if let descriptor = held.withLock({ held in defer { held = nil }; return held }), descriptor >= 0 { close(descriptor) }
    }

    deinit { release() }
}

/// The journal cannot be opened or read: it is locked by another host, or damaged.
public struct JournalError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
