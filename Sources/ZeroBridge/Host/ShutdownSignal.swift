import Foundation

/// Waits for the first of some signals (SIGINT, SIGTERM) instead of letting them end the process, so a service can
/// shut down gracefully.
///
/// The handler is in place when `init` returns: a service can say it is ready right after, and a stop sent at once
/// is not lost (a dispatch signal source registers later, on another thread, and misses such a signal). One per
/// process. For example:
/// ```swift
/// let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
/// print("ready")
/// await stop.wait()
/// await host.shutdown()
/// ```
public final class ShutdownSignal: Sendable {
    private let readEnd: Int32

    /// Starts catching `signals` (their default action, ending the process, no longer happens) until this
    /// object is released; ``wait()`` returns when one arrives.
    public init(trapping signals: [Int32]) {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0, "no file descriptors left for a pipe")
        readEnd = ends[0]
        signalPipeWriteEnd = ends[1]
        for number in signals {
            // Only an async-signal-safe write: the waiting thread does the rest.
            signal(number) { _ in
                var byte: UInt8 = 1
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
        }
    }

    /// Returns once one of the signals has arrived (or at once, if one already has).
    public func wait() async {
        let readEnd = readEnd
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // A blocking read on a thread of its own: never on Swift's cooperative pool.
            let waiter = Thread {
                var byte: UInt8 = 0
                while read(readEnd, &byte, 1) < 0 && errno == EINTR {}
                continuation.resume()
            }
            waiter.name = "zerobridge-signals"
            waiter.start()
        }
    }
}

/// Where the signal handler writes; a C handler cannot capture it.
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1
