import Foundation
import Testing
@testable import ZeroBridge

/// Decodes `text` as a body.
func decodeBody(_ text: String) -> Result<Message, DecodeFailure> {
    Message.decode(Array(text.utf8))
}

struct MessageCase: Sendable, CustomTestStringConvertible {
    var name: String
    var message: Message
    var testDescription: String { name }
}

/// A body that must be rejected, with the code, echoed id and a fragment of the message it must be rejected with.
struct Rejection: Sendable, CustomTestStringConvertible {
    var body: String
    var code: BridgeError.Code
    var id: String?
    var mentions: String

    init(_ body: String, _ code: BridgeError.Code = .badMessage, id: String? = nil, mentions: String) {
        self.body = body
        self.code = code
        self.id = id
        self.mentions = mentions
    }

    var testDescription: String { body.count > 100 ? String(body.prefix(100)) + "…" : body }
}

/// A body that must be accepted, and what it must decode to.
struct Acceptance: Sendable, CustomTestStringConvertible {
    var body: String
    var expected: Message
    init(_ body: String, _ expected: Message) {
        self.body = body
        self.expected = expected
    }
    var testDescription: String { body }
}

/// Checks a rejection through both decoders (bytes and parsed value).
func expectRejected(_ example: Rejection, sourceLocation: SourceLocation = #_sourceLocation) {
    let outcomes: [(String, Result<Message, DecodeFailure>)] = [
        ("bytes", decodeBody(example.body)),
        ("value", (try? parseJSON(example.body)).map(Message.decode) ?? decodeBody(example.body)),
    ]
    for (path, outcome) in outcomes {
        guard case .failure(let failure) = outcome else {
            Issue.record("accepted (\(path)): \(example.body)", sourceLocation: sourceLocation)
            continue
        }
        #expect(failure.error.code == example.code, "\(path): \(failure)", sourceLocation: sourceLocation)
        #expect(failure.id == example.id, "\(path): \(failure)", sourceLocation: sourceLocation)
        #expect(failure.error.message.contains(example.mentions), "\(path): \(failure.error.message)", sourceLocation: sourceLocation)
    }
}

func expectAccepted(_ example: Acceptance, sourceLocation: SourceLocation = #_sourceLocation) {
    for outcome in [decodeBody(example.body), Message.decode(try! parseJSON(example.body))] {
        switch outcome {
        case .success(let message):
            #expect(message == example.expected, sourceLocation: sourceLocation)
            #expect(message.json == example.expected.json, sourceLocation: sourceLocation)
        case .failure(let failure):
            Issue.record("rejected: \(failure) for \(example.body)", sourceLocation: sourceLocation)
        }
    }
}

let maxName = String(repeating: "é", count: 128)
let tooLongName = String(repeating: "é", count: 129)

@Suite("Message round trips", .timeLimit(.minutes(3)))
struct MessageRoundTripTests {
    static let messages: [MessageCase] = [
        MessageCase(name: "hello (minimal)", message: .hello(.init(peer: "frontend"))),
        MessageCase(name: "hello (full)", message: .hello(.init(peer: "etl", actions: ["render", "$evaluate"], features: ["evaluate"],
                                                             session: "s-1", heartbeatMs: 250))),
        MessageCase(name: "welcome", message: .welcome(.init(host: "conformance", session: "s-9", actions: ["echo", "add"],
                                                              heartbeatMs: 5000, maxMessageBytes: 1_048_576, maxInFlight: 256))),
        MessageCase(name: "welcome (library version)", message: .welcome(.init(host: "h", session: "s", actions: ["a"], heartbeatMs: 50,
                                                                                maxMessageBytes: 1, maxInFlight: 1,
                                                                                libraryVersion: "2.1.0"))),
        MessageCase(name: "welcome (no actions)", message: .welcome(.init(host: "h", session: "s", actions: [], heartbeatMs: 50,
                                                                           maxMessageBytes: 1, maxInFlight: 1))),
        MessageCase(name: "request (minimal)", message: .request(.init(id: "1", action: "echo"))),
        MessageCase(name: "request (full)", message: .request(.init(id: maxName, action: "add", payload: ["a": 1, "b": 2.5],
                                                                   timeoutMs: 1500, wantsProgress: true))),
        MessageCase(name: "request (nested payload)", message: .request(.init(id: "x", action: "echo",
                                                                             payload: [1, ["k": [nil, true, "😀\n"]]]))),
        MessageCase(name: "response ok", message: .response(.init(id: "7", outcome: .success(["sum": 3])))),
        MessageCase(name: "response ok null", message: .response(.init(id: "7", outcome: .success(nil)))),
        MessageCase(name: "response error", message: .response(.init(id: "7", outcome: .failure(BridgeError(.handlerError, "boom"))))),
        MessageCase(name: "response error with data", message: .response(.init(id: "7", outcome: .failure(
            BridgeError(.invalidPayload, "bad \"a\"", data: ["field": "a"]))))),
        MessageCase(name: "response error, unknown code", message: .response(.init(id: "7", outcome: .failure(
            BridgeError("quota_exceeded", "try later"))))),
        MessageCase(name: "response to an unreadable message", message: .response(.init(id: nil, outcome: .failure(
            BridgeError(.badMessage, "not JSON"))))),
        MessageCase(name: "progress", message: .progress(.init(id: "p", seq: 1, payload: ["i": 1, "n": 3]))),
        MessageCase(name: "event", message: .event(.init(action: "log", payload: "started"))),
        MessageCase(name: "event (null payload)", message: .event(.init(action: "tick"))),
        MessageCase(name: "cancel", message: .cancel(id: "42")),
        MessageCase(name: "ping", message: .ping),
        MessageCase(name: "pong", message: .pong),
        MessageCase(name: "bye", message: .bye),
    ]

