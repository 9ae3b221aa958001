import Foundation
import Synchronization
import Testing
@testable import ZeroBridge

/// Events a peer's handler received, with the topic each came on.
private final class Received: Sendable {
    private let events = Mutex<[(payload: JSONValue, topic: String?)]>([])
    var all: [(payload: JSONValue, topic: String?)] { events.withLock { $0 } }
    func add(_ payload: JSONValue, _ topic: String?) { events.withLock { $0.append((payload, topic)) } }
}

/// SPEC 7.15 and `welcome.info`: broadcasts to every named peer or a topic's subscribers, from the Swift host.
@Suite("Broadcast, topics and welcome.info", .timeLimit(.minutes(3)))
struct BroadcastTests {
    private func listener(_ host: BridgeHost, _ name: String, topics: Set<String> = []) async throws -> (BridgePeer, Received) {
        let received = Received()
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: name)
        configuration.topics = topics
        let peer = try BridgePeer(configuration: configuration)
        try peer.handle("notice") { payload, request in
            received.add(payload, request.topic)
            return nil
        }
        try await peer.connect(timeout: patience)
        return (peer, received)
    }

    @Test("every named peer gets a broadcast without topic, only subscribers one with a topic, in order; anonymous peers none")
    func everyoneAndTopics() async throws {
        let host = try startConformanceHost()
        let (alice, aliceGot) = try await listener(host, "alice", topics: ["catalog"])
        let (bob, bobGot) = try await listener(host, "bob")
        // A raw peer reads the wire itself: the order the host sent in (handlers run concurrently).
        let raw = try RawPeer(host.boundEndpoint!)
        #expect(try await raw.hello("raw", heartbeatMs: 600_000)?["type"] == "welcome")
        let anonymous = try RawPeer(host.boundEndpoint!)
        try anonymous.send(["v": 1, "type": "request", "id": "hi", "action": "echo", "payload": 1])
        #expect(try await anonymous.receive()?["result"] == 1)  // its session exists

        for index in 1...20 {
            let report = try await host.broadcast("notice", ["n": .int(index)])
            #expect(report == .init(delivered: ["alice", "bob", "raw"], skipped: []))
        }
        #expect(try await host.broadcast("notice", ["n": 21], topic: "catalog") == .init(delivered: ["alice"], skipped: []))
        #expect(try await eventually { aliceGot.all.count == 21 && bobGot.all.count == 20 })
        let byNumber = { (events: [(payload: JSONValue, topic: String?)]) in events.sorted { $0.payload["n"]!.intValue! < $1.payload["n"]!.intValue! } }
        #expect(byNumber(aliceGot.all).map(\.payload) == (1...21).map { ["n": .int($0)] })
        #expect(byNumber(aliceGot.all).last?.topic == "catalog" && byNumber(aliceGot.all).dropLast().allSatisfy { $0.topic == nil })
        #expect(byNumber(bobGot.all).map(\.payload) == (1...20).map { ["n": .int($0)] })
        var onTheWire: [JSONValue] = []
        while onTheWire.count < 20, let body = try await raw.receiveSkippingPings() {
            #expect(body["type"] == "event" && body["action"] == "notice" && body["topic"] == nil)
            onTheWire.append(body["payload"] ?? nil)
        }
        #expect(onTheWire == (1...20).map { ["n": .int($0)] }, "copies to one peer keep the order of the broadcasts")
        #expect(try await anonymous.receive(timeout: .milliseconds(200)) == nil)

        // Subscribing is a new hello: from then on bob gets the topic too; alice, unsubscribed, no longer does.
        bob.subscribe("catalog")
        alice.unsubscribe("catalog")
        #expect(try await eventually {
            try await host.broadcast("notice", ["probe": true], topic: "catalog").delivered == ["bob"]
        })
        #expect(host.peers.first { $0.name == "bob" }?.info.topics == ["catalog"])
        #expect(bob.topics == ["catalog"] && alice.topics.isEmpty)
        await alice.close()
        await bob.close()
        await host.shutdown()
    }

    @Test("a peer whose queue is full is skipped and reported, while the others are served in order")
    func stalledPeerSkipped() async throws {
        let host = try startConformanceHost()
        let stalled = try RawPeer(host.boundEndpoint!)
        try stalled.socket.set(.receiveHighWaterMark(1))
        #expect(try await stalled.hello("stalled", heartbeatMs: 600_000)?["type"] == "welcome")
        let (reader, got) = try await listener(host, "reader")
        let chunk = JSONValue.string(String(repeating: "x", count: 32 << 10))
        var skipped = false, deliveredToReader: [Int] = []
        for index in 1...5000 where !skipped {
            let report = try await host.broadcast("notice", ["n": .int(index), "chunk": chunk])
            if report.delivered.contains("reader") { deliveredToReader.append(index) }
            skipped = report.skipped.contains("stalled")
            if index % 64 == 0 { await Task.yield() }
        }
        #expect(skipped, "the stalled peer's queue never went over its bound")
        // Whatever reached the reader came once each (its handlers run concurrently, so compare as sorted).
        #expect(try await eventually(timeout: patience) { got.all.count >= deliveredToReader.count })
        #expect(got.all.map { $0.payload["n"]!.intValue! }.sorted() == deliveredToReader)
        await reader.close()
        await host.shutdown()
    }

    @Test("a subscriber that never reads costs at most 8 MiB of broadcasts and one event, then is skipped; one that reads gets every one")
    func silentSubscriberBoundedInBytes() async throws {
        let host = try startConformanceHost()
        let silent = try RawPeer(host.boundEndpoint!)  // never reads after its welcome, so never answers a ping
        #expect(try await silent.hello("silent", heartbeatMs: 600_000)?["type"] == "welcome")
        let (reader, got) = try await listener(host, "reader")
        let eventBytes = 512 << 10
        let chunk = JSONValue.string(String(repeating: "x", count: eventBytes))
        var deliveredToSilent = 0, skippedSilent = 0
        for index in 1...48 {
            let report = try await host.broadcast("notice", ["n": .int(index), "chunk": chunk])
            deliveredToSilent += report.delivered.contains("silent") ? 1 : 0
            skippedSilent += report.skipped.contains("silent") ? 1 : 0
            #expect(report.delivered.contains("reader"), "a reader that keeps up is never skipped (broadcast \(index))")
            // The reader takes each event before the next broadcast, as a peer that keeps up does.
            #expect(try await eventually { got.all.count == index })
        }
        // Libzmq alone would have taken all 48 (24 MiB): its queue counts messages, not bytes.
        #expect(deliveredToSilent * eventBytes <= Outbox.maxQueuedBytes + eventBytes)
        #expect(deliveredToSilent >= 8, "the bound is 8 MiB, not less")
        #expect(skippedSilent == 48 - deliveredToSilent)
        await reader.close()
        await host.shutdown()
    }

    @Test("welcome.info is what the host's configuration says; a payload JSON cannot carry is refused before any copy goes")
    func infoAndRefusals() async throws {
        let host = try startConformanceHost { $0.info = ["version": "2.1", "features": ["search"]] }
        let (peer, _) = try await listener(host, "curious")
        #expect(peer.welcome?.info == ["version": "2.1", "features": ["search"]])
        #expect(peer.welcome?.libraryVersion == zeroBridgeVersion)   // SPEC 5, decision 44
        let refused = await #expect(throws: BridgeError.self) { try await host.broadcast("notice", ["ratio": .double(.nan)]) }
        #expect(refused?.code == .invalidPayload)
        await #expect(throws: BridgeError.self) { try await host.broadcast("notice", nil, topic: "") }
        await peer.close()
        await host.shutdown()
    }
}
