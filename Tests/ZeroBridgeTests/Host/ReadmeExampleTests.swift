import Testing
import ZeroBridge

/// The README's Swift example, kept compiling and working.
@Suite("README example", .timeLimit(.minutes(3)))
struct ReadmeExampleTests {
    struct Add: BridgeAction {
        static let name = "add"
        struct Payload: Codable, Sendable { var a: Int; var b: Int }
        typealias Result = Int
    }

    @Test("the README's host serves its typed and untyped actions and calls a peer")
    func readmeHost() async throws {
        let host = BridgeHost(configuration: .init(endpoint: "tcp://127.0.0.1:*", name: "calculator"))
        try host.handle(Add.self) { payload, request in payload.a + payload.b }
        try host.handle("slowCount") { payload, request in
            for i in 1...(payload.intValue ?? 3) { try await request.progress(["i": .int(i)]) }
            return "done"
        }
        try host.start()

        let peer = try BridgePeer(configuration: .init(endpoint: host.boundEndpoint!, name: "frontend"))
        try peer.handle("render") { payload, _ in ["html": .string("<p>page \(payload["page"]?.intValue ?? 0)</p>")] }
        try await peer.connect()
        #expect(try await peer.call(Add.self, .init(a: 2, b: 3)) == 5)
        let call = peer.stream("slowCount", 2)
        var steps: [JSONValue] = []
        for try await step in call.progress { steps.append(step) }
        #expect(steps == [["i": 1], ["i": 2]])
        #expect(try await call.result == "done")

        let frontend = try await host.peer(named: "frontend", waitingUpTo: patience)
        let html = try await frontend.call("render", ["page": 1], timeout: .seconds(10))
        #expect(html == ["html": "<p>page 1</p>"])
        await peer.close()
        await host.shutdown()
    }
}
