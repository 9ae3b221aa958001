import Logging
import Tracing

// Traces across languages (SPEC 7.18) through swift-distributed-tracing: the link only calls the API. An app
// bootstraps its own tracer (`InstrumentationSystem.bootstrap`); without one, the NoOpTracer records nothing and the
// received trace context is carried through unchanged, so a trace crosses a Swift side that records nothing.

extension ServiceContext {
    /// The trace context the request or event being handled arrived with.
    var receivedTrace: TraceHeaders? {
        get { self[ReceivedTraceKey.self] }
        set { self[ReceivedTraceKey.self] = newValue }
    }
}

private enum ReceivedTraceKey: ServiceContextKey {
    typealias Value = TraceHeaders
}

/// Reads `traceparent` and `tracestate` from a received message for the bootstrapped tracer.
struct TraceHeadersExtractor: Extractor {
    func extract(key: String, from carrier: TraceHeaders) -> String? {
        switch key {
        case "traceparent": carrier.traceparent
        case "tracestate": carrier.tracestate
        default: nil
        }
    }
}

/// Collects what the bootstrapped tracer writes for an outgoing message.
struct TraceFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}

extension TraceHeaders {
    /// What a request or event sent now carries (SPEC 7.18): the current span as the bootstrapped tracer writes it,
    /// or, without a tracer, what the request being handled arrived with; nil outside any trace.
    static var current: TraceHeaders? {
        guard let context = ServiceContext.current else { return nil }
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &fields, using: TraceFieldsInjector())
        // A tracer that writes no (or no valid) W3C context: carry the received one rather than send garbage.
        guard let written = fields["traceparent"], let traceparent = traceparent(reading: written) else {
            return context.receivedTrace
        }
        let tracestate = fields["tracestate"].flatMap { !$0.isEmpty && isValidTracestate($0) ? $0 : nil }
        return TraceHeaders(traceparent: traceparent, tracestate: tracestate)
    }
}

/// Which requests and events a bootstrapped tracer is asked for a span (SPEC 7.18). Where the trace was sampled
/// matters for cost: a tracer spends CPU on every span it starts, recorded or not (swift-otel 1.6 draws new trace and
/// span ids from the kernel for each, about 1.7 us a request with nothing recorded), so a service whose callers
/// decide what is sampled need not ask it at all for the rest.
public enum TracedRequests: Sendable, Equatable {
    /// Every request and event runs in a span; the tracer's sampler decides what is recorded (the default).
    case all
    /// Only a request or event that arrived in a trace its sender sampled (`traceparent` flags with bit 0 set) runs
    /// in a span. Any other is handled as without a tracer: no span, and a received trace is carried through
    /// unchanged to the calls its handler makes. The tracer then never starts a trace of its own, as with
    /// OpenTelemetry's parent-based sampler whose root is always-off, without the tracer's cost for the rest.
    case sampledByCaller

    /// Whether a message that arrived with `received` runs in a span of a bootstrapped tracer.
    func traces(_ received: TraceHeaders?) -> Bool {
        self == .all || received?.isSampled == true
    }

    /// Whether work that a handled message starts in the current context (a job) runs in a span of its own: always
    /// for `.all`; for `.sampledByCaller` only when the message arrived in a sampled trace, as its own span did.
    package var tracesCurrentWork: Bool {
        traces(ServiceContext.current?.receivedTrace)
    }
}

/// The tracer a link's handlers run in spans of: the bootstrapped one, or nil without one. Looked up once per link
/// (a lookup takes a lock and two dynamic casts): a link opened before the app bootstraps its tracer records nothing.
func bootstrappedTracer() -> (any Tracer)? {
    let tracer = InstrumentationSystem.tracer
    return tracer is NoOpTracer ? nil : tracer
}

/// Runs a handler, and what the link does around it, in a span of `tracer` named after the action (found in the
/// handler table, so a bounded name), whose parent is the received trace context. Inside, `ServiceContext.current`
/// is the span's: the handler's own spans nest under it, its calls carry the trace, and the link's log lines about it
/// carry the trace's id (`withTraceID`).
/// `policy` may leave a message out of the tracer (``TracedRequests``): it is then handled as without one.
func withHandlerSpan<T>(_ action: String, ofKind kind: SpanKind, received: TraceHeaders?, tracer: (any Tracer)?,
                        following policy: TracedRequests = .all, _ body: (any Span) async -> T) async -> T {
    guard let tracer, policy.traces(received) else {
        // No tracer bootstrapped (the default), or the policy leaves this one out: no span is started, and only a
        // received trace costs anything, the one task-local value that lets what the handler sends carry it.
        guard let received else { return await body(NoOpTracer.NoOpSpan(context: .topLevel)) }
        return await ServiceContext.withValue(receivedContext(received)) { await body(NoOpTracer.NoOpSpan(context: .topLevel)) }
    }
    return await inSpan(of: tracer, action, ofKind: kind, received: received, body)
}

