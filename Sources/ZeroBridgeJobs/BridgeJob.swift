import ZeroBridge

/// What a job's handler knows about its job (SPEC 7.16): its id, the checkpoint it resumes from, and a way to
/// report progress, which is journaled before any reader sees it. Cancellation (`$job.cancel`, the host shutting
/// down) cancels the handler's task; a caller detaching does not.
///
/// For example:
/// ```swift
/// try host.job(ImportFolder.self) { payload, job in
///     let start = try job.checkpoint(as: Int.self) ?? 0          // nil on the first run
///     for index in start ..< files.count {
///         try await importFile(files[index])
///         // journaled with its checkpoint in one transaction: a restarted host resumes after this file
///         try await job.progress(ImportFolder.Progress(done: index + 1, total: files.count), checkpoint: index + 1)
///     }
///     return ImportFolder.Result(files: files.count)
/// }
/// ```
public struct BridgeJob: Sendable {
    /// The job's id, as `$job.*` and the peers' job APIs name it.
    public let id: String
    /// The action the job serves.
    public let action: String
    /// The idempotency key it was started with.
    public let key: String?
    /// The checkpoint saved by an earlier run that a host restart interrupted; nil on the first run.
    public let resumedFrom: JSONValue?

    let live: LiveJob
    let journal: JobJournal

    /// Reports progress: journaled (with `checkpoint`, when given, in the same transaction), then sent to every
    /// attached caller that asked for progress. Waits for the journal, never for a reader. Throws
    /// `CancellationError` once the job has been cancelled, `handler_error` for a value JSON cannot carry.
    public func progress(_ value: JSONValue, checkpoint: JSONValue? = nil) async throws {
        try Task.checkCancellation()
        try value.checkCarriable(as: "progress", .handlerError)
        try checkpoint?.checkCarriable(as: "checkpoint", .handlerError)
        let seq = try await journal.appendProgress(job: id, payload: value, checkpoint: checkpoint)
        live.advance(to: seq)
    }

    /// Reports typed progress, optionally with a typed checkpoint.
    public func progress<P: Encodable>(_ value: P) async throws {
        try await progress(try JSONValueEncoder().encode(value))
    }

    /// Reports `value` and saves `checkpoint` together: a host restarted after this resumes the job from
    /// `checkpoint` rather than from an earlier one.
    public func progress<P: Encodable, C: Encodable>(_ value: P, checkpoint: C) async throws {
        try await progress(try JSONValueEncoder().encode(value), checkpoint: try JSONValueEncoder().encode(checkpoint))
    }

    /// Saves where to resume from if the host stops, without reporting progress. A job with a checkpoint is run
    /// again from it after a restart (``resumedFrom``) instead of ending `interrupted`.
    public func checkpoint(_ value: JSONValue) async throws {
        try value.checkCarriable(as: "checkpoint", .handlerError)
        try await journal.saveCheckpoint(job: id, value)
    }

    /// Saves `value` as the point a restarted host resumes the job from (``checkpoint(as:)`` reads it).
    public func checkpoint<C: Encodable>(_ value: C) async throws {
        try await checkpoint(try JSONValueEncoder().encode(value))
    }

    /// The checkpoint this run resumes from, typed; nil on the first run.
    public func checkpoint<C: Decodable>(as type: C.Type) throws -> C? {
        try resumedFrom.map { try JSONValueDecoder().decode(C.self, from: $0) }
    }
}
