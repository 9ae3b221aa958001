import Foundation
import Synchronization
import Testing
import ZeroMQ
@testable import ZeroBridge

/// A started thread on a ROUTER, whose tick asks for nothing sooner than an hour, and a DEALER connected to it.
final class VisitedThreadRig: @unchecked Sendable {
    let context: Context
    let thread: SocketThread
    let dealer: Socket
    let outbox = Outbox()
    /// Messages the thread read from the socket.
    let arrived = Arrivals()

    final class Arrivals: Sendable {
        let count = Atomic<Int>(0)
    }

    init() throws {
        context = try Context()
        let router = try Socket(.router, context: context)
        try router.set(.linger(milliseconds: 0), .routerMandatory(true))
        let endpoint = "inproc://socket-thread-\(UUID().uuidString)"
        try router.bind(endpoint)
        dealer = try Socket(.dealer, context: context)
        try dealer.set(.linger(milliseconds: 0), .routingID(Array("dealer".utf8)), .receiveTimeout(milliseconds: 20_000))
        try dealer.connect(endpoint)
        thread = try SocketThread(socket: router)
        thread.start(name: "socket-thread-test", owner: .init(
            received: { [arrived] _ in arrived.count.add(1, ordering: .relaxed) },
            tick: { now in now + .seconds(3600) },
            stopped: {}))
    }

    /// Runs `job` as a visitor: offers it until it runs on the calling thread (the thread was waiting), however
    /// many offers that takes; an offer the thread took instead runs nothing.
    func visit(_ job: @escaping @Sendable () -> Void) {
        while true {
            let caller = pthread_self()
            let ranHere = Atomic<Bool>(false)
            thread.performHere {
                guard pthread_equal(caller, pthread_self()) != 0 else { return }
                ranHere.store(true, ordering: .relaxed)
                job()
            }
            if ranHere.load(ordering: .relaxed) { return }
            usleep(1_000)
        }
    }

    func stop() async {
        await thread.stop()
        dealer.close()
    }
}

/// `SocketThread.performHere`: a job from another thread (a WebSocket event loop) runs there, in the socket thread's
/// place, while the thread waits in poll; what it leaves for the thread (a send through the socket, a timer due
/// sooner) still happens though the thread's poll would wait an hour; and jobs keep their order either way.
@Suite("SocketThread visitors", .timeLimit(.minutes(3)))
struct SocketThreadTests {
    @Test("SocketThread.current is the thread in its own jobs, and nil in a visitor's job and elsewhere")
    func currentThread() async throws {
        let rig = try VisitedThreadRig()
        let seen = Mutex<(inJob: Bool?, inVisit: Bool?)>((nil, nil))
        rig.visit { seen.withLock { $0.inVisit = SocketThread.current != nil } }
        rig.thread.perform { [thread = rig.thread] in seen.withLock { $0.inJob = SocketThread.current === thread } }
        #expect(try await eventually { seen.withLock { $0.inJob != nil } })
        #expect(seen.withLock { $0.inJob == true && $0.inVisit == false })
        #expect(SocketThread.current == nil)
        await rig.stop()
    }

    @Test("a visitor's send through the socket goes out, though the thread's poll would wait an hour")
    func visitorSendsThroughTheThread() async throws {
        let rig = try VisitedThreadRig()
        let outbox = rig.outbox
        rig.visit { [thread = rig.thread] in
            thread.send([Array("from a visitor".utf8)], after: [Array("dealer".utf8)], via: outbox)
        }
        let frames = try rig.dealer.receiveBytes()  // the receive timeout (20 s) bounds the wait
        #expect(frames == [Array("from a visitor".utf8)])
        await rig.stop()
    }

