/// An object told when a deadline it set passes, with the key it set it under: a link sets one per call and per
/// request, and a closure capturing the link and the key was an allocation each (issue 26).
protocol DeadlineTarget: AnyObject {
    /// `token` tells deadlines under the same key apart (a request's), or is nil (a call's).
    func deadlinePassed(_ key: String, token: UInt64?)
}

/// Deadlines on a socket thread: the poll waits until the nearest one, so timeouts need no timer thread.
///
/// Confined to its thread. A timer whose work ended early is cancelled: its action is let go at once and its
/// heap entry is dropped later, in bulk, so the heap holds the deadlines still pending plus at most as many
/// cancelled ones, not every deadline of the last timeout period.
final class Timers: @unchecked Sendable {
    /// Names a scheduled action, to cancel it.
    struct ID: Hashable, Sendable {
        fileprivate let order: UInt64
        fileprivate let slot: Int
    }

    /// Where a timer's action waits; `order` tells which heap entry owns it.
    private struct Slot {
        var order: UInt64
        var action: Action?
    }

    private enum Action {
        case run(() -> Void)
        case tell(any DeadlineTarget, key: String, token: UInt64?)

        func callAsFunction() {
            switch self {
            case .run(let run): run()
            case .tell(let target, let key, let token): target.deadlinePassed(key, token: token)
            }
        }
    }

    private var heap = DeadlineHeap()
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var counter: UInt64 = 0
    /// Heap entries of cancelled timers, dropped all at once when they are as many as the live ones.
    private var stale = 0

    /// When to wake next. A cancelled entry on top makes it early, never late; cancelled entries are mostly
    /// the oldest, so popping them here would cost a sift per request, where dropping them in bulk costs a few
    /// moves each.
    var nextDeadline: ContinuousClock.Instant? { heap.top?.deadline }

    /// Timers scheduled and neither run nor cancelled.
    var count: Int { heap.count - stale }

    @discardableResult
    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) -> ID {
        schedule(at: deadline, .run(action))
    }

    /// Tells `target` when `deadline` passes, unless cancelled first; holds `target` until then.
    func schedule(at deadline: ContinuousClock.Instant, telling target: any DeadlineTarget, key: String,
                  token: UInt64? = nil) -> ID {
        schedule(at: deadline, .tell(target, key: key, token: token))
    }

    private func schedule(at deadline: ContinuousClock.Instant, _ action: Action) -> ID {
        counter += 1
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = Slot(order: counter, action: action)
        } else {
            slot = slots.count
            slots.append(Slot(order: counter, action: action))
        }
        heap.push(.init(deadline: deadline, order: counter, slot: slot))
        return ID(order: counter, slot: slot)
    }

    /// Cancels an action that has not run yet; cancelling one that has run, or twice, does nothing.
    func cancel(_ id: ID) {
        guard slots[id.slot].order == id.order, slots[id.slot].action != nil else { return }
        release(id.slot)
        stale += 1
        if stale > 64 && stale * 2 > heap.count {
            heap.removeAll { isStale($0) }
            stale = 0
        }
    }

    /// Runs, in deadline order, every action due by `now`.
    func fire(until now: ContinuousClock.Instant) {
        while let top = heap.top, top.deadline <= now {
            _ = heap.popTop()
            guard !isStale(top), let action = slots[top.slot].action else {
                stale -= 1
                continue
            }
            release(top.slot)
            action()
        }
    }

    private func isStale(_ entry: DeadlineHeap.Entry) -> Bool {
        slots[entry.slot].order != entry.order || slots[entry.slot].action == nil
    }

    private func release(_ slot: Int) {
        slots[slot].action = nil
        freeSlots.append(slot)
    }
}

/// A binary min-heap of deadlines. Entries are plain values and the heap is a value, so sifting neither
/// retains and releases closures nor checks exclusivity per element (both showed in the host's profile).
private struct DeadlineHeap {
    struct Entry {
        var deadline: ContinuousClock.Instant
        /// Scheduling order: breaks ties, and names the timer.
        var order: UInt64
        var slot: Int
    }

    private var entries: [Entry] = []

    var count: Int { entries.count }
    var top: Entry? { entries.first }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(entries[child], entries[parent]) else { return }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popTop() -> Entry {
        entries.swapAt(0, entries.count - 1)
        let top = entries.removeLast()
        siftDown(0)
        return top
    }

    mutating func removeAll(where shouldBeRemoved: (Entry) -> Bool) {
        entries.removeAll(where: shouldBeRemoved)
        for index in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < entries.count && Self.before(entries[left], entries[first]) { first = left }
            if right < entries.count && Self.before(entries[right], entries[first]) { first = right }
            if first == parent { return }
            entries.swapAt(parent, first)
            parent = first
        }
    }

    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.order < b.order)
    }
}
