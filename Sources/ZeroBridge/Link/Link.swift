import Foundation  // ContiguousBytes: received frames and the parts of a batch read in place
import Logging
import ZeroMQ
import Synchronization

/// One conversation with one other side, the symmetric core that host sessions and peers share: requests sent
/// with ids and deadlines, each request received answered exactly once, progress in order, cancellation, and
/// the liveness stamps that heartbeats read.
///
/// Its state is confined to its socket thread: the async entry points hand their work to ``thread``.
final class Link: @unchecked Sendable {
    struct Limits: Sendable {
        /// Requests from the other side running at once; more are answered `overloaded`.
        var maxInFlight: Int
        /// What every session of a host runs at once, shared by their links; nil on a peer.
        var hostWide: HostWideInFlight? = nil
    }

    /// Requests and events running across all of a host's sessions, and the most it runs at once: the per-session
    /// limit times the number of connections would otherwise bound memory only by the open-file limit.
    /// Confined to the host's socket thread, like the links that count in it.
    final class HostWideInFlight: @unchecked Sendable {
        let limit: Int
        fileprivate(set) var running = 0
        init(limit: Int) { self.limit = limit }
    }

    let thread: SocketThread
    let handlers: HandlerTable
    let limits: Limits
    let logger: Logger
    /// What the owner counts (issue 27); shared by a host's sessions, on the same thread.
    let telemetry: Telemetry
    /// The bootstrapped tracer handlers run in spans of (SPEC 7.18), as it was when the link opened; nil without one.
    let tracer = bootstrappedTracer()
    /// Which requests and events get a span of `tracer` (the owner's configuration).
    var tracedRequests = TracedRequests.all
    /// How the other side is connected: the `transport` label of the bytes counted. Only on the thread.
    var transport = Telemetry.Transport.zmq
    /// Sends one message (its body and attachment frames) to the other side through the link's outbox; the owner
    /// adds the envelope. On the thread.
    private let transmit: ([[UInt8]], Outbox) -> Void
    /// What this conversation has queued for the socket (SPEC 7.13).
    let outbox = Outbox()
    /// Progress bytes on their way from this conversation's handlers to the thread.
    let progressBudget = ProgressBudget()
    /// Broadcast bytes sent that the other side has not shown it read (SPEC 7.15). On the thread.
    var broadcasts = BroadcastWindow()
    /// The handle given to handlers as ``BridgeRequest/peer`` (on a host). It holds the link, so ``close(_:)``
    /// lets go of it.
    var remote: RemotePeer?

    private let counter = Atomic<UInt64>(0)
    /// Whether `calls` holds any, for callers on other threads (``call(_:_:timeout:idempotencyKey:onProgressMessage:)``):
    /// written only when that changes, so that callers at 1,024 in flight read it without contending for it (a count
    /// each caller added to and took from cost about 3% there).
    private let hasCalls = Atomic<Bool>(false)
    /// How many requests `requests` holds, for handlers' tasks ending on other threads: the response to the only one
    /// is sent by its task when the thread waits in poll (no wake-up), the others' by the thread, in bursts.
    private let requestCount = Atomic<Int>(0)
    private let closedFlag = Atomic<Bool>(false)

    // Confined to the thread.
    private var calls: [String: OutgoingCall] = [:]
    private var requests: [String: IncomingRequest] = [:] {
        didSet { requestCount.store(requests.count, ordering: .relaxed) }  // no oldValue: changed in place
    }
    /// Event handlers running, which count toward `maxInFlight` with the requests (SPEC 7.13).
    private var events: [UInt64: Task<Void, Never>] = [:]
    /// Calls made while the outbox was congested, sent when it drains (unless ended meanwhile).
    private var heldCalls: [(id: String, body: [[UInt8]])] = []
    /// Requests whose progress waits for the outbox to drain.
    private var heldProgress: [String] = []
    private var closedWith: BridgeError?
    /// While false (a host shutting down), new requests are answered `overloaded`.
    var accepting = true
    /// Whether a handler's unexpected error reaches the caller with its description, not only its type (opt-in).
    var revealsErrorDescriptions = false
    /// When the other side was last heard from, and when this side last sent: dated by the heartbeat's look
    /// (``liveness(at:interval:)``), which reads the clock anyway, not per message; `heard()` and `send` only note
    /// that something happened since. A date is thus late by at most a tick (a quarter heartbeat at most), so a
    /// silence is never taken for longer than it was.
    private var heardAt = ContinuousClock.now
    private var sentAt = ContinuousClock.now
    private var heardSinceLook = false
    private var sentSinceLook = false
    private var lastPing: ContinuousClock.Instant?
    /// This link, referred to weakly by its timers: one box for the link, which each deadline names with its key,
    /// where a `[weak self]` closure per deadline allocated one per call and per request.
    private let weakly = WeakLink()

