import Foundation
import ZeroBridge

/// One `importFolder` request: lists the folder, reads a few files at a time and hands each one's bytes to the ETL
/// peer, writes each file's records in its own transaction, relays progress, and tells the front-ends when the
/// catalogue changed. Cancelling the task stops it between files (or rolls back the file being written), so no file
/// is ever half-imported.
struct FolderImport: Sendable {
    static let maxReportedErrors = 1000
    /// Progress events at most this often (and for the first and last file), so thousands of small files do not
    /// become thousands of messages.
    static let progressInterval: Duration = .milliseconds(100)

    let catalog: Catalog
    /// The only folders requests may import from, with what lies below them.
    let roots: ImportRoots
    /// Files larger than this are not read (`too_large`); a file travels whole in one message to the ETL peer.
    let maxFileBytes: Int
    let etl: EtlPeer
    /// Tells the front-ends (a broadcast) that a run wrote to the catalogue.
    let announce: @Sendable (CatalogChanged.Payload) async -> Void

    /// What the import's task group hands back: a file done, or a tick to relay the ETL peer's progress.
    private enum Step: Sendable {
        case file(String, Swift.Result<Catalog.ImportedFile, ImportFolder.FileError>)
        case tick
    }

    /// Imports the folder, handing each progress report to `report` (a request's or a job's progress).
    func run(_ payload: ImportFolder.Payload,
             report: @Sendable (ImportFolder.Progress) async throws -> Void) async throws -> ImportFolder.Result {
        // Opened once, beneath its import root: listing and reading go through this descriptor, not the path.
        let opened = try roots.openFolder(payload.path)
        let folder = URL(fileURLWithPath: opened.path)
        let files = try opened.listFiles()
        let options = payload.options
        let concurrency = min(max(options?.concurrency ?? 4, 1), 64)
        let etlTimeout = options?.etlTimeoutMs.map { Duration.milliseconds(max($0, 1)) } ?? etl.timeout
        let pause = options?.delayPerFileMs.map { Duration.milliseconds(max($0, 0)) }
        if let transform = options?.transform {
            try await etl.checkTransform(transform, timeout: etlTimeout)
        }
        let etlRun = EtlPeer.Run(timeout: etlTimeout, transform: options?.transform)

        let run = try catalog.beginRun(folder: folder.path, filesTotal: files.count)
        var tally = Tally(filesTotal: files.count)
        do {
            try await withThrowingTaskGroup(of: Step.self) { group in
                var pending = files[...]
                var inFlight = 0
                var relayedVersion = 0
                func startNext() {
                    guard let file = pending.popFirst() else { return }
                    inFlight += 1
                    group.addTask { .file(file, await read(file, in: opened, etlRun: etlRun)) }
                }
                func tickLater() {
                    group.addTask {
                        try? await Task.sleep(for: Self.progressInterval)
                        return .tick
                    }
                }
                for _ in 0..<concurrency { startNext() }
                if inFlight > 0 { tickLater() }
                while let step = try await group.next() {
                    try Task.checkCancellation()
                    switch step {
                    case .tick:
                        guard inFlight > 0 else { continue }
                        // The ETL peer's progress on long files, relayed between the files' own reports.
                        let news = etlRun.snapshot.parsingVersion
                        if news != relayedVersion {
                            relayedVersion = news
                            try await report(tally.progress(etlRun.snapshot))
                        }
                        tickLater()
                    case .file(let name, let outcome):
                        inFlight -= 1
                        switch outcome {
                        case .success(let parsed):
                            do {
                                try await catalog.store(parsed)
                                tally.imported(parsed)
                            } catch is CancellationError {
                                throw CancellationError()
                            } catch {
                                tally.failed(.init(file: name, kind: .unreadable, message: "could not be stored: \(error)"))
                            }
                        case .failure(let error):
                            tally.failed(error)
                        }
                        tally.currentFile = name
                        if tally.progressDue() {
                            try await report(tally.progress(etlRun.snapshot))
                        }
                        if let pause { try await Task.sleep(for: pause) }
                        startNext()
                        if inFlight == 0 { group.cancelAll() }  // only the tick is left
                    }
                }
            }
        } catch {
            // Cancelled (or the peer went away): what was written stays, whole files only; the run says so.
            try? catalog.finishRun(run, status: "cancelled", imported: tally.filesImported, failed: tally.errors.count,
                                   records: tally.records)
            // From a task of its own: this one may be cancelled, and GRDB refuses to read in a cancelled task.
            await Task { [tally] in await announceChange(run, folder: folder, status: "cancelled", tally) }.value
            throw error
        }
        try catalog.finishRun(run, status: "completed", imported: tally.filesImported, failed: tally.errors.count,
                              records: tally.records)
        await announceChange(run, folder: folder, status: "completed", tally)
        return tally.result(folder: folder.path, database: catalog.path, etlRun.snapshot)
    }