/// withHandlerSpan for a synchronous handler (`handleInline`), run where it is read: the same span and context,
/// without a task.
func withInlineHandlerSpan<T>(_ action: String, ofKind kind: SpanKind, received: TraceHeaders?, tracer: (any Tracer)?,
                              following policy: TracedRequests = .all, _ body: (any Span) -> T) -> T {
    guard let tracer, policy.traces(received) else {
        guard let received else { return body(NoOpTracer.NoOpSpan(context: .topLevel)) }
        return ServiceContext.withValue(receivedContext(received)) { body(NoOpTracer.NoOpSpan(context: .topLevel)) }
    }
    return inInlineSpan(of: tracer, action, ofKind: kind, received: received, body)
}

/// withHandlerSpan with a tracer, its type opened.
private func inSpan<Traced: Tracer, T>(of tracer: Traced, _ action: String, ofKind kind: SpanKind, received: TraceHeaders?,
                                       _ body: (any Span) async -> T) async -> T {
    await tracer.withSpan(action, context: parentContext(of: tracer, received: received), ofKind: kind) { span in
        describe(span, action: action)
        return await body(span)
    }
}

/// withInlineHandlerSpan with a tracer, its type opened.
private func inInlineSpan<Traced: Tracer, T>(of tracer: Traced, _ action: String, ofKind kind: SpanKind,
                                             received: TraceHeaders?, _ body: (any Span) -> T) -> T {
    tracer.withSpan(action, context: parentContext(of: tracer, received: received), ofKind: kind) { span in
        describe(span, action: action)
        return body(span)
    }
}

/// The context a request that arrived with `received` is handled in without a tracer: the trace, carried through.
private func receivedContext(_ received: TraceHeaders) -> ServiceContext {
    var context = ServiceContext.topLevel
    context.receivedTrace = received
    return context
}

/// What a handler's span is started in: the received trace, as the tracer reads it, as its parent.
private func parentContext<Traced: Tracer>(of tracer: Traced, received: TraceHeaders?) -> ServiceContext {
    guard let received else { return .topLevel }
    var context = receivedContext(received)
    tracer.extract(received, into: &context, using: TraceHeadersExtractor())
    return context
}

/// A recording span's attributes (OpenTelemetry's RPC conventions).
private func describe(_ span: any Span, action: String) {
    guard span.isRecording else { return }
    span.updateAttributes {  // one read and one write of the span's attributes (each may take a lock), not two of each
        $0["rpc.system"] = "zerobridge"
        $0["rpc.method"] = action
    }
}

/// `metadata` with the `trace_id` of the request or event being handled (SPEC 7.18), so logs and traces join: the
/// trace of the current span as the bootstrapped tracer writes it, or the received one without a tracer. Read when a
/// line is written (pass it as a log call's metadata, which is only evaluated for a line that is), never per
/// request: a log handler may render metadata as it is set (swift-log's StreamLogHandler does), and setting it on
/// every request's logger cost more than the rest of the span wrapper.
func withTraceID(_ metadata: Logger.Metadata) -> Logger.Metadata {
    guard let trace = TraceHeaders.current else { return metadata }
    var metadata = metadata
    metadata["trace_id"] = .string(String(trace.traceID))
    return metadata
}

extension Span {
    /// Marks the span failed with the code the caller is answered with (bounded: the protocol's or the app's codes).
    func recordFailure(_ error: BridgeError) {
        attributes["zerobridge.error.code"] = error.code.rawValue
        setStatus(SpanStatus(code: .error, message: error.code.rawValue))
    }
}

/// Runs `body` as a handler of a request that arrived with `traceparent` would run without a tracer: the calls it
/// makes carry it. For `make bench`, which measures what carrying a trace costs.
@_spi(Benchmarks) public func withReceivedTrace<T>(_ traceparent: String, _ body: () async throws -> T) async rethrows -> T {
    var context = ServiceContext.current ?? .topLevel
    context.receivedTrace = TraceHeaders.traceparent(reading: traceparent).map { TraceHeaders(traceparent: $0) }
    return try await ServiceContext.withValue(context) { try await body() }
}

/// What tracing adds to each request on its own, for `make bench`: the span wrapper around an empty handler.
@_spi(Benchmarks) public enum TracingBenchmark {
    /// Runs the wrapper `count` times, each as a request carrying `traceparent` (or none) would; returns a checksum.
    /// With `oneIn` N, only every Nth request carries it, the others none, and the policy is `tracedRequests`.
    public static func handlerSpans(_ count: Int, traceparent: String?, oneIn: Int = 1,
                                    tracedRequests: TracedRequests = .all) async -> Int {
        let received = traceparent.flatMap(TraceHeaders.traceparent(reading:)).map { TraceHeaders(traceparent: $0) }
        let tracer = bootstrappedTracer()
        var sum = 0
        for index in 0..<count {
            let trace = index % max(oneIn, 1) == 0 ? received : nil
            sum &+= await withHandlerSpan("echo", ofKind: .server, received: trace, tracer: tracer,
                                          following: tracedRequests) { _ in 1 }
        }
        return sum
    }
}
