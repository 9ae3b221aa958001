import Foundation
import ZeroMQ
import Testing
@testable import ZeroBridge

@Suite("Conformance actions, Swift peer to Swift host", .timeLimit(.minutes(3)))
struct ConformanceActionTests {
    @Test("echo, add, sleep and fail", arguments: ["ipc", "tcp", "inproc"])
    func simpleActions(transport: String) async throws {
        let host = try startConformanceHost(transport: transport) { configuration in
            if transport == "inproc" { configuration.context = try! ZeroMQContextForTests.shared() }
        }
        let peer = try await connectPeer(host)
        #expect(try await peer.call("echo", ["a": [1, 2.5, "x", nil, true]]) == ["a": [1, 2.5, "x", nil, true]])
        #expect(try await peer.call("add", ["a": 1, "b": 2]) == 3)
        #expect(try await peer.call("add", ["a": 1.5, "b": 2]) == 3.5)
        #expect(await bridgeError { _ = try await peer.call("add", ["a": "1", "b": 2]) }?.code == .invalidPayload)
        #expect(await bridgeError { _ = try await peer.call("add", [1, 2]) }?.code == .invalidPayload)
        #expect(try await peer.call("sleep", ["ms": 20]) == ["slept_ms": 20])
        let failure = await bridgeError { _ = try await peer.call("fail", ["message": "boom"]) }
        #expect(failure?.code == .handlerError)
        #expect(failure?.message == "boom")
        #expect(await bridgeError { _ = try await peer.call("nope") }?.code == .unknownAction)
        #expect(try await peer.actions() == ["add", "broadcast", "callPeer", "callback", "count", "countJob", "echo", "emit", "evaluate", "fail", "once", "sleep"])
        await peer.close()
        await host.shutdown()
    }

    @Test("count streams 10,000 progress events in order before its result")
    func progressOrder() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host)
        let call = peer.stream("count", ["n": 10_000])
        var expected = 1
        for try await event in call.progress {
            #expect(event == ["i": .int(expected), "n": 10_000])
            expected += 1
        }
        #expect(expected == 10_001)
        #expect(try await call.result == ["n": 10_000])
        // Without asking for progress, only the result comes.
        #expect(try await peer.call("count", ["n": 5]) == ["n": 5])
        await peer.close()
        await host.shutdown()
    }

    @Test("callback, evaluate and emit call back into the requesting peer")
    func callbacks() async throws {
        let host = try startConformanceHost()
        let events = AsyncStream<JSONValue>.makeStream()
        let peer = try await connectPeer(host) { peer in
            try peer.handle("double") { payload, _ in .int((payload.intValue ?? 0) * 2) }
            try peer.handle("broken") { _, _ in throw BridgeError(.handlerError, "broken on purpose") }
            try peer.handle("news") { payload, _ in events.continuation.yield(payload); return nil }
        }
        #expect(try await peer.call("callback", ["action": "double", "payload": 21]) == 42)
        #expect(await bridgeError { _ = try await peer.call("callback", ["action": "broken", "payload": nil]) }?.code == .handlerError)
        #expect(await bridgeError { _ = try await peer.call("callback", ["action": "missing", "payload": nil]) }?.code == .unknownAction)
        #expect(await bridgeError { _ = try await peer.call("evaluate", ["script": "return 1"]) }?.code == .notAllowed)
        #expect(try await peer.call("emit", ["action": "news", "payload": ["headline": "hi"]]) == nil)
        var iterator = events.stream.makeAsyncIterator()
        #expect(await iterator.next() == ["headline": "hi"])
        await peer.close()
        await host.shutdown()
    }

    @Test("callPeer calls another named peer, passing its error codes on; an unknown name is peer_lost at once")
    func callPeer() async throws {
        let host = try startConformanceHost()
        let target = try await connectPeer(host, name: "target") { peer in
            try peer.handle("double") { payload, _ in .int((payload.intValue ?? 0) * 2) }
            try peer.handle("broken") { _, _ in throw BridgeError(.handlerError, "broken on purpose") }
        }
        let caller = try await connectPeer(host, name: "caller")
        #expect(try await caller.call("callPeer", ["peer": "target", "action": "double", "payload": 21, "timeout_ms": 5000]) == 42)
        #expect(await bridgeError { _ = try await caller.call("callPeer", ["peer": "target", "action": "broken"]) }?.code == .handlerError)
        #expect(await bridgeError { _ = try await caller.call("callPeer", ["peer": "target", "action": "missing"]) }?.code == .unknownAction)
        #expect(await bridgeError { _ = try await caller.call("callPeer", ["peer": "nobody", "action": "double"]) }?.code == .peerLost)
        for bad: JSONValue in [["action": "double"], ["peer": "target"], ["peer": "", "action": "double"],
                               ["peer": "target", "action": "double", "timeout_ms": 0], "target"] {
            #expect(await bridgeError { _ = try await caller.call("callPeer", bad) }?.code == .invalidPayload, "\(bad)")
        }
        await caller.close()
        await target.close()
        await host.shutdown()
    }

    @Test("once is served by a weakly held object the host releases after its first call")
    func once() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host)
        #expect(try await peer.call("once", "first") == ["called": true])
        #expect(await bridgeError { _ = try await peer.call("once", "second") }?.code == .handlerGone)
        await peer.close()
        await host.shutdown()
    }
}

/// One context for inproc tests, which need host and peer in the same context.
enum ZeroMQContextForTests {
    static func shared() throws -> ZeroMQ.Context { try ZeroMQ.Context() }
}

@Suite("Attachments through the host", .timeLimit(.minutes(3)))
struct HostAttachmentTests {
    @Test("echo sends bytes back as attachments, to a Swift peer and to a raw peer")
    func echoBytes() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host)
        let blob = (0..<1024).map { UInt8(truncatingIfNeeded: $0) }
        #expect(try await peer.call("echo", ["name": "blob", "data": .bytes(blob)]) == ["name": "blob", "data": .bytes(blob)])

        let raw = try RawPeer(host.boundEndpoint!)
        try raw.sendFrames([[], Array(#"{"v":1,"type":"request","id":"a","action":"echo","payload":[{"$attachment":1},{"$attachment":0}]}"#.utf8), [9], [8, 8]])
        try await Task.sleep(for: .milliseconds(1))
        var frames: [[UInt8]]?
        for _ in 0..<5000 where frames == nil {
            frames = try raw.socket.receiveBytes(dontWait: true)
            if frames == nil { try await Task.sleep(for: .milliseconds(1)) }
        }
        let answer = try #require(frames)
        #expect(answer.count == 4)
        #expect(try JSONValue.parse(answer[1])["result"] == [["$attachment": 0], ["$attachment": 1]])
        #expect(answer[2] == [8, 8] && answer[3] == [9])
        await peer.close()
        await host.shutdown()
    }
}
