import Foundation
import Testing
import ZeroBridge
import ZeroBridgeFixtures

@Suite("Recording a session as a fixture", .timeLimit(.minutes(3)))
struct RecorderTests {
    /// A session as a proxy would see it, with timings, against the conformance actions.
    static func recordedSession() -> ConversationRecorder {
        var recorder = ConversationRecorder()
        let start = ContinuousClock.now
        func peer(_ body: String, at ms: Int) { recorder.peerSent([[], Array(body.utf8)], at: start + .milliseconds(ms)) }
        func host(_ body: String, at ms: Int) { recorder.hostSent([[], Array(body.utf8)], at: start + .milliseconds(ms)) }

        peer(#"{"v":1,"type":"request","id":"r1","action":"sleep","payload":{"ms":50}}"#, at: 0)
        peer(#"{"v":1,"type":"request","id":"r2","action":"echo","payload":"quick"}"#, at: 1)
        host(#"{"v":1,"type":"response","id":"r2","ok":true,"result":"quick"}"#, at: 2)
        host(#"{"v":1,"type":"ping"}"#, at: 3)
        peer(#"{"v":1,"type":"pong"}"#, at: 4)
        host(#"{"v":1,"type":"response","id":"r1","ok":true,"result":{"slept_ms":50}}"#, at: 52)

        peer(#"{"v":1,"type":"request","id":"c1","action":"count","payload":{"n":1000,"delay_ms":20},"progress":true}"#, at: 100)
        host(#"{"v":1,"type":"progress","id":"c1","seq":1,"payload":{"i":1,"n":1000}}"#, at: 121)
        peer(#"{"v":1,"type":"cancel","id":"c1"}"#, at: 122)
        host(#"{"v":1,"type":"progress","id":"c1","seq":2,"payload":{"i":2,"n":1000}}"#, at: 123)
        host(#"{"v":1,"type":"response","id":"c1","ok":false,"error":{"code":"cancelled","message":"cancelled by the caller"}}"#, at: 124)

        peer(#"{"v":1,"type":"request","id":"s1","action":"sleep","payload":{"ms":10}}"#, at: 200)
        host(#"{"v":1,"type":"response","id":"s1","ok":true,"result":{"slept_ms":10}}"#, at: 12200)
        recorder.peerSent([[], Array("not json".utf8)], at: start + .milliseconds(12300))
        host(#"{"v":1,"type":"response","id":null,"ok":false,"error":{"code":"bad_message","message":"the body is not valid JSON"}}"#, at: 12301)
        return recorder
    }

    @Test("racing responses become expect_unordered, progress after a cancel is skipped, pings are left out, slow answers get room")
    func generalised() throws {
        let text = Self.recordedSession().fixture(description: "generalised")
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.contains(#"{"expect_unordered": [{"body": {"v": 1, "type": "response", "id": "r2", "ok": true, "result": "quick"}}, {"body": {"v": 1, "type": "response", "id": "r1", "ok": true, "result": {"slept_ms": 50}}}]},"#), "\(text)")
        #expect(lines.contains(#"{"expect": {"v": 1, "type": "response", "id": "c1", "error": {"code": "cancelled", "message": {"$any": "string"}}, "ok": false}, "skip": [{"v": 1, "type": "progress", "id": "c1", "payload": {"$any": "value"}, "seq": {"$any": "integer"}}]},"#), "\(text)")
        #expect(!text.contains(#""seq": 2"#), "progress after the cancel is not expected")
        #expect(!text.contains("ping") && !text.contains("pong"))
        #expect(lines.contains(#"{"expect": {"v": 1, "type": "response", "id": "s1", "ok": true, "result": {"slept_ms": 10}}, "within_ms": 36000},"#), "\(text)")
        #expect(lines.contains(#"{"send_frames": [{"text": ""}, {"text": "not json"}]},"#))
        #expect(try Conversation(json: Array(text.utf8)).description == "generalised")
    }

    @Test("the generalised recording replays against the conformance host")
    func replays() async throws {
        let conversation = try Conversation(json: Array(Self.recordedSession().fixture(description: "replayed").utf8))
        let result = await ConversationRunner(endpoint: conformanceHost.boundEndpoint!).run(conversation)
        #expect(result.passed, "\(result.failure.map(String.init(describing:)) ?? "")")
    }

    @Test("a resume token is captured into a variable and never written down; one the recording never saw is blanked")
    func resumeTokensStayOut() throws {
        var recorder = ConversationRecorder()
        let start = ContinuousClock.now
        let token = String(repeating: "c3", count: 32), foreign = String(repeating: "d4", count: 32)
        recorder.peerSent([[], Array(#"{"v":1,"type":"hello","peer":"p","session":"old","resume_token":"\#(foreign)"}"#.utf8)], at: start)
        recorder.hostSent([[], Array(#"{"v":1,"type":"welcome","host":"h","session":"s1","resume_token":"\#(token)","actions":[],"heartbeat_ms":5000,"limits":{"max_message_bytes":1024,"max_in_flight":8}}"#.utf8)],
                          at: start + .milliseconds(1))
        recorder.peerSent([[], Array(#"{"v":1,"type":"hello","peer":"p","session":"s1","resume_token":"\#(token)"}"#.utf8)], at: start + .milliseconds(2))
        let text = recorder.fixture(description: "tokens")
        #expect(!text.contains(token) && !text.contains(foreign), "\(text)")
        #expect(text.contains(#""resume_token": {"$capture": "resume_token"}"#), "\(text)")
        #expect(text.contains(#""resume_token": {"$var": "resume_token"}"#), "\(text)")
        #expect(try Conversation(json: Array(text.utf8)).description == "tokens")
    }
}