    init(thread: SocketThread, handlers: HandlerTable, limits: Limits, logger: Logger, telemetry: Telemetry,
         transmit: @escaping ([[UInt8]], Outbox) -> Void) {
        self.thread = thread
        self.handlers = handlers
        self.limits = limits
        self.logger = logger
        self.telemetry = telemetry
        self.transmit = transmit
        outbox.onDrained = { [weak self] in self?.resumeFlow() }
        outbox.onRefused = { [weak self] in self?.wakeHeldProgress() }
        weakly.link = self
    }

    var isIdle: Bool { calls.isEmpty && requests.isEmpty }
    var requestsInFlight: Int { requests.count }
    /// Readable from any thread: calls made now fail at once.
    var isClosed: Bool { closedFlag.load(ordering: .acquiring) }

    // MARK: Sending requests (any thread)

    /// Sends a request and waits for its response, failing with `timeout` at the deadline, `cancelled` when the
    /// calling task is cancelled (the other side is told with `cancel`), or the link's closing error.
    func call(_ action: String, _ payload: JSONValue, timeout: Duration,
              onProgress: (@Sendable (JSONValue) -> Void)?) async throws -> JSONValue {
        var forward: (@Sendable (Message.Progress) -> Void)?
        if let onProgress { forward = { message in onProgress(message.payload) } }
        return try await call(action, payload, timeout: timeout, idempotencyKey: nil, onProgressMessage: forward)
    }

    /// ``call(_:_:timeout:onProgress:)`` with an idempotency key (a job action: SPEC 7.16), handing each progress
    /// message over whole (its `seq`, which for a job is the job's, and `skipped`).
    func call(_ action: String, _ payload: JSONValue, timeout: Duration, idempotencyKey: String?,
              onProgressMessage onProgress: (@Sendable (Message.Progress) -> Void)?) async throws -> JSONValue {
        let id = String(counter.add(1, ordering: .relaxed).newValue)
        let timeoutMs = max(1, Int((timeout / .milliseconds(1)).rounded(.up)))
        let body = try Message.request(.init(id: id, action: action, payload: payload, timeoutMs: timeoutMs,
                                         deadline: WallClock.milliseconds + timeoutMs,
                                         wantsProgress: onProgress != nil, idempotencyKey: idempotencyKey,
                                         trace: TraceHeaders.current))
            .frames(refusing: payload, at: "payload", as: .invalidPayload)  // SPEC 7.14: before anything is sent
        let call = StartingCall(link: self, id: id, body: body, deadline: ContinuousClock.now + timeout,
                                onProgress: onProgress)
        let alone = !hasCalls.load(ordering: .relaxed)
        return try await withTaskCancellationHandler {
            // Unchecked: every path resumes it once, after taking the call out of `calls` (or before putting it in),
            // on the thread; the checked kind cost an allocation and an atomic per call.
            try await withUnsafeThrowingContinuation { continuation in
                call.continuation = continuation
                // The link's only call is sent from here when the thread waits in poll, which saves waking it. Calls
                // made while others are in flight go to the thread, which sends them in bursts: sent one by one from
                // their callers, each woke libzmq's I/O thread, a fifth fewer calls a second at 64 in flight.
                if alone { thread.performHere(call) } else { thread.perform(call) }
            }
        } onCancel: {
            // Cancellation may be handed over before the start, or after the end; the call tells on the thread.
            thread.perform { [self] in cancelCall(call) }
        }
    }

    /// Sends an event (never answered). Throws `peer_lost` when the link has closed, `overloaded` while the
    /// outbox holds more than its bound (SPEC 7.13).
    func post(_ action: String, _ payload: JSONValue) throws {
        if let error = closedError { throw error }
        guard outbox.queuedBytes <= Outbox.maxQueuedBytes else {
            throw BridgeError(.overloaded, "\(outbox.queuedBytes) bytes are queued for the other side; the event was not sent")
        }
        let body = try Message.event(.init(action: action, payload: payload, trace: TraceHeaders.current))
            .frames(refusing: payload, at: "payload", as: .invalidPayload)
        thread.perform { [self] in
            if closedWith == nil { send(body) }
        }
    }

    private var closedError: BridgeError? {
        isClosed ? BridgeError(.peerLost, "the other side is gone") : nil
    }

    // MARK: On the thread

    /// Sends an encoded message (``Message/frames()``) and notes it, for heartbeats.
    func send(_ frames: [[UInt8]]) {
        sentSinceLook = true
        telemetry.sent(bytes: frames.reduce(0) { $0 + $1.count }, over: transport)
        transmit(frames, outbox)
    }

    func send(_ message: Message) { send(message.frames()) }

