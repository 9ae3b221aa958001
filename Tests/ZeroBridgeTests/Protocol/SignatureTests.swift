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

    /// What a receiver reads from a batch's frame 1, each message's frames copied out: WebSocketFraming.readSignedBatch.
    static func readSignedBatch(_ frame1: [UInt8]) -> Result<[Result<[[UInt8]], WebSocketFraming.Refusal>], WebSocketFraming.Refusal> {
        var messages: [Result<[[UInt8]], WebSocketFraming.Refusal>] = []
        let refusal = frame1.withUnsafeBytes { batch in
            WebSocketFraming.readSignedBatch(batch) { entry in
                messages.append(entry.map { $0.map { Array($0) } })
                return true
            }
        }
        return refusal.map { .failure($0) } ?? .success(messages)
    }

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
                Array(item.data.utf8).withUnsafeBytes { hmac.update($0) }
                #expect(hmac.finalize().hex == item.mac)
            }
        }
        #expect(Catalogue.hash(String(repeating: "a", count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("the channel's HMAC over swift-crypto's SHA256 gives swift-crypto's HMAC<SHA256>: keys of 1 to 200 bytes, messages fed in random pieces, each state copied and reused")
    func sameAsSwiftCryptoHMAC() {
        var random = SystemRandomNumberGenerator()
        for keyLength in [1, 20, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200] {
            let key = (0..<keyLength).map { _ in UInt8.random(in: 0...255, using: &random) }
            let prepared = ChannelMAC(key: key)
            for messageLength in [0, 1, 55, 56, 63, 64, 65, 200, 4_096] {
                let message = (0..<messageLength).map { _ in UInt8.random(in: 0...255, using: &random) }
                var ours = prepared
                var start = 0
                while start < message.count {  // pieces of random sizes, as frames and their lengths go in
                    let end = min(message.count, start + Int.random(in: 1...100, using: &random))
                    message[start..<end].withUnsafeBytes { ours.update($0) }
                    start = end
                }
                let reference = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
                #expect(ours.finalize() == MAC(Array(reference)), "key \(keyLength) bytes, message \(messageLength) bytes")
                #expect(ours.finalize().hex == Signature.hex(reference))
            }
        }
        let one = MAC([UInt8](repeating: 7, count: 32))
        for index in 0..<32 {  // a difference in any byte is seen
            var bytes = [UInt8](repeating: 7, count: 32)
            bytes[index] ^= 0x80
            #expect(MAC(bytes) != one)
        }
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
        #expect(accepted == .message)
        var tampered = copies
        tampered[tampered.count - 1].append(0x20)
        var again = KeyedChannel.peer(Self.key, nonce: channel)
        let acceptedTampered = again.accept(frame0, tampered.map { Frame($0) })
        #expect(acceptedTampered == nil, "one byte more in the last frame")
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

    @Test("frame 0 is read by the rules in one pass: what the reference pattern refuses is refused, the MAC decoded")
    func parseByTheRules() {
        let mac = String(repeating: "0f", count: 32)
        let nonce = String(repeating: "a", count: 32)
        let macBytes = MAC([UInt8](repeating: 0x0f, count: 32))
        #expect(Signature.parse(Array("m.1.\(mac)".utf8)) == .message(counter: 1, mac: macBytes))
        #expect(Signature.parse(Array("m.9223372036854775807.\(mac)".utf8)) == .message(counter: .max, mac: macBytes))
        #expect(Signature.parse(Array("h.\(nonce).0.\(mac)".utf8)) == .opening(nonce: nonce, ms: 0, mac: macBytes))
        // The Python peer's patterns (signing.py): m\.([1-9][0-9]{0,18})\.([0-9a-f]{64}) and h\.([0-9a-f]{32})\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{64}), at most 2^63-1.
        for refused in ["", "m", "m.", "m.1", "m.1.", "m.0.\(mac)", "m.01.\(mac)", "m.-1.\(mac)", "m.+1.\(mac)",
                        "m.9223372036854775808.\(mac)", "m.12345678901234567890.\(mac)", "m.1.\(mac.uppercased())",
                        "m.1.\(mac.dropLast())", "m.1.\(mac)0", "m.1.\(mac).", "M.1.\(mac)", "m.1.\(mac.dropLast())g",
                        "h.\(nonce).00.\(mac)", "h.\(nonce.dropLast()).1.\(mac)", "h.\(nonce)a.1.\(mac)", "h.\(nonce).1.\(mac).",
                        "h.\(nonce.uppercased()).1.\(mac)", "h.\(nonce).1", "x.1.\(mac)"] {
            #expect(Signature.parse(Array(refused.utf8)) == nil, "\(refused)")
        }
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
                let isBatch = frame0.first == UInt8(ascii: "b")  // what an accepted one must be read as (SPEC 3.3)
                let accepted: Bool
                if item["side"] == "host" {
                    let connection = Array((message["connection"]?.stringValue ?? "a").utf8)
                    let verdict = host.receive(on: connection, frame0: frame0, size: frames.reduce(0) { $0 + $1.count },
                                               maxMessageBytes: 1 << 20, frames: frames,
                                               now: Int64(item["now_ms"]!.intValue!)) {
                        (try? JSONValue.parse(frames[0]))?["type"] == "hello"
                    }
                    accepted = verdict == (isBatch ? .acceptedBatch : .accepted)
                    let skew: Int64? = if case .refused(_, let skew) = verdict { skew } else { nil }
                    #expect(skew == message["clock_skew_ms"]?.intValue.map(Int64.init), "\(description), message \(index + 1): the clock skew")
                } else {
                    accepted = peer!.accept(frame0, frames) == (isBatch ? .batch : .message)
                }
                #expect(accepted == message["accept"]!.boolValue!, "\(description), message \(index + 1): \(message["note"] ?? "")")
            }
        }
    }

    @Test("a batched message with the most frames a message may have is read whole, its parts off the stack; one more is refused")
    func batchedMessageWithMostFrames() throws {
        for frameCount in [64, 65, WebSocketFraming.maxFrames, WebSocketFraming.maxFrames + 1] {
            let frames = [[UInt8]](repeating: [7], count: frameCount - 1)  // frame 0, the batch's, is empty
            var frame1: [UInt8] = []
            WebSocketFraming.appendBatchEntry(frames, to: &frame1)
            let entries = try Self.readSignedBatch(frame1).get()
            #expect(entries.count == 1)
            if frameCount <= WebSocketFraming.maxFrames {
                #expect(try entries[0].get() == [[]] + frames, "\(frameCount) frames")
            } else {
                #expect(throws: WebSocketFraming.Refusal.self, "\(frameCount) frames") { try entries[0].get() }
            }
        }
    }

    @Test("every batch case of the fixture: what a receiver reads from a batch's frame 1, and what a sender writes (SPEC 3.3)")
    func batchCases() {
        for item in Self.fixture["batches"]!.arrayValue! {
            let description = item["description"]!.stringValue!
            let frame1 = Signature.bytes(hex: item["hex"]!.stringValue!)!
            let read = Self.readSignedBatch(frame1)
            guard let messages = item["messages"]?.arrayValue else {
                guard case .failure = read else { Issue.record("\(description): read, but the whole batch is refused"); continue }
                #expect(item["error"] == "bad_message", "\(description)")
                continue
            }
            guard case .success(let entries) = read, entries.count == messages.count else {
                Issue.record("\(description): \(read) is not \(messages.count) messages")
                continue
            }
            for (index, (entry, expected)) in zip(entries, messages).enumerated() {
                switch (entry, expected["error"]) {
                case (.failure, "bad_message"?): break
                case (.success(let frames), nil):
                    #expect(Array(frames.dropFirst()) == Self.frames(expected), "\(description), message \(index + 1)")
                default: Issue.record("\(description), message \(index + 1): \(entry)")
                }
            }
            if messages.allSatisfy({ $0["error"] == nil }) {
                var written: [UInt8] = []
                for message in messages { WebSocketFraming.appendBatchEntry(Self.frames(message), to: &written) }
                #expect(written == frame1, "\(description): written as the fixture has it")
            }
        }
    }

    @Test("an outbox signs what it holds as batches of at most 64 KiB and 1,000 messages, one alone as itself, in order (SPEC 3.3)")
    func outboxSignsBatches() throws {
        let nonce = String(repeating: "ab", count: 16)
        var sender = KeyedChannel.peer(Self.key, nonce: nonce)
        var receiver = KeyedChannel.host(Self.key, nonce: nonce)
        let outbox = Outbox()
        outbox.signer = { _, frames, batch in batch ? sender.signBatch(frames[0]) : sender.sign(frames) }
        outbox.batches = true
        // 1,500 small messages, one of 70,000 bytes, then 3 more: batches of 1,000 and 500, the large one alone,
        // then a batch of 3.
        let small = (0..<1_500).map { [Array(#"{"v":1,"type":"event","action":"n","payload":\#($0)}"#.utf8)] }
        let large = [Array(#"{"v":1,"type":"event","action":"big","payload":""#.utf8) + [UInt8](repeating: 0x61, count: 70_000) + Array(#""}"#.utf8)]
        let all = small + [large] + small.prefix(3)
        for frames in all { outbox.append(OutboundMessage(envelope: [], frames: frames, awaitsSignature: true)) }
        var read: [[[UInt8]]] = [], shapes: [String] = []
        while let first = outbox.messages.first {
            if first.awaitsSignature { outbox.signHead(); continue }
            outbox.removeFirst()
            switch receiver.accept(first.envelope[0], first.frames) {
            case .message?:
                shapes.append("1")
                read.append(first.frames)
            case .batch?:
                #expect(first.frames.count == 1 && first.frames[0].count <= WebSocketFraming.batchBytes)
                let entries = try Self.readSignedBatch(first.frames[0]).get().map { try $0.get() }
                shapes.append("b\(entries.count)")
                read += entries.map { Array($0.dropFirst()) }
            case nil:
                Issue.record("refused: \(String(decoding: first.envelope[0], as: UTF8.self))")
            }
        }
        #expect(read == all, "every message read once, in order")
        #expect(shapes.first == "b1000" && shapes.contains("1") && shapes.last == "b3", "\(shapes)")
        #expect(outbox.queuedBytes == 0)
    }

    @Test("a full opening history refuses new openings instead of raising a floor: openings stamped 299 s ahead lock no one out once forgotten")
    func openingHistoryBound() {
        var history = OpeningHistory(capacity: 3)
        let now: Int64 = 1_800_000_000_000
        // A key holder fills the history with openings stamped as far ahead as the clock bound allows.
        for nonce in ["a", "b", "c"] { #expect(history.refusal(nonce: nonce, ms: now + 299_000, now: now) == nil) }
        #expect(history.refusal(nonce: "d", ms: now, now: now)?.contains("its most") == true, "full: refused, nothing forgotten")
        #expect(history.refusal(nonce: "a", ms: now + 299_000, now: now + 1000)?.contains("replayed") == true)
        // Ten minutes after they were accepted, they are forgotten, and an opening of the present is accepted: no floor.
        let later = now + 600_001
        #expect(history.refusal(nonce: "e", ms: later, now: later) == nil)
        #expect(history.count == 1)
        #expect(history.refusal(nonce: "f", ms: later - 400_000, now: later)?.contains("-400 s from the host's") == true,
                "a clock off by more than the bound is named as such")
    }

    @Test("a history started at a moment refuses openings signed before it (a restart with the same key)")
    func openingHistoryNotBefore() {
        let start: Int64 = 1_800_000_000_000
        var history = OpeningHistory(notBefore: start)
        #expect(history.refusal(nonce: "a", ms: start - 1, now: start + 5)?.contains("before this host started") == true)
        #expect(history.refusal(nonce: "b", ms: start + 1, now: start + 5) == nil)
    }

    @Test("openings are limited per connection (8, then 1 a second) and per key (1024, then 32 a second)")
    func openingRates() {
        var rates = OpeningRates()
        let now: Int64 = 1_800_000_000_000
        let one = Array("one".utf8)
        for _ in 0..<8 { #expect(rates.refusal(on: one, now: now) == nil) }
        #expect(rates.refusal(on: one, now: now)?.contains("on this connection") == true)
        #expect(rates.refusal(on: one, now: now + 1000) == nil, "a second later, one more")
        var index = 0  // one opening per connection: only the key's bucket runs out
        while index < 2000, rates.refusal(on: Array("c\(index)".utf8), now: now + 1000) == nil { index += 1 }
        #expect(index == 1023, "the key's burst of 1024, less the one just above")
        #expect(rates.refusal(on: Array("fresh".utf8), now: now + 1000)?.contains("on this host's key") == true)
        #expect(rates.refusal(on: Array("fresh".utf8), now: now + 1100) == nil, "32 a second: one per 31.25 ms")
    }
}
