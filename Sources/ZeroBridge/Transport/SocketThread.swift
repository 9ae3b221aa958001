import Foundation
import Synchronization
import ZeroMQ

/// The one thread that owns a socket: it polls the socket, runs jobs handed to it, fires timers and sends.
///
/// Everything that touches the socket, or state confined to this thread (links, sessions), runs here, so that
/// state needs no locks. Other threads hand work over with ``perform(_:)``; each hand-off wakes the thread once,
/// however many jobs arrive before it wakes.
final class SocketThread: @unchecked Sendable {
    /// What the owner of the socket does on this thread.
    struct Owner {
        /// One whole inbound multipart message.
        var received: ([Frame]) -> Void
        /// Periodic work (heartbeats); returns when it wants to run next.
        var tick: (ContinuousClock.Instant) -> ContinuousClock.Instant
        /// The last job, after the thread stops taking new ones; the socket is closed after it.
        var stopped: () -> Void
    }

    let socket: Socket
    let timers = Timers()
    private let wake: WakeSignal
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private var owner: Owner?
    // Confined to the thread:
    private var spareJobs: [@Sendable () -> Void] = []
    private var outbox = OutboundQueue()
    private var stopping = false
    private var nextTick = ContinuousClock.now
    private var threadID: pthread_t?
    private let finished = DispatchSemaphore(value: 0)

    init(socket: Socket) throws {
        self.socket = socket
        wake = try WakeSignal()
    }

    /// Starts the thread. The owner's closures run on it from now on; the thread keeps them (and what they
    /// hold) until it stops.
    func start(name: String, owner: Owner) {
        self.owner = owner
        let thread = Thread { [self] in
            threadID = pthread_self()
            loop()
            finished.signal()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Runs `job` on the thread, after the jobs handed over before it.
    func perform(_ job: @escaping @Sendable () -> Void) {
        let wasEmpty = jobs.withLock { queue in
            queue.append(job)
            return queue.count == 1
        }
        if wasEmpty { wake.signal() }
    }

    /// Whether the caller is this socket's thread.
    var isCurrent: Bool {
        guard let threadID else { return false }
        return pthread_equal(threadID, pthread_self()) != 0
    }

    /// Queues one multipart message for the socket. Only on the thread.
    func send(_ parts: [[UInt8]]) {
        send(parts, after: [])
    }

    /// Queues one multipart message: the `envelope` parts (a routing id, a signature), then `frames`. The two
    /// are kept apart so that no array is built per message to join them. Only on the thread.
    func send(_ frames: [[UInt8]], after envelope: [[UInt8]]) {
        outbox.append(OutboundMessage(envelope: envelope, frames: frames))
        if outbox.count == 1 { flush() }
    }

    /// Runs the owner's tick no later than `instant` (a session's heartbeat changed). Only on the thread.
    func tick(by instant: ContinuousClock.Instant) {
        nextTick = min(nextTick, instant)
    }

    /// Asks the thread to stop after the jobs already handed over, then waits for it.
    func stopAndWait() {
        perform { [self] in stopping = true }
        finished.wait()
    }

    private func loop() {
        var poller = Poller()
        let socketIndex = poller.add(socket, for: .readable)
        let wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
        guard let owner else { return }
        while true {
            runJobs()
            if stopping { break }
            let now = ContinuousClock.now
            timers.fire(until: now)
            if now >= nextTick { nextTick = owner.tick(now) }
            flush()

            var wakeAt = nextTick
            if let deadline = timers.nextDeadline, deadline < wakeAt { wakeAt = deadline }
            let timeout = max(0, Int(((wakeAt - ContinuousClock.now) / .milliseconds(1)).rounded(.up)))
            poller.setEvents(outbox.isEmpty ? .readable : [.readable, .writable], at: socketIndex)
            do {
                try poller.poll(timeoutMilliseconds: timeout)
            } catch {
                break  // the context was terminated under us: nothing more can be sent or received
            }
            if poller.events(at: wakeIndex).contains(.readable) { wake.drain() }
            receiveAvailable(owner)
        }
        owner.stopped()
        flush()
        socket.close()
        self.owner = nil
    }

    private func runJobs() {
        // Repeat until no job is left, so jobs that hand over more jobs finish before the next poll.
        while true {
            // Swapping in an emptied buffer, instead of copying the queue out and clearing it under the lock,
            // saves allocating a new queue buffer per batch.
            var batch = spareJobs
            spareJobs = []
            jobs.withLock { swap(&$0, &batch) }
            if batch.isEmpty {
                spareJobs = batch
                return
            }
            for job in batch { job() }
            batch.removeAll(keepingCapacity: true)
            spareJobs = batch
        }
    }

    private func receiveAvailable(_ owner: Owner) {
        // A bounded batch, so outbound work and timers are not starved by a flood.
        for _ in 0..<512 {
            guard let frames = try? socket.receive(dontWait: true) else { return }
            owner.received(frames)
        }
    }

    /// Sends what the socket will take now; the rest waits for the socket to become writable.
    private func flush() {
        while let message = outbox.first {
            do {
                guard try transmit(message) else { return }
            } catch {
                // EHOSTUNREACH: the peer has gone; its session ends by heartbeat. Nothing else can be done with it.
            }
            outbox.removeFirst()
        }
    }

    /// Sends the parts of one message without waiting; false when the socket takes none now (libzmq queues the
    /// parts of a message all or none, so only the first can be refused).
    private func transmit(_ message: OutboundMessage) throws -> Bool {
        let last = message.envelope.count + message.frames.count - 1
        var index = 0
        func put(_ part: [UInt8]) throws -> Bool {
            defer { index += 1 }
            return try part.withUnsafeBytes { try socket.send($0, more: index < last, dontWait: true) }
        }
        for part in message.envelope where try !put(part) { return false }
        for part in message.frames where try !put(part) { return false }
        return true
    }
}

/// One multipart message waiting for the socket: the parts in front (routing id, signature), then the rest.
struct OutboundMessage {
    var envelope: [[UInt8]]
    var frames: [[UInt8]]
}

/// A FIFO of outbound messages that does not shift elements on removal.
struct OutboundQueue {
    private var items: [OutboundMessage] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: OutboundMessage? { isEmpty ? nil : items[head] }

    mutating func append(_ message: OutboundMessage) { items.append(message) }

    mutating func removeFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
    }
}