    fileprivate func start(_ call: StartingCall) {
        let id = call.id, body = call.body, continuation = call.continuation!
        call.body = []  // not kept until the call ends: its task holds the call as long
        if call.isCancelled {
            continuation.resume(throwing: BridgeError(.cancelled, "the call was cancelled"))
            return
        }
        if let closedWith {
            continuation.resume(throwing: closedWith)
            return
        }
        let timer = thread.timers.schedule(at: call.deadline, telling: weakly, key: id)
        calls[id] = OutgoingCall(continuation: continuation, onProgress: call.onProgress, timer: timer)
        if calls.count == 1 { hasCalls.store(true, ordering: .relaxed) }
        // Into a congested outbox a call waits for room, up to its deadline (SPEC 7.13); one that ends before it
        // is sent is never sent.
        if outbox.isCongested { heldCalls.append((id, body)) } else { send(body) }
    }

    fileprivate func expireCall(id: String) {
        // Ids are unique per link, so a call still under this id is the one this timer was set for.
        guard let call = takeCall(id) else { return }
        call.continuation.resume(throwing: BridgeError(.timeout, "no response within the call's timeout"))
    }

    /// Takes a call out of `calls`, telling callers (``hasCalls``) when none is left.
    private func takeCall(_ id: String) -> OutgoingCall? {
        guard let call = calls.removeValue(forKey: id) else { return nil }
        if calls.isEmpty { hasCalls.store(false, ordering: .relaxed) }
        return call
    }

    private func cancelCall(_ starting: StartingCall) {
        starting.isCancelled = true
        let id = starting.id
        guard let call = takeCall(id) else { return }  // not started yet, or already ended
        thread.timers.cancel(call.timer)
        send(.cancel(id: id))
        call.continuation.resume(throwing: BridgeError(.cancelled, "the call was cancelled"))
    }

    /// Handles one message of the conversation (hello, welcome and bye are the owner's).
    func receive(_ message: Message) {
        switch message {  // heard already: `read` noted it
        case .request(let request): receive(request)
        case .response(let response): receive(response)
        case .progress(let progress): receive(progress)
        case .event(let event): receive(event)
        case .cancel(let id): receiveCancel(id: id)
        case .ping: send(.pong)
        case .pong: broadcasts.ponged()
        case .hello, .welcome, .bye: break
        }
    }

    /// Notes that the other side said something, even if it was not understood.
    func heard() { heardSinceLook = true }

    /// When the other side was last heard from, as of `now` (not earlier than anything heard on the thread): what
    /// was heard since the last look counts as heard now.
    func lastHeard(asOf now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        if heardSinceLook {
            heardSinceLook = false
            heardAt = now
        }
        return heardAt
    }

    private func lastSent(asOf now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        if sentSinceLook {
            sentSinceLook = false
            sentAt = now
        }
        return sentAt
    }

    /// What heartbeats call for now, with `interval` the heartbeat in force.
    enum Liveness {
        case alive
        /// Nothing sent for an interval (or a long silence not yet asked about): send a ping.
        case ping
        /// Nothing heard for three intervals, and a ping has gone unanswered for a whole interval.
        case lost(silence: Duration)
    }

    /// The heartbeat rule, one for host sessions and peers. A side is declared lost only after it was pinged and
    /// stayed silent: a thread kept from running for a while must ask before it gives up on a healthy peer.
    func liveness(at now: ContinuousClock.Instant, interval: Duration) -> Liveness {
        let heard = lastHeard(asOf: now)
        let silence = now - heard
        let askedSinceHeard = lastPing.map { $0 > heard } ?? false
        if silence >= interval * 3 {
            guard askedSinceHeard, let pinged = lastPing else { return .ping }
            return now - pinged >= interval ? .lost(silence: silence) : .alive
        }
        return now - lastSent(asOf: now) >= interval ? .ping : .alive
    }

    func sendPing() {
        lastPing = .now
        broadcasts.pinged()
        send(.ping)
    }

    private func receive(_ response: Message.Response) {
        // Responses to unknown or already-ended calls (late, after a timeout or cancel) are dropped.
        guard let id = response.id, let call = takeCall(id) else { return }
        thread.timers.cancel(call.timer)
        call.continuation.resume(with: response.outcome.mapError { $0 as Error })
    }

    private func receive(_ progress: Message.Progress) {
        // One hash lookup, and the call updated in place rather than copied out and stored back.
        guard let index = calls.index(forKey: progress.id), progress.seq > calls.values[index].lastSeq else { return }
        calls.values[index].lastSeq = progress.seq
        calls.values[index].onProgress?(progress)
    }

