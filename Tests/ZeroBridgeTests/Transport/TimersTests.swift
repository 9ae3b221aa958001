import Testing
@testable import ZeroBridge

@Suite("Timers", .timeLimit(.minutes(3)))
struct TimersTests {
    @Test("timers fire in deadline order, ties in scheduling order, only once they are due")
    func order() {
        let timers = Timers()
        let start = ContinuousClock.now
        var fired: [String] = []
        _ = timers.schedule(at: start + .milliseconds(30)) { fired.append("c") }
        _ = timers.schedule(at: start + .milliseconds(10)) { fired.append("a") }
        _ = timers.schedule(at: start + .milliseconds(20)) { fired.append("b1") }
        _ = timers.schedule(at: start + .milliseconds(20)) { fired.append("b2") }
        #expect(timers.nextDeadline == start + .milliseconds(10))
        timers.fire(until: start + .milliseconds(5))
        #expect(fired.isEmpty)
        timers.fire(until: start + .milliseconds(20))
        #expect(fired == ["a", "b1", "b2"])
        timers.fire(until: start + .seconds(1))
        #expect(fired == ["a", "b1", "b2", "c"])
        #expect(timers.count == 0 && timers.nextDeadline == nil)
    }

    @Test("a cancelled timer never fires and stops counting; cancelling twice or after firing is harmless")
    func cancel() {
        let timers = Timers()
        let start = ContinuousClock.now
        var fired: [Int] = []
        var ids: [Timers.ID] = []
        for index in 0..<1000 { ids.append(timers.schedule(at: start + .milliseconds(index)) { fired.append(index) }) }
        for index in stride(from: 0, to: 1000, by: 2) { timers.cancel(ids[index]) }
        timers.cancel(ids[0])
        #expect(timers.count == 500)
        timers.fire(until: start + .seconds(2))
        #expect(fired == Array(stride(from: 1, to: 1000, by: 2)))
        timers.cancel(ids[1])
        #expect(timers.count == 0)
        // Slots are reused: a new timer after many cancellations still fires once.
        var late = 0
        _ = timers.schedule(at: start) { late += 1 }
        timers.fire(until: start + .seconds(3))
        #expect(late == 1)
    }

    @Test("a deadline set for a target tells it its key and token once, in order with closures; cancelled, it tells nothing and lets the target go")
    func targets() {
        final class Target: DeadlineTarget {
            var told: [String] = []
            func deadlinePassed(_ key: String, token: UInt64?) { told.append(token.map { "\(key)#\($0)" } ?? key) }
        }
        let timers = Timers()
        let start = ContinuousClock.now
        let target = Target()
        var order: [String] = []
        _ = timers.schedule(at: start + .milliseconds(20), telling: target, key: "call-7")
        _ = timers.schedule(at: start + .milliseconds(10), telling: target, key: "request-3", token: 42)
        _ = timers.schedule(at: start + .milliseconds(15)) { order.append("closure at \(target.told.count)") }
        weak var dropped: Target?
        do {
            let transient = Target()
            dropped = transient
            let id = timers.schedule(at: start + .milliseconds(5), telling: transient, key: "cancelled")
            timers.cancel(id)
        }
        #expect(dropped == nil, "a cancelled deadline holds its target no longer")
        timers.fire(until: start + .seconds(1))
        #expect(target.told == ["request-3#42", "call-7"])
        #expect(order == ["closure at 1"])
        #expect(timers.count == 0)
    }
}
