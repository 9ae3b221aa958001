import Foundation
import Histogram
import Synchronization

struct Options {
    var command = ""
    var endpoint = ""
    var window = 1
    var seconds = 1.0
    var max = 1_000_000
    var warmup = 2_000
    var events = 200_000

    init(_ arguments: [String]) throws {
        guard let first = arguments.first else { throw Usage("no command") }
        command = first
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw Usage("\(flag) needs a value") }
            switch flag {
            case "--endpoint": endpoint = value
            case "--seconds":
                guard let s = Double(value), s > 0 else { throw Usage("--seconds takes a positive number") }
                seconds = s
            case "--window": window = try Self.positive(value, flag)
            case "--max": max = try Self.positive(value, flag)
            case "--warmup": warmup = try Self.positive(value, flag)
            case "--events": events = try Self.positive(value, flag)
            default: throw Usage("unknown option \(flag)")
            }
        }
    }

    /// HOST:PORT of `--endpoint`.
    func hostAndPort() throws -> (host: String, port: Int) {
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
              (1...65535).contains(port) else { throw Usage("--endpoint takes HOST:PORT") }
        return (String(endpoint[..<colon]), port)
    }

    private static func positive(_ text: String, _ flag: String) throws -> Int {
        guard let value = Int(text), value > 0 else { throw Usage("\(flag) takes a positive integer") }
        return value
    }
}

struct Usage: Error, CustomStringConvertible {
    var description: String
    init(_ text: String) { description = text }
}

/// Says where a server listens, on the one line bench/run.py reads before it starts a client.
func announce(host: String, port: Int) {
    FileHandle.standardOutput.write(Data("ready \(host):\(port)\n".utf8))
}

/// A clock for a measured phase: its wall time on the monotonic clock and this process's CPU time (every thread).
struct Stopwatch {
    let startNanoseconds = DispatchTime.now().uptimeNanoseconds
    let startCPU = Stopwatch.cpuMicroseconds()

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    static func cpuMicroseconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) * 1e6 + Double(time.tv_nsec) / 1e3
    }

    func deadline(after seconds: Double) -> UInt64 { startNanoseconds + UInt64(seconds * 1e9) }

    /// The rate and the CPU time per request of `completed` requests since the start; `warmup` those before it.
    func result(_ completed: Int, warmup: Int) -> [String: Any] {
        let elapsed = Double(Self.now() - startNanoseconds) / 1e9
        return ["requests": completed, "seconds": elapsed, "per_second": Double(completed) / elapsed, "warmup": warmup,
                "cpu_us_per_request": (Self.cpuMicroseconds() - startCPU) / Double(Swift.max(completed, 1))]
    }
}

func emit(_ object: [String: Any]) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// Runs `call` the way every echo row of `make bench` does: `warmup` calls, then for `--seconds` (or `--max` calls)
/// one at a time with its latency percentiles (window 1), or `window` callers each calling again as soon as its last
/// call returned.
func measureEcho(_ options: Options, _ call: @escaping @Sendable () async throws -> Void) async throws -> [String: Any] {
    for _ in 0..<options.warmup { try await call() }
    var result: [String: Any] = ["window": options.window]
    let clock = Stopwatch()
    let end = clock.deadline(after: options.seconds)
    let completed: Int
    if options.window == 1 {
        var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000,
                                          numberOfSignificantValueDigits: .three)
        var count = 0
        while count < options.max {
            let before = Stopwatch.now()
            try await call()
            let after = Stopwatch.now()
            _ = histogram.record(after - before)
            count += 1
            if after >= end { break }
        }
        completed = count
        func us(_ ns: UInt64) -> Double { (Double(ns) / 100).rounded() / 10 }
        result.merge(["p50_us": us(histogram.valueAtPercentile(50)), "p99_us": us(histogram.valueAtPercentile(99)),
                      "p999_us": us(histogram.valueAtPercentile(99.9)), "max_us": us(histogram.max),
                      "samples": Int(histogram.totalCount)]) { a, _ in a }
    } else {
        let started = Counter()
        let max = options.max
        completed = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<options.window {
                group.addTask {
                    var mine = 0
                    while started.value.add(1, ordering: .relaxed).oldValue < max {
                        try await call()
                        mine += 1
                        if mine & 63 == 0 && Stopwatch.now() >= end { break }
                    }
                    return mine
                }
            }
            return try await group.reduce(0, +)
        }
    }
    result.merge(clock.result(completed, warmup: options.warmup)) { a, _ in a }
    return result
}

/// The calls the callers of a pipelined run have started, shared among them.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
