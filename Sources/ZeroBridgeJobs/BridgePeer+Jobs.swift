import ZeroBridge

/// One progress message of a job as an attached caller receives it (SPEC 7.16): the job's own `seq`, so that a
/// caller that keeps the last one can attach again after it and miss nothing.
public struct JobProgress: Sendable, Hashable {
    /// The job's own number for this progress: attach again with `afterSeq` set to it to get what follows.
    public var seq: Int
    /// What the job reported.
    public var payload: JSONValue
    /// How many earlier messages the journal no longer held (pruned past its bound); nil when none were missed.
    public var skipped: Int?
}

extension BridgePeer {
    /// How long an attach waits for its job, unless told: jobs run long, and the Swift API always has a limit.
    public static let defaultAttachTimeout: Duration = .seconds(24 * 3600)

    /// Calls a job action with an idempotency key, streaming the job's progress (with its `seq`): a retry with the
    /// same key, after a lost connection or a host restart, attaches to the job the first call started instead of
    /// running it again (SPEC 7.16). Ending the call (cancelling, its timeout) only detaches from the job.
    ///
    /// For example:
    /// ```swift
    /// let call = peer.stream("importFolder", ["path": "/data"], idempotencyKey: "import-/data")
    /// for try await step in call.progress { lastSeq = step.seq }
    /// ```
    public func stream(_ action: String, _ payload: JSONValue = nil, idempotencyKey: String,
                       timeout: Duration? = nil) -> BridgeCall<JobProgress, JSONValue> {
        jobCall(action, payload, timeout: timeout ?? configuration.defaultTimeout, idempotencyKey: idempotencyKey)
    }

    /// Starts a job of `action` (or, with `key`, finds the one that key started) and answers at once, without
    /// waiting for it: `created` is false when the key named an existing job.
    public func startJob(_ action: String, _ payload: JSONValue = nil, key: String? = nil,
                         timeout: Duration? = nil) async throws -> (record: JobRecord, created: Bool) {
        var request: [String: JSONValue] = ["action": .string(action), "payload": payload]
        if let key { request["key"] = .string(key) }
        let answer = try await call("$job.start", .object(request), timeout: timeout)
        return (try JobRecord(json: answer), answer["created"] == true)
    }

    /// Attaches to a job: its progress after `afterSeq`, in order and each once, then live, then its result (or its
    /// error: the handler's, `cancelled`, `interrupted`, `journal_full`; `suspended` when the host stopped gracefully
    /// and resumes the job at its next start). Ending the call detaches; the job runs on. Another owner's job, named
    /// by its key, is `unknown_job`: keys are per owner (SPEC 7.16).
    public func attachJob(_ id: String, afterSeq: Int = 0, timeout: Duration = BridgePeer.defaultAttachTimeout)
        -> BridgeCall<JobProgress, JSONValue> {
        jobCall("$job.attach", ["job": .string(id), "after_seq": .int(afterSeq)], timeout: timeout, idempotencyKey: nil)
    }

    /// Attaches to the job that `key` started for `action`; see ``attachJob(_:afterSeq:timeout:)``.
    public func attachJob(action: String, key: String, afterSeq: Int = 0,
                          timeout: Duration = BridgePeer.defaultAttachTimeout) -> BridgeCall<JobProgress, JSONValue> {
        jobCall("$job.attach", ["action": .string(action), "key": .string(key), "after_seq": .int(afterSeq)],
                timeout: timeout, idempotencyKey: nil)
    }

    /// Cancels a running job (every caller attached to it gets `cancelled`); a finished one is left as it is.
    public func cancelJob(_ id: String, timeout: Duration? = nil) async throws -> JobRecord {
        try JobRecord(json: try await call("$job.cancel", ["job": .string(id)], timeout: timeout))
    }

    /// This peer's own jobs, newest first: the ones started with its CURVE key, or else under its name (an anonymous
    /// peer has none; SPEC 7.16).
    public func jobs(action: String? = nil, state: JobRecord.State? = nil, limit: Int = 100,
                     timeout: Duration? = nil) async throws -> [JobRecord] {
        var filter: [String: JSONValue] = ["limit": .int(limit)]
        if let action { filter["action"] = .string(action) }
        if let state { filter["state"] = .string(state.rawValue) }
        let answer = try await call("$job.list", .object(filter), timeout: timeout)
        guard case .array(let records)? = answer["jobs"] else {
            throw BridgeError(.badMessage, "$job.list did not answer with {\"jobs\": [...]}")
        }
        return try records.map(JobRecord.init(json:))
    }

    private func jobCall(_ action: String, _ payload: JSONValue, timeout: Duration,
                         idempotencyKey: String?) -> BridgeCall<JobProgress, JSONValue> {
        BridgeCall { [self] onProgress in
            try await call(action, payload, timeout: timeout, idempotencyKey: idempotencyKey) { message in
                onProgress(.success(JobProgress(seq: message.seq, payload: message.payload, skipped: message.skipped)))
            }
        }
    }
}

extension JobRecord {
    /// A record as `$job.start`, `$job.cancel` and `$job.list` write it (`protocol/schema/job.schema.json`).
    public init(json: JSONValue) throws {
        func bad(_ what: String) -> BridgeError { BridgeError(.badMessage, "a job record \(what): \(json)") }
        guard let id = json["job"]?.stringValue, let action = json["action"]?.stringValue,
              let state = json["state"]?.stringValue.flatMap(State.init(rawValue:)),
              let lastSeq = json["last_seq"]?.intValue, let runs = json["runs"]?.intValue,
              let createdMs = json["created_ms"]?.intValue else { throw bad("lacks job, action, state, last_seq, runs or created_ms") }
        var error: BridgeError?
        if let body = json["error"] {
            guard let code = body["code"]?.stringValue else { throw bad("has an error without a code") }
            error = BridgeError(.init(code), body["message"]?.stringValue ?? "", data: body["data"])
        }
        self.init(id: id, action: action, key: json["key"]?.stringValue, state: state, lastSeq: lastSeq, runs: runs,
                  createdMs: createdMs, finishedMs: json["finished_ms"]?.intValue, error: error)
    }
}
