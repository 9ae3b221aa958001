import Foundation
import Synchronization
import ZeroBridge
import ZeroBridgeSupervision

/// The import host's side of the Node ETL peer: where to find it, how a file goes to it and comes back as records
/// (with a retry when the peer was lost holding the call), the opt-in `$evaluate` transform, and the counts `stats`
/// shows.
///
/// How the peer is reached is this type's one seam, ``locate``: the host launches the peer and keeps it running
/// (``supervised(_:timeout:)``, `--etl-command`), or it is started beside the host by a person or a test and found by
/// name among the connected peers (``connecting(to:name:timeout:)``). Either way a call waits for the peer to be up
/// (again), up to the call's timeout.
final class EtlPeer: Sendable {
    /// A caller for the ETL peer, waiting up to the given time for it to be connected; throws `timeout` when it is not.
    typealias Locate = @Sendable (_ waitingUpTo: Duration) async throws -> any BridgeCaller

    /// Attempts per file: a call the peer was lost holding is sent again (to the peer that comes back) this many
    /// times in all. Safe: the host stores a file's records only once a call has returned them.
    static let maxAttempts = 3

    let name: String
    let timeout: Duration
    /// The host's handle to the peer when it launches it; nil for a peer started beside the host.
    private let supervised: Supervised?
    private let locate: Locate
    private let counts = Mutex(Counts())

    private struct Counts {
        var connections = 0
        var filesSent = 0
        var attachmentBytes = 0
        var attachmentBytesReceived = 0
        var retriedCalls = 0
        var evaluations = 0
    }

    private init(name: String, timeout: Duration, supervised: Supervised? = nil, locate: @escaping Locate) {
        self.name = name
        self.timeout = timeout
        self.supervised = supervised
        self.locate = locate
    }

    /// The ETL peer as a program the host launches and restarts (SPEC 10.1): its session once it is up, waiting for
    /// it through a start or a restart. A call the peer was lost holding fails `peer_lost` and is sent again to the
    /// next one (``records(of:format:bytes:run:)``).
    static func supervised(_ supervised: Supervised, timeout: Duration) -> EtlPeer {
        EtlPeer(name: supervised.name, timeout: timeout, supervised: supervised) { wait in
            try await supervised.session(waitingUpTo: wait)
        }
    }