    @Test("encode then decode gives the same message", arguments: messages)
    func roundTrip(_ example: MessageCase) throws {
        let bytes = example.message.encoded()
        let decoded = try Message.decode(bytes).get()
        #expect(decoded == example.message)
        // BridgeError compares codes only, so compare the full JSON too.
        #expect(decoded.json == example.message.json)
        #expect(try Message.decode(example.message.json).get().json == example.message.json)
        #expect(try JSONValue.parse(bytes) == example.message.json)
        let prefix = #"{"v":1,"type":"\#(example.message.kind.rawValue)""#
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix(prefix))
        var appended = Array("xy".utf8)
        example.message.write(to: &appended)
        #expect(Array(appended.dropFirst(2)) == bytes)
    }

    @Test("exact bytes of each envelope")
    func exactBytes() {
        func text(_ message: Message) -> String { String(decoding: message.encoded(), as: UTF8.self) }
        #expect(text(.request(.init(id: "1", action: "add", payload: ["a": 1, "b": 2], timeoutMs: 500, wantsProgress: true)))
                == #"{"v":1,"type":"request","id":"1","action":"add","payload":{"a":1,"b":2},"timeout_ms":500,"progress":true}"#)
        #expect(text(.request(.init(id: "1", action: "echo")))
                == #"{"v":1,"type":"request","id":"1","action":"echo","payload":null}"#)
        #expect(text(.response(.init(id: "1", outcome: .success(3))))
                == #"{"v":1,"type":"response","id":"1","ok":true,"result":3}"#)
        #expect(text(.response(.init(id: nil, outcome: .failure(BridgeError(.badMessage, "no"))))) ==
                #"{"v":1,"type":"response","id":null,"ok":false,"error":{"code":"bad_message","message":"no"}}"#)
        #expect(text(.response(.init(id: "2", outcome: .failure(BridgeError(.timeout, "late", data: [1])))))
                == #"{"v":1,"type":"response","id":"2","ok":false,"error":{"code":"timeout","message":"late","data":[1]}}"#)
        #expect(text(.progress(.init(id: "1", seq: 2, payload: 0.5)))
                == #"{"v":1,"type":"progress","id":"1","seq":2,"payload":0.5}"#)
        #expect(text(.event(.init(action: "a", payload: nil))) == #"{"v":1,"type":"event","action":"a","payload":null}"#)
        #expect(text(.cancel(id: "9")) == #"{"v":1,"type":"cancel","id":"9"}"#)
        #expect(text(.hello(.init(peer: "p", actions: ["a"], features: [], session: "s", heartbeatMs: 100)))
                == #"{"v":1,"type":"hello","peer":"p","actions":["a"],"features":[],"session":"s","heartbeat_ms":100}"#)
        #expect(text(.welcome(.init(host: "h", session: "s", actions: ["x", "y"], heartbeatMs: 5000, maxMessageBytes: 1024, maxInFlight: 8)))
                == #"{"v":1,"type":"welcome","host":"h","session":"s","actions":["x","y"],"heartbeat_ms":5000,"limits":{"max_message_bytes":1024,"max_in_flight":8}}"#)
        let token = String(repeating: "7e", count: 32)
        #expect(text(.hello(.init(peer: "p", session: "s", resumeToken: token)))
                == #"{"v":1,"type":"hello","peer":"p","actions":[],"features":[],"session":"s","resume_token":"\#(token)"}"#)
        #expect(text(.welcome(.init(host: "h", session: "s", resumeToken: token, actions: [], heartbeatMs: 5000, maxMessageBytes: 1024, maxInFlight: 8)))
                == #"{"v":1,"type":"welcome","host":"h","session":"s","resume_token":"\#(token)","actions":[],"heartbeat_ms":5000,"limits":{"max_message_bytes":1024,"max_in_flight":8}}"#)
        #expect(text(.ping) == #"{"v":1,"type":"ping"}"#)
        #expect(text(.pong) == #"{"v":1,"type":"pong"}"#)
        #expect(text(.bye) == #"{"v":1,"type":"bye"}"#)
    }

    @Test("a decode failure becomes the response that answers it")
    func failureResponse() {
        guard case .failure(let failure) = decodeBody(#"{"v":1,"type":"request","id":"r1"}"#) else {
            Issue.record("accepted a request without an action")
            return
        }
        #expect(failure.response.json == ["v": 1, "type": "response", "id": "r1", "ok": false,
                                          "error": ["code": "bad_message", "message": .string(failure.error.message)]])
    }

    @Test("the id accessor")
    func idAccessor() {
        #expect(Message.request(.init(id: "a", action: "b")).id == "a")
        #expect(Message.cancel(id: "c").id == "c")
        #expect(Message.progress(.init(id: "p", seq: 1)).id == "p")
        #expect(Message.response(.init(id: nil, outcome: .success(nil))).id == nil)
        #expect(Message.ping.id == nil)
    }
}

