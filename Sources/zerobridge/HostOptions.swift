import ArgumentParser
import Foundation
import Logging
import ZeroBridge
import ZeroMQ

/// `--endpoint` or `--connection-file`: the host a command talks to as a peer (`call`, `types`).
struct HostOptions: ParsableArguments {
    @Option(help: "The host's endpoint, e.g. tcp://127.0.0.1:5555 or ipc:///tmp/host.sock.")
    var endpoint: String?

    @Option(help: "Read the host's endpoint, key and CURVE server key from its connection file instead.")
    var connectionFile: String?

    /// Whether either was given (commands with another source of their input may take neither).
    var isGiven: Bool { endpoint != nil || connectionFile != nil }

    func validate() throws {
        guard endpoint == nil || connectionFile == nil else {
            throw ValidationError("give the host as exactly one of --endpoint or --connection-file")
        }
    }

    /// From --endpoint, or from a connection file with its key and CURVE server key (SPEC 10).
    /// `keyPair`: the peer's own CURVE key pair, where the host admits by key (else a new one for a CURVE host).
    func peerConfiguration(name: String, keyPair: CurveKeyPair? = nil) throws -> BridgePeer.Configuration {
        if let endpoint { return BridgePeer.Configuration(endpoint: endpoint, name: name) }
        guard let connectionFile else {
            throw ValidationError("give the host as exactly one of --endpoint or --connection-file")
        }
        do {
            return try BridgePeer.Configuration(connectionFile: ConnectionFile.read(connectionFile), name: name, keyPair: keyPair)
        } catch let error as BridgeError {
            throw ValidationError(error.message)
        }
    }

    /// What to check when the host refused this command's messages for their key (not for a clock skew, which the
    /// peer's message names).
    private func hint(for error: BridgeError) -> String {
        guard error.code == .unauthorized, error.data?["clock_skew_ms"] == nil else { return "" }
        if let connectionFile {
            return "\nhint: \(connectionFile) must be the connection file of the host running now (a host writes a new key each time it starts)"
        }
        return "\nhint: this host requires a key: give its connection file (--connection-file) instead of --endpoint"
    }

    /// A peer named `name`, welcomed by the host (logging errors only). A host that does not welcome it within
    /// `timeout` fails it with a BridgeError saying so; the peer is closed then.
    func connectedPeer(name: String, keyPair: CurveKeyPair? = nil, timeout: Duration = .seconds(5)) async throws -> BridgePeer {
        var logger = Logger(label: "zerobridge.peer")
        logger.logLevel = .error
        var configuration = try peerConfiguration(name: name, keyPair: keyPair)
        configuration.logger = logger
        let peer = try BridgePeer(configuration: configuration)
        do {
            try await peer.connect(timeout: timeout)
            return peer
        } catch let error as BridgeError {
            await peer.close()
            throw BridgeError(error.code, "no welcome from \(configuration.endpoint): \(error.message)\(hint(for: error))")
        }
    }
}
