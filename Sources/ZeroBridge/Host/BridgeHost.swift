import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import ZeroMQ

/// A ZeroBridge host: binds a ROUTER socket, gives each connecting peer a session, serves the actions
/// registered on it, and calls into its peers.
///
/// For example:
/// ```swift
/// let host = BridgeHost(configuration: .init(endpoint: "tcp://127.0.0.1:5555", name: "etl"))
/// try host.handle(ImportFile.self) { payload, request in
///     try await request.progress(.init(done: 1, total: 2))
///     return .init(records: 2)
/// }
/// try await host.run()   // until graceful shutdown (a swift-service-lifecycle `Service`)
/// ```
public final class BridgeHost: BridgeHandling, Service, @unchecked Sendable {
    /// Where a host listens and what it allows: endpoint, name, limits, timeouts, security and jobs.
    ///
    /// Only the endpoint is required; every limit has a default that bounds what one peer can cost the host.
    public struct Configuration: Sendable {
        /// Where to bind: `tcp://127.0.0.1:5555` (`*` for any port), `ipc:///path`, or `inproc://name`.
        public var endpoint: String
        /// The host's name in `welcome`.
        public var name: String
        /// Context every peer gets in `welcome.info` (an object: version, platform, features); nil sends none.
        public var info: [String: JSONValue]?
        /// The heartbeat interval offered to peers that do not ask for one.
        public var heartbeat: Duration = .seconds(5)
        /// The timeout of host -> peer calls that set none.
        public var defaultTimeout: Duration = .seconds(30)
        /// Larger messages (body and attachments) are answered `too_large`.
        public var maxMessageBytes: Int = 16 << 20
        /// Requests one session may have running at once; more are answered `overloaded`.
        public var maxInFlight: Int = 4096
        /// Requests and events all sessions together may have running at once (more are answered `overloaded`):
        /// what bounds the memory of work in flight (a few KB each) whatever the number of connections.
        public var maxInFlightTotal: Int = 16_384
        /// Sessions the host keeps at once (SPEC 6, Bounds): a new connection's first message past it is answered
        /// `overloaded` and opens none.
        public var maxSessions: Int = 10_000
        /// How long a named session whose connection closed keeps its name and memory, waiting to be resumed (SPEC 6):
        /// this, or 3 heartbeats if shorter, whatever heartbeat its peer asked for.
        public var sessionGrace: Duration = .seconds(30)
        /// Connections kept open at once (SPEC 7.17); nil: the open-file limit less a quarter of it (at least 64). One
        /// accepted past it is shed.
        public var maxConnections: Int?
        /// How long a graceful shutdown waits for requests in flight before cancelling them.
        public var drainTimeout: Duration = .seconds(5)
        /// WebSocket connections for browser peers and the page they load (SPEC 2.2); nil: ZeroMQ only. With it, the
        /// host has a connection key by default (``Signing/automatic``), for ZeroMQ peers too.
        public var webSocket: WebSocketOptions?
        /// Where to write a connection file (mode 0600) for peers, if anywhere.
        public var connectionFile: String?
        /// Encryption and peer keys (SPEC 2.1); nil: plaintext, and any process that reaches the endpoint may connect.
        public var curve: Curve?
        /// Signed connections (SPEC 3.1): by default, a new key when the host writes a connection file.
        public var signing: Signing = .automatic
        /// Where and how jobs are journaled (SPEC 7.16); used once a job action is registered (`job(_:replacing:_:)`, in ZeroBridgeJobs).
        public var jobs = JobsConfiguration()
        /// Shares a context with other sockets (needed for `inproc://`); nil makes one. With ``curve``, the host runs
        /// the context's ZAP handler, so the context must not have one already.
        public var context: Context?
        /// Where the host logs sessions, refusals and handler failures (swift-log; the app chooses the backend).
        public var logger = Logger(label: "zerobridge.host")
        /// Who may read the host's `$stats` snapshot (SPEC 7.8): by default nobody.
        public var statsAccess = StatsAccess.nobody
        /// Whether a handler's unexpected error (neither a ``BridgeError`` nor ``BridgeErrorConvertible``) reaches
        /// the caller with its description. Off by default: the caller gets `handler_error` naming the error's type,
        /// and the description (which may name internal paths) only goes to ``logger``.
        public var revealsErrorDescriptions = false
        /// Which requests and events run in a span when a tracer is bootstrapped (SPEC 7.18): all of them, or only
        /// those whose caller sampled their trace.
        public var tracedRequests = TracedRequests.all

        /// A configuration that binds `endpoint` (`tcp://127.0.0.1:*` picks a free port, `ipc://path` a local
        /// socket) and says `name` in its `welcome`, with every other setting at its default.
        public init(endpoint: String, name: String = "zerobridge") {
            self.endpoint = endpoint
            self.name = name
        }
    }

    /// Whether every message must be signed with a connection key (SPEC 3.1).
    public enum Signing: Sendable {
        /// A new random key when the host writes a connection file (peers read it from there) or listens for
        /// WebSocket connections (the page gets it injected); none otherwise.
        case automatic
        /// No signing, even with a connection file: for a host only trusted local processes can reach.
        case none
        /// This key (written into the connection file when there is one): peers that already hold it keep working
        /// across host restarts.
        case key(ConnectionKey)
    }

    /// CURVE (ZeroMQ RFC 26) for the host: its key pair, and which peer keys may connect.
    public struct Curve: Sendable {
        /// The host's own key pair: peers need its public key (`serverKey`), which the connection file carries.
        public var keyPair: CurveKeyPair
        /// The public keys (Z85) of the peers that may connect; nil: any key (the traffic is still encrypted).
        public var allowedPeerKeys: Set<String>?

        /// CURVE with this key pair; `allowedPeerKeys` nil lets any key connect (encrypted, not authenticated).
        public init(keyPair: CurveKeyPair, allowedPeerKeys: Set<String>? = nil) {
            self.keyPair = keyPair
            self.allowedPeerKeys = allowedPeerKeys
        }
    }

    /// A peer arriving or leaving.
    public enum PeerEvent: Sendable {
        /// A peer said `hello` and was welcomed (a new session, or one resumed under its resume token).
        case joined(RemotePeer)
        /// A peer's session ended: it said `bye`, stopped answering heartbeats or was refused; `reason` says which.
        case left(RemotePeer, reason: BridgeError)
    }

    /// The configuration the host was created with.
    public let configuration: Configuration
    public let handlers = HandlerTable()
    /// What ZeroBridgeJobs and ZeroBridgeSupervision add to the host, once used (see ``HostExtension``).
    let extensions = HostExtensions()
    private let started = Mutex<Started?>(nil)
    private let directory = Mutex(Directory())