    private func receive(_ request: Message.Request) {
        if requests[request.id] != nil {
            return refuse(request.id, BridgeError(.duplicateID, "a request with id '\(request.id)' is already in flight"))
        }
        guard accepting, closedWith == nil else {
            return refuse(request.id, BridgeError(.overloaded, "shutting down; not taking new requests"))
        }
        guard requests.count + events.count < limits.maxInFlight else {
            return refuse(request.id, BridgeError(.overloaded, "more than \(limits.maxInFlight) requests and events in flight"))
        }
        if let hostWide = limits.hostWide, hostWide.running >= hostWide.limit {
            return refuse(request.id, BridgeError(.overloaded, "the host runs its most requests and events at once (\(hostWide.limit), all sessions)"))
        }
        // At most once after giving up (SPEC 7.3): a request that arrives after its caller's deadline never starts.
        let arrivedAt = ContinuousClock.now
        let wallNow = WallClock.milliseconds
        if let deadline = request.deadline, deadline <= wallNow {
            let late = wallNow - deadline
            if let timeoutMs = request.timeoutMs, late > timeoutMs {
                logger.warning("a request arrived long after its deadline: is the other side's clock behind this one?",
                               metadata: ["action": "\(request.action)", "late_ms": "\(late)", "timeout_ms": "\(timeoutMs)"])
            }
            return refuse(request.id, BridgeError(.timeout, "the request arrived \(late) ms after its deadline; it was not started"))
        }
        let handler: HandlerTable.Handler?, inline: HandlerTable.InlineHandler?
        switch handlers.lookup(request.action) {
        case .found(let found): (handler, inline) = (found, nil)
        case .inline(let found): (handler, inline) = (nil, found)
        case .gone: return refuse(request.id, BridgeError(.handlerGone, "the handler for '\(request.action)' has been released"))
        case .unknown: return refuse(request.id, BridgeError(.unknownAction, "no handler for '\(request.action)'"))
        }

        // The earlier of the two limits the caller set (SPEC 7.3).
        var deadline = request.timeoutMs.map { arrivedAt + .milliseconds($0) }
        if let wallDeadline = request.deadline {
            let byDeadline = arrivedAt + .milliseconds(wallDeadline - wallNow)
            deadline = min(deadline ?? byDeadline, byDeadline)
        }
        // The action is the handler table's name (it was found there), so its metrics' label is bounded.
        let action = telemetry.requestStarted(request.action)
        let startedAt = telemetry.isRecording ? arrivedAt : nil
        if let inline, !request.wantsProgress {
            // Answered before the next message is read, with no progress to send first: nothing can look it up by
            // its id meanwhile (a cancel, a duplicate, a timer), so it is never entered in `requests`.
            let context = BridgeRequest(request, deadline: deadline, peer: remote, sink: nil)
            let outcome = inlineOutcome(request, inline, context)
            telemetry.requestEnded(action, failure: Self.code(of: outcome), startedAt: startedAt)
            return send(Self.responseBody(request.id, outcome))
        }
        let token = counter.add(1, ordering: .relaxed).newValue
        let progress = request.wantsProgress ? ProgressQueue(budget: progressBudget) : nil
        let entry = IncomingRequest(token: token, action: action, progress: progress, startedAt: startedAt)
        requests[request.id] = entry
        limits.hostWide?.running += 1
        if let deadline, inline == nil {  // an inline handler ends before any timer could fire
            // Captures the id only: capturing `request` kept its payload alive until the deadline.
            let id = request.id
            entry.timer = thread.timers.schedule(at: deadline, telling: weakly, key: id, token: token)
        }
        // A constant for the closures below: a captured `var` costs a heap box per request.
        let context = BridgeRequest(request, deadline: deadline, peer: remote,
                                    sink: progress.map { ProgressSink(link: self, id: request.id, token: token, queue: $0) })
        let payload = request.payload
        if let inline {
            let outcome = inlineOutcome(request, inline, context)
            return finish(request.id, token: token, body: Self.responseBody(request.id, outcome), failure: Self.code(of: outcome))
        }
        guard let handler else { return }
        let session = remote?.sessionID  // read here, on the thread
        let peerName = remote?.name
        let reveals = revealsErrorDescriptions
        entry.task = Task { [self] in
            let outcome = await withHandlerSpan(request.action, ofKind: .server, received: request.trace,
                                                tracer: tracer, following: tracedRequests) { span -> Result<JSONValue, BridgeError> in
                let outcome: Result<JSONValue, BridgeError>
                do {
                    // A cancel read before the task began: the handler never starts (SPEC 7.3).
                    try Task.checkCancellation()
                    logStarted(request, session: session, to: logger)
                    outcome = .success(try await handler(payload, context))
                } catch {
                    outcome = .failure(failure(error, of: request, peer: peerName, session: session, reveals: reveals,
                                               loggingTo: logger))
                }
                if case .failure(let error) = outcome { span.recordFailure(error) }
                return outcome
            }
            respondFromTask(request.id, token: token, outcome)
        }
    }

    /// On a handler's task, once it returned: its response is encoded there and sent. Alone, it is sent from there
    /// when the thread waits in poll, which saves waking it (as a lone call is); among others, by the thread: sent
    /// one by one from their tasks, each would wake libzmq's I/O thread.
    private func respondFromTask(_ id: String, token: UInt64, _ outcome: Result<JSONValue, BridgeError>) {
        let body = Self.responseBody(id, outcome)
        let failedWith = Self.code(of: outcome)
        let respond: @Sendable () -> Void = { [self] in finish(id, token: token, body: body, failure: failedWith) }
        if requestCount.load(ordering: .relaxed) == 1 { thread.performHere(respond) } else { thread.perform(respond) }
    }

