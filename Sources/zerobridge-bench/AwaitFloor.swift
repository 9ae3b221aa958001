// `zerobridge-bench await-floor`: what an `await`ed call costs in Swift before any protocol work, as a floor for the
// Swift peer's pipelined target (issue 26: at least 0.25 of raw libzmq).
//
// `window` tasks each await one call after another, as `zerobridge-bench peer` does, but a call is only this: a
// continuation handed to one socket thread that owns a DEALER, which sends the raw echo's bytes behind a 4-byte call
// number, and resumes the continuation when raw-server echoes them back. No JSON, no signatures, no timers; with
// `--cancellation yes` each call also waits inside `withTaskCancellationHandler`, as every BridgePeer call does.
import Foundation
import Synchronization
import ZeroMQ

/// The calls handed to the socket thread and not yet sent, and whether it may be asleep in its poll.
private struct Handed {
    var calls: [(number: UInt32, continuation: UnsafeContinuation<Void, Never>)] = []
    var sleeping = false
}

private final class FloorThread: @unchecked Sendable {
    private let dealer: Socket
    private let wake: WakeSignal
    private let handed = Mutex(Handed())
    // Owned by the thread.
    private var waiting: [UInt32: UnsafeContinuation<Void, Never>] = [:]
    private var taken: [(number: UInt32, continuation: UnsafeContinuation<Void, Never>)] = []

    init(endpoint: String) throws {
        let context = try Context()
        dealer = try Socket(.dealer, context: context)
        try dealer.set(.sendHighWaterMark(0), .receiveHighWaterMark(0), .linger(milliseconds: 0))
        try dealer.connect(endpoint)
        wake = try WakeSignal()
    }

    /// From any task: the call goes out on the thread's next turn.
    func hand(_ number: UInt32, _ continuation: UnsafeContinuation<Void, Never>) {
        let signal = handed.withLock { state in
            state.calls.append((number, continuation))
            defer { state.sleeping = false }
            return state.sleeping
        }
        if signal { wake.signal() }
    }

    func start() {
        Thread.detachNewThread { [self] in
            do { try loop() } catch {
                // The calls would wait for ever: the run ends here, as the other subcommands end on an error.
                FileHandle.standardError.write(Data("zerobridge-bench: await-floor: \(error)\n".utf8))
                exit(1)
            }
        }
    }

    private func loop() throws {
        var poller = Poller()
        _ = poller.add(dealer, for: .readable)
        _ = poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
        var body = [UInt8](repeating: 0, count: 4) + requestBody
        while true {
            handed.withLock { swap(&taken, &$0.calls) }
            for call in taken {
                waiting[call.number] = call.continuation
                withUnsafeBytes(of: call.number) { number in body.withUnsafeMutableBytes { $0.copyMemory(from: number) } }
                _ = try dealer.send([[], body])
            }
            taken.removeAll(keepingCapacity: true)
            var received = 0
            while let reply = try dealer.receive(dontWait: true) {
                guard reply.count == 2, reply[1].count == body.count else { throw Usage("the raw echo returned something else") }
                let number = reply[1].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                waiting.removeValue(forKey: number)?.resume()
                received += 1
            }
            if received == 0 {
                let idle = handed.withLock { state in
                    state.sleeping = state.calls.isEmpty
                    return state.sleeping
                }
                if idle { _ = try poller.poll(timeoutMilliseconds: 100); wake.drain() }
            }
        }
    }
}

func awaitFloorBench(_ options: Options, cancellation: Bool) async throws {
    let thread = try FloorThread(endpoint: options.endpoint)
    thread.start()
    let numbers = Counter()
    @Sendable func call() async {
        let number = UInt32(truncatingIfNeeded: numbers.value.add(1, ordering: .relaxed).oldValue)
        if cancellation {
            await withTaskCancellationHandler {
                await withUnsafeContinuation { thread.hand(number, $0) }
            } onCancel: {}
        } else {
            await withUnsafeContinuation { thread.hand(number, $0) }
        }
    }
    for _ in 0..<options.warmup { await call() }

    let startCPU = cpuMicroseconds()
    let start = now()
    let end = start + UInt64(options.seconds * 1e9)
    let started = Counter()
    let max = options.max
    let completed = await withTaskGroup(of: Int.self) { group in
        for _ in 0..<options.window {
            group.addTask {
                var mine = 0
                while started.value.add(1, ordering: .relaxed).oldValue < max {
                    await call()
                    mine += 1
                    if mine & 63 == 0 && now() >= end { break }
                }
                return mine
            }
        }
        return await group.reduce(0, +)
    }
    var result: [String: Any] = ["window": options.window, "cancellation": cancellation]
    result.merge(measured(completed, since: start, cpu: startCPU, warmup: options.warmup)) { a, _ in a }
    emit(result)
}
