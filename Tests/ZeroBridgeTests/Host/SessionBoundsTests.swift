import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

/// SPEC 6 (Bounds) and 3.1: what sessions and openings a hostile client can make the host keep, or spend.
@Suite("Session and opening bounds", .timeLimit(.minutes(3)))
struct SessionBoundsTests {
    @Test("a hello declaring more than 64 KiB of action and topic names is refused too_large and names nothing")
    func declaredBytes() async throws {
        let host = try startConformanceHost()
        let peer = try RawPeer(host.boundEndpoint!)
        let names = (0..<600).map { "a\($0)-" + String(repeating: "x", count: 110) }  // 68 KB of 128-character names
        let answer = try #require(try await peer.hello("hoarder", actions: names))
        #expect(answer.errorCode == "too_large" && answer["id"] == .null, "\(answer)")
        #expect(answer["error"]?["message"]?.stringValue?.contains("65536") == true)
        #expect(host.peers.isEmpty)
        // Within the bound, the same connection is welcomed.
        #expect(try await peer.hello("hoarder", actions: Array(names.prefix(100)))?["type"] == "welcome")
        await host.shutdown()
    }

    @Test("a named session whose connection closed ends after the host's grace, whatever heartbeat its peer asked for; its name is free again")
    func graceAfterClose() async throws {
        let host = try startConformanceHost { $0.sessionGrace = .milliseconds(300) }
        let leaver = try RawPeer(host.boundEndpoint!)
        #expect(try await leaver.hello("pinned", heartbeatMs: 600_000)?["type"] == "welcome")
        #expect(host.peers.map(\.name) == ["pinned"])
        leaver.socket.close()
        // With 600 s heartbeats, it used to be kept 30 minutes.
        #expect(try await eventually { host.peers.isEmpty })
        let next = try RawPeer(host.boundEndpoint!)
        #expect(try await next.hello("pinned")?["type"] == "welcome")
        await host.shutdown()
    }

    @Test("past maxSessions, a new connection's first message is answered overloaded and opens nothing; room comes back")
    func sessionCount() async throws {
        let host = try startConformanceHost { $0.maxSessions = 2 }
        let peers = try (0..<3).map { _ in try RawPeer(host.boundEndpoint!) }
        for (index, peer) in peers.prefix(2).enumerated() {
            try peer.request("r\(index)", "echo", .int(index))
            #expect(try await peer.receive()?["result"] == .int(index))
        }
        try peers[2].request("late", "echo", 2)
        let refusal = try #require(try await peers[2].receive())
        #expect(refusal.errorCode == "overloaded" && refusal["id"] == .null, "\(refusal)")
        peers[0].socket.close()  // its anonymous session ends with its connection
        #expect(try await eventually {
            try peers[2].request("again", "echo", 3)
            return try await peers[2].receive(timeout: .milliseconds(200))?["result"] == 3
        })
        await host.shutdown()
    }
}

@Suite("Keyed openings against a key holder", .timeLimit(.minutes(3)))
struct KeyedOpeningBoundsTests {
    typealias SigningPeer = KeyedConnectionTests.SigningPeer

    @Test("an opening over 128 KiB is refused by its size before its MAC is computed, a frame 0 over 128 bytes unread")
    func bigOpening() async throws {
        let (host, _) = try KeyedConnectionTests.keyedHost()
        let forger = try SigningPeer(host.boundEndpoint!, key: .generate())
        let hello: JSONValue = ["v": 1, "type": "hello", "peer": "big", "actions": [.string(String(repeating: "y", count: 1 << 20))]]
        try forger.open(hello)
        let answer = try #require(try await forger.receive())
        #expect(!answer.signed && answer.body.errorCode == "unauthorized")
        #expect(answer.body["error"]?["message"]?.stringValue?.contains("at most 131072 are verified") == true, "\(answer.body)")
        // A frame 0 longer than any signature is refused unread.
        try forger.sendFrames([Array(repeating: UInt8(ascii: "h"), count: 1 << 20), hello.serialized()])
        let unread = try #require(try await forger.receive())
        #expect(unread.body["error"]?["message"]?.stringValue?.contains("frame 0 has 1048576 bytes") == true, "\(unread.body)")
        await host.shutdown()
    }

    @Test("a host restarted with the same key refuses an opening captured from its earlier run")
    func restartWithSameKey() async throws {
        let (first, key) = try KeyedConnectionTests.keyedHost()
        let peer = try SigningPeer(first.boundEndpoint!, key: key)
        try peer.open(["v": 1, "type": "hello", "peer": "captured"])
        #expect(try await peer.receive()?.body["type"] == "welcome")
        let captured = peer.lastSent
        await first.shutdown()
        try await Task.sleep(for: .milliseconds(5))  // the wall clock moves past the capture
        let (second, _) = try KeyedConnectionTests.keyedHost(key)
        let replayer = try RawPeer(second.boundEndpoint!)
        try replayer.sendFrames(captured)
        let answer = try #require(try await replayer.receive())
        #expect(answer.errorCode == "unauthorized")
        #expect(answer["error"]?["message"]?.stringValue?.contains("before this host started") == true, "\(answer)")
        await second.shutdown()
    }

    @Test("a key holder cycling hello and bye on one connection is slowed after 8 openings, and another peer still opens")
    func openingCycles() async throws {
        let (host, key) = try KeyedConnectionTests.keyedHost()
        let cycler = try SigningPeer(host.boundEndpoint!, key: key)
        var welcomed = 0
        var refusal: String?
        let started = ContinuousClock.now
        for _ in 0..<40 {
            cycler.channel = .peer(key)  // a new channel each time, as after a bye
            // The longest heartbeat: a session left waiting 5 s (the default) for this client's next step on a loaded
            // machine was pinged, and the ping, signed for that session's channel, arrived after the switch to the next.
            try cycler.open(["v": 1, "type": "hello", "peer": "cycler", "heartbeat_ms": 600_000])
            let answer = try #require(try await cycler.receive())
            if answer.body["type"] == "welcome" {
                welcomed += 1
                try cycler.send(["v": 1, "type": "bye"])
            } else {
                refusal = answer.body["error"]?["message"]?.stringValue
                break
            }
        }
        // 8 at once, then 1 a second: a loaded machine may have taken a second or two for the cycles.
        let seconds = Int((ContinuousClock.now - started) / .seconds(1))
        #expect(welcomed >= 8 && welcomed <= 8 + seconds + 1, "\(welcomed) openings in \(seconds) s")
        #expect(refusal?.contains("openings on this connection") == true, "\(refusal ?? "none")")
        let other = try SigningPeer(host.boundEndpoint!, key: key)
        try other.open(["v": 1, "type": "hello", "peer": "newcomer"])
        #expect(try await other.receive()?.body["type"] == "welcome")
        await host.shutdown()
    }
}