    private struct Started {
        let thread: SocketThread
        let endpoint: String
        let context: Context
        let zap: ZAPHandler?
        var webSocket: WebSocketListener?
    }

    /// Named peers, readable from any thread, and who waits for which.
    private struct Directory {
        var peers: [String: RemotePeer] = [:]
        var waiters: [UUID: (name: String, continuation: CheckedContinuation<RemotePeer, Error>)] = [:]
        var watchers: [UUID: AsyncStream<PeerEvent>.Continuation] = [:]
    }

    // Confined to the socket thread (set before it starts).
    private var socketThread: SocketThread?
    var sessions: [[UInt8]: Session] = [:]
    private var sessionsByID: [String: Session] = [:]
    /// Each name's one live session (SPEC 6, Names).
    private var sessionsByName: [String: Session] = [:]
    private var sessionCounter = 0
    /// Which connection each peer's messages come over, which have closed, and which are retired.
    private var connections = Connections()
    /// The endpoint bound, released on shutdown. On the thread.
    private var listeningEndpoint: String?
    /// Connections against the open-file limit (SPEC 7.17). On the thread.
    private var descriptors: DescriptorBudget?
    /// Where answers to connections without a session go (refused openings, a full host): one bounded queue.
    private let strangers = Outbox(shared: true)
    /// Whether sessions ended since the heap was last trimmed, and when that was (see ``tick(_:)``).
    private var sessionsEndedSinceTrim = false
    private var lastTrim = ContinuousClock.now
    /// When a flood-prone condition (shedding, running out of descriptors) was last logged at warning level.
    private var lastSheddingWarning = ContinuousClock.now - .seconds(60)
    /// The socket's connection events; read on the thread's loop, and by ``releaseEndpoint()`` once it has ended.
    private var monitor: SocketMonitor?
    /// Channels of keyed connections (SPEC 3.1); nil when the host runs without a key.
    private var keyed: KeyedConnections?
    /// When a refused message was last logged at warning level (the rest go to debug, so a flood cannot flood logs).
    private var lastRefusalWarning = ContinuousClock.now - .seconds(60)
    private let refusedCount = Atomic<Int>(0)
    /// What all sessions run at once (Configuration.maxInFlightTotal); counted by their links, on the thread.
    private let inFlightTotal: Link.HostWideInFlight
    /// What the host counts (issue 27): the totals `$stats` reads, and metrics when a backend is bootstrapped.
    /// On the thread, with the links that count in it.
    let telemetry = Telemetry()
    /// When the host was made, for its age in `$stats`.
    let startedAt = ContinuousClock.now
    private let keyInUse = Mutex<ConnectionKey?>(nil)

    /// A host that will serve `configuration`; nothing is bound until ``start()`` (or ``run()``).
    public init(configuration: Configuration) {
        self.configuration = configuration
        inFlightTotal = Link.HostWideInFlight(limit: configuration.maxInFlightTotal)
        try? handlers.add("$evaluate", replacing: true) { _, _ in
            throw BridgeError(.notAllowed, "a ZeroBridge host does not evaluate scripts")
        }
        try? handlers.add("$stats", replacing: true) { [weak self] _, request in
            guard let self else { throw BridgeError(.peerLost, "the host is gone") }
            return try await stats(for: request)
        }
    }

    /// Messages refused for a missing, wrong or replayed signature (SPEC 3.1) since the host started.
    public var refusedMessages: Int { refusedCount.load(ordering: .relaxed) }

    /// The key every message must be signed with, when the host requires one (written to its connection file).
    public var connectionKey: ConnectionKey? { keyInUse.withLock { $0 } }

    /// The port of the WebSocket listener; nil before ``start()`` or without one.
    var webSocketPort: Int? { started.withLock { $0?.webSocket?.port } }

    /// The endpoint actually bound (a `*` port resolved); nil before ``start()``.
    public var boundEndpoint: String? { started.withLock { $0?.endpoint } }

    // MARK: Starting and stopping

    /// Binds the socket and starts serving. ``run()`` does this too; calling it first surfaces bind errors early.
    public func start() throws {
        try started.withLock { started in
            guard started == nil else { return }
            handlers.warnAboutReleasedHandlers(configuration.logger)
            Self.raiseOpenFileLimit(logger: configuration.logger)
            let context = try configuration.context ?? Context()
            let router = try Socket(.router, context: context)
            // Unknown routing ids fail loudly instead of vanishing. libzmq queues at most 1000 messages per connection
            // (then refuses, and the session's outbox holds the rest under its own bound: SPEC 7.13), and drops the
            // connection of a peer whose single frame is over the size limit and its slack (SPEC 7.10).
            try router.set(.routerMandatory(true), .sendHighWaterMark(1000), .receiveHighWaterMark(1000),
                           .maxMessageSize(Int64(configuration.maxMessageBytes) + 65536), .linger(milliseconds: 1000))
            let zap = try configuration.curve.map { curve in try Self.requireCurve(curve, on: router, logger: configuration.logger) }
            do {
                try Self.bindPrivately(router, configuration.endpoint)
            } catch {
                zap?.stop()
                throw error
            }
            let endpoint = try router.lastEndpoint
            if configuration.curve == nil, Self.isTCPOffLoopback(endpoint) {
                configuration.logger.warning("listening off loopback without CURVE: anyone who reaches this address can connect, and traffic is plaintext",
                                             metadata: ["endpoint": "\(endpoint)"])
            }
            // Disconnects end sessions, anonymous ones with work in flight included (SPEC 7.6); failed accepts
            // are how running out of file descriptors shows; `closed` tells when shutting down freed the endpoint.
            let monitor = try SocketMonitor(watching: router, events: [.accepted, .disconnected, .acceptFailed, .closed])
            let key: ConnectionKey? = switch configuration.signing {
            case .automatic: configuration.connectionFile == nil && configuration.webSocket == nil ? nil : .generate()
            case .none: nil
            case .key(let key): key
            }
            // A page of an allowed origin is not proof enough (SPEC 2.2): the key is what lets a connection in.
            if let options = configuration.webSocket, key == nil, !options.allowsUnkeyedConnections {
                throw BridgeError(.notAllowed, "WebSocket connections need a connection key: give the host one, or allow unkeyed connections for development")
            }
            if let options = configuration.webSocket, options.idleTimeout <= .zero || options.maxPendingConnections < 1 {
                throw BridgeError(.notAllowed, "WebSocketOptions: idleTimeout must be above zero and maxPendingConnections at least 1 (got \(options.idleTimeout), \(options.maxPendingConnections)): with less, every connection would be closed before it could upgrade")
            }
            // An abstract socket has no file, so no permissions: unlike a path socket, it keeps no local user out.
            if configuration.curve == nil, key == nil, Self.isAbstractIPC(endpoint) {
                configuration.logger.warning("listening on an abstract ipc socket (ipc://@) without a key or CURVE: any local user can connect; use an ipc:// path, a connection file (key) or CURVE",
                                             metadata: ["endpoint": "\(endpoint)"])
            }
            // Jobs a killed host left running are resumed or interrupted before anything is served (SPEC 7.16).
            for added in extensions.all { try added.hostStarting(self) }
            // A key given to the host may have served an earlier run, whose history of openings is gone: openings
            // signed before this start are refused (SPEC 3.1). A generated key is new to this run.
            let notBefore: Int64 = if case .key = configuration.signing { Int64(WallClock.milliseconds) } else { .min }
            keyed = key.map { KeyedConnections(key: $0, notBefore: notBefore) }
            descriptors = DescriptorBudget(maxConnections: configuration.maxConnections)
            keyInUse.withLock { $0 = key }
            let thread = try SocketThread(socket: router)
            // Before the thread starts: what WebSocket peers send meanwhile waits in its queue of jobs.
            let webSocket = try configuration.webSocket.map { options in
                do {
                    return try startWebSocketListener(options, thread: thread, key: key, budget: descriptors!.others)
                } catch {
                    zap?.stop()
                    descriptors?.release()
                    throw error
                }
            }
            started = Started(thread: thread, endpoint: endpoint, context: context, zap: zap, webSocket: webSocket)
            socketThread = thread
            listeningEndpoint = endpoint
            self.monitor = monitor
            thread.start(name: "zerobridge-host", owner: .init(
                received: { [self] frames in received(frames) },
                tick: { [self] now in tick(now) },
                stopped: { [self] in stopped() },
                monitored: (monitor, { [self] event in connectionEvent(event) }),
                closing: { [self] in releaseEndpoint() }))
            if let path = configuration.connectionFile { try writeConnectionFile(path, endpoint: endpoint, key: key) }
            configuration.logger.info("listening", metadata: ["endpoint": "\(endpoint)"])
            if let webSocket, let options = configuration.webSocket {
                configuration.logger.info("listening for WebSocket connections", metadata: [
                    "endpoint": "ws://\(WebSocketOptions.authority(options.host, webSocket.port))\(WebSocketListener.bridgePath)"])
            }
        }
        // Outside the lock: launching supervised peers reads the endpoint and key bound above.
        for added in extensions.all { added.hostStarted(self) }
    }

