import CoreMetrics
import ZeroBridge
import Foundation
import Logging
import Synchronization
import Tracing

/// A host's jobs (SPEC 7.16): the handlers of its job actions, the jobs running in this process, and the journal
/// that outlives them. `BridgeHost` owns one once a job action is registered, and serves `$job.*` through it.
final class JobService: Sendable {
    typealias Handler = @Sendable (JSONValue, BridgeJob) async throws -> JSONValue

    let configuration: BridgeHost.JobsConfiguration
    let journal: JobJournal
    private let logger: Logger
    /// The host's: a job runs in a span when the request that started it did.
    private let tracedRequests: TracedRequests
    private let handlers = Mutex<[String: Handler]>([:])
    /// Jobs running in this process. A job is here from before it is journaled until its outcome is, so a job the
    /// journal says is running is always here (once ``recover()`` has run).
    private let running = Mutex<[String: LiveJob]>([:])
    /// Set by ``stop()``: a handler cancelled by the shutdown does not record itself as cancelled.
    private let stopping = Atomic<Bool>(false)
    private let purger = Mutex<Task<Void, Never>?>(nil)
    /// Outcomes the journal could not take (its disk full): callers are answered from here, and the record shows
    /// them, until a later write succeeds (``journalUnjournaled()``).
    private let unjournaled = Mutex<[String: (outcome: Result<JSONValue, BridgeError>, finishedMs: Int)]>([:])

    /// Progress messages read from the journal and handed to the link at once, per attached request.
    static let batch = 64
    /// Jobs by state for a metrics backend (issue 27): made once; no-ops without one.
    private let runningMeter = Meter(label: "zerobridge_jobs_running")
    private let endedCounters = Dictionary(uniqueKeysWithValues: JobRecord.State.allCases.map {
        ($0, Counter(label: "zerobridge_jobs_ended_total", dimensions: [("state", $0.rawValue)]))
    })

