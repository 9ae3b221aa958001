import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

/// SPEC 3.1 end to end: a keyed host, the Swift peer, and a raw peer that forges, garbles and replays.
@Suite("Keyed connections", .timeLimit(.minutes(3)))
struct KeyedConnectionTests {
    /// A DEALER that signs by hand, so a test can also sign wrongly.
    final class SigningPeer: @unchecked Sendable {
        let raw: RawPeer
        var channel: KeyedChannel
        var lastSent: [[UInt8]] = []

        init(_ endpoint: String, key: ConnectionKey) throws {
            raw = try RawPeer(endpoint)
            channel = .peer(key)
        }

        func open(_ hello: JSONValue, ms: Int64 = Int64(WallClock.milliseconds)) throws {
            try sendFrames([channel.opening([hello.serialized()], ms: ms), hello.serialized()])
        }

        func send(_ body: JSONValue) throws {
            try sendFrames([channel.sign([body.serialized()]), body.serialized()])
        }

        func sendFrames(_ frames: [[UInt8]]) throws {
            lastSent = frames
            try raw.sendFrames(frames)
        }

        /// The next message as [frame 0 text, body], accepted through the channel when it is signed.
        func receive() async throws -> (signed: Bool, body: JSONValue)? {
            let deadline = ContinuousClock.now + patience
            while ContinuousClock.now < deadline {
                if let frames = try raw.socket.receiveBytes(dontWait: true) {
                    let body = try JSONValue.parse(frames[1])
                    if frames[0].isEmpty { return (false, body) }
                    let accepted = channel.accept(frames[0], Array(frames[1...]))
                    #expect(accepted == .message, "a host message signed for this channel, not in a batch: this client does not read them")
                    if body["type"] == "ping" { try send(["v": 1, "type": "pong"]); continue }
                    return (true, body)
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }
    }

    static func keyedHost(_ key: ConnectionKey = .generate()) throws -> (BridgeHost, ConnectionKey) {
        let host = try startConformanceHost { $0.signing = .key(key) }
        return (host, key)
    }

    /// A keyed conformance host and a Swift peer given its key, connected.
    static func keyedHostAndPeer(_ name: String) async throws -> (BridgeHost, BridgePeer) {
        let (host, key) = try keyedHost()
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: name)
        configuration.key = key
        let peer = try BridgePeer(configuration: configuration)
        try await peer.connect(timeout: patience)
        return (host, peer)
    }

    /// Nothing was refused either way; both closed.
    static func closeUnrefused(_ host: BridgeHost, _ peer: BridgePeer) async {
        #expect(host.refusedMessages == 0 && peer.refusedMessages == 0)
        await peer.close()
        await host.shutdown()
    }

    @Test("a Swift peer given the key is served; everything it receives is signed for its channel")
    func swiftPeer() async throws {
        let (host, peer) = try await Self.keyedHostAndPeer("signer")
        let call = peer.stream("count", ["n": 3])
        var seen = 0
        for try await _ in call.progress { seen += 1 }
        #expect(seen == 3)
        #expect(try await peer.call("echo", "signed") == "signed")
        await Self.closeUnrefused(host, peer)
    }

