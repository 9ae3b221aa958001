import Dispatch
import Synchronization

/// Sleeps like `Task.sleep`, but lets go of everything when the task is cancelled. On Linux a cancelled
/// `Task.sleep` keeps its timer, and about 0.7 KB, until the original deadline: 25,600 cancelled one-hour sleeps
/// held 18 MB for that hour, which made orphaned `sleep` requests look like a leak in the host.
func cancellableSleep(for duration: Duration) async throws {
    let sleeper = Sleeper()
    try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in sleeper.start(duration, continuation) }
    } onCancel: {
        sleeper.end(throwing: CancellationError())
    }
}

private final class Sleeper: Sendable {
    /// A queue of its own: it gets a thread even while handlers keep every cooperative thread busy.
    static let queue = DispatchQueue(label: "zerobridge.conformance.sleep")

    private struct State {
        var timer: DispatchSourceTimer?
        var continuation: CheckedContinuation<Void, Error>?
        var ended = false
    }
    private let state = Mutex(State())

    func start(_ duration: Duration, _ continuation: CheckedContinuation<Void, Error>) {
        let cancelledAlready = state.withLock { state -> Bool in
            if state.ended { return true }
            let timer = DispatchSource.makeTimerSource(queue: Self.queue)
            let nanoseconds = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
            timer.schedule(deadline: .now() + .nanoseconds(Int(max(0, nanoseconds))))
            timer.setEventHandler { [self] in end(throwing: nil) }
            state.timer = timer
            state.continuation = continuation
            timer.resume()
            return false
        }
        if cancelledAlready { continuation.resume(throwing: CancellationError()) }
    }

    /// Ends the sleep once: at its deadline (nil) or on cancellation.
    func end(throwing error: Error?) {
        let (timer, continuation) = state.withLock { state in
            state.ended = true
            defer { state.timer = nil; state.continuation = nil }
            return (state.timer, state.continuation)
        }
        timer?.cancel()
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume() }
    }
}