    /// An inline handler's outcome: run on the thread as read, no task and no hand-off (handleInline), in its span
    /// all the same.
    private func inlineOutcome(_ request: Message.Request, _ inline: HandlerTable.InlineHandler,
                               _ context: BridgeRequest) -> Result<JSONValue, BridgeError> {
        withInlineHandlerSpan(request.action, ofKind: .server, received: request.trace,
                              tracer: tracer, following: tracedRequests) { span -> Result<JSONValue, BridgeError> in
            logStarted(request, session: remote?.sessionID, to: logger)
            let outcome: Result<JSONValue, BridgeError>
            do {
                outcome = .success(try inline(request.payload, context))
            } catch {
                outcome = .failure(failure(error, of: request, peer: remote?.name, session: remote?.sessionID,
                                           reveals: revealsErrorDescriptions, loggingTo: logger))
            }
            if case .failure(let error) = outcome { span.recordFailure(error) }
            return outcome
        }
    }

    /// The debug log names every request started, by session and id (what the partition tests read).
    ///
    /// This and `failure(_:of:peer:session:reveals:loggingTo:)` are never inlined: inlined into a handler's task,
    /// their log metadata's temporaries doubled the task's first frame (864 -> 1,728 bytes), past what the task's
    /// first slab holds, and every request in flight cost another 1,776-byte allocation (17 MB more at 10,000).
    @inline(never)
    private func logStarted(_ request: Message.Request, session: String?, to logger: Logger) {
        logger.debug("request started", metadata: withTraceID(["id": "\(request.id)", "action": "\(request.action)",
                                                               "session": "\(session ?? "-")"]))
    }

    /// What a handler's error answers. Not meant for the caller unless the app chose it: the log has it all, the
    /// caller its type (or what the app chose). Never inlined: see `logStarted(_:session:to:)`.
    @inline(never)
    private func failure(_ error: Error, of request: Message.Request, peer: String?, session: String?,
                         reveals: Bool, loggingTo logger: Logger) -> BridgeError {
        switch error {
        case let error as BridgeError: return error
        case is CancellationError: return BridgeError(.cancelled, "the handler was cancelled")
        default:
            if !BridgeError.isAppChosen(error) {
                logger.error("handler failed", metadata: withTraceID([
                    "action": "\(request.action)", "id": "\(request.id)", "peer": "\(peer ?? "-")",
                    "session": "\(session ?? "-")", "type": "\(BridgeError.errorTypeName(error))", "error": "\(error)",
                ]))
            }
            return BridgeError.answering(error, revealingDescription: reveals)
        }
    }

    /// A response's frames, encoded once; a result JSON cannot carry answers `handler_error` (SPEC 7.14).
    private static func responseBody(_ id: String, _ outcome: Result<JSONValue, BridgeError>) -> [[UInt8]] {
        let response = Message.response(.init(id: id, outcome: outcome))
        do throws(BridgeError) {
            let (value, root): (JSONValue, String) = switch outcome {
            case .success(let result): (result, "result")
            case .failure(let error): (error.data ?? nil, "error.data")
            }
            return try response.frames(refusing: value, at: root, as: .handlerError)
        } catch {
            return Message.response(.init(id: id, outcome: .failure(error))).frames()
        }
    }

    private static func code(of outcome: Result<JSONValue, BridgeError>) -> BridgeError.Code? {
        if case .failure(let error) = outcome { error.code } else { nil }
    }

    private func finish(_ id: String, token: UInt64, body: [[UInt8]], failure: BridgeError.Code?) {
        guard let entry = requests[id], entry.token == token else { return }  // already answered
        // Progress the handler reported goes before its response, congested or not: at most 64 payloads.
        sendProgress(id, entry)
        entry.releaseJournaled()
        requests[id] = nil
        limits.hostWide?.running -= 1
        telemetry.requestEnded(entry.action, failure: failure, startedAt: entry.startedAt)
        if let timer = entry.timer { thread.timers.cancel(timer) }
        send(body)
    }

    /// The request's time limit has passed; its timer has run, so there is none left to cancel.
    fileprivate func expireRequest(_ id: String, token: UInt64) {
        guard let entry = requests[id], entry.token == token else { return }
        entry.timer = nil
        end(id, BridgeError(.timeout, "the handler did not finish within the request's time limit"))
    }

    /// Answers a request in flight with an error now and cancels its handler. Progress it reported and that is
    /// not sent yet goes first (none is dropped silently, and nothing may follow the response): at most 64.
    private func end(_ id: String, _ error: BridgeError) {
        guard let entry = requests[id] else { return }
        sendProgress(id, entry)
        requests[id] = nil
        limits.hostWide?.running -= 1
        telemetry.requestEnded(entry.action, failure: error.code, startedAt: entry.startedAt)
        if let timer = entry.timer { thread.timers.cancel(timer) }
        entry.progress?.discard()
        entry.releaseJournaled()
        entry.task?.cancel()
        answer(id, error)
    }

