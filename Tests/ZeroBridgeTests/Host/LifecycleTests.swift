import Foundation
import Logging
import ServiceLifecycle
import Testing
@testable import ZeroBridge

@Suite("Lifecycle and sessions")
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

    @Test("a peer that reconnects naming its session resumes it, with calls in flight")
    func sessionResume() async throws {
        let host = try startConformanceHost()
        let first = try RawPeer(host.boundEndpoint!)
        let welcome = try #require(try await first.hello("resumer", actions: ["work"]))
        let session = try #require(welcome["session"]?.stringValue)
        let remote = try await host.peer(named: "resumer")
        let call = Task { try await remote.call("work", nil, timeout: .seconds(10)) }
        let request = try #require(try await first.receiveSkippingPings())
        first.socket.close()

        // A new connection (a new routing id) resumes the session and answers the call made over the old one.
        let second = try RawPeer(host.boundEndpoint!)
        try second.send(["v": 1, "type": "hello", "peer": "resumer", "actions": ["work"], "features": [],
                         "session": .string(session)])
        let resumed = try #require(try await second.receiveSkippingPings())
        #expect(resumed["session"] == .string(session))
        try second.send(["v": 1, "type": "response", "id": request["id"]!, "ok": true, "result": "finished"])
        #expect(try await call.value == "finished")
        #expect(remote.isConnected)

        // An unknown session id gets a new session.
        let third = try RawPeer(host.boundEndpoint!)
        try third.send(["v": 1, "type": "hello", "peer": "stranger", "actions": [], "features": [], "session": "no-such"])
        let fresh = try #require(try await third.receiveSkippingPings())
        #expect(fresh["session"] != "no-such" && fresh["session"] != .string(session))
        await host.shutdown()
    }
}
