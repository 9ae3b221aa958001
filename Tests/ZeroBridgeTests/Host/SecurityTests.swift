import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

@Suite("Security: CURVE, peer keys, ipc permissions, secrets kept out of logs", .timeLimit(.minutes(3)))
struct SecurityTests {
    static func curveHost(allowing keys: Set<String>? = nil, log: CapturedLog? = nil) throws -> (BridgeHost, CurveKeyPair) {
        let server = try CurveKeyPair.generate()
        let host = try startConformanceHost(transport: "tcp") { configuration in
            configuration.curve = .init(keyPair: server, allowedPeerKeys: keys)
            if let log { configuration.logger = log.logger("host") }
        }
        return (host, server)
    }

    static func curvePeer(_ host: BridgeHost, serverKey: String, keyPair: CurveKeyPair, name: String = "encrypted") throws -> BridgePeer {
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: name)
        configuration.curve = .init(serverKey: serverKey, keyPair: keyPair)
        return try BridgePeer(configuration: configuration)
    }

    @Test("a CURVE host serves a Swift peer through its connection file, which carries the host's public key and a signing key")
    func curveRoundTrip() async throws {
        let file = scratchDirectory + "zb-curve-\(UUID().uuidString.prefix(8)).json"
        let server = try CurveKeyPair.generate()
        let host = try startConformanceHost(transport: "tcp") { configuration in
            configuration.curve = .init(keyPair: server)
            configuration.connectionFile = file
        }
        let written = try ConnectionFile.read(file)
        #expect(written.curveServerKey == server.publicKey && written.key != nil, "CURVE and a signing key together")
        let peer = try BridgePeer(configuration: .init(connectionFile: written, name: "encrypted"))
        try await peer.connect(timeout: patience)
        #expect(try await peer.call("echo", ["big": .string(String(repeating: "x", count: 100_000))])["big"]?.stringValue?.count == 100_000)
        await peer.close()
        await host.shutdown()
    }

    @Test("a peer pinning another host key, and a plaintext peer, get nothing through")
    func wrongKeys() async throws {
        let (host, _) = try Self.curveHost()
        // The peer pins a key the host cannot prove: the handshake fails, no welcome.
        let impostorKey = try CurveKeyPair.generate().publicKey
        let fooled = try Self.curvePeer(host, serverKey: impostorKey, keyPair: try CurveKeyPair.generate())
        // The failed handshake is known at once: unauthorized, not the connect timeout (docs/errors.md).
        #expect(await bridgeError { try await fooled.connect(timeout: .seconds(2)) }?.code == .unauthorized)
        await fooled.close()
        // A plaintext peer cannot talk to a CURVE host.
        let plain = try RawPeer(host.boundEndpoint!)
        _ = try plain.send(["v": 1, "type": "hello", "peer": "plain"])
        #expect(try await plain.receive(timeout: .seconds(2)) == nil)
        await host.shutdown()
    }

    @Test("only peers on the allow-list connect; a refused key is logged with its address")
    func allowList() async throws {
        let log = CapturedLog()
        let listed = try CurveKeyPair.generate(), unlisted = try CurveKeyPair.generate()
        let (host, server) = try Self.curveHost(allowing: [listed.publicKey], log: log)
        let outsider = try Self.curvePeer(host, serverKey: server.publicKey, keyPair: unlisted, name: "outsider")
        #expect(await bridgeError { try await outsider.connect(timeout: .seconds(2)) }?.code == .unauthorized)
        await outsider.close()
        #expect(try await eventually { log.text.contains("peer key refused") && log.text.contains(unlisted.publicKey) })
        let member = try Self.curvePeer(host, serverKey: server.publicKey, keyPair: listed, name: "member")
        try await member.connect(timeout: patience)
        #expect(try await member.call("echo", 1) == 1)
        await member.close()
        await host.shutdown()
    }

    @Test("with CURVE, a session is resumed only from a connection with the same peer key, even with its token")
    func resumeBoundToKey() async throws {
        let (host, server) = try Self.curveHost()
        let owner = try CurveKeyPair.generate(), thief = try CurveKeyPair.generate()
        let first = try RawPeer(host.boundEndpoint!, curve: .init(serverKey: server.publicKey, keyPair: owner))
        let welcome = try #require(try await first.hello("keyed", heartbeatMs: 600_000))
        let resume: JSONValue = ["v": 1, "type": "hello", "peer": "keyed", "session": welcome["session"]!,
                                 "resume_token": welcome["resume_token"]!]
        let stolen = try RawPeer(host.boundEndpoint!, curve: .init(serverKey: server.publicKey, keyPair: thief))
        try stolen.send(resume)
        #expect(try await stolen.receiveSkippingPings()?.errorCode == "name_taken")
        let back = try RawPeer(host.boundEndpoint!, curve: .init(serverKey: server.publicKey, keyPair: owner))
        try back.send(resume)
        #expect(try await back.receiveSkippingPings()?["session"] == welcome["session"])
        await host.shutdown()
    }

    @Test("an ipc socket file is created for its owner only, whatever the umask")
    func ipcPermissions() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        let host = try startConformanceHost(transport: "ipc")
        let path = String(host.boundEndpoint!.dropFirst("ipc://".count))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode & 0o077 == 0, "mode \(String(mode, radix: 8))")
        await host.shutdown()
    }

    @Test("tcp off loopback is told apart from loopback")
    func offLoopback() {
        #expect(BridgeHost.isTCPOffLoopback("tcp://0.0.0.0:5555"))
        #expect(BridgeHost.isTCPOffLoopback("tcp://*:*"))
        #expect(BridgeHost.isTCPOffLoopback("tcp://192.168.1.4:5555"))
        #expect(BridgeHost.isTCPOffLoopback("tcp://[::]:5555"))
        #expect(!BridgeHost.isTCPOffLoopback("tcp://127.0.0.1:5555"))
        #expect(!BridgeHost.isTCPOffLoopback("tcp://localhost:5555"))
        #expect(!BridgeHost.isTCPOffLoopback("tcp://[::1]:5555"))
        #expect(!BridgeHost.isTCPOffLoopback("ipc:///tmp/x"))
    }

    @Test("an abstract ipc socket (ipc://@) without a key or CURVE is served with a warning that any local user can connect; with a key, without one")
    func abstractIPCWarns() async throws {
        let log = CapturedLog()
        let endpoint = "ipc://@zb-abstract-\(UUID().uuidString.prefix(8))"
        let open = try startConformanceHost { $0.endpoint = endpoint; $0.logger = log.logger("host") }
        #expect(open.boundEndpoint == endpoint)
        let peer = try await connectPeer(open)  // it serves: the warning is not a refusal
        await peer.close()
        await open.shutdown()
        #expect(log.text.contains("abstract ipc socket (ipc://@) without a key or CURVE: any local user can connect"), "\(log.text)")
        #expect(!FileManager.default.fileExists(atPath: String(endpoint.dropFirst("ipc://".count))), "no file is made for it")

        let keyedLog = CapturedLog()
        let keyed = try startConformanceHost { $0.endpoint = endpoint; $0.signing = .key(.generate()); $0.logger = keyedLog.logger("host") }
        await keyed.shutdown()
        #expect(!keyedLog.text.contains("any local user can connect"), "\(keyedLog.text)")
        #expect(BridgeHost.isAbstractIPC("ipc://@name") && !BridgeHost.isAbstractIPC("ipc:///tmp/@name"))
    }

    @Test("a secret file is written 0600, replaces what was there, leaves no temporary file; one others may read is refused with how to fix it")
    func secretFiles() throws {
        let folder = scratchDirectory + "zb-secret-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/host.key"
        try Data("old".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        try SecretFile.write(Array("secret\n".utf8), to: path)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600, "mode \(String(mode, radix: 8))")
        #expect(try SecretFile.read(path, what: "key file") == Array("secret\n".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["host.key"])

        chmod(path, 0o640)
        #expect(throws: SecretFile.Failure.self) { try SecretFile.read(path, what: "key file") }
        do {
            _ = try SecretFile.read(path, what: "CURVE secret key file")
        } catch {
            #expect(error.description == "permissions 0640 for '\(path)' are too open: the CURVE secret key file must be "
                    + "readable by its owner only, so others cannot take it; run chmod 600 \(path)")
        }
        chmod(path, 0o600)
        try SecretFile.write([UInt8](repeating: 65, count: 100), to: path)
        #expect(throws: SecretFile.Failure.self) { try SecretFile.read(path, what: "key file", limit: 99) }
        #expect(throws: SecretFile.Failure.self) { try SecretFile.write([1], to: folder + "/missing/host.key") }
    }

    @Test("resume tokens never reach the logs, at any level")
    func tokensNotLogged() async throws {
        let log = CapturedLog()
        let host = try startConformanceHost { $0.logger = log.logger("host") }
        var configuration = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "quiet")
        configuration.logger = log.logger("peer")
        let raw = try RawPeer(host.boundEndpoint!)
        let welcome = try #require(try await raw.hello("logged", heartbeatMs: 600_000))
        let token = try #require(welcome["resume_token"]?.stringValue)
        try raw.send(["v": 1, "type": "hello", "peer": "logged", "session": welcome["session"]!, "resume_token": .string(token)])
        _ = try await raw.receiveSkippingPings()
        try raw.send(["v": 1, "type": "hello", "peer": "logged", "session": welcome["session"]!, "resume_token": "zz"])
        _ = try await raw.receiveSkippingPings()
        let peer = try BridgePeer(configuration: configuration)
        try await peer.connect(timeout: patience)
        await peer.close()
        await host.shutdown()
        #expect(!log.text.isEmpty)
        #expect(!log.text.contains(token))
    }
}