    /// The ETL peer as a named peer that connects to `host` by itself (started beside it): found among the
    /// connected peers, waiting for it when it is not (yet, or again) connected.
    static func connecting(to host: BridgeHost, name: String, timeout: Duration) -> EtlPeer {
        EtlPeer(name: name, timeout: timeout) { [weak host] wait in
            let deadline = ContinuousClock.now + wait
            while true {
                guard let host else { throw BridgeError(.peerLost, "the host is shutting down") }
                let peer = try await host.peer(named: name, waitingUpTo: max(deadline - .now, .zero))
                if peer.isConnected { return peer }
                // A session that just ended can still be listed for a moment after its calls failed `peer_lost`.
                guard ContinuousClock.now < deadline else {
                    throw BridgeError(.timeout, "no peer named '\(name)' connected within \(wait)")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// Counts a peer of this name being welcomed (see ``status(connected:)``), until the host stops.
    func watch(_ host: BridgeHost) -> Task<Void, Never> {
        Task { [weak self, events = host.peerEvents()] in
            for await event in events {
                guard case .joined(let peer) = event, let self, peer.name == self.name else { continue }
                self.counts.withLock { $0.connections += 1 }
            }
        }
    }

    func status(connected: Bool) -> Stats.EtlStatus {
        var status = counts.withLock { counts in
            Stats.EtlStatus(peer: name, connected: connected, connections: counts.connections, filesSent: counts.filesSent,
                            attachmentBytes: counts.attachmentBytes, attachmentBytesReceived: counts.attachmentBytesReceived,
                            retriedCalls: counts.retriedCalls, evaluations: counts.evaluations)
        }
        if let supervised {
            status.supervised = .init(supervised.state, pid: supervised.pid, restarts: supervised.restarts)
        }
        return status
    }

    /// Why no ETL peer could take a file (the error says how long it was waited for), and what to do about it.
    private func unavailable(_ error: Error) -> String {
        let why = (error as? BridgeError)?.message ?? "\(error)"
        let remedy = supervised == nil ? " (start one: node examples/etl-peer/etl-peer.mjs)" : ""
        return "every file is parsed by the ETL peer '\(name)', which is not available: \(why)\(remedy)"
    }

    // MARK: One import

    /// One import's view of the ETL peer: its own counts for progress and result, what the peer reports on the
    /// files in flight, and whether waiting for a peer already timed out (then the next files do not wait again).
    final class Run: Sendable {
        let timeout: Duration
        let transform: String?
        private let state = Mutex(State())

        struct State {
            var gaveUpWaiting = false
            var attachmentBytes = 0
            var retries = 0
            var transformed = 0
            var parsing: [String: ImportFolder.FileProgress] = [:]
            /// Bumped by each progress from the peer, so the import knows when there is news to relay.
            var parsingVersion = 0
        }

        init(timeout: Duration, transform: String?) {
            self.timeout = timeout
            self.transform = transform
        }

        var snapshot: State { state.withLock { $0 } }
        fileprivate func update<T>(_ change: (inout State) -> T) -> T { state.withLock { change(&$0) } }
    }

    /// Checks the opt-in transform before any file is read: the ETL peer must allow `$evaluate` (`--allow-evaluate`)
    /// and the transform must compile there. Throws what the import should fail with.
    func checkTransform(_ transform: String, timeout: Duration) async throws {
        do {
            let caller = try await locate(timeout)
            counts.withLock { $0.evaluations += 1 }
            _ = try await caller.evaluate("new Function('record', transform); return true",
                                          arguments: ["transform": .string(transform)], timeout: timeout)
        } catch let error as BridgeError where error.code == .notAllowed {
            throw BridgeError(.notAllowed, "the transform runs on the ETL peer '\(name)' through $evaluate, which it refuses: "
                              + "start it with --allow-evaluate to allow it (it said: \(error.message))")
        } catch let error as BridgeError where error.code == .handlerError {
            throw BridgeError(.invalidPayload, "the transform is not a JavaScript function body: \(error.message)")
        } catch let error as BridgeError where error.code == .timeout {
            throw BridgeError(.init(rawValue: "etl_unavailable"), "the transform needs the ETL peer '\(name)': \(error.message)")
        }
    }

    /// The records of one file: its bytes go to the ETL peer as an attachment, and, with a transform, its records
    /// through `$evaluate`. A call the peer was lost holding is sent again once the peer is back (up to
    /// ``maxAttempts`` in all); every other failure is the file's error.
    func records(of file: String, format: FileFormat, bytes: Data, run: Run) async -> Result<[Record], ImportFolder.FileError> {
        func failure(_ kind: ImportFolder.FileError.Kind, _ message: String) -> Result<[Record], ImportFolder.FileError> {
            .failure(.init(file: file, kind: kind, message: message))
        }
        defer { run.update { _ = $0.parsing.removeValue(forKey: file) } }
        for attempt in 1...Self.maxAttempts {
            let caller: any BridgeCaller
            do {
                caller = try await locate(run.update { $0.gaveUpWaiting } ? .zero : run.timeout)
                run.update { $0.gaveUpWaiting = false }
            } catch {
                run.update { $0.gaveUpWaiting = true }
                return failure(.etlUnavailable, unavailable(error))
            }
            do {
                var records = try await importFile(file, format: format, bytes: bytes, on: caller, run: run)
                if let transform = run.transform {
                    records = try await transformed(records, by: transform, on: caller, run: run)
                }
                return .success(records)
            } catch let error as BridgeError where error.code == .peerLost && attempt < Self.maxAttempts {
                run.update { $0.retries += 1 }
                counts.withLock { $0.retriedCalls += 1 }
            } catch let error as BridgeError {
                if let kind = ImportFolder.FileError.Kind(rawValue: error.code.rawValue),
                   ImportFolder.FileError.Kind.parserKinds.contains(kind) {
                    if case .int(let received)? = error.data?["attachmentBytes"] {
                        counts.withLock { $0.attachmentBytesReceived += received }
                    }
                    return failure(kind, error.message)
                }
                let lost = error.code == .peerLost ? " (lost on each of \(Self.maxAttempts) attempts)" : ""
                return failure(.etlFailed, "the ETL peer '\(name)'\(lost): \(error)")
            } catch let error as TransformError {
                return failure(.transform, error.message)
            } catch {
                return failure(.etlFailed, "the ETL peer '\(name)': \(error)")
            }
        }
        preconditionFailure("the last attempt returns")
    }

    private func importFile(_ file: String, format: FileFormat, bytes: Data, on caller: any BridgeCaller,
                            run: Run) async throws -> [Record] {
        counts.withLock {
            $0.filesSent += 1
            $0.attachmentBytes += bytes.count
        }
        run.update { $0.attachmentBytes += bytes.count }
        let call = caller.stream(ImportFile.self, .init(file: file, format: format, bytes: bytes), timeout: run.timeout)
        for try await step in call.progress {
            run.update {
                $0.parsing[file] = .init(file: file, records: step.records, bytesDone: step.bytesDone, bytesTotal: step.bytesTotal)
                $0.parsingVersion += 1
            }
        }
        let result = try await call.result
        counts.withLock { $0.attachmentBytesReceived += result.attachmentBytes }
        return result.records
    }

    /// The records as the transform returns them, mapped on the ETL peer in one `$evaluate`.
    private func transformed(_ records: [Record], by transform: String, on caller: any BridgeCaller,
                             run: Run) async throws -> [Record] {
        counts.withLock { $0.evaluations += 1 }
        let result: JSONValue
        do {
            result = try await caller.evaluate(Self.transformScript,
                                               arguments: ["records": .array(records.map(\.json)), "transform": .string(transform)],
                                               timeout: run.timeout)
        } catch let error as BridgeError where [.handlerError, .notAllowed, .timeout].contains(error.code) {
            // The script threw, was refused by the ETL peer's sandbox, or ran past its time: the transform's fault.
            throw TransformError(message: error.message)
        }
        guard case .array(let values) = result, values.count == records.count else {
            throw TransformError(message: "the transform's script did not answer with one record per record")
        }
        let mapped = try values.enumerated().map { index, value in
            guard let record = Record(json: value) else {
                throw TransformError(message: "record \(index): the transform returned \(value), not {title, body, fields?}")
            }
            return record
        }
        run.update { $0.transformed += mapped.count }
        return mapped
    }

    private static let transformScript = """
        const apply = new Function('record', transform);
        return records.map((record) => apply(record));
        """

    private struct TransformError: Error {
        var message: String
    }
}