    @Test("a message that arrives while a visitor sends through the socket is read, though the thread's poll would wait an hour")
    func arrivalsDuringAVisitorsSendAreRead() async throws {
        // A send takes in the commands that announce arrivals, after which the socket's descriptor stays quiet: the
        // visitor asks libzmq and wakes the thread. Each round races an arrival against a visitor's send; one whose
        // announcement the send took and no one heeded would wait for the hour.
        let rig = try VisitedThreadRig()
        let outbox = rig.outbox
        for round in 1...300 {
            _ = try rig.dealer.send([Array("to the thread \(round)".utf8)])
            rig.thread.performHere { [thread = rig.thread] in
                thread.send([Array("from a visitor".utf8)], after: [Array("dealer".utf8)], via: outbox)
            }
            let read = try await eventually(timeout: .seconds(10)) { rig.arrived.count.load(ordering: .relaxed) == round }
            #expect(read, "round \(round): what arrived was not read")
            if !read { break }
        }
        await rig.stop()
    }

    @Test("a timer a visitor schedules fires on time, though the thread's poll would wait an hour")
    func visitorTimerWakesTheThread() async throws {
        let rig = try VisitedThreadRig()
        let fired = AsyncStream<Void>.makeStream()
        rig.visit { [thread = rig.thread] in
            _ = thread.timers.schedule(at: .now + .milliseconds(20)) { fired.continuation.yield() }
        }
        var iterator = fired.stream.makeAsyncIterator()
        let started = ContinuousClock.now
        _ = await iterator.next()
        #expect(ContinuousClock.now - started < .seconds(30))
        await rig.stop()
    }

    @Test("jobs run in the order they were handed over, whether the thread or a visitor runs them")
    func order() async throws {
        let rig = try VisitedThreadRig()
        let ran = Mutex<[Int]>([])
        let done = AsyncStream<Void>.makeStream()
        for round in 0..<200 {
            rig.thread.perform { ran.withLock { $0.append(2 * round) } }
            rig.thread.performHere {
                ran.withLock { $0.append(2 * round + 1) }
                if round == 199 { done.continuation.yield() }
            }
        }
        var iterator = done.stream.makeAsyncIterator()
        _ = await iterator.next()
        #expect(ran.withLock { $0 } == Array(0..<400))
        await rig.stop()
    }
}

/// What a round sends through the socket goes to libzmq in bursts (issue 26): held in its outbox while the round runs,
/// `SocketThread.heldBurst` for a round's first burst, at most `SocketThread.largestHeldBurst` at a time, and in the
/// order it was sent.
@Suite("SocketThread bursts", .timeLimit(.minutes(3)))
struct SocketThreadBurstTests {
    @Test("a job's sends wait in their outbox until the round is dispatched, then arrive in order")
    func heldUntilTheRoundEnds() async throws {
        let rig = try VisitedThreadRig()
        let outbox = rig.outbox
        let queuedAfterEachSend = Mutex<[Int]>([])
        rig.thread.perform { [thread = rig.thread] in
            for index in 0..<3 {
                thread.send([Array("message \(index)".utf8)], after: [Array("dealer".utf8)], via: outbox)
                queuedAfterEachSend.withLock { $0.append(outbox.messages.count) }
            }
        }
        for index in 0..<3 {
            let frames = try rig.dealer.receiveBytes()  // the receive timeout (20 s) bounds the wait
            #expect(frames == [Array("message \(index)".utf8)])
        }
        #expect(queuedAfterEachSend.withLock { $0 } == [1, 2, 3])
        await rig.stop()
    }

    @Test("however many jobs a round runs, the first burst goes after heldBurst messages, none waits for more than largestHeldBurst, and all arrive in order")
    func boundedBursts() async throws {
        let rig = try VisitedThreadRig()
        let outbox = rig.outbox
        let queued = Mutex<[Int]>([])
        let count = 4 * SocketThread.largestHeldBurst
        for index in 0..<count {
            rig.thread.perform { [thread = rig.thread] in
                thread.send([Array("message \(index)".utf8)], after: [Array("dealer".utf8)], via: outbox)
                queued.withLock { $0.append(outbox.messages.count) }
            }
        }
        for index in 0..<count {
            let frames = try rig.dealer.receiveBytes()
            #expect(frames == [Array("message \(index)".utf8)])
        }
        let sizes = queued.withLock { $0 }
        #expect(sizes.max()! <= SocketThread.largestHeldBurst)
        // Up to the first burst (the first send that finds fewer waiting than the one before), at most heldBurst waited.
        let firstBurst = sizes.indices.dropLast().first { sizes[$0 + 1] < sizes[$0] } ?? sizes.count - 1
        #expect(sizes[...firstBurst].max()! <= SocketThread.heldBurst)
        await rig.stop()
    }

