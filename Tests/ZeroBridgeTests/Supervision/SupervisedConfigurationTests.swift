import Foundation
import Testing
import ZeroMQ
@testable import ZeroBridge

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
        let folder = NSTemporaryDirectory() + "zerobridge-supervised-test-\(UUID().uuidString.prefix(8))"
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
