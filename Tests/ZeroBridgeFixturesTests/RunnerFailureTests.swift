import Foundation
import Synchronization
import Testing
@_spi(Fixtures) import ZeroBridge
import ZeroBridgeFixtures
import ZeroMQ

/// A deliberately wrong host: a raw ROUTER on its own thread that answers each message with what `reply` says.
final class ScriptedRouter: @unchecked Sendable {  // the socket is confined to its thread
    let endpoint: String
    private let socket: Socket
    private let stopped = Atomic<Bool>(false)

    init(reply: @escaping @Sendable (JSONValue) -> [[UInt8]]?) throws {
        socket = try Socket(.router, context: Context())
        try socket.set(.linger(milliseconds: 0))
        try socket.bind("tcp://127.0.0.1:*")
        endpoint = try socket.lastEndpoint
        let thread = Thread { [self] in
            var poller = Poller()
            poller.add(socket, for: .readable)
            while !stopped.load(ordering: .relaxed) {
                _ = try? poller.poll(timeoutMilliseconds: 20)
                while let frames = try? socket.receiveBytes(dontWait: true), frames.count >= 3 {
                    guard let body = try? FixtureCodec.parse(frames[2]), let answer = reply(body) else { continue }
                    _ = try? socket.send([frames[0]] + answer)
                }
            }
            socket.close()
        }
        thread.start()
    }

    func stop() { stopped.store(true, ordering: .relaxed) }

    /// `[empty signature, body]`.
    static func frames(_ body: String) -> [[UInt8]] { [[], Array(body.utf8)] }
}

