import Synchronization
import Testing
@testable import ZeroBridge

/// ``BridgeProgress``: what a call's progress sequence gives its reader, over a real host and peer and on its own.
@Suite("A call's progress sequence", .timeLimit(.minutes(2)))
struct ProgressSequenceTests {
    struct Undecodable: Error, Equatable {}

    @Test("every event, in order, reaches a reader that waits for each one alone (woken by the socket thread's round)")
    func loneEventsWakeTheReader() async throws {
        let host = try startConformanceHost()
        let seen = Atomic<Int>(0)
        try host.handle("lockstep") { payload, request in
            // The next event only once the reader has the last: each arrives alone, to a reader that waits for it.
            for step in 1...(payload.intValue ?? 0) {
                try await request.progress(.int(step))
                while seen.load(ordering: .acquiring) < step { try await Task.sleep(for: .milliseconds(1)) }
            }
            return "done"
        }
        let peer = try await connectPeer(host)
        let call = peer.stream("lockstep", 50)
        var steps: [Int] = []
        for try await step in call.progress {
            steps.append(step.intValue ?? -1)
            seen.store(steps.count, ordering: .releasing)
        }
        #expect(steps == Array(1...50))
        #expect(try await call.result == "done")
        await peer.close()
        await host.shutdown()
    }

    @Test("a reader that starts late gets all 20,000 events of a finished call, in order, then the end")
    func lateReaderGetsEverything() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host)
        let call = peer.stream("count", ["n": 20_000])
        #expect(try await call.result == ["n": 20_000])  // everything has arrived before the first read
        var expected = 1
        for try await event in call.progress {
            #expect(event["i"]?.intValue == expected)
            expected += 1
        }
        #expect(expected == 20_001)
        await peer.close()
        await host.shutdown()
    }

    @Test("an event that does not decode is thrown once, after the events before it; then the sequence ends")
    func decodingErrorEndsTheSequence() async throws {
        let call = BridgeCall<Int, String> { onProgress in
            onProgress(.success(1))
            onProgress(.success(2))
            onProgress(.failure(Undecodable()))
            onProgress(.success(3))  // after the end: not kept
            return "result"
        }
        #expect(try await call.result == "result")
        var iterator = call.progress.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
        #expect(try await iterator.next() == 2)
        await #expect(throws: Undecodable.self) { try await iterator.next() }
        #expect(try await iterator.next() == nil)
    }

    @Test("cancelling the reading task ends its sequence; the call goes on to its result")
    func cancelledReaderEndsSequence() async throws {
        let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let call = BridgeCall<Int, String> { onProgress in
            onProgress(.success(1))
            await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
            onProgress(.success(2))  // after the reader was cancelled: not kept
            return "finished"
        }
        let firstRead = Atomic<Bool>(false)
        let reader = Task {
            var read: [Int] = []
            for try await step in call.progress {
                read.append(step)
                firstRead.store(true, ordering: .releasing)
            }
            return read
        }
        #expect(try await eventually { firstRead.load(ordering: .acquiring) })
        reader.cancel()
        #expect(try await reader.value == [1])
        #expect(try await eventually { release.withLock { $0 != nil } })
        release.withLock { $0?.resume() }
        #expect(try await call.result == "finished")
    }

    @Test("a second task reading at the same time is told so; the first reads on")
    func concurrentReaderRefused() async throws {
        let release = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let call = BridgeCall<Int, String> { onProgress in
            await withCheckedContinuation { continuation in release.withLock { $0 = continuation } }
            onProgress(.success(7))
            return "done"
        }
        let first = Task {
            var iterator = call.progress.makeAsyncIterator()
            return try await iterator.next()
        }
        #expect(try await eventually { call.progress.channel.isAwaited })
        var second = call.progress.makeAsyncIterator()
        await #expect(throws: BridgeProgress<Int>.ConcurrentIteration.self) { try await second.next() }
        #expect(try await eventually { release.withLock { $0 != nil } })
        release.withLock { $0?.resume() }
        #expect(try await first.value == 7)
        #expect(try await call.result == "done")
    }
}
