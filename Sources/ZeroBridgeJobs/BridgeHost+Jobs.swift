import ZeroBridge
import Foundation

extension BridgeHost {
    /// Serves a typed action as a **job** (SPEC 7.16): a request for it starts a journaled job that outlives the
    /// request and its session, and streams it; any peer can attach to it later (`$job.attach`), by its id or by
    /// the request's idempotency key, and get the progress it missed, then the rest, then the result. Register
    /// job actions before `start()`, so that jobs a killed host left running can resume from their checkpoint.
    ///
    /// For example:
    /// ```swift
    /// try host.job(ImportFolder.self) { payload, job in
    ///     for (index, file) in files.enumerated() {
    ///         try await job.progress(ImportFolder.Progress(done: index + 1, total: files.count))
    ///     }
    ///     return ImportFolder.Result(files: files.count)
    /// }
    /// ```
    public func job<A: BridgeAction>(_ action: A.Type, replacing: Bool = false,
                                     _ body: @escaping @Sendable (A.Payload, BridgeJob) async throws -> A.Result) throws {
        try job(A.name, describedAs: ActionDescription(A.self), replacing: replacing) { payload, job in
            try A.encodeResult(try await body(try A.decodePayload(payload), job))
        }
    }

    /// Serves an untyped action as a job; see ``job(_:replacing:_:)-(A.Type,_,_)``.
    public func job(_ action: String, describedAs description: ActionDescription = .init(), replacing: Bool = false,
                    _ body: @escaping @Sendable (JSONValue, BridgeJob) async throws -> JSONValue) throws {
        let service = try jobService()
        var description = description
        description.isJob = true
        try handlers.add(action, replacing: replacing, describedAs: description) { [service] payload, request in
            let (record, created) = try await service.start(action, payload: payload, key: request.idempotencyKey,
                                                            owner: JobService.owner(of: request.peer))
            return try await service.attach(record.id, afterSeq: 0, request: request, startedIt: created)
        }
        service.register(action, body)
    }

    /// The journal's record of one job, or nil when the host has no such job.
    public func jobRecord(_ id: String) async throws -> JobRecord? {
        guard let service = installedExtension(JobService.self) else { return nil }
        return try await service.list(.init(job: id, limit: 1)).first
    }

    /// The host's job service, made (with the reserved `$job.*` actions) when the first job action is registered.
    private func jobService() throws -> JobService {
        let (service, made) = try installExtension(JobService.self) {
            try JobService(configuration: configuration.jobs, tracedRequests: configuration.tracedRequests,
                           logger: configuration.logger)
        }
        if made {
            try serveJobActions(service)
            // Registered after start: nothing has recovered the journal yet.
            if boundEndpoint != nil { try service.recoverNow() }
        }
        return service
    }

    /// `$job.start`, `$job.attach`, `$job.cancel` and `$job.list` (SPEC 7.16), with their payloads checked.
    private func serveJobActions(_ service: JobService) throws {
        try handlers.add("$job.start", replacing: true) { payload, request in
            let fields = try JobPayload(payload, "$job.start", allowed: ["action", "payload", "key"])
            guard let action = try fields.name("action") else { throw fields.missing("action") }
            let (record, created) = try await service.start(action, payload: fields.object["payload"] ?? .null,
                                                            key: try fields.name("key"), owner: JobService.owner(of: request.peer))
            guard case .object(var json) = record.json else { return record.json }
            json["created"] = .bool(created)
            return .object(json)
        }
        try handlers.add("$job.attach", replacing: true) { payload, request in
            let fields = try JobPayload(payload, "$job.attach", allowed: ["job", "action", "key", "after_seq"])
            let id = try await service.resolve(id: try fields.name("job"), action: try fields.name("action"),
                                               key: try fields.name("key"), owner: JobService.owner(of: request.peer))
            return try await service.attach(id, afterSeq: try fields.count("after_seq") ?? 0, request: request)
        }
        try handlers.add("$job.cancel", replacing: true) { payload, request in
            let fields = try JobPayload(payload, "$job.cancel", allowed: ["job", "action", "key"])
            let owner = JobService.owner(of: request.peer)
            let id = try await service.resolve(id: try fields.name("job"), action: try fields.name("action"),
                                               key: try fields.name("key"), owner: owner)
            return try await service.cancel(id, owner: owner).json
        }
        try handlers.add("$job.list", replacing: true) { payload, request in
            let fields = try JobPayload(payload == .null ? [:] : payload, "$job.list", allowed: ["action", "state", "job", "limit"])
            var state: JobRecord.State?
            if let name = try fields.name("state") {
                guard let known = JobRecord.State(rawValue: name) else {
                    throw BridgeError(.invalidPayload, "$job.list: 'state' is one of "
                                      + JobRecord.State.allCases.map(\.rawValue).joined(separator: ", "))
                }
                state = known
            }
            let limit = try fields.count("limit") ?? 100
            guard (1...1000).contains(limit) else { throw BridgeError(.invalidPayload, "$job.list: 'limit' is 1 to 1000") }
            let filter = JobJournal.Filter(action: try fields.name("action"), state: state, job: try fields.name("job"),
                                           owner: JobService.owner(of: request.peer), limit: limit)
            // A peer lists its own jobs; an anonymous one has no identity to own any by (SPEC 7.16).
            let records = filter.owner == "" ? [] : try await service.list(filter)
            return ["jobs": .array(records.map(\.json))]
        }
    }
}

/// The payload of a `$job.*` request, read strictly: an object, its members of the right types.
private struct JobPayload {
    let object: [String: JSONValue]
    let action: String

    init(_ payload: JSONValue, _ action: String, allowed: Set<String>) throws {
        guard case .object(let object) = payload else {
            throw BridgeError(.invalidPayload, "\(action) takes an object with " + allowed.sorted().joined(separator: ", "))
        }
        self.object = object
        self.action = action
    }

    /// A name (1..128 characters), when present.
    func name(_ field: String) throws -> String? {
        guard let value = object[field] else { return nil }
        guard case .string(let text) = value, BridgeName.isValid(text) else {
            throw BridgeError(.invalidPayload, "\(action): '\(field)' is a string of 1 to 128 characters")
        }
        return text
    }

    /// A non-negative integer, when present.
    func count(_ field: String) throws -> Int? {
        guard let value = object[field] else { return nil }
        guard case .int(let number) = value, number >= 0 else {
            throw BridgeError(.invalidPayload, "\(action): '\(field)' is a non-negative integer")
        }
        return number
    }

    func missing(_ field: String) -> BridgeError {
        BridgeError(.invalidPayload, "\(action): '\(field)' is required")
    }
}

/// The host's start recovers the journal; its shutdown ends the jobs first, so that requests attached to them are
/// answered with the jobs' outcomes rather than drained.
extension JobService: HostExtension {
    func hostStarting(_ host: BridgeHost) throws { try recoverNow() }
    func hostDraining(_ host: BridgeHost) async { await stop(grace: host.configuration.drainTimeout) }
    /// `$stats` (SPEC 7.8): how many jobs the journal holds in each state.
    func stats() async throws -> [String: JSONValue] {
        ["jobs": .object(try await journal.countsByState().mapValues(JSONValue.int))]
    }
}