    /// Serves until graceful shutdown or cancellation, then shuts down. A started host runs until it is shut
    /// down, whether or not anything else still holds it.
    public func run() async throws {
        try start()
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Stops taking requests, waits up to the drain timeout for those in flight, cancels the rest (each still
    /// answered), says `bye` to named peers and closes the socket.
    public func shutdown() async {
        guard let thread = started.withLock({ $0?.thread }) else { return }
        thread.perform { [self] in for session in sessions.values { session.link.accepting = false } }
        // Jobs first: requests attached to them are answered with the jobs' outcomes rather than drained.
        for added in extensions.all { await added.hostDraining(self) }
        let deadline = ContinuousClock.now + configuration.drainTimeout
        while ContinuousClock.now < deadline {
            let busy = await onThread(thread) { [self] in sessions.values.contains { $0.link.requestsInFlight > 0 } }
            if !busy { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        // While the socket is open, so that each launched peer is told bye before its process is stopped.
        for added in extensions.all { await added.hostClosing(self) }
        await thread.stop()
        // After the thread's last byes were handed to the connections: they are written before each close frame.
        await started.withLock { $0?.webSocket }?.stop()
        let zap = started.withLock { started in
            defer { started = nil }
            return started?.zap
        }
        zap?.stop()
        if let path = configuration.connectionFile { try? FileManager.default.removeItem(atPath: path) }
    }

    /// On the thread, as it stops: whatever is still in flight is answered, then every session ends.
    private func stopped() {
        for session in sessions.values {
            session.link.cancelIncoming("the host is shutting down")
            if session.name != nil { session.link.send(.bye) }
            end(session, BridgeError(.cancelled, "the host is shutting down"))
            session.link.outbox.signAwaiting()  // before the channels go, below
        }
        sessions.removeAll()
        for session in sessionsByID.values { telemetry.sessionEnded(transport: session.transport) }
        sessionsByID.removeAll()
        sessionsByName.removeAll()
        keyed = keyed?.withoutChannels()
        descriptors?.release()
        // Finished outside the lock: finishing a stream runs its termination handler, which takes the lock.
        let (waiters, watchers) = directory.withLock { directory in
            defer { directory.waiters.removeAll(); directory.watchers.removeAll() }
            return (directory.waiters.values.map(\.continuation), Array(directory.watchers.values))
        }
        for waiter in waiters { waiter.resume(throwing: BridgeError(.cancelled, "the host is shutting down")) }
        for watcher in watchers { watcher.finish() }
    }

    /// When ``shutdown()`` returns, the endpoint is free: a host started on it at once must not fail to bind a tcp
    /// port, nor have its ipc socket file removed under it. libzmq closes a listener (and removes the file) on its
    /// I/O thread, after `zmq_close` has returned, so the host unbinds and waits for the listener's `closed` event.
    /// Unbinding also ends the connections accepted there (lingering to deliver what was sent): hence only once the
    /// last `bye` is handed to libzmq.
    private func releaseEndpoint() {
        guard let endpoint = listeningEndpoint, let monitor,
              endpoint.hasPrefix("tcp://") || endpoint.hasPrefix("ipc://") else { return }
        do {
            try socketThread?.unbind(endpoint)
        } catch {
            return configuration.logger.warning("could not unbind", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
        }
        // Bounded: an I/O thread starved for this long leaves the endpoint to be freed when it runs.
        let deadline = ContinuousClock.now + .seconds(5)
        while case let left = deadline - .now, left > .zero {
            guard let event = try? monitor.next(timeoutMilliseconds: Int(left / .milliseconds(1)) + 1) else { break }
            if event.kind == .closed { return }
        }
        configuration.logger.warning("the listener did not report closing within 5 s", metadata: ["endpoint": "\(endpoint)"])
    }

    /// Ends the named peer's session, if it has one (SPEC 10.1: a supervised peer's process is gone, or is being
    /// stopped, `bye` first when `sayingBye`): its calls in flight fail with `reason`, and its connection is retired,
    /// so the name is free for the peer's next process at once instead of after the heartbeat runs out.
    package func endSession(named name: String, _ reason: BridgeError, sayingBye: Bool) async {
        guard let thread = started.withLock({ $0?.thread }) else { return }
        await onThread(thread) { [self] in
            guard let session = sessionsByName[name] else { return }
            if sayingBye { session.link.send(.bye) }
            forget(session)
            connections.retire(session.routingID)
            end(session, reason)
            if !sayingBye { discardQueued(for: session) }
        }
    }

    /// What `$stats` reads on the thread (SPEC 7.8): the sessions, longest-lived first, and the telemetry's counts.
    func threadSnapshot() async -> ThreadSnapshot? {
        guard let thread = started.withLock({ $0?.thread }) else { return nil }
        return await onThread(thread) { [self] in
            let now = ContinuousClock.now
            let listed = sessionsByID.values.sorted { $0.openedAt < $1.openedAt }.prefix(ThreadSnapshot.maxSessions).map {
                ThreadSnapshot.SessionSummary(id: $0.id, name: $0.name, transport: $0.transport.rawValue,
                                              age: now - $0.openedAt, inFlight: $0.link.requestsInFlight)
            }
            return ThreadSnapshot(sessions: listed, sessionCount: sessionsByID.count, inFlight: telemetry.inFlight,
                                  eventsInFlight: telemetry.eventsInFlight, totals: telemetry.totals)
        }
    }

    /// The bytes each session has queued for its peer and libzmq has not taken (flow control, SPEC 7.13).
    func sessionOutboxBytes() async -> [Int] {
        guard let thread = started.withLock({ $0?.thread }) else { return [] }
        return await onThread(thread) { [self] in sessions.values.map { $0.link.outbox.queuedBytes } }
    }

    // MARK: Peers

    /// The named peers connected now.
    public var peers: [RemotePeer] { directory.withLock { Array($0.peers.values) } }

    /// The peer that said `hello` with this name, waiting for it to connect; throws `timeout` when it does not.
    public func peer(named name: String, waitingUpTo timeout: Duration = .seconds(5)) async throws -> RemotePeer {
        let id = UUID()
        return try await withCheckedThrowingContinuation { continuation in
            let found = directory.withLock { directory -> RemotePeer? in
                if let peer = directory.peers[name] { return peer }
                directory.waiters[id] = (name, continuation)
                return nil
            }
            if let found { return continuation.resume(returning: found) }
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                let waiter = self?.directory.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(throwing: BridgeError(.timeout, "no peer named '\(name)' connected within \(timeout)"))
            }
        }
    }

    /// What a broadcast reached: the named peers it was sent to, and those skipped because their outgoing queue
    /// was over its bound (SPEC 7.15), each by name.
    public struct BroadcastReport: Sendable, Equatable {
        /// The names of the peers the event was queued for.
        public var delivered: [String]
        /// The names of the peers that did not get it because they had not read earlier broadcasts (SPEC 7.15).
        public var skipped: [String]
    }

    /// Sends the event `action` to every named peer, or with `topic` to those subscribed to it (SPEC 7.15): the
    /// `evaluateJavaScript`-on-every-page role. A peer whose queue is full is skipped (and logged) rather than
    /// waited for, so one slow peer never delays the others; copies to one peer keep the order of broadcasts.
    ///
    /// For example:
    /// ```swift
    /// let report = try await host.broadcast("catalogChanged", ["records": 120], topic: "catalog")
    /// ```
    @discardableResult
    public func broadcast(_ action: String, _ payload: JSONValue = nil, topic: String? = nil) async throws -> BroadcastReport {
        guard Message.isValidName(action), topic.map(Message.isValidName) != false else {
            throw BridgeError(.invalidPayload, "an action or topic name has 1 to \(Message.maxNameLength) characters")
        }
        guard let thread = started.withLock({ $0?.thread }) else {
            throw BridgeError(.peerLost, "the host is not running: nothing to broadcast to")
        }
        // Encoded once for every copy; refused before any copy goes (SPEC 7.14).
        let body = try Message.event(.init(action: action, payload: payload, topic: topic, trace: TraceHeaders.current))
            .frames(refusing: payload, at: "payload", as: .invalidPayload)
        return await onThread(thread) { [self] in deliver(body, action: action, topic: topic) }
    }

    /// Broadcasts a typed event; see ``broadcast(_:_:topic:)``.
    @discardableResult
    public func broadcast<A: BridgeAction>(_ action: A.Type, _ payload: A.Payload, topic: String? = nil) async throws -> BroadcastReport {
        try await broadcast(A.name, try JSONValueEncoder().encode(payload), topic: topic)
    }

    /// On the thread: one copy of the encoded event to each named session that qualifies.
    private func deliver(_ body: [[UInt8]], action: String, topic: String?) -> BroadcastReport {
        var report = BroadcastReport(delivered: [], skipped: [])
        let bytes = body.reduce(0) { $0 + $1.count }
        for (name, session) in sessionsByName.sorted(by: { $0.key < $1.key }) where !session.link.isClosed {
            if let topic, !session.topics.contains(topic) { continue }
            guard session.link.outbox.queuedBytes <= Outbox.maxQueuedBytes, session.link.broadcasts.hasRoom else {
                configuration.logger.warning("broadcast skipped a peer whose queue is full",
                                             metadata: ["peer": "\(name)", "action": "\(action)", "topic": "\(topic ?? "-")",
                                                        "unconfirmed_bytes": "\(session.link.broadcasts.unconfirmedBytes)"])
                report.skipped.append(name)
                continue
            }
            session.link.send(body)
            session.link.broadcasts.sent(bytes)
            // The pong to a ping sent after the copy shows the peer read it (SPEC 7.15).
            if !session.link.broadcasts.awaitsPong { session.link.sendPing() }
            report.delivered.append(name)
        }
        telemetry.broadcast(delivered: report.delivered.count, skipped: report.skipped.count)
        return report
    }

    /// Peers joining and leaving, from now on, until the host shuts down.
    public func peerEvents() -> AsyncStream<PeerEvent> {
        let (stream, continuation) = AsyncStream<PeerEvent>.makeStream()
        let id = UUID()
        directory.withLock { $0.watchers[id] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.directory.withLock { $0.watchers.removeValue(forKey: id) } }
        return stream
    }

    private func announce(_ event: PeerEvent) {
        typealias Notified = ([AsyncStream<PeerEvent>.Continuation], [CheckedContinuation<RemotePeer, Error>])
        let (watchers, waiters) = directory.withLock { directory -> Notified in
            switch event {
            case .joined(let peer):
                guard let name = peer.name else { return ([], []) }
                directory.peers[name] = peer
                let ready = directory.waiters.filter { $0.value.name == name }
                for key in ready.keys { directory.waiters[key] = nil }
                return (Array(directory.watchers.values), ready.values.map(\.continuation))
            case .left(let peer, _):
                if let name = peer.name, directory.peers[name] === peer { directory.peers[name] = nil }
                return (Array(directory.watchers.values), [])
            }
        }
        for waiter in waiters { if case .joined(let peer) = event { waiter.resume(returning: peer) } }
        for watcher in watchers { watcher.yield(event) }
    }

    // MARK: On the thread

    private func received(_ frames: [Frame]) {
        let routingID = frames[0].bytes
        if frames.count > 1, let fd = frames[1].sourceFileDescriptor {
            // A new connection's first message: the disconnects of earlier connections over its descriptor were
            // reported before the descriptor was free, so reading the pending events now attributes them correctly.
            if connections.isNew(routingID, over: fd), let monitor {
                while let event = try? monitor.nextAvailable() { connectionEvent(event) }
            }
            if let closed = connections.message(over: fd, from: routingID) { connectionClosed(closed) }
        }
        if keyed != nil {
            switch acceptSignature(frames, from: routingID) {
            case nil: return
            case .message?: break
            case .batch?: return receivedBatch(frames, from: routingID)
            }
        } else if frames.count > 2, frames[1].count == 1, frames[1].withUnsafeBytes({ $0[0] == Signature.batchForm }) {
            // Without a key, frame 0 is ignored but for the one byte that marks a batch (SPEC 3.3).
            let size = frames.dropFirst(2).reduce(0) { $0 + $1.count }, bound = configuration.maxMessageBytes + KeyedConnections.batchSlackBytes
            guard size <= bound else {
                return refuse(routingID, BridgeError(.tooLarge, "the batch has \(size) bytes; the limit is \(bound)"))
            }
            return receivedBatch(frames, from: routingID)
        }
        process(frames.dropFirst(), from: routingID, metadata: frames.count > 1 ? frames[1] : nil)
    }

    /// Answers a message of a connection with an error, through its session when it has one.
    private func refuse(_ routingID: [UInt8], _ error: BridgeError) {
        if let session = sessions[routingID] { session.link.refuse(nil, error) } else { answerWithoutSession(routingID, error) }
    }

    /// A batch (SPEC 3.3), on a keyed connection signed for its channel: its messages are read in order, each as if
    /// it had come alone; one that is not a message is answered on its own, and a batch that is not a batch once.
    private func receivedBatch(_ frames: [Frame], from routingID: [UInt8]) {
        guard frames.count == 3 else {
            return refuse(routingID, BridgeError(.badMessage, "a batch is frame 0 and frame 1; got \(frames.count - 1) frames (SPEC 3.3)"))
        }
        let refusal = frames[2].withUnsafeBytes { batch in
            WebSocketFraming.readSignedBatch(batch) { entry in
                // A message of the batch may end the session (`bye`) and with it a keyed connection's channel: what
                // follows it is not read, as it would be refused had it come alone.
                guard keyed?.isOpen(routingID) ?? true else {
                    configuration.logger.debug("the rest of a batch not read: its channel closed while it was read")
                    return false
                }
                switch entry {
                case .failure(let refusal): refuse(routingID, BridgeError(.badMessage, refusal.reason))
                case .success(let parts): process(parts, from: routingID, metadata: frames[1])
                }
                return true
            }
        }
        if let refusal { refuse(routingID, BridgeError(.badMessage, refusal.reason)) }
    }

    /// One message whose signature, if the host has a key, is accepted: `frames` are the frames as the peer sent them
    /// (read in place when they came in a batch); `metadata`, a frame of the ZeroMQ message that brought them.
    private func process<Parts: RandomAccessCollection>(_ frames: Parts, from routingID: [UInt8], metadata: Frame?)
    where Parts.Element: ContiguousBytes {
        guard let session = sessions[routingID] ?? openSessionWithinBound(routingID, metadata: metadata) else { return }
        guard let message = session.link.read(frames, maxBytes: configuration.maxMessageBytes) else { return }
        if connections.isRetired(routingID) {
            // A retired connection: a `hello` starts over with a new session; anything else was sent before the peer
            // knew it was lost (or was held up in the network), so it is not processed, and `bye` tells a peer that
            // is alive after all to reconnect (SPEC 6).
            guard case .hello = message else {
                configuration.logger.info("message on a retired connection not processed; answered bye",
                                          metadata: ["type": "\(message.kind.rawValue)"])
                session.link.send(.bye)
                forget(session)
                session.link.close(BridgeError(.peerLost, "the connection was retired"))
                return
            }
            connections.restore(routingID)
        }
        switch message {
        case .hello(let hello):
            greet(session, hello)
        case .bye:
            leave(session, BridgeError(.peerLost, "the peer said bye"))
        case .welcome:
            session.link.refuse(nil, BridgeError(.badMessage, "'welcome' is sent by the host, not to it"))
        default:
            session.link.receive(message)
        }
    }

    /// The connection's new session, unless the host keeps its most (SPEC 6, Bounds): then the message is answered
    /// `overloaded` and nothing is kept for the connection.
    private func openSessionWithinBound(_ routingID: [UInt8], metadata: Frame?) -> Session? {
        guard sessions.count < configuration.maxSessions else {
            warnAtMostEverySecond("session refused: the host keeps its most", ["sessions": "\(sessions.count)"])
            answerWithoutSession(routingID, BridgeError(.overloaded, "the host keeps at most \(configuration.maxSessions) sessions: try again later"))
            keyed?.close(routingID)
            return nil
        }
        // With CURVE, the ZAP handler made the peer's public key the connection's User-Id.
        return openSession(routingID, peerKey: configuration.curve == nil ? nil : metadata?.metadata("User-Id"))
    }

    /// An answer with `"id": null` to a connection that has no session, signed when it has a channel (SPEC 3.1) and
    /// `unsigned` is not asked for. Such answers share one queue; past 1 MiB (connections that do not read them) they
    /// are logged, not queued.
    func answerWithoutSession(_ routingID: [UInt8], _ error: BridgeError, unsigned: Bool = false) {
        telemetry.refused(error.code)
        guard strangers.queuedBytes < 1 << 20 else {
            return configuration.logger.debug("answer not queued: 1 MiB of answers to connections without a session wait",
                                              metadata: ["code": "\(error.code.rawValue)"])
        }
        let frames = Message.response(.init(id: nil, outcome: .failure(error))).frames()
        socketThread!.send(frames, after: [routingID, unsigned ? [] : keyed?.sign(for: routingID, frames) ?? []],
                           via: strangers)
    }

    private func warnAtMostEverySecond(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let level: Logger.Level = now - lastSheddingWarning >= .seconds(1) ? .warning : .debug
        if level == .warning { lastSheddingWarning = now }
        configuration.logger.log(level: level, message, metadata: metadata)
    }

    /// SPEC 3.1: whether a message (or a batch, 3.3) on a keyed connection is signed for it, checked by its size
    /// first; nil when it is not. Such a one is not processed: it is counted, logged, and answered with an unsigned
    /// `unauthorized`.
    private func acceptSignature(_ frames: [Frame], from routingID: [UInt8]) -> KeyedChannel.Accepted? {
        let body = frames.dropFirst(2)  // signed in place, not copied
        let verdict: KeyedConnections.Verdict = body.isEmpty
            ? .refused("a message on a keyed connection is a signature and a body")
            : frames[1].count > Signature.maxFrameBytes
            ? .refused("not a signature: frame 0 has \(frames[1].count) bytes")  // not copied, not parsed
            : keyed!.receive(on: routingID, frame0: frames[1], size: body.reduce(0) { $0 + $1.count },
                             maxMessageBytes: configuration.maxMessageBytes, frames: body,
                             now: Int64(WallClock.milliseconds)) {
                (try? JSONValue.parse(body[body.startIndex].bytes))?["type"] == "hello"
            }
        if case .tooLarge(let reason) = verdict {
            let error = BridgeError(.tooLarge, reason)
            refuse(routingID, error)
            return nil
        }
        if verdict == .accepted { return .message }
        if verdict == .acceptedBatch { return .batch }
        guard case .refused(let reason, let clockSkewMs) = verdict else { return nil }
        refusedCount.add(1, ordering: .relaxed)
        let now = ContinuousClock.now
        let level: Logger.Level = now - lastRefusalWarning >= .seconds(1) ? .warning : .debug
        if level == .warning { lastRefusalWarning = now }
        configuration.logger.log(level: level, "message refused: \(reason)",
                                 metadata: ["connection": "\(Signature.hex(routingID))", "refused_so_far": "\(refusedMessages)"])
        // Unsigned, and without opening a session: a connection that never opens a channel holds nothing.
        let data: JSONValue? = clockSkewMs.map { ["clock_skew_ms": .int(Int($0)), "window_ms": .int(Int(ClockSkew.windowMs))] }
        answerWithoutSession(routingID, BridgeError(.unauthorized, reason, data: data), unsigned: true)
        return nil
    }

    /// A connection closed, or could not be accepted. Events are read before the messages that came after them, so
    /// a file descriptor reused by a new connection is not mistaken for the closed one.
    private func connectionEvent(_ event: SocketMonitor.Event) {
        let value = Int32(bitPattern: event.value)
        switch event.kind {
        case .accepted:
            guard descriptors?.accepted(value) == false else { return }
            warnAtMostEverySecond("connection shed: the host keeps its most connections (SPEC 7.17)",
                                  ["connections": "\(descriptors?.connectionCount ?? 0)", "bound": "\(descriptors?.bound ?? 0)", "shed_so_far": "\(descriptors?.shedCount ?? 0)"])
        case .disconnected:
            descriptors?.disconnected(value)
            if let closed = connections.disconnected(value) { connectionClosed(closed) }
        case .acceptFailed where [EMFILE, ENFILE].contains(value):
            // The listener stays bound (unbinding would close every connection accepted there): giving up the spare
            // descriptors lets libzmq's next accept through, and new connections are shed until they are back.
            let released = descriptors?.exhausted() ?? false
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            warnAtMostEverySecond("out of file descriptors: shedding new connections; connected peers are kept",
                                  ["open_file_limit": "\(limit.rlim_cur)", "sessions": "\(sessions.count)",
                                   "spares_released": "\(released)"])
        default:
            break
        }
    }

    /// The peer left (`bye`, or a WebSocket close frame: SPEC 2.2): its session ends now, its name is free, and the
    /// connection is not retired (a later message opens a new session).
    private func leave(_ session: Session, _ reason: BridgeError) {
        forget(session)
        end(session, reason)
        discardQueued(for: session)
    }

    /// On the thread: the peer of a WebSocket connection sent a close frame, its word that it is leaving (SPEC 2.2,
    /// decision 50); what it sent before was delivered first.
    func peerClosedConnection(_ routingID: [UInt8], code: Int?) {
        guard let session = sessions[routingID] else { return }
        leave(session, BridgeError(.peerLost, "the peer closed its WebSocket connection (close code \(code.map(String.init) ?? "none"))"))
    }

    /// An anonymous session ends with its connection, and its work with it (SPEC 7.6). A named one waits for its
    /// peer to resume it over a new connection, or is lost by heartbeat (7.7): a reconnect closes the old connection.
    func connectionClosed(_ routingID: [UInt8]) {
        guard let session = sessions[routingID] else { return }
        guard session.name == nil else {
            // Kept for its peer to resume, for the host's grace at most (SPEC 6): see tick.
            if session.connectionClosedAt == nil { session.connectionClosedAt = .now }
            return
        }
        connections.retire(routingID)  // what it sent and was not read yet is not processed
        forget(session)
        end(session, BridgeError(.peerLost, "the peer's connection closed"))
        discardQueued(for: session)
    }

    private func openSession(_ routingID: [UInt8], peerKey: String?) -> Session {
        sessionCounter += 1
        let id = "s\(sessionCounter)-\(UUID().uuidString.prefix(8).lowercased())"
        // On keyed connections every message is signed for its connection's channel as it goes to libzmq (for the
        // connection it goes to: a resumed session moves); nothing is sent unsigned but the refusals above, so a
        // connection without a channel yet gets nothing but those. Without a key, frame 0 is empty, or marks a batch.
        let signer: Outbox.Signer? = keyed == nil ? nil : { [unowned self] envelope, frames, batch in
            batch ? keyed?.signBatch(for: envelope[0], frames[0]) : keyed?.sign(for: envelope[0], frames)
        }
        let session = Session(routingID: routingID, id: id, heartbeat: configuration.heartbeat, thread: socketThread!,
                              handlers: handlers, limits: .init(maxInFlight: configuration.maxInFlight, hostWide: inFlightTotal),
                              logger: configuration.logger, telemetry: telemetry, defaultTimeout: configuration.defaultTimeout,
                              signer: signer)
        session.peerKey = peerKey
        session.transport = socketThread!.isAttached(routingID) ? .websocket : .zmq
        session.remote.update { $0.curveKey = peerKey }
        session.link.revealsErrorDescriptions = configuration.revealsErrorDescriptions
        session.link.tracedRequests = configuration.tracedRequests
        sessions[routingID] = session
        sessionsByID[id] = session
        telemetry.sessionOpened(transport: session.transport)
        // The socket says the peer is not there: its connection closed (SPEC 7.6).
        // Found again by its id, not held weakly: a weak reference would give the session a side table, which makes
        // every retain of it (one per message) take the runtime's slow path.
        session.link.outbox.onUnreachable = { [weak self] in
            guard let self, let session = sessionsByID[id], sessions[session.routingID] === session else { return }
            connectionClosed(session.routingID)
        }
        return session
    }

    private func greet(_ session: Session, _ hello: Message.Hello) {
        var session = session
        // What a session keeps of its hello is bounded (SPEC 6, Bounds); an over-long one changes nothing.
        let declared = [hello.actions, hello.features, hello.topics].joined().reduce(0) { $0 + $1.utf8.count }
        guard declared <= Session.maxDeclaredBytes else {
            return session.link.refuse(nil, BridgeError(.tooLarge, "the hello declares \(declared) bytes of actions, features and topics; at most \(Session.maxDeclaredBytes)"))
        }
        // Resuming: the peer reconnected (a new routing id) and names its earlier session with that session's token;
        // the session, with its calls in flight, continues over the new connection.
        if let wanted = hello.session, wanted != session.id, let earlier = sessionsByID[wanted],
           earlier.name == hello.peer, earlier.link.isClosed == false, earlier.peerKey == session.peerKey,
           ResumeToken.matches(hello.resumeToken, earlier.resumeToken) {
            forget(session, keepingChannel: true)  // the new connection's channel now carries the resumed session
            session.link.close(BridgeError(.peerLost, "replaced by a resumed session"))
            sessions[earlier.routingID] = nil
            keyed?.close(earlier.routingID)
            connections.retire(earlier.routingID)
            socketThread!.discard(earlier.link.outbox)  // queued for the old connection: it is gone
            earlier.routingID = session.routingID
            if earlier.transport != session.transport {
                telemetry.sessionEnded(transport: earlier.transport)
                earlier.transport = session.transport
                telemetry.sessionOpened(transport: earlier.transport)
            }
            earlier.connectionClosedAt = nil
            sessions[earlier.routingID] = earlier
            session = earlier
        } else if let holder = sessionsByName[hello.peer], holder !== session {
            // The name is another live session's: the hello changes nothing (SPEC 6, Names).
            configuration.logger.notice("hello refused: the name is taken",
                                        metadata: ["peer": "\(hello.peer)", "holder": "\(holder.id)", "session": "\(session.id)"])
            session.link.refuse(nil, BridgeError(.nameTaken, "the name '\(hello.peer)' is held by another live session"))
            return
        }
        let wasNamed = session.name != nil
        if let earlierName = session.name, earlierName != hello.peer, sessionsByName[earlierName] === session {
            sessionsByName[earlierName] = nil
        }
        session.name = hello.peer
        sessionsByName[hello.peer] = session
        session.heartbeat = hello.heartbeatMs.map { .milliseconds(min(max($0, 50), 600_000)) } ?? configuration.heartbeat
        session.remote.update { info in
            info.name = hello.peer
            info.actions = hello.actions
            info.features = hello.features
            info.catalogue = hello.catalogue
            info.topics = Set(hello.topics)
        }
        session.topics = Set(hello.topics)
        // Batches (SPEC 3.3): read on every connection (WebSocket ones too, since 1.11), and sent to a peer that
        // said it reads them on this connection.
        session.sendsBatches = hello.features.contains("batch")
        session.link.thread.tick(by: .now + session.heartbeat / 4)
        // Listed before it is welcomed, so a peer that has its welcome is in `peers` (what it is sent next, a call
        // from a watcher included, is handed over after this job and so follows the welcome).
        if !wasNamed { announce(.joined(session.remote)) }
        session.link.send(.welcome(.init(
            host: configuration.name, session: session.id, resumeToken: session.resumeToken, actions: handlers.actionNames,
            heartbeatMs: Int(session.heartbeat / .milliseconds(1)),
            maxMessageBytes: configuration.maxMessageBytes, maxInFlight: configuration.maxInFlight,
            catalogue: handlers.catalogue.hash, info: configuration.info.map(JSONValue.object),
            libraryVersion: zeroBridgeVersion, batch: true)))
    }

    /// The session is over for the host's tables: its connection (and that connection's channel), its id and its
    /// name (which becomes free).
    private func forget(_ session: Session, keepingChannel: Bool = false) {
        if !keepingChannel {
            session.link.outbox.signAwaiting()  // its last words (a bye) are signed while the channel is there
            keyed?.close(session.routingID)
        }
        if sessions[session.routingID] === session { sessions[session.routingID] = nil }
        if sessionsByID[session.id] === session {
            sessionsByID[session.id] = nil
            telemetry.sessionEnded(transport: session.transport)
        }
        if let name = session.name, sessionsByName[name] === session { sessionsByName[name] = nil }
        sessionsEndedSinceTrim = true
    }

    private func end(_ session: Session, _ reason: BridgeError) {
        let remote = session.remote
        session.link.close(reason)
        if session.name != nil { announce(.left(remote, reason: reason)) }
    }

    /// Heartbeats: pings named peers that have heard nothing from the host for an interval, ends sessions silent
    /// for three, and forgets idle anonymous ones.
    private func tick(_ now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        var shortest = configuration.heartbeat
        for session in Array(sessions.values) {
            let silence = now - session.link.lastHeard(asOf: now)
            if session.name != nil {
                shortest = min(shortest, session.heartbeat)
                if let closedAt = session.connectionClosedAt, now - closedAt >= configuration.sessionGrace {
                    forget(session)
                    connections.retire(session.routingID)
                    end(session, BridgeError(.peerLost, "its connection closed \(now - closedAt) ago and it was not resumed"))
                    discardQueued(for: session)
                    continue
                }
                switch session.link.liveness(at: now, interval: session.heartbeat) {
                case .alive: break
                case .ping: session.link.sendPing()
                case .lost(let silence):
                    forget(session)
                    connections.retire(session.routingID)
                    end(session, BridgeError(.peerLost, "no message from the peer for \(silence)"))
                    discardQueued(for: session)
                }
            } else if session.link.isIdle && silence >= configuration.heartbeat * 3 {
                forget(session)
                session.link.close(BridgeError(.peerLost, "an idle anonymous session expired"))
            }
        }
        // Memory that ended sessions held goes back to the system, not only to malloc: glibc keeps freed small
        // blocks (the names of 300 sessions' hellos: 30 MB) for the process otherwise (SPEC 6, Bounds). At most once a
        // second, and only after sessions ended.
        if sessionsEndedSinceTrim, now - lastTrim >= .seconds(1) {
            sessionsEndedSinceTrim = false
            lastTrim = now
            _ = Self.trimHeap?(0)  // malloc_trim says only whether it gave memory back
        }
        return now + max(shortest / 4, .milliseconds(10))
    }

    // MARK: Helpers

    /// Makes `router` a CURVE server, and starts the ZAP handler that checks peer keys and tags each connection
    /// with its peer's key. Before binding: a handshake may start as soon as the socket listens.
    private static func requireCurve(_ curve: Curve, on router: Socket, logger: Logger) throws -> ZAPHandler {
        let zap = try ZAPHandler(context: router.context) { request in
            guard let key = request.curvePublicKey else { return .deny("CURVE only") }
            if let allowed = curve.allowedPeerKeys, !allowed.contains(key) {
                logger.warning("peer key refused: not on the allow-list",
                               metadata: ["peer_key": "\(key)", "address": "\(request.address)"])
                return .deny("key not allowed")
            }
            return .allow(userID: key)
        }
        do {
            try router.set(.curveServer(true), .curveSecretKey(curve.keyPair.secretKey), .zapDomain("zerobridge"))
        } catch {
            zap.stop()
            throw error
        }
        return zap
    }

    /// Binds; an `ipc://` socket file is created with mode 0600, so that other local users cannot connect (SPEC 2.1).
    /// An abstract socket (`ipc://@name`) has no file to protect: `start()` warns about it instead.
    /// libzmq creates the file inside `zmq_bind`, on this thread, so the umask set around the call applies to it.
    private static func bindPrivately(_ socket: Socket, _ endpoint: String) throws {
        guard endpoint.hasPrefix("ipc://"), !isAbstractIPC(endpoint) else { return try socket.bind(endpoint) }
        let previous = umask(0o077)
        defer { umask(previous) }
        try socket.bind(endpoint)
        chmod(String(endpoint.dropFirst("ipc://".count)), 0o600)
    }

    /// A tcp endpoint on an address other than loopback (`*`, `0.0.0.0` and `::` included).
    static func isTCPOffLoopback(_ endpoint: String) -> Bool {
        guard endpoint.hasPrefix("tcp://") else { return false }
        var address = endpoint.dropFirst("tcp://".count)
        if let colon = address.lastIndex(of: ":") { address = address[..<colon] }
        let host = address.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return !(host == "localhost" || host == "::1" || host.hasPrefix("127."))
    }

    /// `ipc://@name`: Linux's abstract namespace, a socket without a file in the file system.
    static func isAbstractIPC(_ endpoint: String) -> Bool { endpoint.hasPrefix("ipc://@") }

    /// Each peer connection takes a file descriptor: the soft limit (often 1024) goes up to the hard one.
    private static func raiseOpenFileLimit(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        let soft = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            logger.debug("open-file limit raised", metadata: ["from": "\(soft)", "to": "\(limit.rlim_max)"])
        } else {
            logger.warning("could not raise the open-file limit", metadata: ["limit": "\(soft)", "errno": "\(errno)"])
        }
    }

    /// glibc's `malloc_trim`, which Swift's Glibc module does not declare; nil on other C libraries.
    private static let trimHeap: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    /// Nothing queued for a lost peer is sent later (SPEC 7.3).
    private func discardQueued(for session: Session) {
        socketThread?.discard(session.link.outbox)
    }

    private func onThread<T: Sendable>(_ thread: SocketThread, _ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in thread.perform { continuation.resume(returning: work()) } }
    }

    private func writeConnectionFile(_ path: String, endpoint: String, key: ConnectionKey?) throws {
        try ConnectionFile(endpoint: endpoint, host: configuration.name, key: key,
                           curveServerKey: configuration.curve?.keyPair.publicKey).write(to: path)
    }
}

/// One peer's session on the host. Confined to the host's socket thread.
final class Session: @unchecked Sendable {
    /// Where the session's messages go; a resumed session moves to the peer's new connection.
    private final class Address: @unchecked Sendable {
        /// The parts in front of every message to the peer: its routing id and the empty signature (no key).
        /// Built once, not per message.
        private(set) var envelope: [[UInt8]]
        /// The routing id alone, for a message whose frame 0 is made as it goes (SPEC 3.3).
        private(set) var route: [[UInt8]]
        var routingID: [UInt8] {
            get { envelope[0] }
            set { envelope = [newValue, []]; route = [newValue] }
        }
        init(_ routingID: [UInt8]) { envelope = [routingID, []]; route = [routingID] }
    }

    private let address: Address
    let id: String
    /// The secret that resuming the session takes (SPEC 6): sent only in `welcome`, never logged.
    let resumeToken = ResumeToken.make()
    /// The peer's CURVE public key (SPEC 2.1), when the host requires CURVE: only a connection with the same key
    /// resumes the session.
    var peerKey: String?
    var name: String?
    /// The broadcast topics its peer subscribed to (SPEC 7.15), from its latest `hello`.
    var topics: Set<String> = []
    var heartbeat: Duration
    /// How its peer reached the host (its current connection's transport, when it was resumed over another).
    var transport: Telemetry.Transport {
        get { link.transport }
        set { link.transport = newValue }
    }
    let openedAt = ContinuousClock.now
    /// When its connection was seen to close, for a named session waiting to be resumed (SPEC 6).
    var connectionClosedAt: ContinuousClock.Instant?
    /// The bytes of `actions`, `features` and `topics` names one `hello` may declare (SPEC 6, Bounds).
    static let maxDeclaredBytes = 65_536
    let link: Link
    let remote: RemotePeer

    /// `signer`: on a keyed host, what signs the session's messages (SPEC 3.1, 3.3).
    init(routingID: [UInt8], id: String, heartbeat: Duration, thread: SocketThread, handlers: HandlerTable,
         limits: Link.Limits, logger: Logger, telemetry: Telemetry, defaultTimeout: Duration, signer: Outbox.Signer? = nil) {
        let address = Address(routingID)
        self.address = address
        self.id = id
        self.heartbeat = heartbeat
        link = Link(thread: thread, handlers: handlers, limits: limits, logger: logger, telemetry: telemetry) { frames, outbox in
            // Signed in send order, which is the order the peer reads them in (the counters must increase): as it
            // goes to libzmq, with what the round sends with it, to a peer that reads batches (SPEC 3.3); otherwise
            // now, as before batches, which costs a peer that does not read them nothing more.
            if outbox.batches { return thread.send(frames, after: address.route, via: outbox, awaitingSignature: true) }
            guard let signer else { return thread.send(frames, after: address.envelope, via: outbox) }
            guard let signature = signer(address.route, frames, false) else {
                return logger.debug("nothing sent before the connection's channel is open")
            }
            thread.send(frames, after: [address.routingID, signature], via: outbox)
        }
        link.outbox.signer = signer ?? Outbox.unkeyed(_:_:batch:)  // without a key, frame 0 marks a batch (SPEC 3.3)
        remote = RemotePeer(info: .init(name: nil, sessionID: id, actions: [], features: []), link: link,
                            defaultTimeout: defaultTimeout)
        link.remote = remote
    }

    var routingID: [UInt8] {
        get { address.routingID }
        set { address.routingID = newValue }
    }

    /// Whether what the session sends goes in batches (SPEC 3.3): its peer said, in its latest `hello` on this
    /// connection, that it reads them.
    var sendsBatches: Bool {
        get { link.outbox.batches }
        set {
            // What waits to be signed as it goes is signed before anything signed at once from now on.
            if !newValue { link.outbox.signAwaiting() }
            link.outbox.batches = newValue
        }
    }
}
