// The Swift side of `make bench` (bench/run.py drives it): each subcommand measures one thing against an
// endpoint and prints one JSON object on stdout.
//
//   zerobridge-bench raw-server   --endpoint E                        a ROUTER echoing whole messages (no JSON)
//   zerobridge-bench raw-client   --endpoint E --window W [limits]    DEALER -> raw-server; W 1 = sequential
//   zerobridge-bench await-floor  --endpoint E --window W [--cancellation yes|no]
//                                                                     raw-client's echo as awaited calls: the floor of
//                                                                     a Swift peer's call (AwaitFloor.swift)
//   zerobridge-bench ws-raw-server --endpoint HOST:PORT               a WebSocket echo (a page's floor, no bridge)
//   zerobridge-bench peer         --endpoint E --window W [limits]    BridgePeer call("echo") -> a ZeroBridge host
//   zerobridge-bench progress     --endpoint E --events N             BridgePeer stream("count") from the host
//   zerobridge-bench codec        --seconds S                         the host's codec share, no sockets
//   zerobridge-bench telemetry    --backend none|prometheus           the metrics hooks of one request, no sockets
//   zerobridge-bench traced-host  --endpoint E [--tracer memory]      an echo host; with a tracer bootstrapped
//   zerobridge-bench span-wrapper --seconds S [--traceparent TP] [--tracer memory]
//                                                                     what tracing adds per request, no sockets
//   zerobridge-bench span-alone   --seconds S                         InMemoryTracer's own span, without ZeroBridge
//
// `peer --traceparent TP` sends every call in the trace TP (SPEC 7.18), as a handler that received it would.
//
// Limits: --seconds S (wall time of the measured phase) and --max N (requests), whichever comes first.
// An endpoint without a scheme (`peer`, `progress`) is a host's connection file: keyed, and CURVE when it says so.
// Every result has `warmup` (requests or events before the measured phase, so bench/run.py can divide a server's CPU
// time over the whole run) and `cpu_us_per_request`: this process's CPU time over the measured phase, per request.
@_spi(Benchmarks) import ZeroBridge
import Foundation
import Histogram
import InMemoryTracing
import Synchronization
import ZeroBridgePrometheus
import Tracing
import ZeroMQ

/// The ~100-byte payload every driver echoes (bench/run.py and the Python and Node drivers build the same one).
let payloadText = String(repeating: "x", count: 65)
let payload: JSONValue = ["name": "bench", "seq": 42, "text": .string(payloadText)]
/// What a ZeroBridge peer sends for one echo of that payload: the raw echo moves exactly these bytes.
let requestBody = Array(
    #"{"v":1,"type":"request","id":"1","action":"echo","payload":{"name":"bench","seq":42,"text":"\#(payloadText)"},"timeout_ms":30000}"#.utf8)

struct Options {
    var command = ""
    var endpoint = ""
    var window = 1
    var seconds = 2.0
    var max = 1_000_000
    var warmup = 2_000
    var events = 200_000
    var backend = "none"
    var traceparent: String?
    var tracer = "none"
    var cancellation = false

    init(_ arguments: [String]) throws {
        guard let first = arguments.first else { throw Usage("no subcommand") }
        command = first
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw Usage("\(flag) needs a value") }
            switch flag {
            case "--endpoint": endpoint = value
            case "--window": window = try Self.positive(value, flag)
            case "--seconds": guard let s = Double(value), s > 0 else { throw Usage("--seconds takes a positive number") }; seconds = s
            case "--max": max = try Self.positive(value, flag)
            case "--warmup": warmup = try Self.positive(value, flag)
            case "--events": events = try Self.positive(value, flag)
            case "--backend":
                guard ["none", "prometheus"].contains(value) else { throw Usage("--backend takes none or prometheus") }
                backend = value
            case "--traceparent": traceparent = value
            case "--cancellation":
                guard ["yes", "no"].contains(value) else { throw Usage("--cancellation takes yes or no") }
                cancellation = value == "yes"
            case "--tracer":
                guard ["none", "memory"].contains(value) else { throw Usage("--tracer takes none or memory") }
                tracer = value
            default: throw Usage("unknown option \(flag)")
            }
        }
        if !["codec", "telemetry", "span-wrapper", "span-alone"].contains(command) && endpoint.isEmpty { throw Usage("--endpoint is required") }
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

/// Nanoseconds on the monotonic clock.
@inline(__always) func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Microseconds of CPU time this process (every thread) has used.
func cpuMicroseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) * 1e6 + Double(time.tv_nsec) / 1e3
}