    /// Answers a request, or a message that cannot be taken, with an error response. An answer with `"id": null`
    /// answers nothing a caller waits for: past the outbox's bound, to a side that sends what is refused and reads
    /// nothing (a batch of 1,000 empty messages makes 1,000 answers), it is logged, not queued (SPEC 7.13, decision 54).
    func answer(_ id: String?, _ error: BridgeError) {
        guard id != nil || outbox.queuedBytes <= Outbox.maxQueuedBytes else {
            return logger.debug("answer not queued: the other side reads nothing and 8 MiB wait for it",
                                metadata: ["code": "\(error.code.rawValue)"])
        }
        send(.response(.init(id: id, outcome: .failure(error))))
    }

    /// Answers a message refused before any handler ran, and counts the refusal.
    func refuse(_ id: String?, _ error: BridgeError) {
        telemetry.refused(error.code)
        answer(id, error)
    }

    /// Reads one message as the other side sent it (signature, body, attachments). What cannot be understood, or
    /// is larger than `maxBytes`, is answered here (rule 5, rule 10) and nil returned; the caller handles the rest.
    /// `frames` are received frames, or the parts of a message in a batch read in place.
    func read<Parts: RandomAccessCollection>(_ frames: Parts, maxBytes: Int) -> Message? where Parts.Element: ContiguousBytes {
        heard()
        guard frames.count >= 2 else {
            refuse(nil, BridgeError(.badMessage, "a message has a signature frame and a body frame; got \(frames.count) frame(s)"))
            return nil
        }
        let body = frames[frames.index(after: frames.startIndex)]
        let size = frames.dropFirst().reduce(0) { $0 + $1.withUnsafeBytes(\.count) }
        guard size <= maxBytes else {
            refuse(body.withUnsafeBytes { Message.readableID(in: $0) },
                   BridgeError(.tooLarge, "the message has \(size) bytes; the limit is \(maxBytes)"))
            return nil
        }
        telemetry.received(bytes: size, over: transport)
        let attachments = frames.count > 2 ? frames.dropFirst(2).map { $0.withUnsafeBytes { Array($0) } } : []
        switch body.withUnsafeBytes({ Message.decode($0, attachments: attachments) }) {
        case .failure(let failure):
            refuse(failure.id, failure.error)
            return nil
        case .success(let message):
            return message
        }
    }

    private func receiveCancel(id: String) {
        // A cancel of an unknown or answered request is ignored: its one response has gone already.
        end(id, BridgeError(.cancelled, "cancelled by the caller"))
    }

    private func receive(_ event: Message.Event) {
        let handler: HandlerTable.Handler?, inline: HandlerTable.InlineHandler?
        switch handlers.lookup(event.action) {
        case .found(let found): (handler, inline) = (found, nil)
        case .inline(let found): (handler, inline) = (nil, found)
        case .gone, .unknown:
            logger.debug("event with no handler dropped", metadata: ["action": "\(event.action)"])
            return
        }
        guard closedWith == nil else { return }
        // Events hold a place among the requests in flight; one over the limit is refused, not run (SPEC 7.13).
        guard requests.count + events.count < limits.maxInFlight else {
            logger.warning("event refused: too much in flight", metadata: ["action": "\(event.action)"])
            return refuse(nil, BridgeError(.overloaded, "event '\(event.action)' not run: more than \(limits.maxInFlight) requests and events in flight"))
        }
        if let hostWide = limits.hostWide, hostWide.running >= hostWide.limit {
            return refuse(nil, BridgeError(.overloaded, "event '\(event.action)' not run: the host runs its most requests and events at once (\(hostWide.limit), all sessions)"))
        }
        var made = BridgeRequest(id: nil, action: event.action, deadline: nil, wantsProgress: false,
                                 peer: remote, sink: nil)
        made.topic = event.topic
        made.traceparent = event.trace?.traceparent
        made.tracestate = event.trace?.tracestate
        let context = made  // a constant for the closures below, as for a request
        let logger = logger
        if let inline {  // on the thread as read (handleInline), in its span
            withInlineHandlerSpan(event.action, ofKind: .consumer, received: event.trace, tracer: tracer,
                                   following: tracedRequests) { span in
                do { _ = try inline(event.payload, context) } catch {
                    logger.warning("event handler failed", metadata: withTraceID(["action": "\(event.action)", "error": "\(error)"]))
                    span.recordError(error)
                }
            }
            return
        }
        guard let handler else { return }
        let token = counter.add(1, ordering: .relaxed).newValue
        limits.hostWide?.running += 1
        telemetry.eventStarted()
        events[token] = Task { [self] in
            await withHandlerSpan(event.action, ofKind: .consumer, received: event.trace, tracer: tracer,
                                   following: tracedRequests) { span in
                do { _ = try await handler(event.payload, context) } catch is CancellationError {
                } catch {
                    logger.warning("event handler failed", metadata: withTraceID(["action": "\(event.action)", "error": "\(error)"]))
                    span.recordError(error)
                }
            }
            thread.perform { [self] in
                if events.removeValue(forKey: token) != nil {
                    limits.hostWide?.running -= 1
                    telemetry.eventEnded()
                }
            }
        }
    }

