import CoreMetrics
import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

@Suite("$stats (SPEC 7.8): who may read it, and what it says", .timeLimit(.minutes(3)))
struct StatsTests {
    /// The code a call fails with, or nil when it succeeds.
    private func failure(of call: () async throws -> JSONValue) async -> BridgeError.Code? {
        do {
            _ = try await call()
            return nil
        } catch let error as BridgeError {
            return error.code
        } catch {
            return "unexpected"
        }
    }

    @Test("by default nobody may read $stats: a named peer, even on a keyed host, is answered not_allowed")
    func nobodyByDefault() async throws {
        let path = scratchDirectory + "zb-stats-\(UUID().uuidString.prefix(8)).json"
        let host = try startConformanceHost { $0.connectionFile = path }
        let peer = try BridgePeer(configuration: .init(connectionFile: try ConnectionFile.read(path), name: "curious"))
        try await peer.connect(timeout: patience)
        #expect(await failure { try await peer.call("$stats", nil) } == .notAllowed)
        #expect(try await peer.call("$actions", nil).arrayValue?.contains("$stats") == false, "reserved names are not listed")
        await peer.close()
        await host.shutdown()
    }

    @Test("on a keyed host configured for it, the connection key's holders read $stats; on a keyless host that setting admits nobody")
    func connectionKeyHolders() async throws {
        let path = scratchDirectory + "zb-stats-\(UUID().uuidString.prefix(8)).json"
        let keyed = try startConformanceHost {
            $0.connectionFile = path
            $0.statsAccess = .init(connectionKeyHolders: true)
        }
        let holder = try BridgePeer(configuration: .init(connectionFile: try ConnectionFile.read(path), name: "holder"))
        try await holder.connect(timeout: patience)
        let snapshot = try await holder.call("$stats", nil)
        #expect(snapshot["host"] == "conformance")
        #expect(snapshot["sessions"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["holder"])
        await holder.close()
        await keyed.shutdown()

        let keyless = try startConformanceHost { $0.statsAccess = .init(connectionKeyHolders: true) }
        let anyone = try await connectPeer(keyless, name: "anyone")
        #expect(await failure { try await anyone.call("$stats", nil) } == .notAllowed)
        await anyone.close()
        await keyless.shutdown()
    }

    @Test("with CURVE, only a session whose key is on the $stats list reads it; other admitted peers are not_allowed")
    func curveKeys() async throws {
        let operatorKeys = try CurveKeyPair.generate(), appKeys = try CurveKeyPair.generate()
        let server = try CurveKeyPair.generate()
        let host = try startConformanceHost(transport: "tcp") {
            $0.curve = .init(keyPair: server)
            $0.statsAccess = .init(curveKeys: [operatorKeys.publicKey])
        }
        let operatorPeer = try SecurityTests.curvePeer(host, serverKey: server.publicKey, keyPair: operatorKeys, name: "operator")
        let app = try SecurityTests.curvePeer(host, serverKey: server.publicKey, keyPair: appKeys, name: "app")
        try await operatorPeer.connect(timeout: patience)
        try await app.connect(timeout: patience)
        #expect(await failure { try await app.call("$stats", nil) } == .notAllowed)
        let snapshot = try await operatorPeer.call("$stats", nil)
        #expect(Set(snapshot["sessions"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []) == ["operator", "app"])
        #expect(snapshot["refusals"] == [:], "a not_allowed answer comes from a handler that ran: it is not a refusal")
        await operatorPeer.close()
        await app.close()
        await host.shutdown()
    }

    @Test("the snapshot counts requests by outcome, lists work in flight by action and names anonymous sessions null")
    func snapshotCounts() async throws {
        let host = try startConformanceHost { $0.statsAccess = .init(anyone: true) }
        let peer = try await connectPeer(host, name: "worker")
        for i in 0..<5 { #expect(try await peer.call("echo", .int(i)) == .int(i)) }
        #expect(await failure { try await peer.call("fail", ["message": "no"]) } == .handlerError)
        #expect(await failure { try await peer.call("nothing-here", nil) } == .unknownAction)
        let sleeping = Task { try await peer.call("sleep", ["ms": 60_000]) }
        let raw = try RawPeer(host.boundEndpoint!)
        try raw.send(["v": 1, "type": "request", "id": "r1", "action": "echo", "payload": 1])
        #expect(try await raw.receive()?["ok"] == true)
        // The sleep is in flight once the host says so: waited for, not assumed.
        var snapshot: JSONValue = nil
        #expect(try await eventually {
            snapshot = try await peer.call("$stats", nil)
            return snapshot["in_flight"]?["requests"]?["sleep"] == 1
        }, "the sleep is in flight")
        #expect(snapshot["totals"]?["requests"]?.intValue ?? 0 >= 7)
        #expect(snapshot["totals"]?["failed"] == 1)
        #expect(snapshot["refusals"] == ["unknown_action": 1])
        #expect(snapshot["session_count"] == 2)
        let sessions = snapshot["sessions"]?.arrayValue ?? []
        #expect(sessions.map { $0["name"] ?? "missing" } == ["worker", nil], "longest-lived first; anonymous is null")
        #expect(sessions.allSatisfy { $0["transport"] == "zmq" })
        sleeping.cancel()
        _ = await sleeping.result
        await peer.close()
        await host.shutdown()
    }

    @Test("without a metrics backend (swift-metrics' NOOP factory) a host makes no metric objects, and still counts for $stats")
    func noBackendNoMetrics() async throws {
        #expect(MetricsSystem.factory is NOOPMetricsHandler, "the test process bootstraps no backend")
        let telemetry = Telemetry()
        #expect(!telemetry.isRecording)
        let echo = telemetry.requestStarted("echo")
        #expect(telemetry.inFlight == ["echo": 1])
        telemetry.requestEnded(echo, failure: nil, startedAt: nil)
        telemetry.refused(.badMessage)
        #expect(telemetry.totals.requests == 1 && telemetry.totals.refusals == [.badInput: 1] && telemetry.inFlight.isEmpty)
    }
}
