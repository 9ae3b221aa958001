import ZeroBridge
import Synchronization

extension BridgeHost {
    /// Launches the peer (now, or when the host starts) and keeps it running until the host shuts down (SPEC 10.1):
    /// restarted when it exits, hangs or is never ready, with a backoff, until it restarts too often; its output goes
    /// to the host's logger. The host's `shutdown()` stops it (`bye`, SIGTERM, SIGKILL).
    ///
    /// Refused (`not_allowed`) when the host only lets CURVE keys on an allow-list connect (a launched peer's key could
    /// not be on it), or listens on `inproc://` (another process cannot connect there); refused (`invalid_payload`)
    /// for a name that is not 1 to 128 characters or that the host already supervises (``Supervised/stop()`` that one
    /// first, also after the host gave up on it).
    ///
    /// For example:
    /// ```swift
    /// let etl = try host.supervise(SupervisedPeer(name: "etl", executable: "node", arguments: ["etl-peer.js"]))
    /// try host.start()
    /// let rows = try await etl.call("importFile", ["path": "/data/a.csv"], timeout: .seconds(20))
    /// ```
    @discardableResult
    public func supervise(_ peer: SupervisedPeer) throws -> Supervised {
        guard BridgeName.isValid(peer.name) else {
            throw BridgeError(.invalidPayload, "a supervised peer's name has 1 to \(BridgeName.maxLength) characters")
        }
        if configuration.curve?.allowedPeerKeys != nil {
            throw BridgeError(.notAllowed, "this host only lets peers with a CURVE key on its allow-list connect: it cannot "
                                           + "supervise peer '\(peer.name)', whose key would not be on it (SPEC 10.1)")
        }
        if configuration.endpoint.hasPrefix("inproc://") {
            throw BridgeError(.notAllowed, "a host on inproc:// cannot supervise peer '\(peer.name)': another process cannot connect there")
        }
        let supervised = Supervised(peer, defaultTimeout: configuration.defaultTimeout, logger: configuration.logger)
        try installExtension(Supervision.self) { Supervision() }.0.add(supervised)
        if boundEndpoint != nil { supervised.launch(on: self) }
        return supervised
    }

    /// The peer supervised under `name`, if any (also one the host gave up on, until it is stopped).
    package func supervised(named name: String) -> Supervised? {
        installedExtension(Supervision.self)?.named(name)
    }
}

/// The peers a host supervises, by name.
final class Supervision: HostExtension {
    private let peers = Mutex<[String: Supervised]>([:])

    func add(_ supervised: Supervised) throws {
        try peers.withLock { peers in
            if let earlier = peers[supervised.name], earlier.state != .stopped {
                throw BridgeError(.invalidPayload, "the host already supervises a peer named '\(supervised.name)'")
            }
            peers[supervised.name] = supervised
        }
    }

    func named(_ name: String) -> Supervised? { peers.withLock { $0[name] } }
    var all: [Supervised] { peers.withLock { Array($0.values) } }

    /// The host has bound its endpoint: peers supervised before launch now (each once).
    func hostStarted(_ host: BridgeHost) {
        for supervised in peers.withLock({ Array($0.values) }) { supervised.launch(on: host) }
    }

    /// Stops every peer at once, so the host's shutdown takes one grace period, not one per peer; while the host's
    /// socket is open, so that each is told `bye` before its process is stopped.
    func hostClosing(_ host: BridgeHost) async {
        await withTaskGroup(of: Void.self) { group in
            for supervised in peers.withLock({ Array($0.values) }) { group.addTask { await supervised.stop() } }
        }
    }

    /// `$stats` (SPEC 7.8): each supervised peer's state and restarts, by name.
    func stats() async throws -> [String: JSONValue] {
        ["supervised": .array(all.sorted { $0.name < $1.name }.map { peer in
            .object(["name": .string(peer.name), "state": .string(Self.name(of: peer.state)), "restarts": .int(peer.restarts)])
        })]
    }

    private static func name(of state: Supervised.State) -> String {
        switch state {
        case .starting: "starting"
        case .up: "up"
        case .restarting: "restarting"
        case .gaveUp: "gave_up"
        case .stopped: "stopped"
        }
    }
}
