import Synchronization

/// The host's handle to one connected peer: who it is, and a way to call into it (the `evaluateJavaScript` /
/// `callAsyncJavaScript` role). Calls fail with `peer_lost` once the peer has gone.
///
/// For example:
/// ```swift
/// let frontend = try await host.peer(named: "frontend", waitingUpTo: .seconds(5))
/// let html = try await frontend.call(Render.self, .init(page: 1), timeout: .seconds(2))
/// ```
public final class RemotePeer: BridgeCaller, @unchecked Sendable {
    /// What a peer said of itself in its `hello`.
    public struct Info: Sendable, Hashable {
        /// The peer's name; nil for an anonymous peer (one that never said `hello`).
        public var name: String?
        /// The session the host gave it in `welcome`: it changes when the peer connects anew, not when it resumes.
        public var sessionID: String
        /// The actions it serves to the host.
        public var actions: [String]
        /// Its features, such as `"evaluate"`.
        public var features: [String]
        /// The hash of its catalogue (SPEC 7.8), when it sent one: it changes when its actions' contract does.
        public var catalogue: String? = nil
        /// The broadcast topics it subscribed to (SPEC 7.15).
        public var topics: Set<String> = []
        /// Its CURVE public key (Z85), when the host requires CURVE (SPEC 2.1): what its jobs belong to (SPEC 7.16).
        public var curveKey: String? = nil
    }

    private let state: Mutex<Info>
    private let defaultTimeout: Duration
    let link: Link

    init(info: Info, link: Link, defaultTimeout: Duration) {
        state = Mutex(info)
        self.link = link
        self.defaultTimeout = defaultTimeout
    }

    /// What the peer said of itself in its latest `hello`.
    public var info: Info { state.withLock { $0 } }
    /// The peer's name; nil for an anonymous peer.
    public var name: String? { info.name }
    /// The peer's current session id (see ``Info/sessionID``).
    public var sessionID: String { info.sessionID }
    /// Whether the peer is still connected.
    public var isConnected: Bool { !link.isClosed }

    func update(_ change: (inout Info) -> Void) { state.withLock { change(&$0) } }

    public func call(_ action: String, _ payload: JSONValue, timeout: Duration?,
                     onProgress: (@Sendable (JSONValue) -> Void)?) async throws -> JSONValue {
        let info = self.info
        // Only what the peer said it serves is sent; reserved actions go to any named peer.
        let offered = info.name != nil && (action.hasPrefix("$") || info.actions.contains(action))
        guard offered else {
            let who = info.name.map { "peer '\($0)'" } ?? "an anonymous peer"
            throw BridgeError(.unknownAction, "\(who) does not serve '\(action)'")
        }
        return try await link.call(action, payload, timeout: timeout ?? defaultTimeout, onProgress: onProgress)
    }

    public func post(_ action: String, _ payload: JSONValue) throws {
        try link.post(action, payload)
    }
}
