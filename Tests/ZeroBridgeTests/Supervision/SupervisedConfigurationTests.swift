import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge
@testable import ZeroBridgeSupervision

/// What a launched peer reads (SPEC 10.1), and how the host cuts its output, without starting processes.
@Suite("supervised peers: connection file, environment, output lines")
struct SupervisedConfigurationTests {
    private func file(_ extra: [String: JSONValue]) -> JSONValue {
        var fields: [String: JSONValue] = ["protocol": 1, "endpoint": "tcp://127.0.0.1:41234", "host": "etl-host",
                                           "signature_scheme": "hmac-sha256", "key": ""]
        fields.merge(extra) { $1 }
        return .object(fields)
    }

    private func written(_ json: JSONValue) throws -> String {
        let folder = scratchDirectory + "zerobridge-supervised-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/connection.json"
        try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("the connection file's peer is read, and one that is not a name of 1 to 128 characters is refused naming the field")
    func peerField() throws {
        #expect(try ConnectionFile.parse(file(["peer": "etl"])).peer == "etl")
        #expect(try ConnectionFile.parse(file([:])).peer == nil)
        for bad: JSONValue in ["", .string(String(repeating: "p", count: 129)), 7, nil] {
            #expect { try ConnectionFile.parse(file(["peer": bad])) } throws: { error in
                (error as? BridgeError)?.message.contains("'peer'") == true
            }
        }
    }

    @Test("a file written with a peer reads back the same")
    func roundTrip() throws {
        let original = ConnectionFile(endpoint: "ipc:///tmp/x.sock", host: "h", key: .generate(),
                                      curveServerKey: try CurveKeyPair.generate().publicKey, peer: "etl")
        #expect(try ConnectionFile.parse(original.json) == original)
    }

    @Test(".supervised() reads ZEROBRIDGE_CONNECTION_FILE, its name from the file, the program or ZEROBRIDGE_PEER_NAME")
    func supervisedConfiguration() throws {
        let key = ConnectionKey.generate()
        let named = try written(file(["peer": "etl", "key": .string(key.hex)]))
        let fromFile = try BridgePeer.Configuration.supervised(environment: ["ZEROBRIDGE_CONNECTION_FILE": named])
        #expect(fromFile.name == "etl")
        #expect(fromFile.endpoint == "tcp://127.0.0.1:41234")
        #expect(fromFile.key == key)
        #expect(try BridgePeer.Configuration.supervised(name: "mine", environment: ["ZEROBRIDGE_CONNECTION_FILE": named]).name == "mine")

        let unnamed = try written(file([:]))
        let fromVariable = try BridgePeer.Configuration.supervised(
            environment: ["ZEROBRIDGE_CONNECTION_FILE": unnamed, "ZEROBRIDGE_PEER_NAME": "from-env"])
        #expect(fromVariable.name == "from-env")
        #expect(throws: BridgeError.self) { try BridgePeer.Configuration.supervised(environment: ["ZEROBRIDGE_CONNECTION_FILE": unnamed]) }
    }

    @Test(".supervised() without ZEROBRIDGE_CONNECTION_FILE fails at once, saying so")
    func notSupervised() {
        #expect { try BridgePeer.Configuration.supervised(environment: [:]) } throws: { error in
            (error as? BridgeError)?.message.contains("ZEROBRIDGE_CONNECTION_FILE is not set") == true
        }
    }

    @Test("a launched peer ends with its host: the host's bye closes it, closed() says why, and it never reconnects")
    func launchedPeerEndsWithItsHost() async throws {
        let path = scratchDirectory + "zb-launched-\(UUID().uuidString.prefix(8)).json"
        let host = try startConformanceHost { $0.connectionFile = path }
        defer { try? FileManager.default.removeItem(atPath: path) }
        var file = try ConnectionFile.read(path)
        file.peer = "launched"
        let launchedFile = path + ".peer.json"
        try file.write(to: launchedFile)
        defer { try? FileManager.default.removeItem(atPath: launchedFile) }
        let configuration = try BridgePeer.Configuration.supervised(environment: ["ZEROBRIDGE_CONNECTION_FILE": launchedFile])
        #expect(configuration.endsWithHost)
        let launched = try BridgePeer(configuration: configuration)
        // An ordinary peer of the same host, for comparison: it keeps trying after the bye.
        let ordinary = try BridgePeer(configuration: .init(connectionFile: try ConnectionFile.read(path), name: "ordinary"))
        try await launched.connect(timeout: patience)
        try await ordinary.connect(timeout: patience)
        #expect(try await launched.call("echo", 1) == 1)

        await host.shutdown()  // says bye to its named peers
        let reason = await launched.closed()
        #expect(reason.code == .peerLost && reason.message.contains("bye"))
        #expect(await bridgeError { try await launched.call("echo", 2) } != nil)
        #expect(await bridgeError { try await launched.connect(timeout: .milliseconds(200)) } != nil)
        // Closed for good: connecting again fails at once with why, never after its own timeout.
        #expect(await bridgeError { try await launched.connect(timeout: patience) }?.code == .peerLost)

        await ordinary.close()
        #expect(await ordinary.closed().code == .cancelled)
        await launched.close()  // closing again changes nothing: the first reason stands
        #expect(await launched.closed().code == .peerLost)
    }

    @Test("output is cut into lines (CRLF too), a line over the limit into pieces of the limit, and what is left at the end is a line")
    func outputLines() {
        var lines = OutputLines(maxLineBytes: 4)
        var seen: [String] = []
        lines.append(Array("ab\r\ncdefghij\n\nk".utf8)) { seen.append($0) }
        #expect(seen == ["ab", "cdef", "ghij", "", ""])
        lines.finish { seen.append($0) }
        #expect(seen.last == "k")
    }
}