    /// Broadcasts `catalogChanged` when the run wrote at least one file.
    private func announceChange(_ run: Int64, folder: URL, status: String, _ tally: Tally) async {
        guard tally.filesImported > 0, let now = try? await catalog.stats() else { return }
        await announce(.init(run: run, folder: folder.path, status: status, filesImported: tally.filesImported,
                             filesFailed: tally.errors.count, records: tally.records, files: now.files,
                             recordsTotal: now.records))
    }

    /// Reads one file (opened beneath the folder, up to the size limit) and has the ETL peer parse it; every problem
    /// becomes that file's error.
    private func read(_ name: String, in folder: OpenFolder, etlRun: EtlPeer.Run) async
        -> Swift.Result<Catalog.ImportedFile, ImportFolder.FileError> {
        func failure(_ kind: ImportFolder.FileError.Kind, _ message: String) -> Swift.Result<Catalog.ImportedFile, ImportFolder.FileError> {
            .failure(.init(file: name, kind: kind, message: message))
        }
        // Opened first, so that a link or a hard link is reported as such whatever its name.
        let file: OpenFile
        switch folder.openFile(name) {
        case .success(let opened): file = opened
        case .failure(let error): return .failure(error)
        }
        guard let format = FileFormat(fileName: name) else {
            return failure(.unsupported, "not a format the host imports (csv, json, md)")
        }
        guard file.size <= maxFileBytes else {
            return failure(.tooLarge, "\(file.size) bytes; the host imports files up to \(maxFileBytes)")
        }
        let bytes: Data
        do {
            // Read up to one byte past the limit, so a file that grew since is refused, not held.
            bytes = try file.handle.read(upToCount: maxFileBytes + 1) ?? Data()
        } catch {
            return failure(.unreadable, "cannot read: \(error.localizedDescription)")
        }
        guard bytes.count <= maxFileBytes else {
            return failure(.tooLarge, "more than \(maxFileBytes) bytes, the most the host imports in one file")
        }
        let path = URL(fileURLWithPath: folder.path).appendingPathComponent(name).path
        return await etl.records(of: name, format: format, bytes: bytes, run: etlRun).map { records in
            .init(path: path, folder: folder.path, name: name, format: format, bytes: bytes.count, records: records)
        }
    }
}

/// Counts as an import goes, and the progress and result made from them.
private struct Tally {
    let filesTotal: Int
    let started = ContinuousClock.now
    var lastProgress: ContinuousClock.Instant?
    /// The file finished last (relative to the folder).
    var currentFile: String?
    var filesImported = 0
    var records = 0
    var bytes = 0
    var errors: [ImportFolder.FileError] = []

    init(filesTotal: Int) { self.filesTotal = filesTotal }

    var filesDone: Int { filesImported + errors.count }
    var elapsed: Double { (ContinuousClock.now - started) / .seconds(1) }

    mutating func imported(_ file: Catalog.ImportedFile) {
        filesImported += 1
        records += file.records.count
        bytes += file.bytes
    }

    mutating func failed(_ error: ImportFolder.FileError) { errors.append(error) }

    mutating func progressDue() -> Bool {
        let now = ContinuousClock.now
        guard filesDone == 1 || filesDone == filesTotal || lastProgress.map({ now - $0 >= FolderImport.progressInterval }) ?? true else {
            return false
        }
        lastProgress = now
        return true
    }

    func progress(_ etl: EtlPeer.Run.State) -> ImportFolder.Progress {
        let seconds = max(elapsed, 1e-6)
        return .init(filesDone: filesDone, filesTotal: filesTotal, filesFailed: errors.count, records: records,
                     bytes: bytes, currentFile: currentFile, elapsedSeconds: elapsed,
                     filesPerSecond: Double(filesDone) / seconds, recordsPerSecond: Double(records) / seconds,
                     attachmentBytes: etl.attachmentBytes, etlRetries: etl.retries,
                     parsing: etl.parsing.values.sorted { $0.file < $1.file })
    }

    func result(folder: String, database: String, _ etl: EtlPeer.Run.State) -> ImportFolder.Result {
        let seconds = max(elapsed, 1e-6)
        let sorted = errors.sorted { $0.file < $1.file }
        return .init(folder: folder, database: database, filesTotal: filesTotal, filesImported: filesImported,
                     filesFailed: errors.count, records: records, bytes: bytes, seconds: elapsed,
                     filesPerSecond: Double(filesDone) / seconds, recordsPerSecond: Double(records) / seconds,
                     errors: Array(sorted.prefix(FolderImport.maxReportedErrors)),
                     errorsOmitted: max(sorted.count - FolderImport.maxReportedErrors, 0),
                     attachmentBytes: etl.attachmentBytes, etlRetries: etl.retries, transformed: etl.transformed)
    }
}
