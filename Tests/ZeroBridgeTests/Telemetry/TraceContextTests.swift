import InMemoryTracing
import Logging
import Synchronization
import Testing
import Tracing
@testable import ZeroBridge

/// Trace context (SPEC 7.18) through a real host and Swift peer, without a tracer: the test process bootstraps none
/// (a bootstrap is for the whole process, and every suite shares it), so the received context is carried through.
/// The tracer's side (spans continuing it, their ids on the wire) is followed across processes by
/// examples/tests/test_traces.py, against the import host's recording tracer.
@Suite("Trace context", .timeLimit(.minutes(3)))
struct TraceContextTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a handler sees the trace its request came in, and its calls to other peers carry it")
    func carriedThroughHandlers() async throws {
        let host = try startConformanceHost()
        let seen = SeenTraces()
        let record = seen.record
        // The host's handler calls the peer back; the peer's handler, in turn, calls the host.
        try host.handle("outer") { _, request in
            record("outer", request)
            return try await request.peer!.call("inner", nil)
        }
        try host.handle("innermost") { _, request in
            record("innermost", request)
            return "done"
        }
        let peer = try await connectPeer(host, name: "traced-swift-peer") { peer in
            try peer.handle("inner") { [weak peer] _, request in
                record("inner", request)
                return try await peer!.call("innermost", nil)
            }
        }
        var context = ServiceContext.topLevel
        context.receivedTrace = TraceHeaders(traceparent: Self.traceparent, tracestate: "rojo=1")
        let result = try await ServiceContext.withValue(context) { try await peer.call("outer", nil) }
        #expect(result == "done")
        // Outside the trace, nothing is sent.
        #expect(try await peer.call("innermost", nil) == "done")

        let carried = "\(Self.traceparent) rojo=1"
        #expect(seen.all == ["outer": [carried], "inner": [carried], "innermost": [carried, nil]])
        await peer.close()
        await host.shutdown()
    }

    @Test("an event a handler posts carries its trace, and the listener sees it")
    func carriedOnEvents() async throws {
        let host = try startConformanceHost()
        let heard = Mutex<[String?]>([])
        let peer = try await connectPeer(host, name: "traced-swift-listener") { peer in
            try peer.handle("note") { _, request in
                heard.withLock { $0.append(request.traceparent) }
                return nil
            }
        }
        var context = ServiceContext.topLevel
        context.receivedTrace = TraceHeaders(traceparent: Self.traceparent)
        _ = try await ServiceContext.withValue(context) { try await peer.call("emit", ["action": "note", "payload": 1]) }
        #expect(try await eventually { heard.withLock { $0 } == [Self.traceparent] })
        await peer.close()
        await host.shutdown()
    }

    @Test("a traceparent of a higher version is read as version 00; ids of zeros, ff and stray characters are not")
    func readingTraceparents() {
        let ids = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(TraceHeaders.traceparent(reading: "00-\(ids)") == "00-\(ids)")
        #expect(TraceHeaders.traceparent(reading: "cc-\(ids)-future") == "00-\(ids)")
        #expect(TraceHeaders.traceparent(reading: "cc-\(ids)x") == nil)
        #expect(TraceHeaders.traceparent(reading: "ff-\(ids)") == nil)
        #expect(TraceHeaders.traceparent(reading: "00-\(ids)-") == nil)
        #expect(TraceHeaders.traceparent(reading: "00-\(String(repeating: "0", count: 32))-00f067aa0ba902b7-01") == nil)
        #expect(TraceHeaders.traceparent(reading: "00-4bf92f3577b34da6a3ce929d0e0e4736-\(String(repeating: "0", count: 16))-01") == nil)
        #expect(TraceHeaders.traceparent(reading: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01") == nil)
        #expect(TraceHeaders(traceparent: "00-\(ids)").traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
    }
}

/// What each handler saw: its traceparent and tracestate, or nil for none.
/// Inline handlers (`handleInline`) run where the request is read, without a task: the same trace context, log
/// metadata and span as an async handler's.
@Suite("Trace context of inline handlers", .timeLimit(.minutes(3)))
struct InlineTraceContextTests {
    static let received = TraceHeaders(traceparent: TraceContextTests.traceparent, tracestate: "rojo=1")

