import Foundation
import Logging
import ServiceLifecycle
import Testing
@testable import ZeroBridge
import ZeroMQ

@Suite("Lifecycle and sessions", .timeLimit(.minutes(3)))
struct LifecycleTests {
    @Test("the host runs as a swift-service-lifecycle Service and stops on graceful shutdown")
    func serviceGroup() async throws {
        var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("ipc"), name: "service")
        configuration.drainTimeout = .milliseconds(100)
        let host = BridgeHost(configuration: configuration)
        try host.handle("echo") { payload, _ in payload }
        try host.start()  // binds now, so the test knows the endpoint; run() keeps it
        let group = ServiceGroup(configuration: .init(services: [host], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        let peer = try await connectPeer(host)
        #expect(try await peer.call("echo", "up") == "up")
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(host.boundEndpoint == nil)
        #expect(await bridgeError { _ = try await peer.call("echo", "down", timeout: .milliseconds(300)) } != nil)
        await peer.close()
    }

    @Test("when shutdown returns the endpoint is free: a host started at once on it binds and serves",
          arguments: ["ipc", "tcp"])
    func shutdownFreesEndpoint(transport: String) async throws {
        // libzmq closes a listener on its I/O thread after zmq_close returns: without waiting for that, binding the
        // same tcp port at once could fail with EADDRINUSE.
        for _ in 0..<5 {
            let first = try startConformanceHost(transport: transport)
            let endpoint = try #require(first.boundEndpoint)
            await first.shutdown()
            let second = try startConformanceHost(transport: transport) { $0.endpoint = endpoint }
            #expect(second.boundEndpoint == endpoint)
            let peer = try await connectPeer(second)
            #expect(try await peer.call("echo", "again") == "again")
            await peer.close()
            await second.shutdown()
        }
    }

    @Test("a peer that reconnects naming its session and its resume token resumes it, with calls in flight")
    func sessionResume() async throws {
        let host = try startConformanceHost()
        let first = try RawPeer(host.boundEndpoint!)
        let welcome = try #require(try await first.hello("resumer", actions: ["work"], heartbeatMs: 600_000))
        let session = try #require(welcome["session"]?.stringValue)
        let token = try #require(welcome["resume_token"]?.stringValue)
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit) && token == token.lowercased())
        let remote = try await host.peer(named: "resumer")
        let call = Task { try await remote.call("work", nil, timeout: .seconds(10)) }
        let request = try #require(try await first.receiveSkippingPings())
        first.socket.close()

        // A new connection (a new routing id) resumes the session and answers the call made over the old one.
        let second = try RawPeer(host.boundEndpoint!)
        try second.send(["v": 1, "type": "hello", "peer": "resumer", "actions": ["work"], "features": [],
                         "session": .string(session), "resume_token": .string(token)])
        let resumed = try #require(try await second.receiveSkippingPings())
        #expect(resumed["session"] == .string(session))
        #expect(resumed["resume_token"] == .string(token), "the token stays the session's for its whole life")
        try second.send(["v": 1, "type": "response", "id": request["id"]!, "ok": true, "result": "finished"])
        #expect(try await call.value == "finished")
        #expect(remote.isConnected)

