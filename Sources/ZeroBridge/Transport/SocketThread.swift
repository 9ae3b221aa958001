import Foundation
import Synchronization
import ZeroMQ

/// Work for a socket thread that is an object already (a call on its way, for instance): handed over as it is, where
/// a closure would cost an allocation per job.
protocol SocketThreadWork: AnyObject, Sendable {
    /// Runs on the thread.
    func run()
}

/// The one thread that owns a socket: it polls the socket, runs jobs handed to it, fires timers and sends.
///
/// Everything that touches the socket, or state confined to this thread (links, sessions), runs here, so that
/// state needs no locks. Other threads hand work over with ``perform(_:)``; each hand-off wakes the thread once,
/// however many jobs arrive before it wakes.
///
/// "Confined to the thread" means run by whoever holds ``ownership``: the thread itself, except while it waits in
/// poll. Then another thread may run its job in the thread's place (``performHere(_:)``): a WebSocket event loop,
/// which saves the two hand-offs (to the thread and back to the event loop) that cost a WebSocket request most of its
/// latency, or a task starting a call, which saves waking the thread to send it. A visitor sends through the socket
/// as the thread would (libzmq lets a socket move between threads behind a full memory barrier, which `ownership`
/// is), then asks libzmq whether the send took in messages the socket's descriptor will no longer announce, and
/// wakes the thread if so.
final class SocketThread: @unchecked Sendable {
    /// What the owner of the socket does on this thread.
    struct Owner {
        /// One whole inbound multipart message.
        var received: ([Frame]) -> Void
        /// Periodic work (heartbeats); returns when it wants to run next.
        var tick: (ContinuousClock.Instant) -> ContinuousClock.Instant
        /// The last job, after the thread stops taking new ones; the socket is closed after it.
        var stopped: () -> Void
        /// Connection events of the socket (disconnects, failed accepts), read before the messages of each round,
        /// so an event about a connection is seen before anything that came after it.
        var monitored: (monitor: SocketMonitor, event: (SocketMonitor.Event) -> Void)? = nil
        /// After the last messages were handed to libzmq, just before the socket closes.
        var closing: () -> Void = {}
    }

    /// Replaced only on the thread (``replaceSocket(with:)``).
    private(set) var socket: Socket
    let timers = Timers()
    private let wake: WakeSignal
    private let jobs = Mutex(JobQueue())
    /// Held by the thread except while it waits in poll, and by a visitor while it runs a job (``performHere(_:)``).
    private let ownership = Mutex(())
    private var owner: Owner?
    // Confined to the thread (to whoever holds `ownership`):
    /// Whether a visitor may run jobs now: the thread's loop is running (between its start and its owner's `stopped`).
    private var takesVisitors = false
    /// A visitor is running a job on another thread: sends through the socket wait in their outboxes for the thread.
    private var visited = false
    /// What the thread's poll waits until: a visitor that leaves work due sooner (a timer, a send) wakes it.
    private var waitingUntil = ContinuousClock.now
    /// A visitor queued a message for the thread to send.
    private var leftToSend = false
    /// Set while the thread reads and dispatches a round: what it sends through the socket waits in the outboxes and
    /// goes to libzmq in bursts, after every ``heldBurst`` messages and when the round is dispatched (``flush(now:)``).
    /// libzmq's I/O thread is woken (an eventfd written and read, then a `sendto`) whenever a message lands in a pipe
    /// it found empty: sent one by one as they were produced, a round's responses woke it every 3 to 5 of them once
    /// signing spread them out (issue 26, keyed host at 64 in flight).
    private var holdingSends = false
    /// Messages held in this round since the last burst.
    private var held = 0
    /// The messages held back before this round's next burst: ``heldBurst`` for the first, twice as many for each
    /// after it, up to ``largestHeldBurst``.
    private var burst = heldBurst
    /// The first burst of a round. Not the whole round: a peer that answers whole batches (the Node peer) starts on
    /// the first burst while the rest is dispatched; holding whole rounds made the two take turns and gave back the
    /// throughput the fewer wake-ups saved (bench/RESULTS.md, issue 26).
    static let heldBurst = 16
    /// The largest burst: a long round (hundreds of messages at 1,024 in flight) goes to libzmq in a few large bursts,
    /// not dozens of small ones, once its first burst has set the other side going.
    static let largestHeldBurst = 128
    private var spareJobs: [Job] = []
    /// Outboxes with messages libzmq has not taken yet, in the order they first had one.
    private var waiting: [Outbox] = []
    private var stopping = false
    private var nextTick = ContinuousClock.now
    private var socketReplaced = false
    /// Whether the socket may hold messages its signalling descriptor will not announce: until a receive finds nothing,
    /// and again after any other call on it (a send may take in the commands that announce messages). Only on the
    /// thread; see ``SignalPoller``.
    private var socketUnsettled = true
    /// Connections that reach the owner other than through the socket (WebSocket), by the routing id the owner knows
    /// them by. Confined to the thread.
    private var attached: [[UInt8]: any AttachedConnection] = [:]
    /// Jobs handed over and not run yet. Once the thread has ended, a job still runs (a call fails at once on its
    /// closed link instead of waiting for a thread that is gone): on the thread that handed it over, one drainer at
    /// a time, so jobs never run concurrently.
    /// A job as handed over. In a struct, the closure is stored as it is: an array of bare closures stores each
    /// behind a reabstraction thunk, an allocation per job.
    private enum Job {
        case closure(@Sendable () -> Void)
        case work(any SocketThreadWork)

