import Foundation
import ZeroBridge

/// One `importFolder` request: lists the folder, parses a few files at a time, writes each parsed file in its own
/// transaction, and reports progress. Cancelling the task stops it between files (or rolls back the file being
/// written), so no file is ever half-imported.
struct FolderImport: Sendable {
    static let maxReportedErrors = 1000
    static let maxFileBytes = 64 << 20
    /// Progress events at most this often (and for the first and last file), so thousands of small files do not
    /// become thousands of messages.
    static let progressInterval: Duration = .milliseconds(100)

    let catalog: Catalog
    /// The only folders requests may import from, with what lies below them.
    let roots: ImportRoots
    /// The connected ETL peer, if any, asked for each Markdown file.
    let etlPeer: @Sendable () -> RemotePeer?
    let etlName: String
    let etlTimeout: Duration

    /// Imports the folder, handing each progress report to `report` (a request's or a job's progress).
    func run(_ payload: ImportFolder.Payload,
             report: @Sendable (ImportFolder.Progress) async throws -> Void) async throws -> ImportFolder.Result {
        let folder = URL(fileURLWithPath: payload.path).standardizedFileURL
        guard roots.contains(folder.path) else {
            throw BridgeError(.notAllowed, "'\(payload.path)' is outside the folders this host imports from (its --import-root)")
        }
        let files = try listFiles(in: folder)
        let options = payload.options
        let concurrency = min(max(options?.concurrency ?? 4, 1), 64)
        let etlTimeout = options?.etlTimeoutMs.map { Duration.milliseconds(max($0, 1)) } ?? etlTimeout
        let pause = options?.delayPerFileMs.map { Duration.milliseconds(max($0, 0)) }

        let run = try catalog.beginRun(folder: folder.path, filesTotal: files.count)
        var tally = Tally(filesTotal: files.count)
        do {
            try await withThrowingTaskGroup(of: (String, Swift.Result<Catalog.ImportedFile, ImportFolder.FileError>).self) { group in
                var pending = files[...]
                func startNext() {
                    guard let file = pending.popFirst() else { return }
                    group.addTask { (file, await parse(file, in: folder, etlTimeout: etlTimeout)) }
                }
                for _ in 0..<concurrency { startNext() }
                while let (name, outcome) = try await group.next() {
                    try Task.checkCancellation()
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
                    if tally.progressDue() {
                        try await report(tally.progress(currentFile: name))
                    }
                    if let pause { try await Task.sleep(for: pause) }
                    startNext()
                }
            }
        } catch {
            // Cancelled (or the peer went away): what was written stays, whole files only; the run says so.
            try? catalog.finishRun(run, status: "cancelled", imported: tally.filesImported, failed: tally.errors.count,
                                   records: tally.records)
            throw error
        }
        try catalog.finishRun(run, status: "completed", imported: tally.filesImported, failed: tally.errors.count,
                              records: tally.records)
        return tally.result(folder: folder.path, database: catalog.path)
    }

