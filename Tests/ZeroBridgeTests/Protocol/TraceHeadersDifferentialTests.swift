import Testing
import W3CTraceContext
@testable import ZeroBridge

/// The hand-written `traceparent` reader (SPEC 7.18) against swift-w3c-trace-context's decoder, on version 00, the
/// one version the library reads: every valid header, and every one-character change or removal of one, gets the
/// same verdict from both, and a header both accept names the same trace.
@Suite("traceparent against swift-w3c-trace-context")
struct TraceHeadersDifferentialTests {
    static let valid = [
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        "00-00000000000000000000000000000001-0000000000000001-ff",
    ]
    static let replacements: [Character] = ["0", "1", "9", "a", "f", "g", "A", "F", "-", " ", "z", "\u{e9}"]

    static func referenceAccepts(_ text: String) -> TraceContext? {
        try? TraceContext(traceParentHeaderValue: text)
    }

    @Test func everyValidHeaderIsReadAsTheReferenceReadsIt() throws {
        for text in Self.valid {
            let ours = try #require(TraceHeaders.traceparent(reading: text))
            let reference = try #require(Self.referenceAccepts(text))
            #expect(ours == reference.traceParentHeaderValue)
            #expect(String(TraceHeaders(traceparent: ours).traceID) == reference.traceID.description)
        }
    }

    @Test func everyOneCharacterChangeGetsTheReferenceVerdict() {
        for valid in Self.valid {
            let characters = Array(valid)
            for at in characters.indices {
                var variants = Self.replacements.map { replacement -> String in
                    var changed = characters
                    changed[at] = replacement
                    return String(changed)
                }
                var shorter = characters
                shorter.remove(at: at)
                variants.append(String(shorter))
                // Version 00 only: SPEC 7.18 reads higher versions forward-compatibly, the library refuses them (the
                // fixtures in protocol/fixtures/messages/trace-context.json pin those).
                for text in variants where text.hasPrefix("00") {
                    #expect((TraceHeaders.traceparent(reading: text) != nil) == (Self.referenceAccepts(text) != nil),
                            "\(text)")
                }
            }
        }
    }
}