        func run() {
            switch self {
            case .closure(let run): run()
            case .work(let work): work.run()
            }
        }
    }

    private struct JobQueue {
        var jobs: [Job] = []
        var ended = false
        var draining = false
        /// The thread found no job and is on its way into a poll that may block: the next job hands over must wake
        /// it. A thread that runs finds jobs at its next round, so they do not signal (an eventfd written and read).
        var sleeping = false
    }

    /// Whether the thread has ended, and who waits for it to.
    private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    init(socket: Socket) throws {
        self.socket = socket
        wake = try WakeSignal()
    }

    /// Starts the thread. The owner's closures run on it from now on; the thread keeps them (and what they
    /// hold) until it stops.
    func start(name: String, owner: Owner) {
        self.owner = owner
        let thread = Thread { [self] in
            pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
            defer { pthread_setspecific(Self.currentKey, nil) }
            loop()
            jobs.withLock {
                $0.ended = true
                $0.draining = true
            }
            drainAfterEnd()  // what was handed over while the thread was stopping
            let waiters = finished.withLock { state in
                state.done = true
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Runs `job` on the thread, after the jobs handed over before it.
    func perform(_ job: @escaping @Sendable () -> Void) {
        hand(.closure(job))
    }

    /// Runs `work` on the thread, as ``perform(_:)`` runs a closure, with no closure made for it.
    func perform(_ work: any SocketThreadWork) {
        hand(.work(work))
    }

    private func hand(_ job: Job) {
        let (asleep, drain) = jobs.withLock { queue -> (Bool, Bool) in
            queue.jobs.append(job)
            guard queue.ended else {
                defer { queue.sleeping = false }
                return (queue.sleeping, false)
            }
            defer { queue.draining = true }
            return (false, !queue.draining)
        }
        if asleep { wake.signal() }
        if drain { drainAfterEnd() }
    }

    /// Runs `job` on the calling thread, now, if the thread waits in poll with no job handed over before still to
    /// run; otherwise hands it over as ``perform(_:)`` does. Either way it runs after the jobs handed over before it,
    /// and never at once with another. For WebSocket event loops: a message read there is handled there, and what its
    /// handler answers is written there, without a wake-up of the thread (SPEC 2.2 changes nothing: only who runs it).
    func performHere(_ job: @escaping @Sendable () -> Void) {
        performHere(.closure(job))
    }

    /// Runs `work` as ``performHere(_:)`` runs a closure: a call started by an idle link's caller is sent from the
    /// caller's thread, without a wake-up of the socket thread.
    func performHere(_ work: any SocketThreadWork) {
        performHere(.work(work))
    }

    private func performHere(_ job: Job) {
        let ran = ownership.withLockIfAvailable { _ -> Bool in
            guard takesVisitors, jobs.withLock({ $0.jobs.isEmpty }) else { return false }
            let settled = !socketUnsettled
            visited = true
            job.run()
            visited = false
            // What the job left to send goes now, as the thread would after a round (a batch-reading WebSocket
            // peer's answers among it); what cannot go yet waits for the thread.
            if leftToSend {
                _ = flush(now: .now)
                leftToSend = !waiting.isEmpty
            }
            // A send through the socket may have taken in the commands that announce messages, after which its
            // descriptor does not wake the thread for them: ask, as the thread does before it waits.
            var unread = false
            if settled && socketUnsettled {
                if let pending = try? socket.pendingEvents, !pending.contains(.readable) {
                    socketUnsettled = false
                } else {
                    unread = true  // messages to read, or a socket gone: the thread finds out
                }
            }
            // Work the visit left for the thread sooner than its poll would end: messages to read, sends that waited,
            // a timer.
            if unread || leftToSend || timers.nextDeadline.map({ $0 < waitingUntil }) == true || nextTick < waitingUntil {
                leftToSend = false
                wake.signal()
            }
            return true
        } ?? false
        if !ran { hand(job) }
    }

    /// Runs the jobs handed over after the thread ended, and those they hand over in turn, until none is left.
    private func drainAfterEnd() {
        while true {
            let batch = jobs.withLock { queue -> [Job] in
                if queue.jobs.isEmpty { queue.draining = false }
                defer { queue.jobs.removeAll() }
                return queue.jobs
            }
            if batch.isEmpty { return }
            for job in batch { job.run() }
        }
    }

    /// The socket thread the caller runs on, if it is one (not a visitor's: ``performHere(_:)``).
    static var current: SocketThread? {
        pthread_getspecific(currentKey).map { Unmanaged<SocketThread>.fromOpaque($0).takeUnretainedValue() }
    }

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Sends one multipart message now if libzmq takes it, else queues it in `outbox`: the `envelope` parts (a
    /// routing id, a signature), then `frames`. The two are kept apart so that no array is built per message to
    /// join them. `awaitingSignature`: the envelope lacks frame 0 (a keyed connection's), which the outbox's signer
    /// makes as the message goes, in the order sent: for it alone, or for a batch of what the round queued with it
    /// (SPEC 3.3). Only on the thread.
    func send(_ frames: [[UInt8]], after envelope: [[UInt8]], via outbox: Outbox, awaitingSignature: Bool = false) {
        var message = OutboundMessage(envelope: envelope, frames: frames, awaitsSignature: awaitingSignature)
        // A round holds what goes through the socket for its burst; a visitor (the thread waits in poll) sends now.
        // A WebSocket connection takes its messages at once, but for a peer that reads batches (SPEC 3.3): what one
        // job answers it waits until the job ends, to go as one batch under one signature.
        let attached = attachedConnection(message) != nil
        let direct = attached ? !(outbox.batches && (visited || holdingSends)) : !holdingSends
        if direct && outbox.messages.isEmpty && outbox.retryAt == nil {
            if awaitingSignature {
                guard let signed = outbox.signedAlone(message) else { return }  // the channel is gone
                message = signed
            }
            switch transmitting(message) {
            case .sent: return
            case .refused: break
            case .unreachable:
                outbox.onUnreachable?()
                return
            }
            block(outbox)
        }
        outbox.append(message)
        if !outbox.isListed {
            outbox.isListed = true
            waiting.append(outbox)
        }
        if visited { leftToSend = true } else if holdingSends { held += 1 }
    }

    /// From now on, messages sent to `routingID` go to `connection` instead of the socket. Only on the thread.
    func attach(_ connection: any AttachedConnection, as routingID: [UInt8]) {
        attached[routingID] = connection
    }

    /// Whether `routingID` is an attached connection's (a WebSocket), not the socket's. Only on the thread.
    func isAttached(_ routingID: [UInt8]) -> Bool { attached[routingID] != nil }

    /// Messages to `routingID` are unreachable from now on (its connection ended). Only on the thread.
    func detach(_ routingID: [UInt8]) {
        attached[routingID] = nil
    }

    /// Hands the owner one message that arrived over an attached connection: `frames` are the routing id, then the
    /// frames as the peer sent them, exactly as the socket delivers them. Only on the thread.
    func deliver(_ frames: [Frame]) {
        owner?.received(frames)
    }

    /// Closes the socket without lingering, dropping whatever libzmq still holds for it, and goes on with `new`
    /// (a peer that lost its host: nothing queued for the lost host arrives later, SPEC 7.3). Only on the thread.
    func replaceSocket(with new: Socket) {
        try? socket.set(.linger(milliseconds: 0))
        socket.close()
        socket = new
        socketReplaced = true
        socketUnsettled = true
    }

    /// Stops listening at `endpoint` (libzmq closes the listener on its I/O thread, after this returns). Only on the
    /// thread.
    func unbind(_ endpoint: String) throws {
        socketUnsettled = true
        try socket.unbind(endpoint)
    }

    /// Forgets what `outbox` still holds (its conversation has ended). Only on the thread.
    func discard(_ outbox: Outbox) {
        outbox.discard()
        if outbox.isListed {
            outbox.isListed = false
            waiting.removeAll { $0 === outbox }
        }
    }

    /// Runs the owner's tick no later than `instant` (a session's heartbeat changed). Only on the thread.
    func tick(by instant: ContinuousClock.Instant) {
        nextTick = min(nextTick, instant)
    }

    /// Asks the thread to stop after the jobs already handed over, then waits for it to end, suspending rather
    /// than blocking (a blocked cooperative thread is one of two on these machines).
    func stop() async {
        perform { [self] in stopping = true }
        await withCheckedContinuation { continuation in
            let done = finished.withLock { state in
                if !state.done { state.waiters.append(continuation) }
                return state.done
            }
            if done { continuation.resume() }
        }
    }

    private func loop() {
        guard let owner else { return }
        var poller = SignalPoller()
        var socketIndex = 0
        var wakeIndex = 0
        var monitorIndex: Int?
        func buildPoller() throws(ZMQError) {
            poller = SignalPoller()
            socketIndex = try poller.add(signalOf: socket)
            wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor)
            monitorIndex = nil
            if let (monitor, _) = owner.monitored { monitorIndex = try poller.add(signalOf: monitor.eventSocket) }
        }
        var polled = false
        var timeout = 0
        // Like the socket's, the monitor's descriptor announces events only once a read has found none.
        var monitorUnsettled = true
        // A socket or a context closed under the thread: nothing more can be sent or received.
        var terminated = (try? buildPoller()) == nil
        while !terminated {
            // Everything but the poll itself holds `ownership`: while the thread waits, a visitor may run a job.
            let stop = ownership.withLock { _ -> Bool in
                takesVisitors = true
                holdingSends = true
                if polled {
                    if poller.isReadable(at: wakeIndex) { wake.drain() }
                    if let monitorIndex, poller.isReadable(at: monitorIndex) { monitorUnsettled = true }
                    if poller.isReadable(at: socketIndex) { socketUnsettled = true }
                }
                // The monitor is only ever read, and read until empty: after that its descriptor says when to read it.
                if monitorUnsettled, let (monitor, event) = owner.monitored {
                    while let next = try? monitor.nextAvailable() { event(next) }
                    monitorUnsettled = false
                }
                if socketUnsettled && !receiveAvailable(owner) {
                    terminated = true
                    return false
                }
                var jobsLeft = runJobs()
                if stopping {
                    holdingSends = false  // the last flush, after the owner stopped, sends what the round held
                    takesVisitors = false  // what is handed over from now on runs after the owner stopped, as before
                    return true
                }
                let now = ContinuousClock.now
                timers.fire(until: now)
                if now >= nextTick { nextTick = owner.tick(now) }
                holdingSends = false
                held = 0
                burst = Self.heldBurst
                let retryAt = flush(now: now)
                if socketReplaced {  // by a job, a timer or the tick above: poll the new socket, not the closed one
                    socketReplaced = false
                    guard (try? buildPoller()) != nil else {
                        terminated = true
                        return false
                    }
                }
                // Sends may have taken in the commands that announce messages: ask before waiting on the descriptor.
                if socketUnsettled && !jobsLeft {
                    guard let pending = try? socket.pendingEvents else {
                        terminated = true
                        return false
                    }
                    if pending.contains(.readable) { jobsLeft = true } else { socketUnsettled = false }
                }

                var wakeAt = nextTick
                if let deadline = timers.nextDeadline, deadline < wakeAt { wakeAt = deadline }
                if let retryAt, retryAt < wakeAt { wakeAt = retryAt }
                waitingUntil = jobsLeft ? now : wakeAt
                timeout = jobsLeft ? 0 : max(0, Int(((wakeAt - ContinuousClock.now) / .milliseconds(1)).rounded(.up)))
                return false
            }
            if stop || terminated { break }
            // A poll that may block is announced under the queue's lock: a job handed over since the round ran its
            // jobs makes it a look instead, and one handed over from now on signals.
            if timeout != 0, !jobs.withLock({ queue in
                queue.sleeping = queue.jobs.isEmpty
                return queue.sleeping
            }) {
                timeout = 0
            }
            do {
                try poller.wait(timeoutMilliseconds: timeout)
            } catch {
                break
            }
            if timeout != 0 { jobs.withLock { $0.sleeping = false } }  // awake: what is handed over waits for the round
            polled = true
        }
        ownership.withLock { _ in
            takesVisitors = false  // also when the poll failed
            owner.stopped()
            _ = flush(now: .now)
            owner.closing()
            self.owner = nil  // the monitor stops watching here, on the socket's own thread
            socket.close()
        }
    }

    /// Runs the jobs handed over, and those they hand over in turn, for up to about 5 ms; returns whether jobs are
    /// left. The bound keeps busy handlers (progress from hundreds of streams) from starving what arrives: another
    /// peer's request is read within one round.
    private func runJobs() -> Bool {
        let until = ContinuousClock.now + .milliseconds(5)
        while true {
            // Swapping in an emptied buffer, instead of copying the queue out and clearing it under the lock,
            // saves allocating a new queue buffer per batch.
            var batch = spareJobs
            spareJobs = []
            jobs.withLock { swap(&$0.jobs, &batch) }
            if batch.isEmpty {
                spareJobs = batch
                return false
            }
            for job in batch {
                job.run()
                sendHeldBurst()
            }
            batch.removeAll(keepingCapacity: true)
            spareJobs = batch
            if ContinuousClock.now >= until { return !jobs.withLock(\.jobs.isEmpty) }
        }
    }

    /// Reads what the socket has, up to a bound; false when the socket or its context was closed under the thread.
    private func receiveAvailable(_ owner: Owner) -> Bool {
        // A bounded batch, so outbound work and timers are not starved by a flood.
        for _ in 0..<512 {
            let received: [Frame]?
            do {
                received = try socket.receive(dontWait: true)
            } catch {
                return error != .contextTerminated && error != .notSocket
            }
            guard let frames = received else {
                socketUnsettled = false  // nothing left, and nothing called the socket since
                return true
            }
            // An attached connection's routing id is the owner's to give (128 random bits): a socket peer claiming one is
            // not let in as that connection.
            if !attached.isEmpty, let routingID = frames.first, attached[routingID.bytes] != nil { continue }
            owner.received(frames)
            sendHeldBurst()
        }
        return true
    }

    /// Between two messages or jobs of a round: the held messages go to libzmq once there are ``burst`` of them.
    private func sendHeldBurst() {
        guard held >= burst else { return }
        held = 0
        burst = min(burst * 2, Self.largestHeldBurst)
        _ = flush(now: .now)  // what libzmq refuses waits on its timer, which the round's own flush reads again
    }

    /// Sends what libzmq takes now from every outbox whose time to try has come; returns the earliest time a
    /// blocked outbox wants to try again. A blocked conversation waits on a timer that backs off (1 ms to 50 ms)
    /// rather than on POLLOUT, which a ROUTER reports whenever any one of its connections has room.
    private func flush(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard !waiting.isEmpty else { return nil }
        var earliest: ContinuousClock.Instant?
        var drained: [Outbox] = []
        var gone: [Outbox] = []
        var refused: [Outbox] = []
        // About 5 ms of sending per round, like runJobs: what is left goes out after the next poll, so hundreds
        // of full outboxes do not keep another peer's request unread.
        let until = ContinuousClock.now + .milliseconds(5)
        var sent = 0
        waiting.removeAll { outbox in
            if let retryAt = outbox.retryAt, retryAt > now {
                earliest = min(earliest ?? retryAt, retryAt)
                return false
            }
            if sent >= 64, ContinuousClock.now >= until {
                earliest = now
                return false
            }
            // retryAt stays set until a message goes through, so a reader that takes nothing stays "blocked since"
            // its first refusal (Outbox.isStalled).
            while let message = outbox.messages.first {
                if message.awaitsSignature {  // signed now, in the order sent: the counters increase
                    outbox.signHead()
                    continue
                }
                switch transmitting(message) {
                case .sent:
                    sent += 1
                    outbox.removeFirst()
                    outbox.retryAt = nil
                    outbox.backoff = .milliseconds(1)
                case .refused:
                    block(outbox)
                    earliest = min(earliest ?? outbox.retryAt!, outbox.retryAt!)
                    refused.append(outbox)
                    return false
                case .unreachable where outbox.isShared:
                    outbox.removeFirst()  // the rest is for other connections
                case .unreachable:
                    outbox.discard()  // all of it was for the same connection
                    gone.append(outbox)
                    outbox.isListed = false
                    return true
                }
            }
            outbox.isListed = false
            drained.append(outbox)
            return true
        }
        // Run after the list is settled: these may send (and list outboxes) again.
        for outbox in gone { outbox.onUnreachable?() }
        for outbox in drained { outbox.onDrained?() }
        for outbox in refused { outbox.onRefused?() }
        return earliest
    }

    private func block(_ outbox: Outbox) {
        outbox.retryAt = .now + outbox.backoff
        outbox.backoff = min(outbox.backoff * 2, .milliseconds(50))
    }

    enum Transmission { case sent, refused, unreachable }

    /// Sends the parts of one message without waiting. libzmq queues the parts of a message all or none, so only
    /// the first can be refused: EAGAIN when the connection's high-water mark is reached, EHOSTUNREACH (a ROUTER
    /// with ROUTER_MANDATORY) when the peer has gone.
    /// The attached connection (a WebSocket) `message` goes to, if it goes to one rather than to the socket.
    private func attachedConnection(_ message: OutboundMessage) -> (any AttachedConnection)? {
        guard !attached.isEmpty, let routingID = message.envelope.first else { return nil }  // only a host attaches
        return attached[routingID]
    }

    private func transmitting(_ message: OutboundMessage) -> Transmission {
        if let connection = attachedConnection(message) {
            return connection.transmit(signature: message.envelope[1], frames: message.frames)
        }
        socketUnsettled = true
        let last = message.envelope.count + message.frames.count - 1
        var index = 0
        func put(_ part: [UInt8]) throws -> Bool {
            defer { index += 1 }
            return try part.withUnsafeBytes { try socket.send($0, more: index < last, dontWait: true) }
        }
        do {
            for part in message.envelope where try !put(part) { return .refused }
            for part in message.frames where try !put(part) { return .refused }
            return .sent
        } catch {
            return .unreachable
        }
    }
}