/// What a measured phase that began at `start` (monotonic ns) and `startCPU` (CPU us) did.
func measured(_ completed: Int, since start: UInt64, cpu startCPU: Double, warmup: Int) -> [String: Any] {
    let elapsed = Double(now() - start) / 1e9
    return ["requests": completed, "seconds": elapsed, "per_second": Double(completed) / elapsed, "warmup": warmup,
            "cpu_us_per_request": (cpuMicroseconds() - startCPU) / Double(max(completed, 1))]
}

func emit(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// Latency percentiles in microseconds from a histogram of nanoseconds.
func percentiles(_ histogram: Histogram<UInt64>) -> [String: Any] {
    func us(_ ns: UInt64) -> Double { (Double(ns) / 100).rounded() / 10 }
    return ["p50_us": us(histogram.valueAtPercentile(50)), "p99_us": us(histogram.valueAtPercentile(99)),
            "p999_us": us(histogram.valueAtPercentile(99.9)), "max_us": us(histogram.max),
            "samples": Int(histogram.totalCount)]
}

func newHistogram() -> Histogram<UInt64> {
    Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
}

/// A shared count for the callers of a pipelined run.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
}

// MARK: Raw libzmq echo: the limit

func rawServer(_ options: Options) throws {
    let context = try Context()
    let router = try Socket(.router, context: context)
    try router.set(.sendHighWaterMark(0), .receiveHighWaterMark(0), .linger(milliseconds: 0))
    try router.bind(options.endpoint)
    FileHandle.standardOutput.write(Data("ready \(try router.lastEndpoint)\n".utf8))
    while true {
        guard let frames = try router.receive() else { continue }
        try router.send(frames: frames)  // the frames' storage passes to libzmq: no copy
    }
}

func rawClient(_ options: Options) throws {
    let context = try Context()
    let dealer = try Socket(.dealer, context: context)
    try dealer.set(.sendHighWaterMark(0), .receiveHighWaterMark(0), .linger(milliseconds: 0))
    try dealer.connect(options.endpoint)
    let parts: [[UInt8]] = [[], requestBody]
    func roundTrip() throws {
        try dealer.send(parts)
        guard let reply = try dealer.receive(), reply.count == 2, reply[1].count == requestBody.count else {
            throw Usage("the raw echo returned something else")
        }
    }
    for _ in 0..<options.warmup { try roundTrip() }

    var result: [String: Any] = ["window": options.window, "message_bytes": requestBody.count]
    let startCPU = cpuMicroseconds()
    let start = now()
    let end = start + UInt64(options.seconds * 1e9)
    var completed = 0
    if options.window == 1 {
        var histogram = newHistogram()
        while completed < options.max {
            let before = now()
            try roundTrip()
            let after = now()
            _ = histogram.record(after - before)
            completed += 1
            if after >= end { break }
        }
        result.merge(percentiles(histogram)) { a, _ in a }
    } else {
        var sent = 0
        while sent < min(options.window, options.max) { try dealer.send(parts); sent += 1 }
        var stopSending = false
        while completed < sent {
            guard let reply = try dealer.receive(), reply.count == 2 else { throw Usage("the raw echo returned something else") }
            completed += 1
            if !stopSending && (sent >= options.max || (completed & 255 == 0 && now() >= end)) { stopSending = true }
            if !stopSending { try dealer.send(parts); sent += 1 }
        }
    }
    result.merge(measured(completed, since: start, cpu: startCPU, warmup: options.warmup)) { a, _ in a }
    emit(result)
}

// MARK: ZeroBridge host <- Swift BridgePeer

func connectedPeer(_ endpoint: String, name: String) async throws -> BridgePeer {
    var configuration = endpoint.contains("://")
        ? BridgePeer.Configuration(endpoint: endpoint, name: name)
        : try BridgePeer.Configuration(connectionFile: ConnectionFile.read(endpoint), name: name)
    configuration.defaultTimeout = .seconds(60)
    // Runs follow each other under one name: the host may read this hello before the last run's bye (two
    // connections, either order), which once failed a `make bench` row with name_taken.
    configuration.waitsForName = true
    let peer = try BridgePeer(configuration: configuration)
    try await peer.connect(timeout: .seconds(10))
    return peer
}

