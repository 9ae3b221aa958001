import Foundation

/// How long a test waits for something that must happen. Only a real hang reaches it: a loaded 2-core machine
/// can delay a message or a process start by seconds, never by a minute. Waits that expect nothing (a message
/// that must not come) use short windows of their own instead.
public let patience: Duration = .seconds(60)

/// Waits until `condition` holds, checking every few milliseconds without holding a thread; false after `timeout`.
public func eventually(timeout: Duration = patience, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return try await condition()
}

/// Runs blocking work (a blocking socket call, waiting for a process) on a thread of its own, so that it never
/// holds one of the cooperative threads that in-process hosts need for their handlers.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.start()
    }
}

/// Waits for `process` to exit, without holding a thread; kills it after `limit`, so a regression fails the test
/// instead of hanging the run. Returns whether it exited by itself.
@discardableResult
public func waitForExit(_ process: some ChildOfTest, limit: Duration = patience) async -> Bool {
    let exited = (try? await eventually(timeout: limit) { !process.isRunning }) ?? false
    if !exited {
        kill(process.processIdentifier, SIGKILL)
        _ = try? await eventually(timeout: .seconds(10)) { !process.isRunning }
    }
    return exited
}

/// ``patience`` in milliseconds, for libzmq's own timeouts (a blocking receive, a monitor's wait).
public let patienceMilliseconds = Int32(patience / .milliseconds(1))

/// A child process a test started: polled, and killed when it outstays its limit.
public protocol ChildOfTest {
    var isRunning: Bool { get }
    var processIdentifier: Int32 { get }
}
