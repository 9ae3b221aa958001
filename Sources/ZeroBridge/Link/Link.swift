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
    }

    let thread: SocketThread
    let handlers: HandlerTable
    let limits: Limits
    let logger: Logger
    /// Sends one message (its body and attachment frames) to the other side; the owner adds the envelope.
    /// On the thread.
    private let transmit: ([[UInt8]]) -> Void
    /// The handle given to handlers as ``BridgeRequest/peer`` (on a host). It holds the link, so ``close(_:)``
    /// lets go of it.
    var remote: RemotePeer?

    private let counter = Atomic<UInt64>(0)
    private let closedFlag = Atomic<Bool>(false)

    // Confined to the thread.
    private var calls: [String: OutgoingCall] = [:]
    private var requests: [String: IncomingRequest] = [:]
    private var closedWith: BridgeError?
    /// While false (a host shutting down), new requests are answered `overloaded`.
    var accepting = true
    private(set) var lastHeard = ContinuousClock.now
    private(set) var lastSent = ContinuousClock.now
    private var lastPing: ContinuousClock.Instant?

    init(thread: SocketThread, handlers: HandlerTable, limits: Limits, logger: Logger,
         transmit: @escaping ([[UInt8]]) -> Void) {
        self.thread = thread
        self.handlers = handlers
        self.limits = limits
        self.logger = logger
        self.transmit = transmit
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
        let id = String(counter.add(1, ordering: .relaxed).newValue)
        let timeoutMs = max(1, Int((timeout / .milliseconds(1)).rounded(.up)))
        let body = Message.request(.init(id: id, action: action, payload: payload, timeoutMs: timeoutMs,
                                         wantsProgress: onProgress != nil)).frames()
        let deadline = ContinuousClock.now + timeout
        // Cancellation may be handed over before the start, or after the end; the token tells on the thread.
        let token = CancellationToken()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                thread.perform { [self] in
                    start(id: id, body: body, deadline: deadline, token: token, onProgress: onProgress,
                          continuation: continuation)
                }
            }
        } onCancel: {
            thread.perform { [self] in cancelCall(id: id, token: token) }
        }
    }

    /// Sends an event (never answered). Throws `peer_lost` when the link has closed.
    func post(_ action: String, _ payload: JSONValue) throws {
        if let error = closedError { throw error }
        let body = Message.event(.init(action: action, payload: payload)).frames()
        thread.perform { [self] in
            if closedWith == nil { send(body) }
        }
    }

    private var closedError: BridgeError? {
        isClosed ? BridgeError(.peerLost, "the other side is gone") : nil
    }

    // MARK: On the thread

    /// Sends an encoded message (``Message/frames()``) and notes the time, for heartbeats.
    func send(_ frames: [[UInt8]]) {
        lastSent = .now
        transmit(frames)
    }

    func send(_ message: Message) { send(message.frames()) }

    private func start(id: String, body: [[UInt8]], deadline: ContinuousClock.Instant, token: CancellationToken,
                       onProgress: (@Sendable (JSONValue) -> Void)?,
                       continuation: CheckedContinuation<JSONValue, Error>) {
        if token.isCancelled {
            continuation.resume(throwing: BridgeError(.cancelled, "the call was cancelled"))
            return
        }
        if let closedWith {
            continuation.resume(throwing: closedWith)
            return
        }
        let timer = thread.timers.schedule(at: deadline) { [weak self] in self?.expireCall(id: id) }
        calls[id] = OutgoingCall(continuation: continuation, onProgress: onProgress, timer: timer)
        send(body)
    }

    private func expireCall(id: String) {
        // Ids are unique per link, so a call still under this id is the one this timer was set for.
        guard let call = calls.removeValue(forKey: id) else { return }
        call.continuation.resume(throwing: BridgeError(.timeout, "no response within the call's timeout"))
    }

    private func cancelCall(id: String, token: CancellationToken) {
        token.isCancelled = true
        guard let call = calls.removeValue(forKey: id) else { return }  // not started yet, or already ended
        thread.timers.cancel(call.timer)
        send(.cancel(id: id))
        call.continuation.resume(throwing: BridgeError(.cancelled, "the call was cancelled"))
    }

    /// Handles one message of the conversation (hello, welcome and bye are the owner's).
    func receive(_ message: Message) {
        lastHeard = .now
        switch message {
        case .request(let request): receive(request)
        case .response(let response): receive(response)
        case .progress(let progress): receive(progress)
        case .event(let event): receive(event)
        case .cancel(let id): receiveCancel(id: id)
        case .ping: send(.pong)
        case .pong: break
        case .hello, .welcome, .bye: break
        }
    }

    /// Notes that the other side said something, even if it was not understood.
    func heard() { lastHeard = .now }

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
        let silence = now - lastHeard
        let askedSinceHeard = lastPing.map { $0 > lastHeard } ?? false
        if silence >= interval * 3 {
            guard askedSinceHeard, let pinged = lastPing else { return .ping }
            return now - pinged >= interval ? .lost(silence: silence) : .alive
        }
        return now - lastSent >= interval ? .ping : .alive
    }

    func sendPing() {
        lastPing = .now
        send(.ping)
    }

    private func receive(_ response: Message.Response) {
        // Responses to unknown or already-ended calls (late, after a timeout or cancel) are dropped.
        guard let id = response.id, let call = calls.removeValue(forKey: id) else { return }
        thread.timers.cancel(call.timer)
        call.continuation.resume(with: response.outcome.mapError { $0 as Error })
    }

    private func receive(_ progress: Message.Progress) {
        // One hash lookup, and the call updated in place rather than copied out and stored back.
        guard let index = calls.index(forKey: progress.id), progress.seq > calls.values[index].lastSeq else { return }
        calls.values[index].lastSeq = progress.seq
        calls.values[index].onProgress?(progress.payload)
    }

    private func receive(_ request: Message.Request) {
        if requests[request.id] != nil {
            return answer(request.id, BridgeError(.duplicateID, "a request with id '\(request.id)' is already in flight"))
        }
        guard accepting, closedWith == nil else {
            return answer(request.id, BridgeError(.overloaded, "shutting down; not taking new requests"))
        }
        guard requests.count < limits.maxInFlight else {
            return answer(request.id, BridgeError(.overloaded, "more than \(limits.maxInFlight) requests in flight"))
        }
        let handler: HandlerTable.Handler
        switch handlers.lookup(request.action) {
        case .found(let found): handler = found
        case .gone: return answer(request.id, BridgeError(.handlerGone, "the handler for '\(request.action)' has been released"))
        case .unknown: return answer(request.id, BridgeError(.unknownAction, "no handler for '\(request.action)'"))
        }

        let token = counter.add(1, ordering: .relaxed).newValue
        let entry = IncomingRequest(token: token, wantsProgress: request.wantsProgress)
        requests[request.id] = entry
        let deadline = request.timeoutMs.map { ContinuousClock.now + .milliseconds($0) }
        if let deadline, let timeoutMs = request.timeoutMs {
            // Captures the id and the number only: capturing `request` kept its payload alive until the deadline.
            let id = request.id
            entry.timer = thread.timers.schedule(at: deadline) { [weak self] in
                self?.expireRequest(id, token: token, timeoutMs: timeoutMs)
            }
        }
        let context = BridgeRequest(id: request.id, action: request.action, deadline: deadline,
                                    wantsProgress: request.wantsProgress, peer: remote,
                                    sink: ProgressSink(link: self, id: request.id, token: token))
        let payload = request.payload
        entry.task = Task { [self] in
            let outcome: Result<JSONValue, BridgeError>
            do {
                outcome = .success(try await handler(payload, context))
            } catch let error as BridgeError {
                outcome = .failure(error)
            } catch is CancellationError {
                outcome = .failure(BridgeError(.cancelled, "the handler was cancelled"))
            } catch {
                outcome = .failure(BridgeError(.handlerError, String(describing: error)))
            }
            let body = Message.response(.init(id: request.id, outcome: outcome)).frames()
            thread.perform { [self] in finish(request.id, token: token, body: body) }
        }
    }

    private func finish(_ id: String, token: UInt64, body: [[UInt8]]) {
        guard let entry = requests[id], entry.token == token else { return }  // already answered
        requests[id] = nil
        if let timer = entry.timer { thread.timers.cancel(timer) }
        send(body)
    }

    /// The request's `timeout_ms` has passed; its timer has run, so there is none left to cancel.
    private func expireRequest(_ id: String, token: UInt64, timeoutMs: Int) {
        guard let entry = requests[id], entry.token == token else { return }
        entry.timer = nil
        end(id, BridgeError(.timeout, "the handler did not finish within \(timeoutMs) ms"))
    }

    /// Answers a request in flight with an error now and cancels its handler.
    private func end(_ id: String, _ error: BridgeError) {
        guard let entry = requests.removeValue(forKey: id) else { return }
        if let timer = entry.timer { thread.timers.cancel(timer) }
        entry.task?.cancel()
        answer(id, error)
    }

    /// Answers a request, or a message that cannot be taken, with an error response.
    func answer(_ id: String?, _ error: BridgeError) {
        send(.response(.init(id: id, outcome: .failure(error))))
    }

    /// Reads one message as the other side sent it (signature, body, attachments). What cannot be understood, or
    /// is larger than `maxBytes`, is answered here (rule 5, rule 10) and nil returned; the caller handles the rest.
    func read(_ frames: ArraySlice<Frame>, maxBytes: Int) -> Message? {
        heard()
        guard frames.count >= 2 else {
            answer(nil, BridgeError(.badMessage, "a message has a signature frame and a body frame; got \(frames.count) frame(s)"))
            return nil
        }
        let body = frames[frames.startIndex + 1]
        let size = frames.dropFirst().reduce(0) { $0 + $1.count }
        guard size <= maxBytes else {
            answer(body.withUnsafeBytes { Message.readableID(in: $0) },
                   BridgeError(.tooLarge, "the message has \(size) bytes; the limit is \(maxBytes)"))
            return nil
        }
        let attachments = frames.count > 2 ? frames.dropFirst(2).map(\.bytes) : []
        switch body.withUnsafeBytes({ Message.decode($0, attachments: attachments) }) {
        case .failure(let failure):
            answer(failure.id, failure.error)
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
        guard case .found(let handler) = handlers.lookup(event.action) else {
            logger.debug("event with no handler dropped", metadata: ["action": "\(event.action)"])
            return
        }
        let context = BridgeRequest(id: nil, action: event.action, deadline: nil, wantsProgress: false,
                                    peer: remote, sink: nil)
        let logger = logger
        Task {
            do { _ = try await handler(event.payload, context) } catch {
                logger.warning("event handler failed", metadata: ["action": "\(event.action)", "error": "\(error)"])
            }
        }
    }

    func sendProgress(id: String, token: UInt64, payload: JSONValue) {
        guard let entry = requests[id], entry.token == token, entry.wantsProgress else { return }
        entry.seq += 1
        send(.progress(.init(id: id, seq: entry.seq, payload: payload)))
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
        for call in ended.values {
            thread.timers.cancel(call.timer)
            call.continuation.resume(throwing: error)
        }
        for entry in requests.values {
            if let timer = entry.timer { thread.timers.cancel(timer) }
            entry.task?.cancel()
        }
        requests.removeAll()
        remote = nil
    }

    /// Opens a closed link again (a peer whose host came back); ids keep counting, so nothing old is confused.
    func reopen() {
        closedWith = nil
        closedFlag.store(false, ordering: .releasing)
        lastHeard = .now
    }
}

/// Whether a call's task was cancelled; read and written only on the link's thread.
private final class CancellationToken: @unchecked Sendable {
    var isCancelled = false
}

private struct OutgoingCall {
    let continuation: CheckedContinuation<JSONValue, Error>
    let onProgress: (@Sendable (JSONValue) -> Void)?
    /// Its deadline, cancelled when the call ends first.
    let timer: Timers.ID
    var lastSeq = 0
}

private final class IncomingRequest {
    let token: UInt64
    let wantsProgress: Bool
    var seq = 0
    var task: Task<Void, Never>?
    /// Its `timeout_ms` deadline, if it has one, cancelled when the request ends first.
    var timer: Timers.ID?

    init(token: UInt64, wantsProgress: Bool) {
        self.token = token
        self.wantsProgress = wantsProgress
    }
}

extension Message {
    /// The `id` of a body that will not be processed (too large), when it is a readable string, for the answer.
    static func readableID(in body: UnsafeRawBufferPointer) -> String? {
        guard let value = try? JSONValue.parse(body), let id = value["id"]?.stringValue,
              (1...128).contains(id.unicodeScalars.count) else { return nil }
        return id
    }
}