func checkedEcho(_ peer: BridgePeer) async throws {
    let answer = try await peer.call("echo", payload)
    guard answer == payload else { throw Usage("echo returned something else: \(answer)") }
}

/// The echo calls of `peer`, in the trace `--traceparent` names when it names one.
func traced(_ options: Options, _ body: () async throws -> Void) async throws {
    if let traceparent = options.traceparent { try await withReceivedTrace(traceparent, body) } else { try await body() }
}

func peerBench(_ options: Options) async throws {
    try await traced(options) { try await peerCalls(options) }
}

func peerCalls(_ options: Options) async throws {
    let peer = try await connectedPeer(options.endpoint, name: "bench-swift")
    for _ in 0..<options.warmup { try await checkedEcho(peer) }

    var result: [String: Any] = ["window": options.window]
    let startCPU = cpuMicroseconds()
    let start = now()
    let end = start + UInt64(options.seconds * 1e9)
    let completed: Int
    if options.window == 1 {
        var histogram = newHistogram()
        var count = 0
        while count < options.max {
            let before = now()
            try await checkedEcho(peer)
            let after = now()
            _ = histogram.record(after - before)
            count += 1
            if after >= end { break }
        }
        completed = count
        result.merge(percentiles(histogram)) { a, _ in a }
    } else {
        // `window` callers, each calling again as soon as its last call returned: `window` requests in flight.
        let started = Counter()
        let max = options.max
        completed = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<options.window {
                group.addTask {
                    var mine = 0
                    while started.value.add(1, ordering: .relaxed).oldValue < max {
                        try await checkedEcho(peer)
                        mine += 1
                        if mine & 63 == 0 && now() >= end { break }
                    }
                    return mine
                }
            }
            return try await group.reduce(0, +)
        }
    }
    result.merge(measured(completed, since: start, cpu: startCPU, warmup: options.warmup)) { a, _ in a }
    await peer.close()
    emit(result)
}

func progressBench(_ options: Options) async throws {
    let peer = try await connectedPeer(options.endpoint, name: "bench-swift-progress")
    let warmup = 1000
    _ = try await peer.stream("count", ["n": .int(warmup)]).result
    let n = options.events
    let startCPU = cpuMicroseconds()
    let start = now()
    let call = peer.stream("count", ["n": .int(n)], timeout: .seconds(120))
    var expected = 1
    var outOfOrder = 0
    for try await event in call.progress {
        if event["i"]?.intValue != expected { outOfOrder += 1 }
        expected += 1
    }
    let answer = try await call.result
    let received = expected - 1
    var result = measured(received, since: start, cpu: startCPU, warmup: warmup)
    result["batches_read"] = peer.batches.read  // keyed: how many signatures the events came under (SPEC 3.3)
    await peer.close()
    result.merge(["events": n, "received": received, "out_of_order": outOfOrder, "result_ok": answer == ["n": .int(n)],
                  "in_order_and_complete": received == n && outOfOrder == 0]) { _, b in b }
    emit(result)
}

// MARK: The codec alone

func codecBench(_ options: Options) {
    _ = ProtocolBenchmark.hostSideExchanges(10_000)
    let start = now()
    let end = start + UInt64(options.seconds * 1e9)
    var iterations = 0
    while now() < end {
        precondition(ProtocolBenchmark.hostSideExchanges(10_000) > 0)
        iterations += 10_000
    }
    let elapsed = Double(now() - start) / 1e9
    emit(["host_side_exchanges": iterations, "seconds": elapsed, "per_second": Double(iterations) / elapsed])
}

// MARK: The metrics hooks alone

/// Nanoseconds per request of the telemetry hooks, with no backend (swift-metrics' NOOP) or with Prometheus's.
func telemetryBench(_ options: Options) {
    if options.backend == "prometheus" { _ = MetricsEndpoint.bootstrapPrometheus() }
    let requests = 1_000_000
    _ = TelemetryBenchmark.hooks(requests: requests / 10)
    // The best of five: other work on a shared machine only ever slows a run down.
    let best = (0 ..< 5).map { _ in TelemetryBenchmark.hooks(requests: requests) }.min()!
    let nanoseconds = Double(best.components.seconds) * 1e9 + Double(best.components.attoseconds) / 1e9
    emit(["backend": options.backend, "requests": requests, "ns_per_request": nanoseconds / Double(requests)])
}

