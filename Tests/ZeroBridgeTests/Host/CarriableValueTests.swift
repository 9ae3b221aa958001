import Foundation
import Testing
@testable import ZeroBridge

/// SPEC 7.14: what JSON cannot carry is refused where it is made, naming its path, never written as `null`.
@Suite("Values JSON cannot carry are refused before sending", .timeLimit(.minutes(3)))
struct CarriableValueTests {
    @Test("a call's or event's payload with NaN, an infinity or too deep a nesting fails at once, invalid_payload")
    func payloads() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host)
        let cases: [(JSONValue, String)] = [
            (["x": .double(.nan)], "payload.x: NaN"),
            (["items": [1, 2, .double(-.infinity)]], "payload.items[2]: an infinity"),
            (.double(.infinity), "payload: an infinity"),
            ((0..<70).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }, "nested deeper than 64"),
        ]
        for (payload, reason) in cases {
            let error = await #expect(throws: BridgeError.self) { try await peer.call("echo", payload) }
            #expect(error?.code == .invalidPayload)
            #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
            #expect(throws: BridgeError.self) { try peer.post("echo", payload) }
        }
        // Deep but within the limit (the payload is level 2 of its body), and finite: sent as is.
        let deepest = (0..<62).reduce(JSONValue.int(1)) { inner, _ in .array([inner]) }
        #expect(try await peer.call("echo", deepest) == deepest)
        #expect(try await peer.call("echo", ["x": 1.5]) == ["x": 1.5])
        await peer.close()
        await host.shutdown()
    }

    @Test("a handler's result or progress that JSON cannot carry fails the request with handler_error and the path")
    func results() async throws {
        let host = try startConformanceHost()
        try host.handle("badResult") { _, _ in ["ok": true, "ratio": .double(.nan)] }
        try host.handle("badProgress") { _, request in
            try await request.progress(["done": .double(.infinity)])
            return "unreachable"
        }
        let peer = try await connectPeer(host)
        let result = await #expect(throws: BridgeError.self) { try await peer.call("badResult") }
        #expect(result?.code == .handlerError)
        #expect(result?.message.contains("result.ratio: NaN") == true)
        let progress = await #expect(throws: BridgeError.self) {
            let call = peer.stream("badProgress")
            _ = try await call.result
        }
        #expect(progress?.code == .handlerError)
        #expect(progress?.message.contains("progress.done: an infinity") == true)
        await peer.close()
        await host.shutdown()
    }
}