    // MARK: Progress and flow (SPEC 7.13)

    /// A handler's progress was queued: sends what is pending, unless the outbox is congested, in which case the
    /// request waits (its queue coalesces meanwhile) until ``resumeFlow()``.
    func flushProgress(id: String, token: UInt64) {
        guard let entry = requests[id], entry.token == token else { return }
        if outbox.isCongested {
            if !heldProgress.contains(id) { heldProgress.append(id) }
            return
        }
        sendProgress(id, entry)
    }

    /// Sends journaled progress now, or once the outbox drains (``resumeFlow()``); see ``ProgressSink/sendJournaled(_:)``.
    func sendJournaled(_ messages: [Message.Progress], id: String, token: UInt64) async -> Bool {
        await withCheckedContinuation { continuation in
            thread.perform { [self] in
                guard let entry = requests[id], entry.token == token, entry.journaled == nil else {
                    return continuation.resume(returning: false)
                }
                entry.journaled = Journaled(messages: messages, sent: continuation)
                if outbox.isCongested {
                    if !heldProgress.contains(id) { heldProgress.append(id) }
                } else {
                    sendJournaled(entry)
                }
            }
        }
    }

    private func sendJournaled(_ entry: IncomingRequest) {
        guard let journaled = entry.journaled else { return }
        entry.journaled = nil
        for message in journaled.messages {
            send(.progress(message))
            telemetry.progressSent(coalesced: message.skipped ?? 0)
        }
        journaled.sent.resume(returning: true)
    }

    private func sendProgress(_ id: String, _ entry: IncomingRequest) {
        sendJournaled(entry)
        guard let queue = entry.progress else { return }
        for pending in queue.takeAll() {
            entry.seq += 1
            send(.progress(.init(id: id, seq: entry.seq, payload: pending.payload,
                                 skipped: pending.replaced > 0 ? pending.replaced : nil)))
            telemetry.progressSent(coalesced: pending.replaced)
        }
    }

    /// libzmq refused again: handlers waiting for room check whether the reader has stalled long enough to coalesce.
    private func wakeHeldProgress() {
        for id in heldProgress { requests[id]?.progress?.wakeWaiters() }
    }

    /// The outbox drained: held calls go out, then held progress, for as long as there is room.
    private func resumeFlow() {
        while !heldCalls.isEmpty, !outbox.isCongested {
            let (id, body) = heldCalls.removeFirst()
            if calls[id] != nil { send(body) }  // ended meanwhile (timeout, cancel): never sent
        }
        while !heldProgress.isEmpty, !outbox.isCongested {
            let id = heldProgress.removeFirst()
            if let entry = requests[id] { sendProgress(id, entry) }
        }
    }

    // MARK: Ending

    /// Cancels every request in flight from the other side, answering each `cancelled`.
    func cancelIncoming(_ reason: String) {
        for id in Array(requests.keys) { end(id, BridgeError(.cancelled, reason)) }
    }

    /// Ends the conversation: calls in flight fail with `error`, requests from the other side are cancelled
    /// and their responses discarded. Later calls fail at once.
    func close(_ error: BridgeError) {
        guard closedWith == nil else { return }
        closedWith = error
        closedFlag.store(true, ordering: .releasing)
        let ended = calls
        calls.removeAll()
        hasCalls.store(false, ordering: .relaxed)
        for call in ended.values {
            thread.timers.cancel(call.timer)
            call.continuation.resume(throwing: error)
        }
        for entry in requests.values {
            telemetry.requestEnded(entry.action, failure: error.code, startedAt: entry.startedAt)
            if let timer = entry.timer { thread.timers.cancel(timer) }
            entry.progress?.discard()
            entry.releaseJournaled()
            entry.task?.cancel()
        }
        limits.hostWide?.running -= requests.count + events.count
        requests.removeAll()
        for task in events.values {
            task.cancel()
            telemetry.eventEnded()
        }
        events.removeAll()
        heldCalls.removeAll()
        heldProgress.removeAll()
        remote = nil
    }

    /// Opens a closed link again (a peer whose host came back); ids keep counting, so nothing old is confused.
    func reopen() {
        closedWith = nil
        closedFlag.store(false, ordering: .releasing)
        heardAt = .now
        heardSinceLook = false
    }
}

/// A link, held weakly (``Link``'s timers): a call's deadline is set under its id, a request's under its id and token.
private final class WeakLink: DeadlineTarget, @unchecked Sendable {
    weak var link: Link?

