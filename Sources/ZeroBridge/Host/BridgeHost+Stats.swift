/// Who may read a host's `$stats` snapshot (SPEC 7.8): admitted by a credential, never by a name.
///
/// For example, the operator's own CURVE key:
/// ```swift
/// configuration.statsAccess = .init(curveKeys: ["rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"])
/// ```
public struct StatsAccess: Sendable, Equatable {
    /// Sessions whose CURVE public key (Z85) is one of these (a host with CURVE: SPEC 2.1).
    public var curveKeys: Set<String>
    /// On a keyed host (SPEC 3.1), every session: each holds the connection key, which only those given the connection
    /// file have. Ignored on a host without a key.
    public var connectionKeyHolders: Bool
    /// Anyone who reaches the host: for tests and the conformance host.
    public var anyone: Bool

    /// Admits the sessions with one of `curveKeys`, every session of a keyed host when `connectionKeyHolders`, or
    /// anyone at all when `anyone`; with no arguments, nobody (``nobody``).
    public init(curveKeys: Set<String> = [], connectionKeyHolders: Bool = false, anyone: Bool = false) {
        self.curveKeys = curveKeys
        self.connectionKeyHolders = connectionKeyHolders
        self.anyone = anyone
    }

    /// The default: `$stats` is answered `not_allowed`.
    public static let nobody = StatsAccess()
}

/// What `$stats` reads on the host's socket thread.
struct ThreadSnapshot: Sendable {
    struct SessionSummary: Sendable {
        let id: String
        let name: String?
        let transport: String
        let age: Duration
        let inFlight: Int
    }

    /// Sessions listed in one snapshot, whatever the host keeps (SPEC 7.8).
    static let maxSessions = 1000

    let sessions: [SessionSummary]
    let sessionCount: Int
    let inFlight: [String: Int]
    let eventsInFlight: Int
    let totals: Telemetry.Totals
}

extension BridgeHost {
    /// The `$stats` result (SPEC 7.8, `schema/stats.schema.json`), for a caller ``Configuration/statsAccess`` admits.
    func stats(for request: BridgeRequest) async throws -> JSONValue {
        let access = configuration.statsAccess
        let curveKey = request.peer?.info.curveKey
        let admitted = access.anyone || curveKey.map(access.curveKeys.contains) == true
            || (access.connectionKeyHolders && connectionKey != nil)
        guard admitted else {
            throw BridgeError(.notAllowed, "this host does not admit this caller to $stats: its configuration lists who may read it (a CURVE key, or the connection key's holders)")
        }
        guard let snapshot = await threadSnapshot() else { throw BridgeError(.peerLost, "the host is not running") }
        var result: [String: JSONValue] = [
            "host": .string(configuration.name),
            "uptime_ms": .int(Self.milliseconds(ContinuousClock.now - startedAt)),
            "library_version": .string(zeroBridgeVersion),
            "session_count": .int(snapshot.sessionCount),
            "sessions": .array(snapshot.sessions.map { session in
                .object(["id": .string(session.id), "name": session.name.map(JSONValue.string) ?? .null,
                         "transport": .string(session.transport), "age_ms": .int(Self.milliseconds(session.age)),
                         "in_flight": .int(session.inFlight)])
            }),
            "in_flight": ["requests": .object(snapshot.inFlight.mapValues(JSONValue.int)), "events": .int(snapshot.eventsInFlight)],
            "totals": Self.json(snapshot.totals),
            "refusals": .object(Dictionary(uniqueKeysWithValues: snapshot.totals.refusals.map { ($0.key.rawValue, JSONValue.int($0.value)) })),
            "supervised": [],  // until ZeroBridgeSupervision says otherwise
        ]
        // Jobs and supervised peers are counted by their own modules, when the host uses them.
        for capability in extensions.all {
            result.merge(try await capability.stats()) { _, theirs in theirs }
        }
        return .object(result)
    }

    private static func json(_ totals: Telemetry.Totals) -> JSONValue {
        [
            "requests": .int(totals.requests), "failed": .int(totals.failed), "events": .int(totals.events),
            "bytes_in": .int(totals.bytesIn), "bytes_out": .int(totals.bytesOut),
            "progress_sent": .int(totals.progressSent), "progress_coalesced": .int(totals.progressCoalesced),
            "broadcasts_delivered": .int(totals.broadcastsDelivered), "broadcasts_skipped": .int(totals.broadcastsSkipped),
        ]
    }

    private static func milliseconds(_ duration: Duration) -> Int { Int(duration / .milliseconds(1)) }
}