    @Test("an inline handler of a real host runs in the trace its request came in: what it posts carries it")
    func inlineHandlerInTheReceivedTrace() async throws {
        let host = try startConformanceHost()
        let current = Mutex<[TraceHeaders?]>([])
        try host.handleInline("inlineTraced") { _, _ in
            current.withLock { $0.append(TraceHeaders.current) }
            return "seen"
        }
        let peer = try await connectPeer(host, name: "inline-traced-peer") { _ in }
        var context = ServiceContext.topLevel
        context.receivedTrace = Self.received
        #expect(try await ServiceContext.withValue(context) { try await peer.call("inlineTraced", nil) } == "seen")
        #expect(try await peer.call("inlineTraced", nil) == "seen")  // outside any trace
        #expect(current.withLock { $0 } == [Self.received, nil])
        await peer.close()
        await host.shutdown()
    }

    @Test("without a tracer, the received trace is current and its id is in the log metadata of lines about it")
    func noTracer() {
        let (current, traceID) = withInlineHandlerSpan("echo", ofKind: .server, received: Self.received, tracer: nil) { _ in
            (TraceHeaders.current, withTraceID(["id": "1"])["trace_id"].map { "\($0)" })
        }
        #expect(current == Self.received)
        #expect(traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(withTraceID(["id": "1"]) == ["id": "1"])  // outside any trace: nothing added
    }

    @Test("with a tracer, an inline handler runs in a span named after its action, its failure marked")
    func withTracer() {
        let tracer = InMemoryTracer()
        let spanWasCurrent = withInlineHandlerSpan("fail", ofKind: .server, received: nil, tracer: tracer) { span in
            span.recordFailure(BridgeError(.handlerError, "no"))
            return ServiceContext.current != nil
        }
        #expect(spanWasCurrent)
        let spans = tracer.finishedSpans
        #expect(spans.map(\.operationName) == ["fail"])
        #expect(spans.first?.kind == .server)
        #expect(spans.first?.attributes["rpc.method"]?.toSpanAttribute() == "fail")
        #expect(spans.first?.status?.code == .error)
    }

    @Test("following callers' sampling: only a request in a trace its sender sampled gets a span; the rest carry theirs")
    func sampledByCaller() {
        let ids = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
        let tracer = InMemoryTracer()
        func traced(_ policy: TracedRequests, _ flags: String?) -> Bool {
            policy.traces(flags.map { TraceHeaders(traceparent: "00-\(ids)-\($0)") })
        }
        // Bit 0 of the flags is "sampled"; the other bits say nothing about it.
        #expect(["00", "01", "02", "03", "0a", "0b", "fe", "ff"].filter { traced(.sampledByCaller, $0) } == ["01", "03", "0b", "ff"])
        #expect(!traced(.sampledByCaller, nil))
        #expect(traced(.all, nil) && traced(.all, "00") && traced(.all, "01"))

        let unsampled = TraceHeaders(traceparent: "00-\(ids)-00", tracestate: "rojo=1")
        let (carried, jobTraced) = withInlineHandlerSpan("echo", ofKind: .server, received: unsampled, tracer: tracer,
                                                         following: .sampledByCaller) { _ in
            (TraceHeaders.current, TracedRequests.sampledByCaller.tracesCurrentWork)
        }
        #expect(carried == unsampled)  // what the handler sends carries the caller's trace, unchanged
        #expect(!jobTraced)  // and a job it starts runs without a span
        #expect(tracer.finishedSpans.isEmpty)
        #expect(!TracedRequests.sampledByCaller.tracesCurrentWork && TracedRequests.all.tracesCurrentWork)  // outside any

        let sampled = TraceHeaders(traceparent: "00-\(ids)-01")
        let sampledJobTraced = withInlineHandlerSpan("echo", ofKind: .server, received: sampled, tracer: tracer,
                                                     following: .sampledByCaller) { _ in TracedRequests.sampledByCaller.tracesCurrentWork }
        #expect(sampledJobTraced)
        #expect(tracer.finishedSpans.map(\.operationName) == ["echo"])
        #expect(tracer.finishedSpans.first?.context.receivedTrace == sampled)  // its parent: the caller's trace
    }
}

private final class SeenTraces: Sendable {
    private let seen = Mutex<[String: [String?]]>([:])

    var all: [String: [String?]] { seen.withLock { $0 } }

    @Sendable func record(_ name: String, _ request: BridgeRequest) {
        seen.withLock { $0[name, default: []].append(request.traceparent.map { "\($0) \(request.tracestate ?? "-")" }) }
    }
}
