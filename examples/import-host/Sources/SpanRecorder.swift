import InMemoryTracing
import Tracing
import ZeroBridge

/// `--record-spans`: a tracer that keeps finished spans in memory (swift-distributed-tracing's `InMemoryTracer`) and
/// speaks W3C trace context (SPEC 7.18), which `InMemoryTracer` alone does not (it writes ids under keys of its own).
/// Served as `recordedSpans`, so a trace can be followed across languages without a tracing backend; the
/// cross-language trace test reads it. An app that exports traces bootstraps its own tracer (swift-otel) instead.
struct SpanRecorder: Tracer {
    private let spans = InMemoryTracer(idGenerator: .w3c, recordInjections: false, recordExtractions: false)

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        spans.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function,
                        file: fileID, line: line)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {
        // The link hands over only a traceparent it has checked (SPEC 7.18), so its parts are where W3C puts them.
        guard let traceparent = extractor.extract(key: "traceparent", from: carrier) else { return }
        let parts = traceparent.split(separator: "-")
        guard parts.count == 4 else { return }
        context.inMemorySpanContext = InMemorySpanContext(traceID: String(parts[1]), spanID: String(parts[2]), parentSpanID: nil)
    }

    /// The finished spans, oldest first: `{name, kind, trace_id, span_id, parent_span_id?, error?}`.
    var finished: JSONValue {
        .array(spans.finishedSpans.map { span in
            var record: [String: JSONValue] = [
                "name": .string(span.operationName), "kind": .string("\(span.kind)"),
                "trace_id": .string(span.traceID), "span_id": .string(span.spanID),
            ]
            if let parent = span.parentSpanID { record["parent_span_id"] = .string(parent) }
            if let status = span.status, status.code == .error { record["error"] = .string(status.message ?? "") }
            return .object(record)
        })
    }
}

extension InMemoryTracer.IDGenerator {
    /// Random ids in W3C's form: 32 and 16 lowercase hex digits, never all zeros.
    static var w3c: Self {
        @Sendable func hex(_ bytes: Int) -> String {
            var text = ""
            repeat {
                text = (0..<bytes).map { _ in
                    let byte = UInt8.random(in: .min ... .max)
                    return String(byte >> 4, radix: 16) + String(byte & 0x0F, radix: 16)
                }.joined()
            } while text.allSatisfy { $0 == "0" }
            return text
        }
        return Self(nextTraceID: { hex(16) }, nextSpanID: { hex(8) })
    }
}
