import Foundation
import Testing
import ZeroBridge
import ZeroBridgeFixtures

@Suite("zerobridge record", .startsProcesses, .timeLimit(.minutes(3)))
struct RecordCommandTests {
    @Test("a session recorded through the proxy (hello, echo, count with progress, a callback, bye) replays green on a fresh host")
    func recordThenReplay() async throws {
        let recordedHost = try startConformanceHost()
        let out = try temporaryFolder()
        let recorder = try ZerobridgeProcess(["record", "--listen", "tcp://127.0.0.1:*", "--forward", recordedHost.boundEndpoint!,
                                              "--out", out], in: out)
        let ready = try #require(try await recorder.line(startingWith: "zerobridge recording "), "no ready line: \(recorder.errors)")
        let listening = String(ready.dropFirst("zerobridge recording ".count))
        #expect(!listening.hasSuffix("*"))

        let peer = try ScriptedPeer(connectingTo: listening)
        try peer.send(["v": 1, "type": "hello", "peer": "Recorded UI", "actions": ["double"], "features": []])
        let welcome = try #require(try await peer.receive())
        #expect(welcome["type"] == "welcome")

        try peer.send(["v": 1, "type": "request", "id": "e1", "action": "echo", "payload": ["text": "hi", "at": "2024-05-01T10:00:00Z"]])
        #expect(try await peer.receive()?["result"]?["text"] == "hi")

        try peer.send(["v": 1, "type": "request", "id": "c1", "action": "count", "payload": ["n": 3], "progress": true])
        for seq in 1...3 {
            let progress = try #require(try await peer.receive())
            #expect(progress["type"] == "progress" && progress["seq"] == .int(seq))
        }
        #expect(try await peer.receive()?["result"] == ["n": 3])

        try peer.send(["v": 1, "type": "request", "id": "cb1", "action": "callback", "payload": ["action": "double", "payload": 21]])
        let call = try #require(try await peer.receive())
        #expect(call["type"] == "request" && call["action"] == "double")
        try peer.send(["v": 1, "type": "response", "id": call["id"]!, "ok": true, "result": 42])
        #expect(try await peer.receive()?["result"] == 42)
        try peer.send(["v": 1, "type": "bye"])

        let written = try #require(try await recorder.line(startingWith: "zerobridge recorded "), "nothing written: \(recorder.output)")
        let file = String(written.dropFirst("zerobridge recorded ".count))
        #expect(file.hasSuffix("/recorded-ui-001.json"))
        let fixture = try String(contentsOfFile: file, encoding: .utf8)
        #expect(fixture.contains(#""session": {"$capture": "session"}"#), "\(fixture)")
        #expect(fixture.contains(#""id": {"$capture": "host_call_1"}"#))
        #expect(fixture.contains(#"{"send": {"v": 1, "type": "response", "id": {"$var": "host_call_1"}, "ok": true, "result": 42}}"#))
        #expect(fixture.contains(#""timeout_ms": {"$any": "integer"}"#))
        #expect(fixture.contains(#""at": {"$any": "string"}"#), "a date-time in a result matches any string")
        #expect(try FixtureLoader.conversations(at: [file]).count == 1)

        recorder.process.interrupt()
        #expect(await recorder.exitStatus() == 0)
        await recordedHost.shutdown()

        let freshHost = try startConformanceHost()
        let replay = try await runZerobridge(["replay", file, "--endpoint", freshHost.boundEndpoint!])
        #expect(replay.status == 0, "\(replay.output)\(replay.errors)\n\(fixture)")
        #expect(replay.output.contains(#"ok   recorded session recorded-ui-001 of peer "Recorded UI""#))
        await freshHost.shutdown()
    }

    @Test("stopping the recorder writes the sessions still open; a peer that never spoke leaves no file")
    func stopWritesOpenSessions() async throws {
        let host = try startConformanceHost()
        let out = try temporaryFolder()
        let recorder = try ZerobridgeProcess(["record", "--listen", "tcp://127.0.0.1:*", "--forward", host.boundEndpoint!,
                                              "--out", out], in: out)
        let ready = try #require(try await recorder.line(startingWith: "zerobridge recording "))
        let peer = try ScriptedPeer(connectingTo: String(ready.dropFirst("zerobridge recording ".count)))
        try peer.send(["v": 1, "type": "request", "id": "a1", "action": "add", "payload": ["a": 1, "b": 2]])
        #expect(try await peer.receive()?["result"] == 3)

        recorder.process.terminate()
        #expect(await recorder.exitStatus() == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".json") }
        #expect(files == ["anonymous-001.json"])
        let conversation = try #require(try FixtureLoader.conversations(at: [out + "/anonymous-001.json"]).first)
        let replay = await ConversationRunner(endpoint: host.boundEndpoint!).run(conversation)
        #expect(replay.passed, "\(replay.failure.map(String.init(describing:)) ?? "")")
        await host.shutdown()
    }

    @Test("a session with no traffic for --idle-ms is written while the recorder keeps running")
    func idleSessionIsWritten() async throws {
        let host = try startConformanceHost()
        let out = try temporaryFolder()
        let recorder = try ZerobridgeProcess(["record", "--listen", "tcp://127.0.0.1:*", "--forward", host.boundEndpoint!,
                                              "--out", out, "--idle-ms", "200"], in: out)
        let ready = try #require(try await recorder.line(startingWith: "zerobridge recording "))
        let peer = try ScriptedPeer(connectingTo: String(ready.dropFirst("zerobridge recording ".count)))
        try peer.send(["v": 1, "type": "hello", "peer": "quiet"])
        #expect(try await peer.receive()?["type"] == "welcome")

        let written = try await recorder.line(startingWith: "zerobridge recorded ")
        #expect(written?.hasSuffix("/quiet-001.json") == true, "\(recorder.output)")
        #expect(recorder.process.isRunning)
        recorder.process.interrupt()
        #expect(await recorder.exitStatus() == 0)
        await host.shutdown()
    }
}