// MARK: Tracing's cost

/// An echo host, with swift-distributed-tracing's InMemoryTracer bootstrapped for `--tracer memory`: every request
/// then runs in a span that is started, given its attributes, ended and recorded. Its finished spans are dropped
/// every 100 ms, as an exporter's batches would be, so memory stays flat. Runs until SIGTERM.
func tracedHost(_ options: Options) async throws {
    if options.tracer == "memory" {
        let tracer = InMemoryTracer(recordInjections: false, recordExtractions: false)
        InstrumentationSystem.bootstrap(tracer)
        Task.detached {
            while true {
                try? await Task.sleep(for: .milliseconds(100))
                tracer.clearFinishedSpans()
            }
        }
    }
    var configuration = BridgeHost.Configuration(endpoint: options.endpoint, name: "bench")
    configuration.maxInFlight = 20_000
    let host = BridgeHost(configuration: configuration)
    try host.handle("echo") { payload, _ in payload }
    try host.start()
    FileHandle.standardOutput.write(Data("ready \(host.boundEndpoint ?? options.endpoint)\n".utf8))
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// The span wrapper each request runs in, with no tracer (the NoOpTracer) or with `--tracer memory` (InMemoryTracer,
/// its finished spans dropped every 10,000): its cost in nanoseconds per request.
func spanWrapperBench(_ options: Options) async {
    let tracer = options.tracer == "memory" ? InMemoryTracer(recordInjections: false, recordExtractions: false) : nil
    if let tracer { InstrumentationSystem.bootstrap(tracer) }
    await timedBatches(options) {
        let checksum = await TracingBenchmark.handlerSpans(10_000, traceparent: options.traceparent)
        precondition(checksum == 10_000)
        tracer?.clearFinishedSpans()
    }
}

/// What the wrapper's span costs InMemoryTracer itself, with no ZeroBridge code around it: started, given the same
/// two attributes, ended and recorded. The wrapper's figure with the tracer, less this one, is ZeroBridge's share.
func spanAloneBench(_ options: Options) async {
    let tracer = InMemoryTracer(recordInjections: false, recordExtractions: false)
    await timedBatches(options) {
        for _ in 0 ..< 10_000 {
            let span = tracer.startSpan("echo", context: ServiceContext.topLevel, ofKind: .server)
            span.updateAttributes {  // as the wrapper sets them
                $0["rpc.system"] = "zerobridge"
                $0["rpc.method"] = "echo"
            }
            span.end()
        }
        tracer.clearFinishedSpans()
    }
}

/// Runs `batch` (10,000 requests) until `--seconds` have passed and prints the time per request.
func timedBatches(_ options: Options, _ batch: () async -> Void) async {
    let start = now()
    let end = start + UInt64(options.seconds * 1e9)
    var iterations = 0
    while now() < end {
        await batch()
        iterations += 10_000
    }
    let elapsed = Double(now() - start) / 1e9
    emit(["requests": iterations, "seconds": elapsed, "per_second": Double(iterations) / elapsed,
          "ns_per_request": elapsed * 1e9 / Double(iterations)])
}

// MARK: Entry

do {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    switch options.command {
    case "raw-server": try rawServer(options)
    case "raw-client": try rawClient(options)
    case "await-floor": try await awaitFloorBench(options, cancellation: options.cancellation)
    case "ws-raw-server": try rawWebSocketServer(options)
    case "peer": try await peerBench(options)
    case "progress": try await progressBench(options)
    case "codec": codecBench(options)
    case "telemetry": telemetryBench(options)
    case "traced-host": try await tracedHost(options)
    case "span-wrapper": await spanWrapperBench(options)
    case "span-alone": await spanAloneBench(options)
    default: throw Usage("unknown subcommand \(options.command)")
    }
} catch {
    FileHandle.standardError.write(Data("zerobridge-bench: \(error)\n".utf8))
    exit(1)
}
