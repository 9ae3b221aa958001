import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

@Suite("Bad input, limits, heartbeats and shutdown", .timeLimit(.minutes(3)))
struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var frames: [[UInt8]]
        var code: String
        var id: JSONValue = nil
    }

    static let cases: [Case] = [
        Case(testDescription: "a single frame", frames: [Array(#"{"v":1}"#.utf8)], code: "bad_message"),
        Case(testDescription: "an empty body", frames: [[], []], code: "bad_message"),
        Case(testDescription: "not JSON", frames: [[], Array("hello".utf8)], code: "bad_message"),
        Case(testDescription: "a JSON array body", frames: [[], Array("[1,2]".utf8)], code: "bad_message"),
        Case(testDescription: "invalid UTF-8", frames: [[], [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D]], code: "bad_message"),
        Case(testDescription: "nesting deeper than 64",
             frames: [[], Array((#"{"v":1,"type":"request","id":"deep","action":"echo","payload":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}").utf8)],
             code: "bad_message"),  // the body is not parsed past the limit, so its id is not read
        Case(testDescription: "an unknown type", frames: [[], Array(#"{"v":1,"type":"shout","id":"x1"}"#.utf8)], code: "bad_message", id: "x1"),
        Case(testDescription: "a missing action", frames: [[], Array(#"{"v":1,"type":"request","id":"x2"}"#.utf8)], code: "bad_message", id: "x2"),
        Case(testDescription: "version 2", frames: [[], Array(#"{"v":2,"type":"request","id":"x3","action":"echo"}"#.utf8)], code: "unsupported_version", id: "x3"),
        Case(testDescription: "a missing version", frames: [[], Array(#"{"type":"request","id":"x4","action":"echo"}"#.utf8)], code: "bad_message", id: "x4"),
        Case(testDescription: "an id of 129 characters",
             frames: [[], Array(#"{"v":1,"type":"request","action":"echo","id":""#.utf8) + Array(repeating: 0x61, count: 129) + Array(#""}"#.utf8)],
             code: "bad_message"),
        Case(testDescription: "a welcome sent to the host",
             frames: [[], Array(#"{"v":1,"type":"welcome","host":"h","session":"s","actions":[],"heartbeat_ms":1,"limits":{"max_message_bytes":1,"max_in_flight":1}}"#.utf8)],
             code: "bad_message"),
        Case(testDescription: "a body over max_message_bytes",
             frames: [[], Array(#"{"v":1,"type":"request","id":"big","action":"echo","payload":""#.utf8) + Array(repeating: 0x61, count: 1 << 20) + Array(#""}"#.utf8)],
             code: "too_large", id: "big"),
    ]

    @Test("bad input is answered with a clear error and the host keeps serving everyone", arguments: cases)
    func badInput(_ badCase: Case) async throws {
        let host = try startConformanceHost()
        let bystander = try await connectPeer(host, name: "bystander")
        let raw = try RawPeer(host.boundEndpoint!)
        try raw.sendFrames(badCase.frames)
        let answer = try #require(try await raw.receive())
        #expect(answer["type"] == "response")
        #expect(answer["ok"] == false)
        #expect(answer.errorCode == badCase.code)
        #expect(answer["id"] == badCase.id)
        #expect(answer["error"]?["message"]?.stringValue?.isEmpty == false)
        // The same raw peer, and everyone else, are still served.
        try raw.request("after", "echo", "ok")
        #expect(try await raw.receive()?["result"] == "ok")
        #expect(try await bystander.call("echo", 1) == 1)
        await bystander.close()
        await host.shutdown()
    }

    @Test("a duplicate id in flight is answered duplicate_id and the original is unaffected")
    func duplicateID() async throws {
        let host = try startConformanceHost()
        let raw = try RawPeer(host.boundEndpoint!)
        try raw.request("same", "sleep", ["ms": 100])
        try raw.request("same", "echo", "second")
        let duplicate = try #require(try await raw.receive())
        #expect(duplicate["id"] == "same" && duplicate.errorCode == "duplicate_id")
        let original = try #require(try await raw.receive())
        #expect(original["result"] == ["slept_ms": 100])
        // Once answered, the id may be used again.
        try raw.request("same", "echo", "third")
        #expect(try await raw.receive()?["result"] == "third")
        await host.shutdown()
    }

    @Test("requests beyond max_in_flight are answered overloaded")
    func overloaded() async throws {
        let host = try startConformanceHost { $0.maxInFlight = 4 }
        let raw = try RawPeer(host.boundEndpoint!)
        for index in 0..<5 { try raw.request("r\(index)", "sleep", ["ms": 300]) }
        let first = try #require(try await raw.receive())
        #expect(first["id"] == "r4" && first.errorCode == "overloaded")
        for _ in 0..<4 { #expect(try await raw.receive()?["ok"] == true) }
        await host.shutdown()
    }

    @Test("anonymous peers are served without hello; ping is answered pong")
    func anonymousAndPing() async throws {
        let host = try startConformanceHost()
        let raw = try RawPeer(host.boundEndpoint!)
        try raw.request("a1", "add", ["a": 2, "b": 3])
        let added = try await raw.receive()
        #expect(added == ["v": 1, "type": "response", "id": "a1", "ok": true, "result": 5], "got \(String(describing: added))")
        try raw.send(["v": 1, "type": "ping"])
        #expect(try await raw.receive() == ["v": 1, "type": "pong"])
        // A host -> peer call back into an anonymous peer is refused: it offered no actions.
        try raw.request("a2", "callback", ["action": "x", "payload": nil])
        #expect(try await raw.receive()?.errorCode == "unknown_action")
        #expect(host.peers.isEmpty)
        await host.shutdown()
    }

    @Test("hello gets a welcome with the host's actions, heartbeat and limits; the host pings named peers")
    func helloWelcomeAndPing() async throws {
        let host = try startConformanceHost()
        let raw = try RawPeer(host.boundEndpoint!)
        let welcome = try #require(try await raw.hello("named", heartbeatMs: 60))
        #expect(welcome["type"] == "welcome")
        #expect(welcome["host"] == "conformance")
        #expect(welcome["session"]?.stringValue?.isEmpty == false)
        #expect(welcome["heartbeat_ms"] == 60)
        #expect(welcome["limits"] == ["max_message_bytes": .int(1 << 20), "max_in_flight": 256])
        #expect(welcome["actions"]?.arrayValue?.contains("echo") == true)
        #expect(try await raw.receive() == ["v": 1, "type": "ping"])
        await host.shutdown()
    }

    @Test("shutdown answers requests in flight, says bye to named peers and closes")
    func shutdownWithRequestsInFlight() async throws {
        // "quick" is held until the shutdown has begun, then finishes within the drain; "slow" outlasts it. The drain
        // (5 s) is the whole test's length, and far longer than a released handler takes to answer on any machine.
        let host = try startConformanceHost { $0.drainTimeout = .seconds(5) }
        let running = AsyncStream<String>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        try host.handle("quick") { _, _ in
            running.continuation.yield("quick")
            for await _ in release.stream { break }
            return "released"
        }
        try host.handle("slow") { _, _ in
            running.continuation.yield("slow")
            try await Task.sleep(for: .seconds(60))
            return "slept"
        }
        let raw = try RawPeer(host.boundEndpoint!)
        _ = try await raw.hello("watcher")
        try raw.request("quick", "quick")
        try raw.request("slow", "slow")
        let peer = try await connectPeer(host)
        let pending = Task { try await peer.call("sleep", ["ms": 30_000], timeout: .seconds(60)) }
        // Shut down only once both requests are running: a request arriving after that is refused, not drained.
        var started = Set<String>()
        for await action in running.stream {
            started.insert(action)
            if started.count == 2 { break }
        }
        let shutdown = Task { await host.shutdown() }
        // The host has begun shutting down once it refuses new requests; only then is "quick" let go.
        #expect(try await eventually {
            do {
                _ = try await peer.call("echo", "probe", timeout: patience)
                return false
            } catch let error as BridgeError {
                return error.code == .overloaded
            }
        })
        release.continuation.yield()
        await shutdown.value
        var answers: [String: JSONValue] = [:]
        var sawBye = false
        while let body = try await raw.receive() {
            if body["type"] == "bye" { sawBye = true; break }
            if body["type"] == "response", let id = body["id"]?.stringValue { answers[id] = body }
        }
        #expect(answers["quick"]?["result"] == "released", "finished during the drain")
        #expect(answers["slow"]?.errorCode == "cancelled", "cancelled after the drain, still answered")
        #expect(sawBye)
        #expect(await bridgeError { _ = try await pending.value }?.code != nil)
        await peer.close()
    }
}