        // An unknown session id gets a new session, with a token of its own.
        let third = try RawPeer(host.boundEndpoint!)
        try third.send(["v": 1, "type": "hello", "peer": "stranger", "actions": [], "features": [], "session": "no-such"])
        let fresh = try #require(try await third.receiveSkippingPings())
        #expect(fresh["session"] != "no-such" && fresh["session"] != .string(session))
        #expect(fresh["resume_token"] != nil && fresh["resume_token"] != .string(token))
        await host.shutdown()
    }

    @Test("a name cannot be taken over: not by another hello, nor with the session id alone or a guessed token")
    func nameHijackRefused() async throws {
        let host = try startConformanceHost()
        let events = host.peerEvents()
        let owner = try RawPeer(host.boundEndpoint!)
        let welcome = try #require(try await owner.hello("owner", actions: ["whoami"], heartbeatMs: 600_000))
        let session = try #require(welcome["session"])
        let remote = try await host.peer(named: "owner")

        let intruder = try RawPeer(host.boundEndpoint!)
        let attempts: [[String: JSONValue]] = [
            [:], ["session": session], ["session": session, "resume_token": .string(String(repeating: "0", count: 64))],
        ]
        for extra in attempts {
            try intruder.send(.object(["v": 1, "type": "hello", "peer": "owner", "actions": ["whoami"]].merging(extra) { $1 }))
            let refusal = try #require(try await intruder.receiveSkippingPings())
            #expect(refusal["id"] == .null && refusal["ok"] == false && refusal.errorCode == "name_taken")
        }
        // Host code still reaches the real owner, and only it.
        let answer = Task { try await remote.call("whoami", nil, timeout: patience) }
        let request = try #require(try await owner.receiveSkippingPings())
        #expect(request["action"] == "whoami")
        try owner.send(["v": 1, "type": "response", "id": request["id"]!, "ok": true, "result": "the owner"])
        #expect(try await answer.value == "the owner")
        #expect(try await host.peer(named: "owner") === remote)

        // Once the owner has left, the name is free.
        try owner.send(["v": 1, "type": "bye"])
        var iterator = events.makeAsyncIterator()
        while let event = await iterator.next() { if case .left = event { break } }
        let taken = try #require(try await intruder.hello("owner"))
        #expect(taken["type"] == "welcome" && taken["session"] != session)
        await host.shutdown()
    }

    @Test("a Swift peer resumes with its token; connecting under a live name fails with name_taken")
    func swiftPeerIdentity() async throws {
        let host = try startConformanceHost()
        let holder = try RawPeer(host.boundEndpoint!)
        // A long heartbeat: the holder answers no pings, and must hold its name until it says bye.
        _ = try #require(try await holder.hello("twin", heartbeatMs: 600_000))
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "twin")
        configuration.heartbeat = .milliseconds(200)
        configuration.waitsForName = true  // else the first refusal fails connect() at once (MistakesTests)
        let peer = try BridgePeer(configuration: configuration)
        let start = ContinuousClock.now
        // The refusal comes in milliseconds; the peer retries until its timeout, long enough for a loaded machine.
        let refused = await bridgeError { try await peer.connect(timeout: .seconds(5)) }
        #expect(refused?.code == .nameTaken)
        #expect(ContinuousClock.now - start >= .seconds(5), "refusals are retried until the timeout")
        // The name frees when the holder leaves; the peer, still saying hello, is welcomed.
        try holder.send(["v": 1, "type": "bye"])
        try await peer.connect(timeout: patience)
        #expect(try await peer.call("echo", "in") == "in")
        await peer.close()
        await host.shutdown()
    }

    @Test("after losing its host, the Swift peer says hello with its session and that session's resume token")
    func swiftPeerSendsToken() async throws {
        let host = try RawHost(peerName: "returning")
        let connecting = Task { try await host.peer.connect(timeout: patience) }
        let hello = try #require(try await host.receive())
        #expect(try JSONValue.parse(hello[2])["resume_token"] == nil, "nothing to resume yet")
        let token = String(repeating: "5a", count: 32)
        try host.welcome(hello[0], session: "s1", token: token)
        _ = try await connecting.value
        try host.send(["v": 1, "type": "bye"], to: hello[0])
        // The lost peer reconnects over a new connection and asks for its session back.
        let again = try #require(try await host.receive(otherThan: hello[0]))
        let body = try JSONValue.parse(again[2])
        #expect(body["type"] == "hello" && body["session"] == "s1" && body["resume_token"] == .string(token))
        await host.peer.close()
    }

    @Test("a call made after its side closed fails at once: on a closed peer, and to a peer of a host that shut down")
    func callsAfterCloseFailAtOnce() async throws {
        let host = try startConformanceHost()
        let peer = try await connectPeer(host) { try $0.handle("echo") { payload, _ in payload } }
        let remote = try await host.peer(named: "swift-peer", waitingUpTo: patience)
        await host.shutdown()
        await peer.close()
        // Both sockets' threads are gone: the calls fail on their closed links instead of waiting for a thread.
        let started = ContinuousClock.now
        let lost: Set<BridgeError.Code> = [.peerLost, .cancelled]
        #expect(await bridgeError { _ = try await peer.call("echo", 1, timeout: patience) }.map { lost.contains($0.code) } == true)
        #expect(await bridgeError { _ = try await remote.call("echo", 1, timeout: patience) }.map { lost.contains($0.code) } == true)
        #expect(ContinuousClock.now - started < patience / 2, "neither waited for its timeout")
    }
}
