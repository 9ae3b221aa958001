/// Deadlines on a socket thread: the poll waits until the nearest one, so timeouts need no timer thread.
///
/// Confined to its thread. A timer whose work ended early is cancelled, so the heap holds only deadlines
/// still pending (plus a bounded number of cancelled ones), not every deadline of the last timeout period.
final class Timers: @unchecked Sendable {
    /// Names a scheduled action, to cancel it.
    struct ID: Hashable, Sendable {
        fileprivate let order: UInt64
    }

    private struct Entry {
        var deadline: ContinuousClock.Instant
        var order: UInt64
        var action: () -> Void
    }

    private var heap: [Entry] = []
    private var counter: UInt64 = 0
    /// Cancelled entries still in the heap: skipped when they come up, or dropped all at once when they are
    /// as many as the live ones.
    private var cancelled = Set<UInt64>()

    var nextDeadline: ContinuousClock.Instant? {
        dropCancelledAtTop()
        return heap.first?.deadline
    }

    /// Timers scheduled and neither run nor cancelled.
    var count: Int { heap.count - cancelled.count }

    @discardableResult
    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) -> ID {
        counter += 1
        heap.append(Entry(deadline: deadline, order: counter, action: action))
        siftUp(heap.count - 1)
        return ID(order: counter)
    }

    /// Cancels an action that has not run yet (cancelling one that has run is a mistake).
    func cancel(_ id: ID) {
        // Responses mostly come in the order their deadlines were set, so the cancelled one is often on top.
        if heap.first?.order == id.order {
            removeTop()
            dropCancelledAtTop()
            return
        }
        cancelled.insert(id.order)
        if cancelled.count > 64 && cancelled.count * 2 > heap.count { compact() }
    }

    /// Runs, in deadline order, every action due by `now`.
    func fire(until now: ContinuousClock.Instant) {
        while let first = heap.first, first.deadline <= now {
            removeTop()
            if cancelled.remove(first.order) == nil { first.action() }
        }
    }

    private func removeTop() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private func dropCancelledAtTop() {
        while let first = heap.first, cancelled.remove(first.order) != nil { removeTop() }
    }

    private func compact() {
        heap.removeAll { cancelled.contains($0.order) }
        cancelled.removeAll(keepingCapacity: true)
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private func before(_ a: Entry, _ b: Entry) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.order < b.order)
    }

    private func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard before(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count && before(heap[left], heap[first]) { first = left }
            if right < heap.count && before(heap[right], heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
