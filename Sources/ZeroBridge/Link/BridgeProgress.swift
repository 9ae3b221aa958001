import Synchronization

/// A call's progress events, in order: an async sequence that ends when the call ends, throwing if an event could
/// not be decoded (``BridgeCall/progress``).
///
/// One task iterates it: a second iterating at the same time gets ``ConcurrentIteration``. Cancelling the iterating
/// task ends the sequence (the call itself goes on: cancel it with ``BridgeCall/cancel()``). Events wait here until
/// they are read, all of them: a call asked for them.
///
/// Not `AsyncThrowingStream`: the standard library's stream is generic code that is not specialized, and looked up
/// the type metadata of its storage on every event (a tenth of a Swift peer's CPU in a stream of progress), and it
/// woke its reader for every event. Here the socket thread appends to a buffer under a lock, wakes a waiting reader
/// once per round, and the iterator takes all that is buffered at once: 3.0 to 1.45 us of the peer's CPU per event
/// (bench/RESULTS.md).
public struct BridgeProgress<Element: Sendable>: AsyncSequence, Sendable {
    @usableFromInline let channel: ProgressChannel<Element>

    init(channel: ProgressChannel<Element>) { self.channel = channel }

    /// The iterator of the one task that reads the events.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }

    /// Reads a call's progress events in order, taking all that have arrived at once.
    public struct AsyncIterator: AsyncIteratorProtocol {
        @usableFromInline let channel: ProgressChannel<Element>
        /// Events taken from the channel in one go, read from `position` on.
        @usableFromInline var taken: [Element] = []
        @usableFromInline var position = 0

        init(channel: ProgressChannel<Element>) { self.channel = channel }

        /// The next event, waiting for it; nil once the call has ended (or the reading task was cancelled).
        /// Throws what an event that did not decode threw, once.
        @inlinable  // so that reading an event already taken is specialized where the events are read
        public mutating func next() async throws -> Element? {
            if position == taken.count {
                taken = try await channel.take()
                position = 0
                if taken.isEmpty { return nil }
            }
            defer { position += 1 }
            return taken[position]
        }
    }

    /// Two tasks read one call's progress at the same time; each event goes to one reader only.
    public struct ConcurrentIteration: Error, CustomStringConvertible {
        public var description: String { "a call's progress is read by one task at a time" }
    }
}

/// Between the call's producer (the socket thread, through the call's progress handler) and the one task that reads.
///
/// A reader waiting for events is woken once per round of its socket thread, not once per event: the thread reads
/// a batch of progress messages (SPEC 3.3) in one round, and a reader woken by the first would wake again for the
/// next, each wake-up a futex call and a task switch.
@usableFromInline
final class ProgressChannel<Element: Sendable>: Sendable {
    private struct State {
        var pending: [Element] = []
        var waiter: UnsafeContinuation<[Element], Error>?
        /// A job on the socket thread will hand the waiter what is pending.
        var wakeScheduled = false
        /// Set once: how the call ended (nil: it goes on).
        var end: Result<Void, Error>?
        /// The reading task was cancelled: the sequence has ended for it, and nothing more is kept.
        var cancelled = false
    }

    private typealias Waiter = UnsafeContinuation<[Element], Error>
    private enum Wake { case none, later(SocketThread), now(Waiter, [Element]) }
    private let state = Mutex(State())

    init() {}

    func yield(_ element: Element) {
        let wake = state.withLock { state -> Wake in
            guard state.end == nil, !state.cancelled else { return .none }
            state.pending.append(element)
            guard let waiter = state.waiter, !state.wakeScheduled else { return .none }
            if let thread = SocketThread.current {
                state.wakeScheduled = true
                return .later(thread)
            }
            state.waiter = nil
            defer { state.pending = [] }
            return .now(waiter, state.pending)
        }
        switch wake {
        case .none: break
        case .later(let thread): thread.perform { [self] in wakeReader() }  // after the round's other messages
        case .now(let waiter, let events): waiter.resume(returning: events)
        }
    }

    private func wakeReader() {
        let woken = state.withLock { state -> (Waiter, [Element])? in
            state.wakeScheduled = false
            guard let waiter = state.waiter, !state.pending.isEmpty else { return nil }
            state.waiter = nil
            defer { state.pending = [] }
            return (waiter, state.pending)
        }
        if let (waiter, events) = woken { waiter.resume(returning: events) }
    }

    /// The call ended: after what is pending, the sequence ends, or throws `error`.
    func finish(throwing error: Error? = nil) {
        let woken = state.withLock { state -> (Waiter, Result<[Element], Error>)? in
            guard state.end == nil else { return nil }
            state.end = error.map { .failure($0) } ?? .success(())
            guard let waiter = state.waiter, let ready = Self.ready(&state) else { return nil }
            state.waiter = nil
            return (waiter, ready)
        }
        if let (waiter, ready) = woken { waiter.resume(with: ready) }
    }

    /// Whether a reader waits for an event now.
    var isAwaited: Bool { state.withLock { $0.waiter != nil } }

    /// Everything pending, waiting for an event when none is; empty once the sequence has ended.
    @usableFromInline
    func take() async throws -> [Element] {
        if let ready = state.withLock({ Self.ready(&$0) }) { return try ready.get() }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<[Element], Error>? in
                    if let ready = Self.ready(&state) { return ready }
                    if state.waiter != nil { return .failure(BridgeProgress<Element>.ConcurrentIteration()) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                state.cancelled = true
                state.pending = []
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: [])
        }
    }

    /// What a reader gets without waiting: the pending events, or the end (its error once, then nothing); nil
    /// while the call goes on with nothing pending.
    private static func ready(_ state: inout State) -> Result<[Element], Error>? {
        if !state.pending.isEmpty {
            defer { state.pending = [] }
            return .success(state.pending)
        }
        if state.cancelled { return .success([]) }
        switch state.end {
        case nil: return nil
        case .success?: return .success([])
        case .failure(let error)?:
            state.end = .success(())
            return .failure(error)
        }
    }
}