    @Test("a Swift peer and a keyed host exchange batches both ways (SPEC 3.3): 64 calls at once and a stream, every answer right and in order")
    func batchesBothWays() async throws {
        let (host, peer) = try await Self.keyedHostAndPeer("batcher")
        // Until both sides have sent batches: each round is 64 calls made at once.
        var rounds = 0
        while peer.batches.read == 0 || peer.batches.sent == 0 {
            rounds += 1
            try #require(rounds <= 50, "no batches after 50 rounds: \(peer.batches)")
            let results = try await withThrowingTaskGroup(of: (Int, JSONValue).self) { group in
                for index in 0..<64 { group.addTask { (index, try await peer.call("echo", .int(index))) } }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(results.count == 64 && results.allSatisfy { $0.value == .int($0.key) })
        }
        // Progress in order, whether it came in batches or alone (a stalled reader's may be coalesced: SPEC 7.13).
        let call = peer.stream("count", ["n": 500])
        var seen: [Int] = []
        for try await progress in call.progress { seen.append(progress["i"]?.intValue ?? -1) }
        #expect(seen.last == 500 && zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 }, "\(seen.prefix(8))")
        await Self.closeUnrefused(host, peer)
    }

    @Test("a keyed host reads a batch's messages as if each came alone: a bad one is answered on its own, a bad batch once, a batch signed wrongly not at all (SPEC 3.3)")
    func hostReadsBatches() async throws {
        let (host, key) = try Self.keyedHost()
        let peer = try SigningPeer(host.boundEndpoint!, key: key)
        try peer.open(["v": 1, "type": "hello", "peer": "batching"])  // without "batch": the host answers one by one
        let welcome = try #require(try await peer.receive())
        #expect(welcome.body["type"] == "welcome" && welcome.body["batch"] == true)
        func entry(_ body: JSONValue) -> [UInt8] {
            var batch: [UInt8] = []
            WebSocketFraming.appendBatchEntry([body.serialized()], to: &batch)
            return batch
        }
        // A ping whose frame 0 is "m": refused alone, not answered with a pong.
        let notEmptyFrame0: [UInt8] = [0, 0, 0, 30, 0, 0, 0, 1, 0x6d, 0, 0, 0, 21] + Array(#"{"v":1,"type":"ping"}"#.utf8)
        let batch = entry(["v": 1, "type": "request", "id": "1", "action": "echo", "payload": "one"]) + notEmptyFrame0
            + entry(["v": 1, "type": "request", "id": "2", "action": "echo", "payload": "two"])
        try peer.sendFrames([peer.channel.signBatch(batch), batch])
        var answers: [JSONValue] = []
        for _ in 0..<3 { answers.append(try #require(try await peer.receive()).body) }
        #expect(answers.map { $0["id"] } == ["1", .null, "2"] && answers[1].errorCode == "bad_message", "\(answers)")
        #expect(answers[0]["result"] == "one" && answers[2]["result"] == "two")

        // A batch that is not one (a length running past its end): answered once, signed; nothing in it read.
        let broken = entry(["v": 1, "type": "request", "id": "3", "action": "echo", "payload": "three"]) + [0, 0, 0, 99]
        try peer.sendFrames([peer.channel.signBatch(broken), broken])
        let once = try #require(try await peer.receive())
        #expect(once.signed && once.body["id"] == .null && once.body.errorCode == "bad_message", "\(once)")

        // Signed with a single message's kind, or replayed: refused whole, unsigned, as a message would be.
        var single = peer.channel
        let wrongKind = Array("b".utf8) + single.sign([batch]).dropFirst()
        try peer.sendFrames([wrongKind, batch])
        let refusal = try #require(try await peer.receive())
        #expect(!refusal.signed && refusal.body.errorCode == "unauthorized", "\(refusal)")
        try peer.sendFrames([peer.channel.signBatch(batch), batch])
        let replayed = peer.lastSent
        for _ in 0..<3 { _ = try #require(try await peer.receive()) }
        try peer.sendFrames(replayed)
        let again = try #require(try await peer.receive())
        #expect(!again.signed && again.body.errorCode == "unauthorized", "\(again)")
        #expect(host.refusedMessages == 2)
        await host.shutdown()
    }

    @Test("forged, garbled, unsigned and replayed messages are refused with an unsigned unauthorized, and counted; the channel goes on")
    func refusals() async throws {
        let (host, key) = try Self.keyedHost()
        let peer = try SigningPeer(host.boundEndpoint!, key: key)
        try peer.open(["v": 1, "type": "hello", "peer": "careful"])
        #expect(try await peer.receive()?.body["type"] == "welcome")
        try peer.send(["v": 1, "type": "request", "id": "1", "action": "echo", "payload": "one"])
        #expect(try await peer.receive()?.body["result"] == "one")

        let request: JSONValue = ["v": 1, "type": "request", "id": "2", "action": "emit", "payload": ["action": "ran"]]
        var forger = KeyedChannel.peer(.generate(), nonce: peer.channel.nonce)
        let forgedSignature = forger.sign([request.serialized()])
        let attempts: [[[UInt8]]] = [
            peer.lastSent,  // an exact replay of the last message
            [Array("not-a-signature".utf8), request.serialized()],
            [[], request.serialized()],
            [forgedSignature, request.serialized()],  // signed with another key
            [request.serialized()],  // one frame: no signature at all
        ]
        for frames in attempts {
            try peer.sendFrames(frames)
            let answer = try #require(try await peer.receive())
            #expect(!answer.signed && answer.body["id"] == .null && answer.body.errorCode == "unauthorized", "\(answer)")
        }
        #expect(host.refusedMessages == 5)
        // None of them ran: the next signed request is the first event the peer sees.
        try peer.send(["v": 1, "type": "request", "id": "3", "action": "echo", "payload": "still here"])
        #expect(try await peer.receive()?.body["result"] == "still here")
        await host.shutdown()
    }

    @Test("an opening hello replayed on another connection, or with a stale clock, opens nothing")
    func openingReplay() async throws {
        let (host, key) = try Self.keyedHost()
        let first = try SigningPeer(host.boundEndpoint!, key: key)
        try first.open(["v": 1, "type": "hello", "peer": "original"])
        #expect(try await first.receive()?.body["type"] == "welcome")
        let copier = try RawPeer(host.boundEndpoint!)
        try copier.sendFrames(first.lastSent)
        #expect(try await copier.receive()?.errorCode == "unauthorized")
        let stale = try SigningPeer(host.boundEndpoint!, key: key)
        try stale.open(["v": 1, "type": "hello", "peer": "late"], ms: Int64(WallClock.milliseconds) - 301_000)
        #expect(try await stale.receive()?.body.errorCode == "unauthorized")
        await host.shutdown()
    }

    @Test("on a keyed connection, a name held by another session is answered name_taken, signed, before any welcome")
    func nameTakenSigned() async throws {
        let (host, key) = try Self.keyedHost()
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "single")
        configuration.key = key
        let first = try BridgePeer(configuration: configuration)
        try await first.connect(timeout: patience)
        let second = try BridgePeer(configuration: configuration)
        // The refusal comes in milliseconds; the peer retries until its timeout, long enough for a loaded machine.
        #expect(await bridgeError { try await second.connect(timeout: .seconds(5)) }?.code == .nameTaken)
        #expect(second.refusedMessages == 0)
        await first.close()
        // The first peer's bye and the second's hello come over two connections, in either order: the name is free
        // once the host has read the bye.
        #expect(try await eventually { host.peers.isEmpty })
        try await second.connect(timeout: patience)
        await second.close()
        await host.shutdown()
    }

    @Test("a Swift peer with the wrong key is never welcomed, and counts the host's refusals")
    func wrongKey() async throws {
        let (host, _) = try Self.keyedHost()
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "guesser")
        configuration.key = .generate()
        let peer = try BridgePeer(configuration: configuration)
        let error = await bridgeError { try await peer.connect(timeout: .seconds(2)) }
        #expect(error?.code == .unauthorized, "the host answered: not a timeout")
        #expect(error?.message == "the host refused this peer's messages as unauthorized (wrong signature): is the key the host's?")
        #expect(try await eventually { peer.refusedMessages > 0 && host.refusedMessages > 0 })
        await peer.close()

        var keyless = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "keyless")
        keyless.key = nil
        let plain = try BridgePeer(configuration: keyless)
        let refused = await bridgeError { try await plain.connect(timeout: .seconds(2)) }
        #expect(refused?.code == .unauthorized)
        #expect(refused?.message.contains("it requires a key; connect through its connection file") == true, "\(refused?.message ?? "")")
        await plain.close()
        await host.shutdown()
    }

    @Test("an opening 400 s off the host's clock is refused with the skew in error.data and a message naming it; the peer's diagnosis names the skew, not the key")
    func clockSkew() async throws {
        let (host, key) = try Self.keyedHost()
        for offset: Int64 in [400_000, -400_000] {
            let peer = try SigningPeer(host.boundEndpoint!, key: key)
            try peer.open(["v": 1, "type": "hello", "peer": "skewed"], ms: Int64(WallClock.milliseconds) + offset)
            let answer = try #require(try await peer.receive())
            #expect(!answer.signed && answer.body["error"]?["code"] == "unauthorized")
            let skew = try #require(answer.body["error"]?["data"]?["clock_skew_ms"]?.intValue)
            #expect(abs(Int64(skew) - offset) < 60_000, "skew \(skew) for an offset of \(offset)")
            #expect(answer.body["error"]?["data"]?["window_ms"] == 300_000)
            let message = answer.body["error"]?["message"]?.stringValue ?? ""
            #expect(message.hasPrefix("the opening hello's clock is 400 s \(offset > 0 ? "ahead of" : "behind") the host's, more than the 300 s window"), "\(message)")
            let diagnosis = try #require(ClockSkew.diagnosis(of: answer.body["error"]))
            #expect(diagnosis.hasPrefix("the host's clock and this peer's differ by 400 s (this peer's is \(offset > 0 ? "ahead" : "behind"))"), "\(diagnosis)")
        }
        // A replay or a wrong key carries no skew: only the clock is reported as the clock.
        let guesser = try SigningPeer(host.boundEndpoint!, key: .generate())
        try guesser.open(["v": 1, "type": "hello", "peer": "guesser"])
        let wrong = try #require(try await guesser.receive())
        #expect(wrong.body["error"]?["data"] == nil && ClockSkew.diagnosis(of: wrong.body["error"]) == nil)
        #expect(ClockSkew.amount(300_001) == "300001 ms" && ClockSkew.amount(-400_499) == "400 s")
        await host.shutdown()
    }

    @Test("a host writing a connection file puts a new 256-bit key in it by default; .none writes none; the file reads back")
    func connectionFileKey() async throws {
        for signing in [BridgeHost.Signing.automatic, .none] {
            let path = scratchDirectory + "zb-keyed-\(UUID().uuidString.prefix(8)).json"
            let host = try startConformanceHost { $0.connectionFile = path; $0.signing = signing }
            let file = try ConnectionFile.read(path)
            if case .automatic = signing {
                #expect(file.key?.bytes.count == 32 && file.key == host.connectionKey)
                let peer = try BridgePeer(configuration: .init(connectionFile: file, name: "from-file"))
                try await peer.connect(timeout: patience)
                #expect(try await peer.call("echo", 7) == 7)
                await peer.close()
            } else {
                #expect(file.key == nil && host.connectionKey == nil)
            }
            await host.shutdown()
        }
    }
}

@Suite("Connection files", .timeLimit(.minutes(3)))
struct ConnectionFileTests {
    @Test("every case of protocol/fixtures/connection-files.json is read or refused as it says")
    func fixtureCases() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("protocol/fixtures/connection-files.json")
        let groups = try JSONValue.parse(Array(try Data(contentsOf: url)))
        var count = 0
        for group in groups.arrayValue ?? [] {
            for test in group["tests"]?.arrayValue ?? [] {
                let read = Result { () throws(BridgeError) in try ConnectionFile.parse(test["data"]!) }
                let valid = test["valid"]!.boolValue!
                switch read {
                case .success: #expect(valid, "\(test["description"]!): accepted")
                case .failure(let error): #expect(!valid, "\(test["description"]!): \(error.message)")
                }
                count += 1
            }
        }
        #expect(count >= 20)
    }
}
