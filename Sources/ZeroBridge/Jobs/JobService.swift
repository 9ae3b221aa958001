import Foundation
import Logging
import Synchronization

/// A host's jobs (SPEC 7.16): the handlers of its job actions, the jobs running in this process, and the journal
/// that outlives them. `BridgeHost` owns one once a job action is registered, and serves `$job.*` through it.
final class JobService: Sendable {
    typealias Handler = @Sendable (JSONValue, BridgeJob) async throws -> JSONValue

    let configuration: BridgeHost.JobsConfiguration
    let journal: JobJournal
    private let logger: Logger
    private let handlers = Mutex<[String: Handler]>([:])
    /// Jobs running in this process. A job is here from before it is journaled until its outcome is, so a job the
    /// journal says is running is always here (once ``recover()`` has run).
    private let running = Mutex<[String: LiveJob]>([:])
    /// Set by ``stop()``: a handler cancelled by the shutdown does not record itself as cancelled.
    private let stopping = Atomic<Bool>(false)
    private let purger = Mutex<Task<Void, Never>?>(nil)

    /// Progress messages read from the journal and handed to the link at once, per attached request.
    static let batch = 64

    init(configuration: BridgeHost.JobsConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        journal = try JobJournal(configuration.journal, durability: configuration.durability,
                                 maxProgressPerJob: configuration.maxProgressPerJob)
    }

    func register(_ action: String, _ handler: @escaping Handler) {
        handlers.withLock { $0[action] = handler }
    }

    func unregister(_ action: String) {
        handlers.withLock { $0[action] = nil }
    }

    func isServed(_ action: String) -> Bool { handlers.withLock { $0[action] != nil } }

    // MARK: Starting

    /// Starts a job of `action`, or finds the one `key` names (SPEC 7.16).
    func start(_ action: String, payload: JSONValue, key: String?) async throws -> (record: JobRecord, created: Bool) {
        guard let handler = handlers.withLock({ $0[action] }) else {
            throw BridgeError(.invalidPayload, "'\(action)' is not served as a job")
        }
        if let key, let existing = try await journal.job(action: action, key: key), !isExpired(existing) {
            return (existing, false)
        }
        try payload.checkCarriable(as: "payload", .invalidPayload)
        let id = Self.newID()
        let live = LiveJob(lastSeq: 0)
        // Taken before the journal has the job, so that a job the journal says is running is always in `running`.
        try running.withLock { running throws(BridgeError) in
            guard running.count < configuration.maxRunning else {
                throw BridgeError(.overloaded, "the host runs its most jobs at once (\(configuration.maxRunning))")
            }
            running[id] = live
        }
        let insertion: JobJournal.Insertion
        do {
            if key != nil { try await purgeExpired() }  // an expired job's key may start a new one
            insertion = try await journal.insert(id: id, action: action, key: key, payload: payload, nowMs: WallClock.milliseconds)
        } catch {
            _ = running.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        switch insertion {
        case .existing(let record):
            _ = running.withLock { $0.removeValue(forKey: id) }
            return (record, false)
        case .created(let record):
            run(record, live: live, payload: payload, resumedFrom: nil, handler: handler)
            return (record, true)
        }
    }

    private func run(_ record: JobRecord, live: LiveJob, payload: JSONValue, resumedFrom: JSONValue?, handler: @escaping Handler) {
        let job = BridgeJob(id: record.id, action: record.action, key: record.key, resumedFrom: resumedFrom,
                            live: live, journal: journal)
        let logger = logger
        live.task = Task {
            logger.debug("job started", metadata: ["job": "\(record.id)", "action": "\(record.action)", "run": "\(record.runs)"])
            let outcome: Result<JSONValue, BridgeError>
            do {
                let result = try await handler(payload, job)
                try result.checkCarriable(as: "result", .handlerError)
                outcome = .success(result)
            } catch let error as BridgeError {
                outcome = .failure(error)
            } catch is CancellationError {
                outcome = .failure(BridgeError(.cancelled, "the job was cancelled"))
            } catch {
                if !BridgeError.isAppChosen(error) {
                    logger.error("job failed", metadata: ["job": "\(record.id)", "action": "\(record.action)",
                                                          "type": "\(BridgeError.errorTypeName(error))", "error": "\(error)"])
                }
                outcome = .failure(BridgeError.answering(error, revealingDescription: false))
            }
            await self.finish(record.id, outcome)
        }
    }

    /// Journals a job's outcome (unless a cancel or the shutdown already did), then wakes its readers.
    private func finish(_ id: String, _ outcome: Result<JSONValue, BridgeError>) async {
        let cancelledByShutdown = stopping.load(ordering: .acquiring) && outcome.failureCode == .cancelled
        if !cancelledByShutdown {
            do {
                // In a task of its own: the handler's task may be cancelled, and GRDB gives up on a cancelled task.
                let journal = journal
                _ = try await Task { try await journal.finish(job: id, outcome, nowMs: WallClock.milliseconds) }.value
            } catch {
                logger.error("the job's outcome could not be journaled", metadata: ["job": "\(id)", "error": "\(error)"])
            }
        }
        running.withLock { $0.removeValue(forKey: id) }?.markFinished()
    }

    // MARK: Attaching

    /// Feeds `request` the job's progress after `afterSeq` (when it asked for progress), then answers with the
    /// job's outcome. Ending the request ends only this; the job runs on.
    func attach(_ id: String, afterSeq: Int, request: BridgeRequest) async throws -> JSONValue {
        guard let record = try await journal.job(id: id), !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job '\(id)'")
        }
        let live = running.withLock { $0[id] }
        let sink = request.wantsProgress ? request.sink : nil
        var cursor = afterSeq
        while true {
            try Task.checkCancellation()
            // Read before the journal: an outcome is journaled after all of the job's progress, so once it is
            // finished, the read below sees everything there will ever be.
            let finished = live?.isFinished ?? true
            if let sink {
                let batch = try await journal.progress(job: id, after: cursor, limit: Self.batch)
                if let first = batch.first {
                    var messages = batch.map { Message.Progress(id: request.id ?? "", seq: $0.seq, payload: $0.payload) }
                    if first.seq > cursor + 1 { messages[0].skipped = first.seq - cursor - 1 }  // pruned (SPEC 7.16)
                    guard await sink.sendJournaled(messages) else { throw CancellationError() }
                    cursor = batch[batch.count - 1].seq
                    continue
                }
            }
            if !finished, let live {
                await live.waitForChange(after: sink == nil ? .max : cursor)
                continue
            }
            guard let outcome = try await journal.outcome(job: id) else {
                // Journaled as running but not running here: only a job being resumed by recover() can be so.
                throw BridgeError(.interrupted, "the job '\(id)' is not running in this host process")
            }
            return try outcome.get()
        }
    }