    /// The regular files under the folder, hidden ones left out, as paths relative to it, sorted.
    private func listFiles(in folder: URL) throws -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw BridgeError(.invalidPayload, "'\(folder.path)' is not a folder")
        }
        guard let walker = FileManager.default.enumerator(
            at: folder, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey], options: [.skipsHiddenFiles]) else {
            throw BridgeError(.invalidPayload, "cannot list '\(folder.path)'")
        }
        let prefix = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        var names: [String] = []
        // Links are listed too (the enumerator does not descend into linked folders): a link to a file is read when it
        // stays inside the import roots, and reported when it does not.
        for case let url as URL in walker {
            let kind = try? url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey])
            guard kind?.isRegularFile == true || (kind?.isSymbolicLink == true && !Self.isFolder(url)) else { continue }
            let path = url.standardizedFileURL.path
            names.append(path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path)
        }
        return names.sorted()
    }

    private static func isFolder(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Reads and parses one file; every problem becomes that file's error.
    private func parse(_ name: String, in folder: URL, etlTimeout: Duration) async
        -> Swift.Result<Catalog.ImportedFile, ImportFolder.FileError> {
        func failure(_ kind: ImportFolder.FileError.Kind, _ message: String) -> Swift.Result<Catalog.ImportedFile, ImportFolder.FileError> {
            .failure(.init(file: name, kind: kind, message: message))
        }
        guard let format = FileFormat(fileName: name) else {
            return failure(.unsupported, "not a format the host imports (csv, json, md)")
        }
        let path = folder.appendingPathComponent(name).path
        guard roots.contains(path) else {
            return failure(.unreadable, "a link to a file outside the folders this host imports from: not read")
        }
        let bytes: [UInt8]
        do {
            let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard size <= Self.maxFileBytes else {
                return failure(.tooLarge, "\(size) bytes; the host imports files up to \(Self.maxFileBytes)")
            }
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            return failure(.unreadable, "cannot read: \(error.localizedDescription)")
        }
        let text: String
        do {
            text = try TextCheck.decode(bytes)
        } catch {
            return failure(.binary, error.message)
        }
        let records: [Record]
        switch format {
        case .csv:
            do { records = try CSVFormat.records(from: text) } catch { return failure(.csv, error.message) }
        case .json:
            do { records = try JSONFormat.records(from: text) } catch { return failure(.json, error.message) }
        case .markdown:
            guard let etl = etlPeer() else {
                return failure(.etlUnavailable, "Markdown is parsed by the ETL peer '\(etlName)', and none is connected "
                               + "(start one: node examples/etl-peer/etl-peer.mjs)")
            }
            do {
                records = try await etl.call(ParseMarkdown.self, .init(file: name, text: text), timeout: etlTimeout).records
            } catch let error as BridgeError where error.code == .handlerError {
                return failure(.markdown, error.message)
            } catch let error as BridgeError {
                return failure(.etlFailed, "the ETL peer '\(etlName)': \(error)")
            } catch {
                return failure(.etlFailed, "the ETL peer '\(etlName)': \(error)")
            }
        }
        return .success(.init(path: path, folder: folder.path, name: name, format: format, bytes: bytes.count,
                              records: records))
    }
}

/// Counts as an import goes, and the progress and result made from them.
private struct Tally {
    let filesTotal: Int
    let started = ContinuousClock.now
    var lastProgress: ContinuousClock.Instant?
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

    func progress(currentFile: String) -> ImportFolder.Progress {
        let seconds = max(elapsed, 1e-6)
        return .init(filesDone: filesDone, filesTotal: filesTotal, filesFailed: errors.count, records: records,
                     bytes: bytes, currentFile: currentFile, elapsedSeconds: elapsed,
                     filesPerSecond: Double(filesDone) / seconds, recordsPerSecond: Double(records) / seconds)
    }

    func result(folder: String, database: String) -> ImportFolder.Result {
        let seconds = max(elapsed, 1e-6)
        let sorted = errors.sorted { $0.file < $1.file }
        return .init(folder: folder, database: database, filesTotal: filesTotal, filesImported: filesImported,
                     filesFailed: errors.count, records: records, bytes: bytes, seconds: elapsed,
                     filesPerSecond: Double(filesDone) / seconds, recordsPerSecond: Double(records) / seconds,
                     errors: Array(sorted.prefix(FolderImport.maxReportedErrors)),
                     errorsOmitted: max(sorted.count - FolderImport.maxReportedErrors, 0))
    }
}

/// The folders an import host reads from (`--import-root`). A path is inside when, with `..` and every symbolic link
/// resolved, it is a root or lies below one, so neither `../..` nor a link planted in an allowed folder reaches out.
struct ImportRoots: Sendable {
    let paths: [String]

    /// Roots that do not exist are refused: a typo would otherwise allow nothing, silently.
    init(_ folders: [String]) throws {
        paths = try folders.map { folder in
            guard let resolved = Self.resolve(folder) else { throw ImportRootError(folder: folder) }
            return resolved
        }
    }

    /// A path that does not exist is judged as written (after `..` is taken out), so that a missing folder inside
    /// a root is reported missing, and nothing tells whether a path outside exists.
    func contains(_ path: String) -> Bool {
        let resolved = Self.resolve(path) ?? URL(fileURLWithPath: path).standardizedFileURL.path
        return paths.contains { root in resolved == root || resolved.hasPrefix(root == "/" ? root : root + "/") }
    }

    /// The canonical absolute path (`realpath`), or nil when it does not exist.
    private static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

struct ImportRootError: Error, CustomStringConvertible {
    let folder: String
    var description: String { "--import-root \(folder): no such folder" }
}
