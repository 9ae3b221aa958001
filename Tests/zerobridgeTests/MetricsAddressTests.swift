import Testing
import ZeroBridgePrometheus

@Suite("--metrics addresses")
struct MetricsAddressTests {
    @Test("a bare port is loopback; HOST:PORT and [IPv6]:PORT are taken as written")
    func parsed() throws {
        #expect(try MetricsEndpoint.ListenAddress.parse("9464") == .init(host: "127.0.0.1", port: 9464))
        #expect(try MetricsEndpoint.ListenAddress.parse("0") == .init(host: "127.0.0.1", port: 0))
        #expect(try MetricsEndpoint.ListenAddress.parse("0.0.0.0:9464") == .init(host: "0.0.0.0", port: 9464))
        #expect(try MetricsEndpoint.ListenAddress.parse("[::1]:9464") == .init(host: "::1", port: 9464))
        #expect(try MetricsEndpoint.ListenAddress.parse("[::1]:9464").description == "[::1]:9464")
    }

    @Test("anything else is refused, saying what to write", arguments: ["", "abc", "70000", "-1", ":9464", "::1:9464", "host:", "host:port"])
    func refused(_ text: String) {
        let error = #expect(throws: MetricsEndpoint.ListenAddress.ParseError.self) { try MetricsEndpoint.ListenAddress.parse(text) }
        #expect(error?.description.contains("HOST:PORT") == true)
    }
}
