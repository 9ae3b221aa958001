import Foundation
import Testing
@testable import ZeroBridge

@Suite("Attachments: bytes travel as frames", .timeLimit(.minutes(3)))
struct AttachmentTests {
    @Test("bytes in a payload become attachment frames referred to in order, and decode back")
    func roundTrip() throws {
        let payload: JSONValue = ["name": "blob", "parts": [.bytes([1, 2, 3]), .bytes([])], "big": .bytes(Array(repeating: 7, count: 70_000))]
        let message = Message.request(.init(id: "r1", action: "echo", payload: payload))
        let frames = message.frames()
        #expect(frames.count == 4)
        let body = try JSONValue.parse(frames[0])
        // Sorted keys: "big" is written first, so it is attachment 0.
        #expect(body["payload"]?["big"] == ["$attachment": 0])
        #expect(body["payload"]?["parts"] == [["$attachment": 1], ["$attachment": 2]])
        #expect(frames[1].count == 70_000 && frames[2] == [1, 2, 3] && frames[3] == [])
        let decoded = frames[0].withUnsafeBytes { Message.decode($0, attachments: Array(frames.dropFirst())) }
        #expect(try decoded.get() == message)
    }

    @Test("a reference to a missing attachment, or a bad index, is bad_message with the id")
    func missingAttachment() {
        for body in [#"{"v":1,"type":"request","id":"m","action":"echo","payload":{"$attachment":0}}"#,
                     #"{"v":1,"type":"request","id":"m","action":"echo","payload":[{"$attachment":-1}]}"#,
                     #"{"v":1,"type":"request","id":"m","action":"echo","payload":{"$attachment":"0"}}"#] {
            let decoded = Array(body.utf8).withUnsafeBytes { Message.decode($0, attachments: []) }
            guard case .failure(let failure) = decoded else { Issue.record("accepted \(body)"); continue }
            #expect(failure.error.code == .badMessage)
            #expect(failure.id == "m")
        }
        // An object with other members beside "$attachment" is plain data.
        let plain = #"{"v":1,"type":"event","action":"x","payload":{"$attachment":0,"note":1}}"#
        let decoded = Array(plain.utf8).withUnsafeBytes { Message.decode($0, attachments: []) }
        #expect(throws: Never.self) { try decoded.get() }
    }

    @Test("an escaped \"$attachment\" key is a reference too: member names count as decoded")
    func escapedKey() throws {
        let body = Array(#"{"v":1,"type":"request","id":"e","action":"echo","payload":{"\u0024attachment":0}}"#.utf8)
        let decoded = body.withUnsafeBytes { Message.decode($0, attachments: [[7, 8]]) }
        guard case .request(let request) = try decoded.get() else { Issue.record("not a request"); return }
        #expect(request.payload == .bytes([7, 8]))
        let missing = body.withUnsafeBytes { Message.decode($0, attachments: []) }
        guard case .failure(let failure) = missing else { Issue.record("accepted a dangling reference"); return }
        #expect(failure.error.code == .badMessage)
    }

    @Test("outside a message, bytes are written as base64 text")
    func plainText() {
        #expect(JSONValue.bytes([0, 1, 2, 255]).description == #""AAEC/w==""#)
    }
}
