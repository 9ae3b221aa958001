/// Deadlines on a socket thread: the poll waits until the nearest one, so timeouts need no timer thread.
///
/// Confined to its thread. Timers are not removed when their work finishes early; the action checks whether
/// it still applies, which keeps scheduling to one heap insertion.
final class Timers: @unchecked Sendable {
    private struct Entry {
        var deadline: ContinuousClock.Instant
        var order: UInt64
        var action: () -> Void
    }

    private var heap: [Entry] = []
    private var counter: UInt64 = 0

    var nextDeadline: ContinuousClock.Instant? { heap.first?.deadline }
    var count: Int { heap.count }

    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) {
        counter += 1
        heap.append(Entry(deadline: deadline, order: counter, action: action))
        siftUp(heap.count - 1)
    }

    /// Runs, in deadline order, every action due by `now`.
    func fire(until now: ContinuousClock.Instant) {
        while let first = heap.first, first.deadline <= now {
            let last = heap.removeLast()
            if !heap.isEmpty {
                heap[0] = last
                siftDown(0)
            }
            first.action()
        }
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