    init(configuration: BridgeHost.JobsConfiguration, tracedRequests: TracedRequests, logger: Logger) throws {
        self.configuration = configuration
        self.tracedRequests = tracedRequests
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

    /// Who a request's sender is, as jobs are owned (SPEC 7.16): its CURVE key when the host requires CURVE, else
    /// its peer name; empty for an anonymous peer.
    static func owner(of peer: RemotePeer?) -> String {
        guard let info = peer?.info else { return "" }
        if let key = info.curveKey { return "curve:" + key }
        return info.name.map { "name:" + $0 } ?? ""
    }

    /// Starts a job of `action` for `owner`, or finds the one `key` names among the owner's (SPEC 7.16).
    func start(_ action: String, payload: JSONValue, key: String?, owner: String) async throws -> (record: JobRecord, created: Bool) {
        guard let handler = handlers.withLock({ $0[action] }) else {
            throw BridgeError(.invalidPayload, "'\(action)' is not served as a job")
        }
        if let key, let existing = try await journal.job(action: action, key: key, owner: owner), !isExpired(existing) {
            return (withUnjournaled(existing), false)
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
            insertion = try await journal.insert(id: id, action: action, key: key, owner: owner, payload: payload,
                                                 nowMs: WallClock.milliseconds)
        } catch {
            _ = running.withLock { $0.removeValue(forKey: id) }
            throw error
        }
        switch insertion {
        case .existing(let record):
            _ = running.withLock { $0.removeValue(forKey: id) }
            return (withUnjournaled(record), false)
        case .created(let record):
            run(record, live: live, payload: payload, resumedFrom: nil, handler: handler)
            return (record, true)
        }
    }

    private func run(_ record: JobRecord, live: LiveJob, payload: JSONValue, resumedFrom: JSONValue?, handler: @escaping Handler) {
        let job = BridgeJob(id: record.id, action: record.action, key: record.key, resumedFrom: resumedFrom,
                            live: live, journal: journal)
        let logger = logger
        runningMeter.increment()
        live.task = Task {
            defer { runningMeter.decrement() }
            logger.debug("job started", metadata: ["job": "\(record.id)", "action": "\(record.action)", "run": "\(record.runs)"])
            let outcome: Result<JSONValue, BridgeError>
            do {
                // Its own span, in the trace of the request that started it (inherited with the task's locals);
                // a job resumed at start-up has none, and so starts a trace of its own (SPEC 7.18). A request the
                // host's TracedRequests left without a span starts a job without one.
                let result = tracedRequests.tracesCurrentWork
                    ? try await withSpan("job \(record.action)") { _ in try await handler(payload, job) }
                    : try await handler(payload, job)
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
            let state: JobRecord.State = switch outcome {
            case .success: .succeeded
            case .failure(let error): JobRecord.State(ending: error)
            }
            endedCounters[state]?.increment()
        }
    }

    /// Journals a job's outcome (unless a cancel or the shutdown already did), then wakes its readers. An outcome
    /// the journal cannot take (its disk full) fails the job `journal_full` at once, in memory, rather than leaving
    /// it `running` until a restart: what a caller is told must be what it can be told again.
    private func finish(_ id: String, _ outcome: Result<JSONValue, BridgeError>) async {
        let cancelledByShutdown = stopping.load(ordering: .acquiring) && outcome.failureCode == .cancelled
        if !cancelledByShutdown {
            let nowMs = WallClock.milliseconds
            do {
                // In a task of its own: the handler's task may be cancelled, and GRDB gives up on a cancelled task.
                let journal = journal
                let recorded = try await Task { try await journal.finish(job: id, outcome, nowMs: nowMs) }.value
                // Its attached callers get it even if retention forgets the job before they read it.
                if recorded { running.withLock { $0[id] }?.outcome = outcome }
            } catch {
                logger.error("the job's outcome could not be journaled", metadata: ["job": "\(id)", "error": "\(error)"])
                let why = (error as? BridgeError)?.code == .journalFull
                    ? BridgeError(.journalFull, "the job failed: its outcome could not be journaled, \(journal.name)'s disk is full")
                    : BridgeError(.handlerError, "the job failed: its outcome could not be journaled (\(error))")
                unjournaled.withLock { $0[id] = (.failure(why), nowMs) }
            }
        }
        running.withLock { $0.removeValue(forKey: id) }?.markFinished()
    }

    /// Tries again to journal the outcomes the journal could not take; those it takes are answered from it again.
    private func journalUnjournaled() async {
        for (id, ended) in unjournaled.withLock({ $0 }) {
            guard (try? await journal.finish(job: id, ended.outcome, nowMs: ended.finishedMs)) != nil else { continue }
            _ = unjournaled.withLock { $0.removeValue(forKey: id) }
        }
    }

    /// The record as callers must see it: with an outcome the journal could not take yet.
    private func withUnjournaled(_ record: JobRecord) -> JobRecord {
        guard record.state == .running, let ended = unjournaled.withLock({ $0[record.id] }),
              case .failure(let error) = ended.outcome else { return record }
        var record = record
        record.state = .failed
        record.error = error
        record.finishedMs = ended.finishedMs
        return record
    }

    // MARK: Attaching

    /// Feeds `request` the job's progress after `afterSeq` (when it asked for progress), then answers with the
    /// job's outcome. Ending the request ends only this; the job runs on. The request that started the job is
    /// answered with its outcome however short the retention (`startedIt`); any other is `unknown_job` once the job
    /// is forgotten, or when the job is not the caller's to see (``checkAccess(_:owner:)``).
    func attach(_ id: String, afterSeq: Int, request: BridgeRequest, startedIt: Bool = false) async throws -> JSONValue {
        guard let record = try await journal.job(id: id), startedIt || !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job '\(id)'")
        }
        try checkAccess(record, owner: Self.owner(of: request.peer))
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
                    var messages = batch.map { ProgressMessage(id: request.id ?? "", seq: $0.seq, payload: $0.payload) }
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
            guard let outcome = try await journal.outcome(job: id) ?? live?.outcome else {
                if let ended = unjournaled.withLock({ $0[id] }) { return try ended.outcome.get() }
                // Journaled as running but not running here: the shutdown is suspending it (SPEC 7.16), if it has
                // a checkpoint to resume from (the journal may have refused to say so: its disk full).
                if stopping.load(ordering: .acquiring), try await journal.hasCheckpoint(job: id) { throw JobRecord.suspension }
                throw BridgeError(.interrupted, "the job '\(id)' is not running in this host process")
            }
            return try outcome.get()
        }
    }

