// An echo host with swift-otel's tracer bootstrapped, for `make bench` (bench/run.py's telemetry section): what
// tracing costs the host with the backend an operator would run, not a test tracer.
//
//   zerobridge-otel-host --endpoint E --otlp URL [--sampler always|ratio:R]
//
// Every request runs in a span (SPEC 7.18). `always` is swift-otel's default, parent-based always-on: a request that
// arrives in a sampled trace is recorded. `ratio:R` is parent-based trace-id ratio: a request that arrives without a
// trace starts one, recorded with probability R. Finished spans go through the batch span processor to the OTLP/HTTP
// exporter at URL (bench/otlp_sink.py counts them). Prints `ready ENDPOINT`; runs until SIGTERM.
import Foundation
import OTel
import ServiceLifecycle
import Tracing
import ZeroBridge

/// Says what is wrong with the command line, and exits 2.
func usage(_ problem: String) -> Never {
    FileHandle.standardError.write(Data("zerobridge-otel-host: \(problem)\nusage: zerobridge-otel-host --endpoint E --otlp URL [--sampler always|ratio:R]\n".utf8))
    exit(2)
}

var endpoint = ""
var otlp = ""
var sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedAlwaysOn
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst() else { usage("\(flag) needs a value") }
    switch flag {
    case "--endpoint": endpoint = value
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
guard !endpoint.isEmpty, !otlp.isEmpty else { usage("--endpoint and --otlp are required") }

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

var hostConfiguration = BridgeHost.Configuration(endpoint: endpoint, name: "bench")
hostConfiguration.maxInFlight = 20_000
let host = BridgeHost(configuration: hostConfiguration)
try host.handle("echo") { payload, _ in payload }
try host.start()
FileHandle.standardOutput.write(Data("ready \(host.boundEndpoint ?? endpoint)\n".utf8))
// On SIGTERM a ServiceGroup stops its services last to first: the host, then the tracer, which exports what is left.
try await ServiceGroup(services: [backend.service, host], gracefulShutdownSignals: [.sigterm], logger: .init(label: "otel")).run()
