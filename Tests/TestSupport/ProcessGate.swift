import Foundation
import Synchronization
import Testing

extension Trait where Self == ProcessGate {
    /// Marks a test (or, on a suite, each of its tests) that starts processes: Python, Node or `zerobridge`.
    ///
    /// Swift Testing runs every suite at once. Each child process wants a core to start, and the in-process hosts
    /// of other tests need the same two cooperative threads for their handlers; a 2-core machine ran at a load of
    /// 11-13 and tests timed out waiting. Tests with this trait run at most `ProcessGate.width` at a time across
    /// the whole test run (all test targets share the gate), whatever their suite.
    ///
    /// For example:
    /// ```swift
    /// @Suite("zerobridge serve", .startsProcesses)
    /// struct ServeCommandTests { ... }
    /// ```
    public static var startsProcesses: ProcessGate { ProcessGate() }
}

/// The trait behind ``Trait/startsProcesses``: a scope that holds one of `width` slots while a test case runs.
public struct ProcessGate: TestTrait, SuiteTrait, TestScoping {
    /// How many process-starting test cases run at once: `ZEROBRIDGE_TEST_PROCESS_WIDTH`, or 1.
    public static let width: Int = {
        let configured = ProcessInfo.processInfo.environment["ZEROBRIDGE_TEST_PROCESS_WIDTH"].flatMap { Int($0) }
        return max(1, configured ?? 1)
    }()

    static let slots = AsyncSlots(count: width)

    public var isRecursive: Bool { true }

    /// One scope per test case (each argument of a parameterized test on its own), none for the suite itself, so
    /// that a suite's tests take turns instead of holding the slot for the whole suite.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> ProcessGate? {
        testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        await Self.slots.acquire()
        defer { Self.slots.release() }
        try await function()
    }
}

/// A counting semaphore for tasks: `acquire` suspends (never blocks a thread) until a slot is free; FIFO.
final class AsyncSlots: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()  // the slot passes straight to the next waiter
    }
}
