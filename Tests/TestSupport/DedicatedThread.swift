import Foundation
import Synchronization

/// A task executor with a thread of its own, for timing what a library does rather than how busy the test run is:
/// `swift test` runs every test at once on one cooperative pool as wide as the cores (2 here), so a task resumed by
/// the library waits behind every other test's work, for seconds on a loaded machine. A task that prefers this
/// executor (`withTaskExecutorPreference`) resumes on its own thread, which the kernel schedules fairly.
public final class DedicatedThread: TaskExecutor, @unchecked Sendable {
    private struct Queue {
        var jobs: [UnownedJob] = []
        var stopped = false
    }
    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    public init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wake.signal()
    }

    /// Ends the thread once the jobs enqueued so far have run.
    public func stop() {
        queue.withLock { $0.stopped = true }
        wake.signal()
    }

    private func run() {
        while true {
            wake.wait()
            let (batch, stopped) = queue.withLock { queue in
                defer { queue.jobs.removeAll() }
                return (queue.jobs, queue.stopped)
            }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            if stopped { return }
        }
    }
}
