/// What a handler knows about the request it is answering: its id, its deadline, who sent it, and a way to
/// report progress. Cancellation (a `cancel` from the caller, or its `timeout_ms` passing) cancels the
/// handler's task.
///
/// For example:
/// ```swift
/// try host.handle(ImportFolder.self) { payload, request in
///     for (index, file) in files.enumerated() {
///         try Task.checkCancellation()
///         try await request.progress(ImportFolder.Progress(done: index + 1, total: files.count))
///     }
///     return ImportFolder.Result(files: files.count)
/// }
/// ```
public struct BridgeRequest: Sendable {
    /// The request's `id`; nil for an event, which is never answered.
    public let id: String?
    /// The action requested.
    public let action: String
    /// When the caller gives up (`timeout_ms` after arrival); nil when it set none.
    public let deadline: ContinuousClock.Instant?
    /// Whether the caller asked for progress; when not, `progress(_:)` sends nothing.
    public let wantsProgress: Bool
    /// On a host: the peer that sent the request, to call back into. Nil on a ``BridgePeer`` (the sender is its host).
    public let peer: RemotePeer?
    /// For an event a host broadcast on a topic (SPEC 7.15): that topic.
    public var topic: String? = nil
    /// The request's `idempotency_key`: for a job action, names the job it starts or attaches to (SPEC 7.16).
    public var idempotencyKey: String? = nil
    /// The W3C `traceparent` the request or event arrived with, when valid (SPEC 7.18). A bootstrapped tracer
    /// continues it in `ServiceContext.current`; calls the handler makes carry the trace either way.
    public var traceparent: String? = nil
    /// The W3C `tracestate` beside ``traceparent``, when valid.
    public var tracestate: String? = nil

    package let sink: ProgressSink?

    /// Sends one progress event to the caller, in order, before the response. It never waits for a slow reader:
    /// while the caller does not keep up, progress is coalesced (the newest payload kept, the ones it replaced
    /// counted in `skipped`; SPEC 7.13). Throws `CancellationError` when the request has been cancelled, and
    /// `handler_error` naming the path when the value cannot be carried in JSON (NaN, an infinity; SPEC 7.14).
    public func progress(_ value: JSONValue) async throws {
        try Task.checkCancellation()
        try value.checkCarriable(as: "progress", .handlerError)
        await sink?.send(value)
    }

    /// Sends one typed progress event.
    public func progress<P: Encodable>(_ value: P) async throws {
        try await progress(try JSONValueEncoder().encode(value))
    }
}

/// Where a handler's progress goes: the request's bounded queue, and one hand-off at a time to the link's thread.
package struct ProgressSink: Sendable {
    let link: Link
    let id: String
    let token: UInt64
    let queue: ProgressQueue

    func send(_ payload: JSONValue) async {
        while true {
            switch queue.offer(payload, congested: link.outbox.isStalled) {
            case .accepted(let handOff, let yield):
                if handOff { link.thread.perform { [link, id, token] in link.flushProgress(id: id, token: token) } }
                if yield { await Task.yield() }
                return
            case .full:
                await queue.room()
            }
        }
    }

    /// Sends progress read from a job's journal (SPEC 7.16): in order, with the job's own `seq`, never coalesced;
    /// waits while the outbox is congested, so a slow reader holds nothing but its place. False once the request
    /// has ended (answered, cancelled, its session gone).
    package func sendJournaled(_ messages: [ProgressMessage]) async -> Bool {
        await link.sendJournaled(messages, id: id, token: token)
    }
}

extension BridgeRequest {
    /// What a handler is given for `request`, received on a link. (In an extension: the memberwise initializer stays.)
    init(_ request: Message.Request, deadline: ContinuousClock.Instant?, peer: RemotePeer?, sink: ProgressSink?) {
        self.init(id: request.id, action: request.action, deadline: deadline, wantsProgress: request.wantsProgress,
                  peer: peer, sink: sink)
        idempotencyKey = request.idempotencyKey
        traceparent = request.trace?.traceparent
        tracestate = request.trace?.tracestate
    }
}