@Suite("Message validation", .timeLimit(.minutes(3)))
struct MessageValidationTests {
    @Test("the body must be a JSON object", arguments: [
        Rejection("", mentions: "not valid JSON"),
        Rejection("not json", mentions: "not valid JSON"),
        Rejection(#"{"v":1,"type":"ping""#, mentions: "not valid JSON"),
        Rejection(#"{"v":1,"type":"ping"} {}"#, mentions: "not valid JSON"),
        Rejection(#"{"v":1,"type":"ping","id":"x",}"#, mentions: "not valid JSON"),
        Rejection("[1,2]", mentions: "must be a JSON object, not an array"),
        Rejection(#""hello""#, mentions: "must be a JSON object, not a string"),
        Rejection("42", mentions: "must be a JSON object, not an integer"),
        Rejection("null", mentions: "must be a JSON object, not null"),
    ])
    func bodyMustBeObject(_ example: Rejection) { expectRejected(example) }

    @Test("invalid JSON gets no id, even when one was written")
    func unreadableHasNoID() {
        guard case .failure(let failure) = decodeBody(#"{"v":1,"type":"request","id":"abc","action":"echo","payload":[}"#) else {
            Issue.record("accepted invalid JSON")
            return
        }
        #expect(failure.id == nil && failure.error.code == .badMessage)
    }

    @Test("invalid UTF-8 anywhere in the body is bad_message")
    func invalidUTF8Body() {
        var body = Array(#"{"v":1,"type":"event","action":"a","payload":""#.utf8)
        body += [0xC0, 0xAF]
        body += Array(#""}"#.utf8)
        guard case .failure(let failure) = Message.decode(body) else {
            Issue.record("accepted invalid UTF-8")
            return
        }
        #expect(failure.error.code == .badMessage)
        #expect(failure.error.message.contains("UTF-8"))
    }

    @Test("'v' must be the integer 1", arguments: [
        Rejection(#"{"type":"ping"}"#, mentions: "field 'v' is missing"),
        Rejection(#"{"v":"1","type":"ping"}"#, mentions: "field 'v' must be the integer 1, not a string"),
        Rejection(#"{"v":1.0,"type":"ping"}"#, mentions: "field 'v' must be the integer 1, not a non-integer number"),
        Rejection(#"{"v":null,"type":"ping"}"#, mentions: "field 'v' must be the integer 1, not null"),
        Rejection(#"{"v":true,"type":"ping"}"#, mentions: "field 'v' must be the integer 1"),
        Rejection(#"{"v":2,"type":"ping"}"#, .unsupportedVersion, mentions: "protocol version 2"),
        Rejection(#"{"v":0,"type":"ping"}"#, .unsupportedVersion, mentions: "protocol version 0"),
        Rejection(#"{"v":-1,"type":"ping"}"#, .unsupportedVersion, mentions: "protocol version -1"),
        Rejection(#"{"v":2,"type":"request","id":"r9","action":"echo"}"#, .unsupportedVersion, id: "r9", mentions: "version 2"),
        Rejection(#"{"v":"x","type":"request","id":"r9","action":"echo"}"#, id: "r9", mentions: "field 'v'"),
    ])
    func versionRules(_ example: Rejection) { expectRejected(example) }

    @Test("'type' must be one of the ten", arguments: [
        Rejection(#"{"v":1}"#, mentions: "field 'type' is missing"),
        Rejection(#"{"v":1,"type":7}"#, mentions: "field 'type' must be a string, not an integer"),
        Rejection(#"{"v":1,"type":"Ping"}"#, mentions: "unknown message type 'Ping'"),
        Rejection(#"{"v":1,"type":""}"#, mentions: "unknown message type ''"),
        Rejection(#"{"v":1,"type":"notify","id":"n1"}"#, id: "n1", mentions: "must be one of hello, welcome, request"),
    ])
    func typeRules(_ example: Rejection) { expectRejected(example) }

    static let idRule = "field 'id' must be a string of 1 to 128 characters"

    @Test("'id' is a string of 1 to 128 characters on request, response, progress and cancel", arguments: [
        Rejection(#"{"v":1,"type":"request","action":"echo"}"#, mentions: "field 'id' is missing"),
        Rejection(#"{"v":1,"type":"request","id":"","action":"echo"}"#, mentions: idRule + ", not an empty string"),
        Rejection(#"{"v":1,"type":"request","id":5,"action":"echo"}"#, mentions: idRule + ", not an integer"),
        Rejection(#"{"v":1,"type":"request","id":null,"action":"echo"}"#, mentions: idRule + ", not null"),
        Rejection(#"{"v":1,"type":"request","id":"\#(tooLongName)","action":"echo"}"#, mentions: idRule + ", not a string of 129 characters"),
        Rejection(#"{"v":1,"type":"progress","seq":1,"payload":1}"#, mentions: "field 'id' is missing"),
        Rejection(#"{"v":1,"type":"progress","id":["x"],"seq":1}"#, mentions: idRule),
        Rejection(#"{"v":1,"type":"cancel"}"#, mentions: "field 'id' is missing"),
        Rejection(#"{"v":1,"type":"cancel","id":""}"#, mentions: idRule),
        Rejection(#"{"v":1,"type":"response","ok":true,"result":1}"#, mentions: "field 'id' is missing"),
        Rejection(#"{"v":1,"type":"response","id":"","ok":true}"#, mentions: "a string of 1 to 128 characters or null"),
        Rejection(#"{"v":1,"type":"response","id":3,"ok":true}"#, mentions: "or null, not an integer"),
    ])
    func idRules(_ example: Rejection) { expectRejected(example) }

    @Test("id length counts Unicode scalars, not bytes or characters", arguments: [
        Acceptance(#"{"v":1,"type":"cancel","id":"\#(maxName)"}"#, .cancel(id: maxName)),
        Acceptance(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "😀", count: 128))"}"#,
                   .cancel(id: String(repeating: "😀", count: 128))),
        Acceptance(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "a", count: 128))"}"#,
                   .cancel(id: String(repeating: "a", count: 128))),
        // One character of two scalars (e + combining acute) counts 2.
        Acceptance(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "e\u{301}", count: 64))"}"#,
                   .cancel(id: String(repeating: "e\u{301}", count: 64))),
        Acceptance(#"{"v":1,"type":"cancel","id":"\u00e9"}"#, .cancel(id: "é")),
    ])
    func idLengthAccepted(_ example: Acceptance) { expectAccepted(example) }

    @Test("ids over 128 scalars are rejected however they are written", arguments: [
        Rejection(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "a", count: 129))"}"#, mentions: "129 characters"),
        Rejection(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "😀", count: 129))"}"#, mentions: "129 characters"),
        Rejection(#"{"v":1,"type":"cancel","id":"\#(String(repeating: "e\u{301}", count: 65))"}"#, mentions: "130 characters"),
    ])
    func idLengthRejected(_ example: Rejection) { expectRejected(example) }

    @Test("a readable id is echoed whatever else is wrong", arguments: [
        Rejection(#"{"v":1,"type":"request","id":"r1"}"#, id: "r1", mentions: "field 'action' is missing"),
        Rejection(#"{"v":1,"type":"request","id":"r1","action":"a","timeout_ms":0}"#, id: "r1", mentions: "timeout_ms"),
        Rejection(#"{"type":"request","id":"r2","action":"a"}"#, id: "r2", mentions: "field 'v' is missing"),
        Rejection(#"{"v":1,"type":"event","id":"e1"}"#, id: "e1", mentions: "field 'action' is missing"),
        Rejection(#"{"v":1,"type":"bogus","id":"\#(maxName)"}"#, id: maxName, mentions: "unknown message type"),
        Rejection(#"{"v":1,"type":"bogus","id":"\#(tooLongName)"}"#, id: nil, mentions: "unknown message type"),
        Rejection(#"{"v":1,"type":"bogus","id":42}"#, id: nil, mentions: "unknown message type"),
    ])
    func echoesID(_ example: Rejection) { expectRejected(example) }

    @Test("'action' is a string of 1 to 128 characters on request and event", arguments: [
        Rejection(#"{"v":1,"type":"request","id":"1"}"#, id: "1", mentions: "field 'action' is missing"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":""}"#, id: "1", mentions: "field 'action' must be a string of 1 to 128 characters, not an empty string"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":{"a":1}}"#, id: "1", mentions: "not an object"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"\#(tooLongName)"}"#, id: "1", mentions: "129 characters"),
        Rejection(#"{"v":1,"type":"event"}"#, mentions: "field 'action' is missing"),
        Rejection(#"{"v":1,"type":"event","action":null,"payload":1}"#, mentions: "field 'action' must be a string"),
    ])
    func actionRules(_ example: Rejection) { expectRejected(example) }

    @Test("'payload' is any JSON and defaults to null", arguments: [
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"echo"}"#, .request(.init(id: "1", action: "echo", payload: nil))),
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"echo","payload":null}"#, .request(.init(id: "1", action: "echo"))),
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"echo","payload":[1,"2",{"3":4.5}]}"#,
                   .request(.init(id: "1", action: "echo", payload: [1, "2", ["3": 4.5]]))),
        Acceptance(#"{"v":1,"type":"event","action":"e"}"#, .event(.init(action: "e", payload: nil))),
        Acceptance(#"{"v":1,"type":"event","action":"e","payload":false}"#, .event(.init(action: "e", payload: false))),
        Acceptance(#"{"v":1,"type":"progress","id":"1","seq":1}"#, .progress(.init(id: "1", seq: 1, payload: nil))),
        Acceptance(#"{"v":1,"type":"progress","id":"1","seq":3,"payload":"x"}"#, .progress(.init(id: "1", seq: 3, payload: "x"))),
    ])
    func payloadRules(_ example: Acceptance) { expectAccepted(example) }

    @Test("'timeout_ms' is an optional positive integer", arguments: [
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":0}"#, id: "1", mentions: "field 'timeout_ms' must be a positive integer, not 0"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":-5}"#, id: "1", mentions: "not -5"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":1.5}"#, id: "1", mentions: "not a non-integer number"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":"100"}"#, id: "1", mentions: "not a string"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":null}"#, id: "1", mentions: "not null"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":1e3}"#, id: "1", mentions: "not a non-integer number"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":99999999999999999999}"#, id: "1", mentions: "positive integer"),
    ])
    func timeoutRejected(_ example: Rejection) { expectRejected(example) }

    @Test("valid 'timeout_ms' and 'progress' values", arguments: [
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":1}"#, .request(.init(id: "1", action: "a", timeoutMs: 1))),
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"a","timeout_ms":9223372036854775807}"#,
                   .request(.init(id: "1", action: "a", timeoutMs: Int.max))),
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"a","progress":true}"#,
                   .request(.init(id: "1", action: "a", wantsProgress: true))),
        Acceptance(#"{"v":1,"type":"request","id":"1","action":"a","progress":false}"#,
                   .request(.init(id: "1", action: "a", wantsProgress: false))),
    ])
    func requestOptions(_ example: Acceptance) { expectAccepted(example) }

    @Test("'progress' is an optional boolean", arguments: [
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","progress":1}"#, id: "1", mentions: "field 'progress' must be true or false, not an integer"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","progress":"yes"}"#, id: "1", mentions: "not a string"),
        Rejection(#"{"v":1,"type":"request","id":"1","action":"a","progress":null}"#, id: "1", mentions: "not null"),
    ])
    func progressFlag(_ example: Rejection) { expectRejected(example) }

    @Test("response: 'result' defaults to null; 'id' may be null on errors", arguments: [
        Acceptance(#"{"v":1,"type":"response","id":"1","ok":true}"#, .response(.init(id: "1", outcome: .success(nil)))),
        Acceptance(#"{"v":1,"type":"response","id":"1","ok":true,"result":{"n":2}}"#, .response(.init(id: "1", outcome: .success(["n": 2])))),
        Acceptance(#"{"v":1,"type":"response","id":null,"ok":false,"error":{"code":"bad_message","message":"?"}}"#,
                   .response(.init(id: nil, outcome: .failure(BridgeError(.badMessage, "?"))))),
        Acceptance(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"timeout","message":"","extra":1}}"#,
                   .response(.init(id: "1", outcome: .failure(BridgeError(.timeout, ""))))),
    ])
    func responseAccepted(_ example: Acceptance) { expectAccepted(example) }

    @Test("response: 'ok' is a required boolean; 'result' and 'error' go with ok true and false", arguments: [
        Rejection(#"{"v":1,"type":"response","id":"1"}"#, id: "1", mentions: "field 'ok' is missing"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":"true"}"#, id: "1", mentions: "field 'ok' must be true or false, not a string"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":1,"result":1}"#, id: "1", mentions: "not an integer"),
        Rejection(#"{"v":1,"type":"response","id":null,"ok":true,"result":1}"#, mentions: "only an error response may have a null id"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":true,"result":1,"error":{"code":"x","message":""}}"#, id: "1",
                  mentions: "\"ok\": true must not have an 'error' field"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"result":null,"error":{"code":"x","message":""}}"#, id: "1",
                  mentions: "\"ok\": false must not have a 'result' field"),
    ])
    func responseOK(_ example: Rejection) { expectRejected(example) }

    @Test("response: 'error' is {code: string, message: string, data?: any}", arguments: [
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false}"#, id: "1", mentions: "field 'error' is missing"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":"timeout"}"#, id: "1", mentions: "field 'error' must be an object, not a string"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"message":"m"}}"#, id: "1", mentions: "field 'error.code' must be a string of 1 to 128 characters, not missing"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":5,"message":"m"}}"#, id: "1", mentions: "'error.code' must be a string of 1 to 128 characters, not an integer"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"","message":"m"}}"#, id: "1", mentions: "not an empty string"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"\#(tooLongName)","message":"m"}}"#, id: "1", mentions: "not a string of 129 characters"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"timeout"}}"#, id: "1", mentions: "field 'error.message' must be a string, not missing"),
        Rejection(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"timeout","message":null}}"#, id: "1", mentions: "not null"),
        Rejection(#"{"v":1,"type":"response","id":null,"ok":false}"#, mentions: "field 'error' is missing"),
    ])
    func responseError(_ example: Rejection) { expectRejected(example) }

    @Test("error codes this build does not know are kept, and data is carried")
    func openErrorCodes() throws {
        let message = try decodeBody(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"rate_limited","message":"slow down","data":{"retry_ms":50},"extra":1}}"#).get()
        guard case .response(let response) = message, case .failure(let error) = response.outcome else {
            Issue.record("not an error response: \(message)")
            return
        }
        #expect(error.code.rawValue == "rate_limited")
        #expect(error.code == BridgeError.Code("rate_limited"))
        #expect(error.message == "slow down")
        #expect(error.data == ["retry_ms": 50])
        // An explicit null data is kept as such.
        let withNull = try decodeBody(#"{"v":1,"type":"response","id":"1","ok":false,"error":{"code":"x","message":"","data":null}}"#).get()
        guard case .response(let nullResponse) = withNull, case .failure(let nullError) = nullResponse.outcome else { return }
        #expect(nullError.data == .some(.null))
    }

    @Test("progress: 'seq' is an integer from 1", arguments: [
        Rejection(#"{"v":1,"type":"progress","id":"1","payload":1}"#, id: "1", mentions: "field 'seq' is missing (it must be a positive integer)"),
        Rejection(#"{"v":1,"type":"progress","id":"1","seq":0}"#, id: "1", mentions: "field 'seq' must be a positive integer, not 0"),
        Rejection(#"{"v":1,"type":"progress","id":"1","seq":-1}"#, id: "1", mentions: "not -1"),
        Rejection(#"{"v":1,"type":"progress","id":"1","seq":1.5}"#, id: "1", mentions: "not a non-integer number"),
        Rejection(#"{"v":1,"type":"progress","id":"1","seq":"1"}"#, id: "1", mentions: "not a string"),
    ])
    func progressSeq(_ example: Rejection) { expectRejected(example) }

    @Test("hello: 'peer' 1..128; 'actions' and 'features' string arrays defaulting to []; optional 'session', 'heartbeat_ms'", arguments: [
        Acceptance(#"{"v":1,"type":"hello","peer":"p"}"#, .hello(.init(peer: "p"))),
        Acceptance(#"{"v":1,"type":"hello","peer":"p","actions":[],"features":["evaluate"]}"#, .hello(.init(peer: "p", features: ["evaluate"]))),
        Acceptance(#"{"v":1,"type":"hello","peer":"p","actions":["a","b"],"session":"\#(maxName)","heartbeat_ms":1}"#,
                   .hello(.init(peer: "p", actions: ["a", "b"], session: maxName, heartbeatMs: 1))),
        Acceptance(#"{"v":1,"type":"hello","peer":"\#(maxName)"}"#, .hello(.init(peer: maxName))),
    ])
    func helloAccepted(_ example: Acceptance) { expectAccepted(example) }

    @Test("hello: field rules", arguments: [
        Rejection(#"{"v":1,"type":"hello"}"#, mentions: "field 'peer' is missing"),
        Rejection(#"{"v":1,"type":"hello","peer":""}"#, mentions: "field 'peer' must be a string of 1 to 128 characters, not an empty string"),
        Rejection(#"{"v":1,"type":"hello","peer":"\#(tooLongName)"}"#, mentions: "129 characters"),
        Rejection(#"{"v":1,"type":"hello","peer":7}"#, mentions: "field 'peer' must be a string"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","actions":"echo"}"#, mentions: "field 'actions' must be an array of strings of 1 to 128 characters, not a string"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","actions":["a",1]}"#, mentions: "field 'actions' must be an array of strings of 1 to 128 characters, but element 1 is an integer"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","actions":[""]}"#, mentions: "but element 0 is an empty string"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","features":["ok","\#(tooLongName)"]}"#, mentions: "element 1 is a string of 129 characters"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","session":""}"#, mentions: "field 'session' must be a string of 1 to 128 characters, not an empty string"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","features":null}"#, mentions: "field 'features' must be an array of strings of 1 to 128 characters, not null"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","features":[["x"]]}"#, mentions: "element 0 is an array"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","session":1}"#, mentions: "field 'session' must be a string of 1 to 128 characters, not an integer"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","session":"s","resume_token":"ABC"}"#, mentions: "field 'resume_token' must be a string of 64 lowercase hex digits"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","heartbeat_ms":0}"#, mentions: "field 'heartbeat_ms' must be a positive integer, not 0"),
        Rejection(#"{"v":1,"type":"hello","peer":"p","heartbeat_ms":"5"}"#, mentions: "field 'heartbeat_ms' must be a positive integer"),
    ])
    func helloRules(_ example: Rejection) { expectRejected(example) }

    static let welcomeBody = #"{"v":1,"type":"welcome","host":"h","session":"s","actions":["a"],"heartbeat_ms":5000,"limits":{"max_message_bytes":1048576,"max_in_flight":256}}"#

    /// The welcome body with one piece of text replaced.
    static func welcomeVariant(replacing old: String, with new: String) -> String {
        precondition(welcomeBody.contains(old))
        return welcomeBody.replacingOccurrences(of: old, with: new)
    }

    @Test("welcome: every field is required")
    func welcomeAccepted() {
        expectAccepted(Acceptance(Self.welcomeBody, .welcome(.init(host: "h", session: "s", actions: ["a"], heartbeatMs: 5000,
                                                                 maxMessageBytes: 1_048_576, maxInFlight: 256))))
    }

    @Test("welcome: field rules", arguments: [
        Rejection(welcomeVariant(replacing: #""host":"h","#, with: ""), mentions: "field 'host' is missing (it must be a string of 1 to 128 characters)"),
        Rejection(welcomeVariant(replacing: #""host":"h""#, with: #""host":1"#), mentions: "field 'host' must be a string of 1 to 128 characters, not an integer"),
        Rejection(welcomeVariant(replacing: #""session":"s","#, with: ""), mentions: "field 'session' is missing"),
        Rejection(welcomeVariant(replacing: #""session":"s""#, with: #""session":null"#), mentions: "field 'session' must be a string of 1 to 128 characters, not null"),
        Rejection(welcomeVariant(replacing: #""session":"s""#, with: #""session":"""#), mentions: "not an empty string"),
        Rejection(welcomeVariant(replacing: #""host":"h""#, with: #""host":"""#), mentions: "field 'host' must be a string of 1 to 128 characters, not an empty string"),
        Rejection(welcomeVariant(replacing: #""actions":["a"]"#, with: #""actions":["a",""]"#), mentions: "element 1 is an empty string"),
        Rejection(welcomeVariant(replacing: #""actions":["a"],"#, with: ""), mentions: "field 'actions' is missing"),
        Rejection(welcomeVariant(replacing: #""actions":["a"]"#, with: #""actions":[true]"#), mentions: "element 0 is a boolean"),
        Rejection(welcomeVariant(replacing: #""heartbeat_ms":5000,"#, with: ""), mentions: "field 'heartbeat_ms' is missing"),
        Rejection(welcomeVariant(replacing: #""heartbeat_ms":5000"#, with: #""heartbeat_ms":0"#), mentions: "field 'heartbeat_ms' must be a positive integer, not 0"),
        Rejection(welcomeVariant(replacing: #","limits":{"max_message_bytes":1048576,"max_in_flight":256}"#, with: ""), mentions: "field 'limits' is missing"),
        Rejection(welcomeVariant(replacing: #"{"max_message_bytes":1048576,"max_in_flight":256}"#, with: "[]"), mentions: "field 'limits' must be an object, not an array"),
        Rejection(welcomeVariant(replacing: #""max_message_bytes":1048576,"#, with: ""), mentions: "field 'limits.max_message_bytes' is missing"),
        Rejection(welcomeVariant(replacing: #","max_in_flight":256"#, with: ""), mentions: "field 'limits.max_in_flight' is missing"),
        Rejection(welcomeVariant(replacing: #""max_in_flight":256"#, with: #""max_in_flight":"256""#), mentions: "field 'limits.max_in_flight' must be a positive integer, not a string"),
        Rejection(welcomeVariant(replacing: #""max_message_bytes":1048576"#, with: #""max_message_bytes":-1"#), mentions: "not -1"),
    ])
    func welcomeRules(_ example: Rejection) { expectRejected(example) }

    @Test("unknown extra fields are ignored, even nested ones", arguments: [
        Acceptance(#"{"v":1,"type":"ping","id":"x","extra":{"deep":[1,{"a":null}]}}"#, .ping),
        Acceptance(#"{"x-trace":"abc","v":1,"type":"pong"}"#, .pong),
        Acceptance(#"{"v":1,"type":"bye","reason":"done"}"#, .bye),
        Acceptance(#"{"type":"cancel","future":true,"id":"c","v":1}"#, .cancel(id: "c")),
        Acceptance(#"{"v":1,"type":"event","action":"a","payload":1,"id":7}"#, .event(.init(action: "a", payload: 1))),
    ])
    func unknownFields(_ example: Acceptance) { expectAccepted(example) }

    @Test("a repeated field keeps its last value")
    func duplicateFields() {
        expectAccepted(Acceptance(#"{"v":2,"type":"request","id":"1","action":"a","id":"2","v":1}"#,
                                  .request(.init(id: "2", action: "a"))))
    }

    @Test("keys written with escapes are matched by their value")
    func escapedKeys() {
        expectAccepted(Acceptance(#"{"\u0076":1,"ty\u0070e":"cancel","i\u0064":"x"}"#, .cancel(id: "x")))
        // A key that merely starts like a known one is unknown.
        expectRejected(Rejection(#"{"v":1,"type":"cancel","idx":"x"}"#, mentions: "field 'id' is missing"))
    }

    @Test("unknown fields must still be well-formed JSON")
    func malformedUnknownField() {
        expectRejected(Rejection(#"{"v":1,"type":"ping","extra":[1,}"#, mentions: "not valid JSON"))
    }

    @Test("nesting: a 64-deep body is accepted, 65 rejected")
    func depth() {
        // The body object is depth 1, so the payload may nest 63 more levels.
        let deepPayload = String(repeating: "[", count: 63) + String(repeating: "]", count: 63)
        expectAccepted(Acceptance(#"{"v":1,"type":"event","action":"a","payload":\#(deepPayload)}"#,
                                  .event(.init(action: "a", payload: try! parseJSON(deepPayload)))))
        let tooDeep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        guard case .failure(let failure) = decodeBody(#"{"v":1,"type":"event","action":"a","payload":\#(tooDeep)}"#) else {
            Issue.record("accepted a body nested 65 deep")
            return
        }
        #expect(failure.error.code == .badMessage && failure.error.message.contains("nested deeper than 64"))
        let hostile = Array(#"{"v":1,"type":"event","action":"a","payload":"#.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        guard case .failure(let deep) = Message.decode(hostile) else {
            Issue.record("accepted 100000 brackets")
            return
        }
        #expect(deep.error.code == .badMessage)
    }

    @Test("decoding from a raw buffer")
    func rawBuffer() throws {
        let bytes = Message.cancel(id: "z").encoded()
        let message = bytes.withUnsafeBytes { Message.decode($0) }
        #expect(try message.get() == .cancel(id: "z"))
        #expect(throws: DecodeFailure.self) { try Message.decode(UnsafeRawBufferPointer(start: nil, count: 0)).get() }
    }
}

@Suite("Message decoding of damaged input", .timeLimit(.minutes(3)))
struct MessageRobustnessTests {
    /// The outcome of a decode, comparable across the two decoders (BridgeError compares codes only).
    static func summary(_ outcome: Result<Message, DecodeFailure>) -> String {
        switch outcome {
        case .success(let message): "ok \(message.json)"
        case .failure(let failure): "failed \(failure.error.code) id=\(failure.id ?? "nil")"
        }
    }

    @Test("random damage never crashes, and bytes and parsed values decode alike")
    func mutations() {
        let seeds = MessageRoundTripTests.messages.map { $0.message.encoded() }
        let alphabet = Array(#"{}[]":,\0123456789-+.eEtrufalsn "#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xE2, 0xED, 0xF0, 0xF4, 0xFF]
        var generator = SplitMix64(seed: 7)
        var accepted = 0
        for round in 0 ..< 20_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0 ..< Int.random(in: 1 ... 4, using: &generator) {
                let position = Int.random(in: 0 ... bytes.count, using: &generator)
                switch Int.random(in: 0 ..< 3, using: &generator) {
                case 0 where position < bytes.count: bytes[position] = alphabet.randomElement(using: &generator)!
                case 1 where position < bytes.count: bytes.remove(at: position)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
                }
            }
            let fromBytes = Message.decode(bytes)
            if case .success = fromBytes { accepted += 1 }
            // When the bytes are JSON, validating the parsed value must give the same answer.
            if let value = try? JSONValue.parse(bytes) {
                #expect(Self.summary(fromBytes) == Self.summary(Message.decode(value)), "\(String(decoding: bytes, as: UTF8.self))")
            } else if case .success = fromBytes {
                Issue.record("decoded bytes that are not JSON: \(bytes)")
            }
        }
        // Some damage (inside strings or payloads) leaves a valid message: the comparison above was exercised.
        #expect(accepted > 0)
    }
}
