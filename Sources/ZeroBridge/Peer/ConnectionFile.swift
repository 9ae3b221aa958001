import Foundation
import ZeroMQ

/// A host's connection file (SPEC 10): where it listens, and the keys a peer needs to talk to it.
public struct ConnectionFile: Sendable, Equatable {
    /// The host's endpoint.
    public var endpoint: String
    /// The host's name.
    public var host: String
    /// The key every message is signed with (SPEC 3.1); nil when the host runs without one.
    public var key: ConnectionKey?
    /// The host's CURVE public key (SPEC 2.1), when the host requires CURVE.
    public var curveServerKey: String?
    /// The name a peer the host launched says `hello` with (SPEC 10.1); only in the file a host writes for such a peer.
    public var peer: String?

    /// Reads and checks the file; the error says what is wrong with it.
    public static func read(_ path: String) throws(BridgeError) -> ConnectionFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BridgeError(.invalidPayload, "cannot read the connection file \(path)")
        }
        guard let json = try? JSONValue.parse(Array(data)) else {
            throw BridgeError(.invalidPayload, "\(path): not a connection file: not JSON")
        }
        do throws(BridgeError) {
            return try parse(json)
        } catch {
            throw BridgeError(error.code, "\(path): \(error.message)")
        }
    }

    /// The file a host writes: for its peers, or (`peer`) for one peer it launches.
    package init(endpoint: String, host: String, key: ConnectionKey? = nil, curveServerKey: String? = nil, peer: String? = nil) {
        self.endpoint = endpoint
        self.host = host
        self.key = key
        self.curveServerKey = curveServerKey
        self.peer = peer
    }

    /// The connection file in `file`, a parsed JSON object (what ``read(_:)`` does after reading the file).
    ///
    /// - Throws: ``BridgeError`` `invalid_payload` naming the member that is missing or malformed.
    public static func parse(_ file: JSONValue) throws(BridgeError) -> ConnectionFile {
        func problem(_ text: String) -> BridgeError { BridgeError(.invalidPayload, "not a connection file: \(text)") }
        guard case .object = file else { throw problem("not a JSON object") }
        guard file["protocol"] == 1 else { throw problem("'protocol' must be the integer 1") }
        guard let endpoint = file["endpoint"]?.stringValue, !endpoint.contains("*"),
              let scheme = ["tcp://", "ipc://", "inproc://"].first(where: endpoint.hasPrefix), endpoint.count > scheme.count else {
            throw problem("'endpoint' must be a tcp://, ipc:// or inproc:// endpoint without wildcards")
        }
        guard let host = file["host"]?.stringValue, Message.isValidName(host) else {
            throw problem("'host' must be a string of 1 to 128 characters")
        }
        guard file["signature_scheme"] == "hmac-sha256" else { throw problem("'signature_scheme' must be \"hmac-sha256\"") }
        guard let keyText = file["key"]?.stringValue, keyText.isEmpty || ConnectionKey(hex: keyText) != nil else {
            throw problem("'key' must be hex digits (an even number of them), or empty")
        }
        var curveServerKey: String?
        if let value = file["curve_server_key"] {
            guard let text = value.stringValue, text.utf8.count == 40, text.unicodeScalars.allSatisfy(Self.z85.contains) else {
                throw problem("'curve_server_key' must be 40 characters of Z85")
            }
            curveServerKey = text
        }
        var peer: String?
        if let value = file["peer"] {
            guard let name = value.stringValue, Message.isValidName(name) else {
                throw problem("'peer' must be a string of 1 to 128 characters")
            }
            peer = name
        }
        return ConnectionFile(endpoint: endpoint, host: host, key: keyText.isEmpty ? nil : ConnectionKey(hex: keyText),
                              curveServerKey: curveServerKey, peer: peer)
    }

    /// The file's JSON (SPEC 10): the five required fields, then `curve_server_key` and `peer` when set.
    var json: JSONValue {
        var fields: [String: JSONValue] = ["protocol": 1, "endpoint": .string(endpoint), "host": .string(host),
                                           "signature_scheme": "hmac-sha256", "key": .string(key?.hex ?? "")]
        if let curveServerKey { fields["curve_server_key"] = .string(curveServerKey) }
        if let peer { fields["peer"] = .string(peer) }
        return .object(fields)
    }

    /// Creates the file at `path` with mode 0600 from its first byte (it may carry a key); fails if it cannot.
    package func write(to path: String) throws {
        try SecretFile.write(json.serialized(), to: path)
    }

    private static let z85 = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".unicodeScalars)
}

extension BridgePeer.Configuration {
    /// A peer of the host that wrote `file`: its endpoint, its key, and CURVE with `keyPair` (a new pair when nil)
    /// when the host requires it.
    public init(connectionFile file: ConnectionFile, name: String, keyPair: CurveKeyPair? = nil) throws {
        self.init(endpoint: file.endpoint, name: name)
        key = file.key
        if let serverKey = file.curveServerKey {
            curve = .init(serverKey: serverKey, keyPair: try keyPair ?? CurveKeyPair.generate())
        }
    }
}

extension BridgePeer.Configuration {
    /// The environment variable naming the connection file a supervising host wrote for the peer it launched (SPEC 10.1).
    public static let connectionFileVariable = "ZEROBRIDGE_CONNECTION_FILE"
    /// The environment variable holding the name a launched peer says `hello` with (SPEC 10.1).
    public static let peerNameVariable = "ZEROBRIDGE_PEER_NAME"

    /// A peer launched by a supervising host (SPEC 10.1): the host's endpoint and keys from the connection file that
    /// `ZEROBRIDGE_CONNECTION_FILE` names, and its name from `name`, else the file's `peer`, else
    /// `ZEROBRIDGE_PEER_NAME`. Fails at once, saying so, when the program was not launched that way. The peer ends with
    /// its host (``endsWithHost``): await ``BridgePeer/closed()`` and exit.
    ///
    /// For example:
    /// ```swift
    /// let peer = try BridgePeer(configuration: .supervised())
    /// try peer.handle("render") { payload, _ in ["html": "<p>\(payload)</p>"] }
    /// try await peer.connect()
    /// ```
    public static func supervised(name: String? = nil,
                                  environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Self {
        guard let path = environment[connectionFileVariable], !path.isEmpty else {
            throw BridgeError(.invalidPayload, "\(connectionFileVariable) is not set: this program was not launched by a "
                                               + "supervising host (SPEC 10.1); give it an endpoint or a connection file instead")
        }
        let file = try ConnectionFile.read(path)
        guard let name = name ?? file.peer ?? environment[peerNameVariable], Message.isValidName(name) else {
            throw BridgeError(.invalidPayload, "\(path) names no peer, and \(peerNameVariable) is not set to a name of 1 to 128 characters")
        }
        var configuration = try Self(connectionFile: file, name: name)
        configuration.endsWithHost = true
        return configuration
    }
}
