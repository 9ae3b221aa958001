import Synchronization

/// A request's progress on its way from the handler to the socket thread: bounded, never held up by a slow reader
/// (SPEC 7.13).
///
/// The handler appends from its task; the link's thread takes everything pending. Up to 64 payloads wait here (and
/// the conversation's 1 MiB budget). When they are all taken up:
/// - while the other side has taken nothing for a second (a stalled reader: ``Outbox/isStalled``), a new payload
///   replaces the newest unsent one, and the message that finally goes out says how many it replaced (`skipped`);
/// - otherwise the reader or the thread is only slower than the handler, and the handler waits for them: no
///   payload is lost to a machine that is merely busy, and memory stays bounded.
/// At most one hand-off to the thread is outstanding per request, so a fast handler cannot flood the thread's job
/// queue either.
final class ProgressQueue: Sendable {
    static let maxPending = 64

    struct Pending {
        var payload: JSONValue
        var bytes: Int
        /// How many payloads this one replaced.
        var replaced: Int
    }

    enum Offer {
        /// Queued; hand a flush over to the thread when `handOff`; let other tasks run when `yield`.
        case accepted(handOff: Bool, yield: Bool)
        /// Full while the reader keeps up: wait for ``room()``, then offer again.
        case full
    }

    private struct State {
        var pending: [Pending] = []
        /// A hand-off to the thread is on its way, or the thread holds the request until the outbox drains.
        var scheduled = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Payloads offered, to yield the handler's thread every ``yieldEvery`` of them.
        var offered = 0
    }

    /// A handler that reports progress in a tight loop never suspends otherwise, and would keep one of the two
    /// cooperative threads from every other handler for as long as it runs.
    static let yieldEvery = 64

    private let state = Mutex(State())
    private let budget: ProgressBudget

    init(budget: ProgressBudget) { self.budget = budget }

    func offer(_ payload: JSONValue, congested: Bool) -> Offer {
        let bytes = payload.approximateSize
        return state.withLock { state in
            state.offered &+= 1
            let yield = state.offered % Self.yieldEvery == 0
            if state.pending.isEmpty {
                budget.force(bytes)  // a request may always keep one payload
            } else if state.pending.count >= Self.maxPending || !budget.take(bytes) {
                guard congested else { return .full }
                let newest = state.pending.removeLast()
                budget.give(newest.bytes)
                budget.force(bytes)
                state.pending.append(Pending(payload: payload, bytes: bytes, replaced: newest.replaced + 1))
                return .accepted(handOff: false, yield: yield)
            }
            state.pending.append(Pending(payload: payload, bytes: bytes, replaced: 0))
            defer { state.scheduled = true }
            return .accepted(handOff: !state.scheduled, yield: yield)
        }
    }

    /// Returns once the thread has taken what was pending (or the queue was emptied), for a handler that found it full.
    func room() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.pending.count < Self.maxPending { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets waiting handlers offer again (the reader may have stalled: they coalesce instead of waiting on).
    func wakeWaiters() {
        let waiters = state.withLock { state in
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Takes everything pending, on the thread; the next offer hands a flush over again.
    func takeAll() -> [Pending] {
        let (taken, waiters) = state.withLock { state in
            defer {
                state.pending.removeAll(keepingCapacity: true)
                state.waiters.removeAll()
            }
            state.scheduled = false
            for item in state.pending { budget.give(item.bytes) }
            return (state.pending, state.waiters)
        }
        for waiter in waiters { waiter.resume() }
        return taken
    }

    /// Drops what is pending (the request has ended), giving its bytes back to the budget.
    func discard() { _ = takeAll() }
}

/// A conversation's bytes of progress waiting between handlers and the socket thread: at most 1 MiB before
/// progress coalesces (each request may always keep one payload).
final class ProgressBudget: Sendable {
    static let limit = 1 << 20
    private let used = Atomic<Int>(0)

    var bytes: Int { used.load(ordering: .relaxed) }

    /// Takes `bytes` if the budget allows it.
    func take(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while current + bytes <= Self.limit {
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Takes `bytes` whatever the budget says (a request's one payload).
    func force(_ bytes: Int) { used.add(bytes, ordering: .relaxed) }

    func give(_ bytes: Int) { used.subtract(bytes, ordering: .relaxed) }
}

extension JSONValue {
    /// About the number of bytes the value takes as JSON, without writing it: enough to bound memory by.
    var approximateSize: Int {
        switch self {
        case .null, .bool: 5
        case .int, .double: 12
        case .string(let string): string.utf8.count + 2
        case .bytes(let bytes): bytes.count + 16
        case .array(let items): items.reduce(2) { $0 + $1.approximateSize + 1 }
        case .object(let members): members.reduce(2) { $0 + $1.key.utf8.count + 4 + $1.value.approximateSize }
        }
    }
}
