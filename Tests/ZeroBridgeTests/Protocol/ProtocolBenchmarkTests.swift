@_spi(Benchmarks) @testable import ZeroBridge
import Testing

/// Runs the codec's hot path many times and checks every result. Not timed: speed is measured by `make bench`
/// in a release build; this keeps the benchmark's code correct.
@Suite("Protocol codec under load", .timeLimit(.minutes(3)))
struct ProtocolBenchmarkTests {
    @Test("100000 request/response exchanges all come out right")
    func exchanges() {
        #expect(ProtocolBenchmark.requestResponseExchanges(100_000) == 100_000)
    }

    @Test("100000 host-side decodes and encodes")
    func hostSide() {
        let responseSize = #"{"v":1,"type":"response","id":"c0ffee-1234","ok":true,"result":42}"#.utf8.count
        #expect(ProtocolBenchmark.hostSideExchanges(100_000) == 100_000 * responseSize)
    }
}