    @Test("a shared outbox (answers to strangers) loses only the message whose connection has gone, not those behind it")
    func sharedOutboxKeepsOthersAnswers() async throws {
        let rig = try VisitedThreadRig()
        let strangers = Outbox(shared: true)
        rig.thread.perform { [thread = rig.thread] in
            // Held for the round's burst, then flushed: the first is refused EHOSTUNREACH (ROUTER_MANDATORY).
            thread.send([Array("to a connection that has gone".utf8)], after: [Array("gone".utf8)], via: strangers)
            thread.send([Array("to the dealer".utf8)], after: [Array("dealer".utf8)], via: strangers)
        }
        // Before the fix the whole queue was dropped with the first message, and this waited out its 20 s timeout.
        #expect(try rig.dealer.receiveBytes() == [Array("to the dealer".utf8)])
        await rig.stop()
    }
}

/// What a job answers an attached connection (a WebSocket) whose peer reads batches (SPEC 3.3, on WebSocket since
/// 1.11): held in its outbox while the job runs and sent when it ends, as one batch under one frame 0; to a peer that
/// does not read them, each message as it is sent.
@Suite("SocketThread attached connections", .timeLimit(.minutes(3)))
struct SocketThreadAttachedTests {
    /// An attached connection that keeps what it is handed, in order.
    final class Recorder: AttachedConnection, @unchecked Sendable {
        let taken = Mutex<[(signature: [UInt8], frames: [[UInt8]])]>([])
        func transmit(signature: [UInt8], frames: [[UInt8]]) -> SocketThread.Transmission {
            taken.withLock { $0.append((signature, frames)) }
            return .sent
        }
        var count: Int { taken.withLock { $0.count } }
    }

    static let page = Array("page".utf8)

    /// Five messages sent in one visitor's job to an attached recorder, awaiting their frame 0 (unkeyed: empty, or
    /// `b`), on a thread of its own: how many the recorder had taken when the job ended, and all it took.
    func answerFive(batches: Bool) async throws -> (takenInJob: Int, taken: [(signature: [UInt8], frames: [[UInt8]])]) {
        let rig = try VisitedThreadRig()
        let recorder = Recorder()
        let outbox = Outbox()
        outbox.signer = Outbox.unkeyed(_:_:batch:)
        outbox.batches = batches
        let takenInJob = Atomic<Int>(-1)
        rig.visit { [thread = rig.thread] in
            thread.attach(recorder, as: Self.page)
            for index in 0..<5 {
                thread.send([Array("answer \(index)".utf8)], after: [Self.page], via: outbox, awaitingSignature: true)
            }
            takenInJob.store(recorder.count, ordering: .relaxed)
        }
        await rig.stop()
        return (takenInJob.load(ordering: .relaxed), recorder.taken.withLock { $0 })
    }

    @Test("a peer that reads batches gets what one job answers as one batch when the job ends")
    func oneBatchPerJob() async throws {
        let (takenInJob, taken) = try await answerFive(batches: true)
        #expect(takenInJob == 0)
        try #require(taken.count == 1)
        #expect(taken[0].signature == [Signature.batchForm])
        #expect(taken[0].frames.count == 1)
        var read: [[UInt8]] = []
        let refusal = taken[0].frames[0].withUnsafeBytes { batch in
            WebSocketFraming.readSignedBatch(batch) { entry in
                if case .success(let parts) = entry { read.append(Array(parts[1])) }
                return true
            }
        }
        #expect(refusal == nil)
        #expect(read == (0..<5).map { Array("answer \($0)".utf8) })
    }

    @Test("a peer that does not read batches gets each message as it is sent")
    func oneAtATimeWithoutBatches() async throws {
        let (takenInJob, taken) = try await answerFive(batches: false)
        #expect(takenInJob == 5)
        #expect(taken.map(\.signature) == Array(repeating: [], count: 5))
        #expect(taken.map(\.frames) == (0..<5).map { [Array("answer \($0)".utf8)] })
    }
}