func conversation(_ steps: String, clients: String = #"["peer"]"#) throws -> Conversation {
    try Conversation(json: Array(#"{"format": 1, "description": "test", "clients": \#(clients), "steps": [\#(steps)]}"#.utf8))
}

@Suite("The runner's failures, against deliberately wrong hosts", .timeLimit(.minutes(3)))
struct RunnerFailureTests {
    @Test("a wrong error code fails the step with a diff that names $.error.code")
    func wrongErrorCode() async throws {
        let host = try ScriptedRouter { body in
            ScriptedRouter.frames(#"{"v":1,"type":"response","id":\#(body["id"]!.description),"ok":false,"error":{"code":"cancelled","message":"no"}}"#)
        }
        defer { host.stop() }
        let timeout = try #require(try FixtureLoader.conversations(at: [fixturesFolder + "/conversations/timeout.json"]).first)
        let result = await ConversationRunner(endpoint: host.endpoint).run(timeout)
        let failure = try #require(result.failure)
        #expect(failure.step == 2)
        #expect(failure.summary == #"step 2 of 8 (expect, client "peer"): $.error.code: expected "timeout", got "cancelled""#)
        #expect(failure.details.contains(#"received: {"v": 1, "type": "response", "id": "t1", "error": {"code": "cancelled", "message": "no"}, "ok": false}"#))
        #expect(failure.details.first?.hasPrefix(#"expected: {"v": 1, "type": "response", "id": "t1", "error": {"code": "timeout""#) == true)
    }

    @Test("silence fails the step when within_ms passes, and says what was expected")
    func nothingArrives() async throws {
        let host = try ScriptedRouter { _ in nil }
        defer { host.stop() }
        let result = await ConversationRunner(endpoint: host.endpoint).run(try conversation(
            #"{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "pong"}, "within_ms": 200, "note": "pong, please"}"#))
        let failure = try #require(result.failure)
        #expect(failure.summary == #"step 2 of 2 (expect, client "peer"): nothing arrived within 200 ms"#)
        #expect(failure.details == [#"expected: {"v": 1, "type": "pong"}"#, "note: pong, please"])
        #expect(result.duration < .seconds(10))  // failed at its window, not at the end of a long wait
    }

    @Test("a message where nothing was expected fails expect_nothing_ms; an invalid body from the host fails at once")
    func unexpectedAndInvalid() async throws {
        let chatty = try ScriptedRouter { _ in ScriptedRouter.frames(#"{"v":1,"type":"pong"}"#) }
        defer { chatty.stop() }
        let unexpected = await ConversationRunner(endpoint: chatty.endpoint).run(try conversation(
            #"{"send": {"v": 1, "type": "pong"}}, {"expect_nothing_ms": 2000}"#))
        #expect(unexpected.failure?.summary == #"step 2 of 2 (expect_nothing_ms, client "peer"): expected nothing for 2000 ms, but a message arrived"#)
        #expect(unexpected.failure?.details == [#"received: {"v": 1, "type": "pong"}"#])

        let broken = try ScriptedRouter { _ in ScriptedRouter.frames(#"{"v":1,"type":"response","ok":true}"#) }
        defer { broken.stop() }
        let invalid = await ConversationRunner(endpoint: broken.endpoint).run(try conversation(
            #"{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "pong"}}"#))
        #expect(invalid.failure?.summary.hasPrefix(#"step 2 of 2 (expect, client "peer"): client "peer" received an invalid body (bad_message"#) == true,
                "\(invalid.failure?.summary ?? "passed")")

        let oneFrame = try ScriptedRouter { _ in [Array(#"{"v":1,"type":"pong"}"#.utf8)] }
        defer { oneFrame.stop() }
        let short = await ConversationRunner(endpoint: oneFrame.endpoint).run(try conversation(
            #"{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "pong"}}"#))
        #expect(short.failure?.summary.contains("received a message of 1 frame") == true)
    }

    @Test("an unordered group reports the message that fits no item left, and the closest item")
    func unorderedMismatch() async throws {
        let host = try ScriptedRouter { body in
            ScriptedRouter.frames(#"{"v":1,"type":"response","id":\#(body["id"]!.description),"ok":true,"result":"wrong"}"#)
        }
        defer { host.stop() }
        let result = await ConversationRunner(endpoint: host.endpoint).run(try conversation("""
            {"send": {"v": 1, "type": "request", "id": "p-{{i}}", "action": "echo", "payload": "{{i}}"}, "repeat": 2},
            {"expect_unordered": [{"body": {"v": 1, "type": "response", "id": "p-{{i}}", "ok": true, "result": "{{i}}"}, "repeat": 2}]}
            """))
        let failure = try #require(result.failure)
        #expect(failure.step == 2)
        #expect(failure.summary.contains(#"a message matches none of the 2 expected messages left; closest: $.result: expected "1", got "wrong""#),
                "\(failure)")
    }

    @Test("a $var used before its $capture is reported as the fixture's fault; an unreachable host as silence")
    func fixtureFaultAndNoHost() async throws {
        let host = try ScriptedRouter { _ in nil }
        defer { host.stop() }
        let fault = await ConversationRunner(endpoint: host.endpoint).run(try conversation(
            #"{"send": {"v": 1, "type": "response", "id": {"$var": "call"}, "ok": true}}"#))
        #expect(fault.failure?.summary == #"step 1 of 1 (send, client "peer"): the fixture is wrong: $var "call" is used before any $capture of that name"#)

        let nowhere = await ConversationRunner(endpoint: "tcp://127.0.0.1:1").run(try conversation(
            #"{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "pong"}, "within_ms": 100}"#))
        #expect(nowhere.failure?.summary == #"step 2 of 2 (expect, client "peer"): nothing arrived within 100 ms"#)
    }

    @Test("pings are answered and hidden in auto mode, and reach the steps in manual mode")
    func pings() async throws {
        let pinging = try ScriptedRouter { body in
            body["type"] == "hello" ? ScriptedRouter.frames(#"{"v":1,"type":"ping"}"#) : nil
        }
        defer { pinging.stop() }
        let hello = #"{"send": {"v": 1, "type": "hello", "peer": "p"}}"#
        let auto = await ConversationRunner(endpoint: pinging.endpoint).run(try conversation(hello + #", {"expect_nothing_ms": 300}"#))
        #expect(auto.passed, "\(auto.failure.map(String.init(describing:)) ?? "")")
        let manual = try Conversation(json: Array(#"""
            {"format": 1, "description": "manual", "clients": ["peer"], "pings": "manual",
             "steps": [\#(hello), {"expect": {"v": 1, "type": "ping"}}]}
            """#.utf8))
        let result = await ConversationRunner(endpoint: pinging.endpoint).run(manual)
        #expect(result.passed, "\(result.failure.map(String.init(describing:)) ?? "")")
    }
}
