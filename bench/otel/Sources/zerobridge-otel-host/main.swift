// An echo host with swift-otel's tracer bootstrapped, for `make bench` (bench/run.py's telemetry section): what
// tracing costs the host with the backend an operator would run, not a test tracer.
//
//   zerobridge-otel-host --endpoint E --otlp URL [--sampler always|ratio:R]
//   zerobridge-otel-host --span-wrapper SECONDS --otlp URL [--sampler always|ratio:R] [--callers-sample N]
//
// Every request runs in a span (SPEC 7.18). `always` is swift-otel's default, parent-based always-on: a request that
// arrives in a sampled trace is recorded. `ratio:R` is parent-based trace-id ratio: a request that arrives without a
// trace starts one, recorded with probability R. Finished spans go through the batch span processor to the OTLP/HTTP
// exporter at URL (bench/otlp_sink.py counts them). Prints `ready ENDPOINT`; runs until SIGTERM.
//
// `--span-wrapper` runs no host: ZeroBridge's span wrapper around an empty handler, as each request without a trace
// runs it, for SECONDS, with the same backend working beside it. It prints the CPU time of the whole process (the
// exporter's threads too) per request, in nanoseconds: what the tracer costs a request, without the noise of sockets
// and wake-ups, which make a host's CPU per request vary by up to 2x from run to run. With `--callers-sample N`
// the wrapper follows its callers' sampling (TracedRequests.sampledByCaller): 1 request in N arrives in a sampled
// trace, the others in none.
import Foundation
import Glibc
import OTel
import ServiceLifecycle
import Tracing
@_spi(Benchmarks) import ZeroBridge

/// Says what is wrong with the command line, and exits 2.
func usage(_ problem: String) -> Never {
    FileHandle.standardError.write(Data("zerobridge-otel-host: \(problem)\nusage: zerobridge-otel-host (--endpoint E | --span-wrapper SECONDS [--callers-sample N]) --otlp URL [--sampler always|ratio:R]\n".utf8))
    exit(2)
}

var endpoint = ""
var wrapperSeconds: Double?
var callersSample: Int?
var otlp = ""
var sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedAlwaysOn
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst() else { usage("\(flag) needs a value") }
    switch flag {
    case "--endpoint": endpoint = value
    case "--span-wrapper":
        guard let seconds = Double(value), seconds > 0, seconds <= 600 else { usage("--span-wrapper takes seconds in (0, 600]") }
        wrapperSeconds = seconds
    case "--callers-sample":
        guard let oneIn = Int(value), oneIn > 0 else { usage("--callers-sample takes a positive integer") }
        callersSample = oneIn
    case "--otlp": otlp = value
    case "--sampler":
        if value == "always" {
            sampler = .parentBasedAlwaysOn
        } else if value.hasPrefix("ratio:"), let ratio = Double(value.dropFirst(6)),
                  let chosen = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedTraceIDRatio(ratio: ratio) {
            sampler = chosen
        } else {
            usage("--sampler takes always or ratio:R with R in 0...1")
        }
    default: usage("unknown option \(flag)")
    }
}
guard endpoint.isEmpty != (wrapperSeconds == nil), !otlp.isEmpty else {
    usage("--otlp and one of --endpoint and --span-wrapper are required")
}

var configuration = OTel.Configuration.default
configuration.serviceName = "zerobridge-bench"
configuration.metrics.enabled = false
configuration.logs.enabled = false
configuration.traces.sampler = sampler
configuration.traces.exporter = .otlp
configuration.traces.otlpExporter.protocol = .httpProtobuf
configuration.traces.otlpExporter.endpoint = otlp
// Sized for a host answering ~100,000 requests a second, every one recorded: swift-otel's defaults (a queue of 2,048
// spans, exported every 5 s) drop most of them. 16,384 spans queued at most (about 10 MB), exported every 100 ms.
configuration.traces.batchSpanProcessor.maxQueueSize = 16_384
configuration.traces.batchSpanProcessor.maxExportBatchSize = 4_096
configuration.traces.batchSpanProcessor.scheduleDelay = .milliseconds(100)
let backend = try OTel.makeTracingBackend(configuration: configuration)
InstrumentationSystem.bootstrap(backend.factory)

/// CPU time of every thread of this process, in nanoseconds.
func processCPUNanoseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) * 1e9 + Double(time.tv_nsec)
}

if let wrapperSeconds {
    let sampledTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    func spans() async -> Int {
        guard let callersSample else { return await TracingBenchmark.handlerSpans(10_000, traceparent: nil) }
        return await TracingBenchmark.handlerSpans(10_000, traceparent: sampledTrace, oneIn: callersSample,
                                                   tracedRequests: .sampledByCaller)
    }
    let group = ServiceGroup(services: [backend.service], gracefulShutdownSignals: [], logger: .init(label: "otel"))
    let figures = try await withThrowingTaskGroup(of: [String: Double]?.self) { tasks in
        tasks.addTask { try await group.run(); return nil }
        tasks.addTask {
            let warmed = await spans()
            precondition(warmed == 10_000)
            let start = DispatchTime.now().uptimeNanoseconds
            let end = start + UInt64(wrapperSeconds * 1e9)
            let startCPU = processCPUNanoseconds()
            var requests = 0
            while DispatchTime.now().uptimeNanoseconds < end {
                let checksum = await spans()
                precondition(checksum == 10_000)
                requests += 10_000
            }
            let cpu = processCPUNanoseconds() - startCPU
            let wall = Double(DispatchTime.now().uptimeNanoseconds - start)
            return ["requests": Double(requests), "ns_per_request": wall / Double(requests),
                    "cpu_ns_per_request": cpu / Double(requests)]
        }
        let figures = try await tasks.next()!
        await group.triggerGracefulShutdown()  // the tracer exports what is left
        while try await tasks.next() != nil {}
        return figures
    }
    let json = try JSONSerialization.data(withJSONObject: figures ?? [:], options: [.sortedKeys])
    FileHandle.standardOutput.write(json + Data("\n".utf8))
    exit(0)
}

var hostConfiguration = BridgeHost.Configuration(endpoint: endpoint, name: "bench")
hostConfiguration.maxInFlight = 20_000
let host = BridgeHost(configuration: hostConfiguration)
try host.handle("echo") { payload, _ in payload }
try host.start()
FileHandle.standardOutput.write(Data("ready \(host.boundEndpoint ?? endpoint)\n".utf8))
// On SIGTERM a ServiceGroup stops its services last to first: the host, then the tracer, which exports what is left.
try await ServiceGroup(services: [backend.service, host], gracefulShutdownSignals: [.sigterm], logger: .init(label: "otel")).run()
