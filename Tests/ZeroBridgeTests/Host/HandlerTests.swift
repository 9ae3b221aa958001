import Foundation
import Testing
@testable import ZeroBridge

struct Greet: BridgeAction {
    static let name = "greet"
    struct Payload: Codable, Sendable { var who: String }
    struct Result: Codable, Sendable, Equatable { var text: String }
}

final class Greeter: BridgeHandler {
    typealias Action = Greet
    func handle(_ payload: Greet.Payload, request: BridgeRequest) async throws -> Greet.Result {
        .init(text: "hello, \(payload.who)")
    }
}

@Suite("Handlers: typed, weak, removable, replaced explicitly", .timeLimit(.minutes(3)))
struct HandlerTests {
    @Test("an object handler is held weakly: released while registered, it answers handler_gone")
    func weakObjectHandler() async throws {
        let host = try startConformanceHost()
        weak var released: Greeter?
        do {
            let greeter = Greeter()
            released = greeter
            try host.register(greeter)
            let peer = try await connectPeer(host)
            #expect(try await peer.call(Greet.self, .init(who: "ada")) == .init(text: "hello, ada"))
            await peer.close()
        }
        #expect(released == nil, "registering must not keep the handler alive")
        let peer = try await connectPeer(host)
        let error = await bridgeError { _ = try await peer.call(Greet.self, .init(who: "bob")) }
        #expect(error?.code == .handlerGone)
        // The name of a released handler can be taken without `replacing`.
        let successor = Greeter()
        try host.register(successor)
        #expect(try await peer.call(Greet.self, .init(who: "cy")).text == "hello, cy")
        await peer.close()
        await host.shutdown()
    }

    @Test("a payload that does not decode is invalid_payload; a closure handler is removable")
    func typedClosureAndRemoval() async throws {
        let host = try startConformanceHost()
        try host.handle(Greet.self) { payload, _ in .init(text: "hi \(payload.who)") }
        let peer = try await connectPeer(host)
        #expect(try await peer.call("greet", ["who": "x"]) == ["text": "hi x"])
        #expect(await bridgeError { _ = try await peer.call("greet", ["name": "x"]) }?.code == .invalidPayload)
        #expect(host.removeHandler(for: Greet.self))
        #expect(!host.removeHandler(for: Greet.self))
        #expect(await bridgeError { _ = try await peer.call("greet", ["who": "x"]) }?.code == .unknownAction)
        await peer.close()
        await host.shutdown()
    }

    @Test("registering a taken name throws unless replacing is explicit")
    func explicitReplace() async throws {
        let host = try startConformanceHost()
        #expect(throws: BridgeRegistrationError.self) { try host.handle("echo") { _, _ in "mine" } }
        try host.handle("echo", replacing: true) { _, _ in "replaced" }
        #expect(throws: BridgeRegistrationError.self) { try host.handle("") { _, _ in nil } }
        #expect(throws: BridgeRegistrationError.self) { try host.handle(String(repeating: "a", count: 129)) { _, _ in nil } }
        let peer = try await connectPeer(host)
        #expect(try await peer.call("echo", 1) == "replaced")
        await peer.close()
        await host.shutdown()
    }

    @Test("a handler gets its request's id, deadline and peer")
    func requestContext() async throws {
        let host = try startConformanceHost()
        try host.handle("whoami") { _, request in
            ["id": .string(request.id ?? ""), "peer": .string(request.peer?.name ?? ""),
             "hasDeadline": .bool(request.deadline != nil), "progress": .bool(request.wantsProgress)]
        }
        let peer = try await connectPeer(host, name: "curious")
        let answer = try await peer.call("whoami", nil, timeout: .seconds(30))
        #expect(answer["peer"] == "curious")
        #expect(answer["hasDeadline"] == true)
        #expect(answer["progress"] == false)
        #expect(answer["id"]?.stringValue?.isEmpty == false)
        await peer.close()
        await host.shutdown()
    }

    @Test("events reach named handlers in both directions, and are never answered")
    func eventsBothWays() async throws {
        let host = try startConformanceHost()
        let fromPeer = AsyncStream<JSONValue>.makeStream()
        try host.handle("log") { payload, request in
            #expect(request.id == nil)
            fromPeer.continuation.yield(payload)
            return nil
        }
        let fromHost = AsyncStream<JSONValue>.makeStream()
        let peer = try await connectPeer(host, name: "listener") { peer in
            try peer.handle("notify") { payload, _ in fromHost.continuation.yield(payload); return nil }
        }
        try peer.post("log", ["line": 1])
        var received = fromPeer.stream.makeAsyncIterator()
        #expect(await received.next() == ["line": 1])

        let remote = try await host.peer(named: "listener")
        try remote.post("notify", ["n": 7])
        var notified = fromHost.stream.makeAsyncIterator()
        #expect(await notified.next() == ["n": 7])

        // An event to an action nobody serves is dropped without a reply; the raw peer sees nothing.
        let raw = try RawPeer(host.boundEndpoint!)
        try raw.send(["v": 1, "type": "event", "action": "nobody", "payload": nil])
        try raw.send(["v": 1, "type": "event", "action": "fail", "payload": ["message": "x"]])
        #expect(try await raw.receive(timeout: .milliseconds(200)) == nil)
        await peer.close()
        await host.shutdown()
    }
}