    func deadlinePassed(_ key: String, token: UInt64?) {
        if let token { link?.expireRequest(key, token: token) } else { link?.expireCall(id: key) }
    }
}

/// A call on its way to the link's thread, handed over as the thread's job (one object per call, where a closure and
/// a cancellation token were two), and whether its task was cancelled: cancellation may be handed over before the
/// start or after the end. Written before it is handed over, then only on the thread.
private final class StartingCall: SocketThreadWork, @unchecked Sendable {
    let link: Link
    let id: String
    var body: [[UInt8]]
    let deadline: ContinuousClock.Instant
    let onProgress: (@Sendable (Message.Progress) -> Void)?
    var continuation: UnsafeContinuation<JSONValue, Error>?
    var isCancelled = false

    init(link: Link, id: String, body: [[UInt8]], deadline: ContinuousClock.Instant,
         onProgress: (@Sendable (Message.Progress) -> Void)?) {
        self.link = link
        self.id = id
        self.body = body
        self.deadline = deadline
        self.onProgress = onProgress
    }

    func run() { link.start(self) }
}

private struct OutgoingCall {
    let continuation: UnsafeContinuation<JSONValue, Error>
    let onProgress: (@Sendable (Message.Progress) -> Void)?
    /// Its deadline, cancelled when the call ends first.
    let timer: Timers.ID
    var lastSeq = 0
}

private final class IncomingRequest {
    let token: UInt64
    /// Its action's counts and metrics (by the handler table's name).
    let action: Telemetry.Action
    /// When it arrived, kept only while a metrics backend times requests.
    let startedAt: ContinuousClock.Instant?
    /// Its progress on the way to the thread; nil when the caller did not ask for progress.
    let progress: ProgressQueue?
    var seq = 0
    var task: Task<Void, Never>?
    /// Journaled progress waiting for the outbox to drain, and the task that waits for it to be sent.
    var journaled: Journaled?
    /// Its time limit, if it has one, cancelled when the request ends first.
    var timer: Timers.ID?

    init(token: UInt64, action: Telemetry.Action, progress: ProgressQueue?, startedAt: ContinuousClock.Instant?) {
        self.token = token
        self.action = action
        self.startedAt = startedAt
        self.progress = progress
    }

    /// The request ended before its journaled progress could go: its task stops feeding it.
    func releaseJournaled() {
        guard let journaled else { return }
        self.journaled = nil
        journaled.sent.resume(returning: false)
    }
}

/// Journaled progress waiting for the outbox to drain, and the task that waits for it to be sent. (A struct: an
/// optional tuple went through the runtime's generic value witnesses at every request's end.)
private struct Journaled {
    let messages: [Message.Progress]
    let sent: CheckedContinuation<Bool, Never>
}

extension Message {
    /// How much of a body that will not be processed is read to find its id (SPEC 7.10).
    static let idPrefixBytes = 4096

    /// The `id` of a body that will not be processed (too large), when it is a readable string that ends within
    /// the body's first ``idPrefixBytes`` bytes as a top-level member: the rest of the body is never read, so
    /// refusing a message costs the same whatever its size.
    static func readableID(in body: UnsafeRawBufferPointer) -> String? {
        var scanner = PrefixScanner(bytes: UnsafeRawBufferPointer(rebasing: body.prefix(idPrefixBytes)))
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        while true {
            guard let key = scanner.string() else { return nil }
            guard scanner.take(UInt8(ascii: ":")) else { return nil }
            if key.count == 4 || key.contains(UInt8(ascii: "\\")), decodedString(key) == "id" {
                guard let token = scanner.string(), let id = decodedString(token),
                      (1...128).contains(id.unicodeScalars.count) else { return nil }
                return id
            }
            guard scanner.skipValue(), scanner.take(UInt8(ascii: ",")) else { return nil }
        }
    }

    /// A JSON string token (with its quotes) as a Swift string, escapes decoded.
    private static func decodedString(_ token: UnsafeRawBufferPointer) -> String? {
        (try? JSONValue.parse(token))?.stringValue
    }
}

/// Steps through the start of a JSON text without building values, and gives up at the end of its bytes.
private struct PrefixScanner {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    /// Takes `byte` (after whitespace) if it is next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// The next string token, quotes included.
    mutating func string() -> UnsafeRawBufferPointer? {
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index
        index += 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
            default: index += 1
            }
        }
        return nil
    }

    /// Skips one value of any kind; false when the prefix ends inside it.
    mutating func skipValue() -> Bool {
        skipSpace()
        var depth = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                guard string() != nil else { return false }
                if depth == 0 { return true }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return true }  // a number or literal ended at its object's end
                depth -= 1
                if depth == 0 {
                    index += 1
                    return true
                }
            case UInt8(ascii: ","):
                if depth == 0 { return true }
            default:
                break
            }
            index += 1
        }
        return false
    }
}
