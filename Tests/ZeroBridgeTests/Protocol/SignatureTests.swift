import Crypto
import Foundation
import Testing
@testable import ZeroBridge
import ZeroMQ

/// protocol/fixtures/signatures.json (SPEC 3.1), and how the Swift side computes and checks MACs (swift-crypto).
@Suite("Signatures of keyed connections", .timeLimit(.minutes(3)))
struct SignatureTests {
    static let fixture: JSONValue = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("protocol/fixtures/signatures.json")
        return try! JSONValue.parse(Array(try! Data(contentsOf: url)))[0]!
    }()
    static let key = ConnectionKey(hex: fixture["key"]!.stringValue!)!

    static func frames(_ value: JSONValue?) -> [[UInt8]] {
        (value?.arrayValue ?? []).map { frame in
            if let text = frame.stringValue { return Array(text.utf8) }
            return ConnectionKey(hex: frame["hex"]!.stringValue!)!.bytes
        }
    }

    @Test("a key's prepared HMAC gives RFC 4231's MACs every time it is used (test cases 1, 2 and 6: a short key, a text key, a key longer than a block)")
    func rfc4231() {
        let cases: [(key: [UInt8], data: String, mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (Array("Jefe".utf8), "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            ([UInt8](repeating: 0xaa, count: 131), "Test Using Larger Than Block-Size Key - Hash Key First",
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        ]
        for item in cases {
            let key = ConnectionKey(hex: Signature.hex(item.key))!
            for _ in 0..<3 {  // each MAC starts from a copy: the key's own state is never advanced
                var hmac = key.authenticator
                hmac.update(data: Array(item.data.utf8))
                #expect(Signature.hex(hmac.finalize()) == item.mac)
            }
        }
        #expect(Catalogue.hash(String(repeating: "a", count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("frames as received (libzmq's storage, read in place) are signed and checked as their copies are")
    func framesInPlace() {
        let host = Self.fixture["sign"]!.arrayValue!.first { $0["kind"] == "h2p" }!
        let copies = Self.frames(host["frames"])
        let frames = copies.map { Frame($0) }
        let channel = host["channel"]!.stringValue!, counter = Int64(host["counter"]!.intValue!)
        #expect("m.\(counter).\(Signature.mac(Self.key, .hostToPeer, channel: channel, stamp: counter, frames: frames))"
                == host["frame0"]!.stringValue!)
        let frame0 = Array(host["frame0"]!.stringValue!.utf8)
        var peer = KeyedChannel.peer(Self.key, nonce: channel)
        let accepted = peer.accept(frame0, frames[...])
        #expect(accepted)
        var tampered = copies
        tampered[tampered.count - 1].append(0x20)
        var again = KeyedChannel.peer(Self.key, nonce: channel)
        let acceptedTampered = again.accept(frame0, tampered.map { Frame($0) })
        #expect(!acceptedTampered, "one byte more in the last frame")
    }

    @Test("a MAC is checked against its hex in full: a wrong digit, or one too few, is refused")
    func macComparison() {
        let frames: [[UInt8]] = [Array(#"{"v":1}"#.utf8)]
        let mac = Signature.mac(Self.key, .peerToHost, channel: "c", stamp: 1, frames: frames)
        #expect(Signature.isValid(mac, Self.key, .peerToHost, channel: "c", stamp: 1, frames: frames))
        let last = mac.last == "0" ? "1" : "0"
        #expect(!Signature.isValid(String(mac.dropLast()) + last, Self.key, .peerToHost, channel: "c", stamp: 1, frames: frames))
        #expect(!Signature.isValid(String(mac.dropLast(2)), Self.key, .peerToHost, channel: "c", stamp: 1, frames: frames))
        #expect(!Signature.isValid(mac, Self.key, .hostToPeer, channel: "c", stamp: 1, frames: frames))
    }

    @Test("every sign case of the fixture, byte for byte")
    func signCases() {
        for item in Self.fixture["sign"]!.arrayValue! {
            let frames = Self.frames(item["frames"])
            let channel = item["channel"]!.stringValue!
            let frame0: String = item["kind"] == "hello"
                ? Signature.opening(Self.key, channel: channel, ms: Int64(item["ms"]!.intValue!), frames: frames)
                : Signature.message(Self.key, Signature.Kind(rawValue: item["kind"]!.stringValue!)!, channel: channel,
                                    counter: Int64(item["counter"]!.intValue!), frames: frames)
            #expect(frame0 == item["frame0"]!.stringValue!, "\(item["description"]!)")
        }
    }

    @Test("every verify case of the fixture, as the host and the peer check what arrives")
    func verifyCases() throws {
        for item in Self.fixture["verify"]!.arrayValue! {
            let description = item["description"]!.stringValue!
            var host = KeyedConnections(key: Self.key)
            var peer = item["channel"]?.stringValue.map { KeyedChannel.peer(Self.key, nonce: $0) }
            for (index, message) in item["messages"]!.arrayValue!.enumerated() {
                let frame0 = Array(message["frame0"]!.stringValue!.utf8), frames = Self.frames(message["frames"])
                let accepted: Bool
                if item["side"] == "host" {
                    let connection = Array((message["connection"]?.stringValue ?? "a").utf8)
                    let verdict = host.receive(on: connection, frame0: frame0, frames: frames,
                                               now: Int64(item["now_ms"]!.intValue!)) {
                        (try? JSONValue.parse(frames[0]))?["type"] == "hello"
                    }
                    accepted = verdict == .accepted
                } else {
                    accepted = peer!.accept(frame0, frames)
                }
                #expect(accepted == message["accept"]!.boolValue!, "\(description), message \(index + 1): \(message["note"] ?? "")")
            }
        }
    }

    @Test("the opening history forgets old nonces, and when full refuses openings not later than the one it forgot")
    func openingHistoryBound() {
        var history = OpeningHistory(capacity: 3)
        let now: Int64 = 1_800_000_000_000
        var accepted: [Bool] = []
        for (index, nonce) in ["a", "b", "c", "d"].enumerated() {
            accepted.append(history.accept(nonce: nonce, ms: now + Int64(index), now: now))
        }
        #expect(accepted == [true, true, true, true])
        #expect(history.count == 3)
        let replay = history.accept(nonce: "a", ms: now, now: now)
        #expect(!replay, "forgotten early: refused by the floor")
        let early = history.accept(nonce: "e", ms: now, now: now)
        #expect(!early, "not later than the forgotten one")
        let later = history.accept(nonce: "e", ms: now + 10, now: now)
        #expect(later)
        let muchLater = history.accept(nonce: "f", ms: now + 700_000, now: now + 700_000)
        #expect(muchLater, "ten minutes on, the old ones are gone")
        #expect(history.count == 1)
    }
}