    /// The job `id`, or the one of `action` that `owner` started with `key`.
    func resolve(id: String?, action: String?, key: String?, owner: String) async throws -> String {
        if let id { return id }
        guard let action, let key else { throw BridgeError(.invalidPayload, "name a job: {\"job\": id} or {\"action\": name, \"key\": string}") }
        guard let record = try await journal.job(action: action, key: key, owner: owner), !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job of '\(action)' with key '\(key)'")
        }
        return record.id
    }

    // MARK: Cancelling and listing

    /// A job started by a CURVE key is that key's alone; any other is reached by whoever names its id, which only
    /// its starter and its owner's listing are told (SPEC 7.16). Another owner hears of no such job.
    private func checkAccess(_ record: JobRecord, owner: String) throws {
        guard !record.owner.hasPrefix("curve:") || record.owner == owner else {
            throw BridgeError(.unknownJob, "no job '\(record.id)'")
        }
    }

    func cancel(_ id: String, owner: String) async throws -> JobRecord {
        guard let record = try await journal.job(id: id).map(withUnjournaled), !isExpired(record) else {
            throw BridgeError(.unknownJob, "no job '\(id)'")
        }
        try checkAccess(record, owner: owner)
        guard record.state == .running else { return record }
        try await journal.finish(job: id, .failure(BridgeError(.cancelled, "the job was cancelled ($job.cancel)")),
                                 nowMs: WallClock.milliseconds)
        if let live = running.withLock({ $0[id] }) {
            live.task?.cancel()
            live.markFinished()  // its readers get the outcome now; its slot is freed when the handler returns
        }
        return try await journal.job(id: id) ?? record
    }

    /// The jobs that match; a filter with an owner lists only that owner's (an anonymous caller's `$job.list`
    /// lists none: SPEC 7.16).
    func list(_ filter: JobJournal.Filter) async throws -> [JobRecord] {
        try await journal.list(filter).map(withUnjournaled).filter { !isExpired($0) }
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

    /// On a graceful shutdown: jobs without a checkpoint end `interrupted`, checkpointed ones are `suspended` until
    /// the next start (their callers are told so); every handler is cancelled, and waited for up to `grace`.
    func stop(grace: Duration) async {
        stopping.store(true, ordering: .releasing)
        purger.withLock { $0?.cancel() }
        await journalUnjournaled()
        do {
            try await journal.suspendOrInterruptRunning(nowMs: WallClock.milliseconds)
        } catch {
            logger.error("running jobs could not be marked suspended or interrupted", metadata: ["error": "\(error)"])
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
        await journalUnjournaled()
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
    private let outcomeBox = Mutex<Result<JSONValue, BridgeError>?>(nil)

    init(lastSeq: Int) { state = Mutex(State(lastSeq: lastSeq)) }

    var task: Task<Void, Never>? {
        get { taskBox.withLock { $0 } }
        set { taskBox.withLock { $0 = newValue } }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// The outcome its handler journaled, once it has.
    var outcome: Result<JSONValue, BridgeError>? {
        get { outcomeBox.withLock { $0 } }
        set { outcomeBox.withLock { $0 = newValue } }
    }

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

extension Result where Failure == BridgeError {
    var failureCode: BridgeError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