    /// The job `id`, or the one of `action` with `key`.
    func resolve(id: String?, action: String?, key: String?) async throws -> String {
        if let id { return id }
        guard let action, let key else { throw BridgeError(.invalidPayload, "name a job: {\"job\": id} or {\"action\": name, \"key\": string}") }
        guard let record = try await journal.job(action: action, key: key), !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job of '\(action)' with key '\(key)'")
        }
        return record.id
    }

    // MARK: Cancelling and listing

    func cancel(_ id: String) async throws -> JobRecord {
        guard let record = try await journal.job(id: id), !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job '\(id)'")
        }
        guard record.state == .running else { return record }
        try await journal.finish(job: id, .failure(BridgeError(.cancelled, "the job was cancelled ($job.cancel)")),
                                 nowMs: WallClock.milliseconds)
        if let live = running.withLock({ $0[id] }) {
            live.task?.cancel()
            live.markFinished()  // its readers get the outcome now; its slot is freed when the handler returns
        }
        return try await journal.job(id: id) ?? record
    }

    func list(_ filter: JobJournal.Filter) async throws -> [JobRecord] {
        try await journal.list(filter).filter { !isExpired($0) }
    }

    // MARK: Restarts, retention, shutdown

    /// Called as the host starts, before it serves anything: jobs a killed host left running are resumed from
    /// their checkpoint, or end `interrupted` (SPEC 7.16). Then expired jobs are forgotten, now and periodically.
    func recoverNow() throws {
        let resumable = try journal.recover(canResume: isServed, nowMs: WallClock.milliseconds)
        for job in resumable {
            guard let handler = handlers.withLock({ $0[job.record.action] }) else { continue }
            let live = LiveJob(lastSeq: job.record.lastSeq)
            running.withLock { $0[job.record.id] = live }
            logger.info("resuming a job from its checkpoint", metadata: ["job": "\(job.record.id)",
                                                                       "action": "\(job.record.action)", "run": "\(job.record.runs)"])
            run(job.record, live: live, payload: job.payload, resumedFrom: job.checkpoint, handler: handler)
        }
        let period = min(configuration.retention, .seconds(60))
        purger.withLock { purger in
            purger?.cancel()
            purger = Task { [weak self] in
                while !Task.isCancelled {
                    try? await self?.purgeExpired()
                    try? await Task.sleep(for: period)
                }
            }
        }
    }

    /// On a graceful shutdown: jobs without a checkpoint end `interrupted`, checkpointed ones stay running for the
    /// next start; every handler is cancelled, and waited for up to `grace`.
    func stop(grace: Duration) async {
        stopping.store(true, ordering: .releasing)
        purger.withLock { $0?.cancel() }
        do {
            try await journal.interruptUncheckpointed(nowMs: WallClock.milliseconds)
        } catch {
            logger.error("running jobs could not be marked interrupted", metadata: ["error": "\(error)"])
        }
        let jobs = running.withLock { Array($0.values) }
        for job in jobs {
            job.task?.cancel()
            job.markFinished()
        }
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline, !running.withLock({ $0.isEmpty }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
        journal.release()
    }

    private func purgeExpired() async throws {
        try await journal.purge(finishedBefore: WallClock.milliseconds - Self.milliseconds(configuration.retention))
    }

    private func isExpired(_ record: JobRecord) -> Bool {
        guard let finished = record.finishedMs else { return false }
        return finished < WallClock.milliseconds - Self.milliseconds(configuration.retention)
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// 128 random bits as 32 lowercase hex digits: never reused, not guessable.
    private static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0 ..< 2).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}

/// A job running in this process: how far its journal has got, whether it has finished, and the readers waiting
/// for either.
final class LiveJob: @unchecked Sendable {
    private struct State {
        var lastSeq: Int
        var finished = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state: Mutex<State>
    private let taskBox = Mutex<Task<Void, Never>?>(nil)

    init(lastSeq: Int) { state = Mutex(State(lastSeq: lastSeq)) }

    var task: Task<Void, Never>? {
        get { taskBox.withLock { $0 } }
        set { taskBox.withLock { $0 = newValue } }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Progress up to `seq` is journaled: readers waiting for it go on.
    func advance(to seq: Int) {
        wake { state in
            guard seq > state.lastSeq else { return false }
            state.lastSeq = seq
            return true
        }
    }

    func markFinished() {
        wake { state in
            defer { state.finished = true }
            return !state.finished
        }
    }

    private func wake(_ change: (inout State) -> Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard change(&state) else { return [] }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once progress after `seq` is journaled, the job has finished, or the calling task is cancelled.
    func waitForChange(after seq: Int) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if state.finished || state.lastSeq > seq || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

private extension Result where Failure == BridgeError {
    var failureCode: BridgeError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
