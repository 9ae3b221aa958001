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

    @Test("an inline handler answers without a task: its result, its errors as an async handler's, its context, events")
    func inlineHandler() async throws {
        let host = try startConformanceHost()
        struct Unexpected: Error {}
        try host.handleInline("inline") { payload, request in
            switch payload["do"]?.stringValue {
            case "refuse": throw BridgeError(.invalidPayload, "refused inline")
            case "fail": throw Unexpected()
            default:
                ["inTask": .bool(withUnsafeCurrentTask { $0 != nil }), "peer": .string(request.peer?.name ?? ""),
                 "id": .string(request.id ?? ""), "hasDeadline": .bool(request.deadline != nil)]
            }
        }
        let events = AsyncStream<JSONValue>.makeStream()
        try host.handleInline("inlineEvent") { payload, request in
            events.continuation.yield(["payload": payload, "inTask": .bool(withUnsafeCurrentTask { $0 != nil }),
                                       "isEvent": .bool(request.id == nil)])
            return nil
        }
        #expect(throws: BridgeRegistrationError.self) { try host.handleInline("echo") { payload, _ in payload } }
        let peer = try await connectPeer(host, name: "quick")
        let answer = try await peer.call("inline", ["do": "answer"], timeout: .seconds(30))
        #expect(answer["inTask"] == false, "an inline handler runs on the socket thread, not in a task")
        #expect(answer["peer"] == "quick")
        #expect(answer["id"]?.stringValue?.isEmpty == false)
        #expect(answer["hasDeadline"] == true)
        let refused = await bridgeError { _ = try await peer.call("inline", ["do": "refuse"]) }
        #expect(refused?.code == .invalidPayload)
        #expect(refused?.message == "refused inline")
        #expect(await bridgeError { _ = try await peer.call("inline", ["do": "fail"]) }?.code == .handlerError)
        try peer.post("inlineEvent", ["n": 1])
        var received = events.stream.makeAsyncIterator()
        #expect(await received.next() == ["payload": ["n": 1], "inTask": false, "isEvent": true])
        // Many at once (the conformance add is inline): each answered once, with its own sum.
        let sums = try await withThrowingTaskGroup(of: JSONValue.self) { group in
            for i in 0..<200 { group.addTask { try await peer.call("add", ["a": .int(i), "b": 1]) } }
            return try await group.reduce(into: [JSONValue]()) { $0.append($1) }
        }
        #expect(Set(sums.compactMap(\.intValue)) == Set(1...200))
        await peer.close()
        await host.shutdown()
    }
}
