import Foundation
import Logging
import Synchronization
import ZeroMQ

/// A ZeroBridge peer in Swift: connects a DEALER to a host, says `hello`, serves the actions registered on it
/// to the host, and calls the host's (the `postMessage` role). When the host goes away, calls in flight fail
/// with `peer_lost` and the peer says `hello` again until the host is back, on a new connection whenever one
/// takes hellos without an answer for a while (5 s, then longer). It runs until ``close()``, or, for a peer launched
/// by a supervising host (``Configuration/endsWithHost``), until its host says `bye` or is lost: ``closed()`` says when.
///
/// For example:
/// ```swift
/// let peer = BridgePeer(configuration: .init(endpoint: "tcp://127.0.0.1:5555", name: "worker"))
/// try peer.handle("render") { payload, _ in ["html": "<p>\\(payload)</p>"] }
/// try await peer.connect()
/// let sum = try await peer.call("add", ["a": 1, "b": 2])
/// await peer.close()
/// ```
public final class BridgePeer: BridgeHandling, BridgeCaller, @unchecked Sendable {
    /// Where a peer connects and how: endpoint, name, timeouts, limits and keys.
    ///
    /// Make one with ``init(endpoint:name:)``, from a connection file with ``init(connectionFile:name:keyPair:)``,
    /// or for a peer its host launched with ``supervised(name:environment:)``.
    public struct Configuration: Sendable {
        /// The host's endpoint, such as `tcp://127.0.0.1:5555` or `ipc:///tmp/app.sock` (a scheme is required).
        public var endpoint: String
        /// The name the host knows this peer by.
        public var name: String
        /// The heartbeat interval to ask the host for (nil: the host's default).
        public var heartbeat: Duration?
        /// The broadcast topics to subscribe to from the start (SPEC 7.15); see ``BridgePeer/subscribe(_:)``.
        public var topics: Set<String> = []
        /// The timeout of calls that set none.
        public var defaultTimeout: Duration = .seconds(30)
        /// Larger messages from the host are answered `too_large`; a single frame more than 64 KiB over it drops
        /// the connection before it is read whole (SPEC 7.10), so a hostile host cannot exhaust the peer's memory.
        public var maxMessageBytes: Int = 64 << 20
        /// CURVE encryption (SPEC 2.1): the host's public key, which the host must prove, and this peer's key pair.
        public var curve: Curve?
        /// The connection key of a keyed host (its connection file's `key`): everything is signed (SPEC 3.1).
        public var key: ConnectionKey?
        /// Whether losing the host, or its `bye`, closes this peer instead of reconnecting: set for a peer launched by a
        /// supervising host (``supervised(name:environment:)``, SPEC 10.1), whose life is bounded by its host's.
        public var endsWithHost = false
        /// While the host refuses the name (`name_taken`: another live session holds it), say `hello` again every second
        /// until the connect timeout instead of failing ``BridgePeer/connect(timeout:)`` at once (the default).
        public var waitsForName = false
        /// Shares a context with other sockets (needed for `inproc://`); nil makes one.
        public var context: Context?
        /// Where the peer logs reconnects and refusals (swift-log).
        public var logger = Logger(label: "zerobridge.peer")
        /// Which requests and events from the host run in a span when a tracer is bootstrapped (SPEC 7.18).
        public var tracedRequests = TracedRequests.all

        /// A configuration for the host at `endpoint`, saying `hello` as `name`, with every other setting at its
        /// default.
        public init(endpoint: String, name: String) {
            self.endpoint = endpoint
            self.name = name
        }
    }

    /// CURVE for the peer: the host's public key (Z85), and the peer's own key pair, which the host may have on
    /// its allow-list.
    public struct Curve: Sendable {
        /// The host's public key (Z85), from its connection file.
        public var serverKey: String
        /// This peer's key pair: the host's allow-list names its public key.
        public var keyPair: CurveKeyPair

        /// CURVE to the host whose public key is `serverKey`, as the owner of `keyPair`.
        public init(serverKey: String, keyPair: CurveKeyPair) {
            self.serverKey = serverKey
            self.keyPair = keyPair
        }
    }

    /// What the host said in its `welcome`.
    public struct Welcome: Sendable, Hashable {
        /// The host's name.
        public var host: String
        /// The session the host gave this peer.
        public var sessionID: String
        /// The actions the host serves.
        public var actions: [String]
        /// The heartbeat interval in force for this session, used by both sides to notice the other is gone.
        public var heartbeat: Duration
        /// The largest message the host accepts; a larger call fails `too_large` before it is sent.
        public var maxMessageBytes: Int
        /// How many of this peer's requests the host runs at once; more are answered `overloaded`.
        public var maxInFlight: Int
        /// The hash of the host's catalogue (SPEC 7.8): compare it with the one a client was generated from.
        public var catalogue: String?
        /// Context the host gives every peer (its version, platform, features), as its configuration says.
        public var info: [String: JSONValue]?
        /// The version of the ZeroBridge library the host runs (`welcome.library_version`); nil from hosts before 2.1.
        public var libraryVersion: String?
    }

    /// The configuration the peer was created with.
    public let configuration: Configuration
    public let handlers = HandlerTable()
    private let signing: PeerSigning?

    /// Messages from the host dropped for a missing, wrong or replayed signature (SPEC 3.1), and unsigned
    /// `unauthorized` answers, since the peer started.
    public var refusedMessages: Int { signing?.refused.load(ordering: .relaxed) ?? 0 }

    /// Batches (SPEC 3.3) this peer has read from its host and sent to it, on keyed connections.
    package var batches: (read: Int, sent: Int) {
        (signing?.batchesRead.load(ordering: .relaxed) ?? 0, signing?.batchesSent.load(ordering: .relaxed) ?? 0)
    }
    private let context: Context
    private let thread: SocketThread
    let link: Link
    private let welcomed = Mutex<Greeting>(Greeting())
    /// Why the peer closed, once it has, and who waits to hear it.
    private let ending = Mutex<(reason: BridgeError?, waiters: [CheckedContinuation<BridgeError, Never>])>((nil, []))
    private let subscribed: Mutex<Set<String>>

    /// What the host last said to this peer's hellos, readable from any thread.
    private struct Greeting {
        var welcome: Welcome?
        var waiters: [UUID: CheckedContinuation<Welcome, Error>] = [:]
        /// The host refused the name (SPEC 6, Names) or this peer's messages (`unauthorized`, SPEC 3.1) since the peer
        /// last started connecting: why connecting failed.
        var refusal: BridgeError?
        /// Nothing listened at the endpoint when libzmq last tried it, and no connection was made since (the first
        /// connect fails at once with this).
        var unreachable: BridgeError?
    }

    // Confined to the socket thread.
    private var connecting = false
    private var lastHello = ContinuousClock.now - .seconds(3600)
    private var heartbeat: Duration
    /// The session the host last welcomed this peer into, and its secret, to resume after losing the host.
    private var lastSessionID: String?
    private var lastResumeToken: String?
    /// Since when hellos have gone unanswered on the current connection, and how long they may before it is replaced.
    private var unansweredSince = ContinuousClock.now
    private var unansweredLimit = BridgePeer.firstUnansweredLimit
    private static let firstUnansweredLimit: Duration = .seconds(5)
    /// Whether the first connection's monitor saw a handshake (libzmq's retries after that are no refusal).
    private var handshook = false

    /// A peer for `configuration`; ``connect(timeout:)`` connects it.
    ///
    /// - Throws: ``BridgeError`` `invalid_payload` when the endpoint is not one (`127.0.0.1:5599` without `tcp://`).
    public init(configuration: Configuration) throws {
        self.configuration = configuration
        subscribed = Mutex(configuration.topics)
        try Self.checkEndpointForm(configuration.endpoint)
        context = try configuration.context ?? Context()
        let dealer = try Self.dealer(configuration, context, connecting: false)
        // Watches the first connection for a refusal known at once (nothing listening, a CURVE key refused); set up
        // before connecting, so that no event is missed. The socket thread alone holds it, and lets go as it stops,
        // before the context can be terminated.
        let monitor = try SocketMonitor(watching: dealer, events: [
            .connectRetried, .handshakeSucceeded, .handshakeFailedAuth, .handshakeFailedNoDetail, .handshakeFailedProtocol,
        ])
        try dealer.connect(configuration.endpoint)
        thread = try SocketThread(socket: dealer)
        heartbeat = configuration.heartbeat ?? .seconds(5)
        let signing = configuration.key.map(PeerSigning.init(key:))
        self.signing = signing
        link = Link(thread: thread, handlers: handlers, limits: .init(maxInFlight: 4096),
                    logger: configuration.logger, telemetry: Telemetry()) { [thread, logger = configuration.logger] frames, outbox in
            // Frame 0 made in send order: as it goes to libzmq, with what the round sends with it, once the host
            // reads batches (SPEC 3.3); before that, now.
            if outbox.batches { return thread.send(frames, after: [], via: outbox, awaitingSignature: true) }
            guard let signing else { return thread.send(frames, after: [[]], via: outbox) }
            guard let signature = signing.frame0(for: frames) else {
                return logger.debug("not sent: a keyed connection opens with hello")
            }
            thread.send(frames, after: [signature], via: outbox)
        }
        link.tracedRequests = configuration.tracedRequests
        link.outbox.signer = Outbox.unkeyed(_:_:batch:)
        if let signing {
            link.outbox.signer = { _, frames, batch in batch ? signing.signBatch(frames[0]) : signing.frame0(for: frames) }
        }
        link.close(BridgeError(.peerLost, "not connected yet"))
        try handlers.add("$evaluate", replacing: true) { _, _ in
            throw BridgeError(.notAllowed, "the Swift peer does not evaluate scripts")
        }
        handlers.onChange.withLock { $0 = { [weak self] in self?.announceActions() } }
        thread.start(name: "zerobridge-peer", owner: .init(
            received: { [self] frames in received(frames) },
            tick: { [self] now in tick(now) },
            stopped: { [self] in link.close(BridgeError(.cancelled, "the peer was closed")) },
            monitored: (monitor, { [self] event in connectionEvent(event) })))
    }

    /// The broadcast topics this peer is subscribed to (SPEC 7.15).
    public var topics: Set<String> { subscribed.withLock { $0 } }

    /// Subscribes to broadcast topics: the host sends this peer what it broadcasts on them, from the next `hello`
    /// on (said at once when connected, as when its actions change).
    public func subscribe(_ topics: String...) {
        subscribed.withLock { $0.formUnion(topics) }
        announceActions()
    }

    /// Stops receiving broadcasts on these topics.
    public func unsubscribe(_ topics: String...) {
        subscribed.withLock { $0.subtract(topics) }
        announceActions()
    }

    /// What the host said when it last welcomed this peer; nil while not connected.
    public var welcome: Welcome? { welcomed.withLock { $0.welcome } }

    /// Says `hello` and waits for the host's `welcome`; throws `timeout` if the host does not answer in time
    /// (the peer keeps trying in the background), and at once why the peer closed once it has (``closed()``).
    @discardableResult
    public func connect(timeout: Duration = BridgePeer.defaultConnectTimeout) async throws -> Welcome {
        if let reason = ending.withLock({ $0.reason }) { throw reason }
        if let unreachable = firstConnectUnreachable() { throw unreachable }
        if welcome == nil { handlers.warnAboutReleasedHandlers(configuration.logger) }
        let id = UUID()
        return try await withCheckedThrowingContinuation { continuation in
            let ready = welcomed.withLock { state -> Welcome? in
                if let welcome = state.welcome { return welcome }
                state.waiters[id] = continuation
                return nil
            }
            if let ready { return continuation.resume(returning: ready) }
            welcomed.withLock { $0.refusal = nil }
            thread.perform { [self] in
                if !connecting { unansweredSince = .now }
                connecting = true
                sayHello()
            }
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                guard let (waiter, refusal) = self?.welcomed.withLock({ ($0.waiters.removeValue(forKey: id), $0.refusal) }) else { return }
                waiter?.resume(throwing: refusal ?? BridgeError(.timeout, "the host did not answer hello within \(timeout)"))
            }
        }
    }

    /// Says `bye` and closes the socket; calls in flight fail with `cancelled`.
    public func close() async {
        thread.perform { [self] in
            connecting = false
            if welcome != nil { link.send(.bye) }
        }
        await finish(BridgeError(.cancelled, "the peer was closed"))
    }

    /// Waits until the peer is closed, and says why: by ``close()`` (`cancelled`), or, for a peer that ends with its
    /// host (``Configuration/endsWithHost``), by the host's `bye` or its loss (`peer_lost`). A launched peer's
    /// program awaits this, then exits.
    ///
    /// For example:
    /// ```swift
    /// let peer = try BridgePeer(configuration: .supervised())
    /// try await peer.connect()
    /// let reason = await peer.closed()     // the host stopped, or went away
    /// print("etl: \(reason.message)")
    /// ```
    public func closed() async -> BridgeError {
        await withCheckedContinuation { continuation in
            let reason = ending.withLock { state -> BridgeError? in
                if state.reason == nil { state.waiters.append(continuation) }
                return state.reason
            }
            if let reason { continuation.resume(returning: reason) }
        }
    }

    /// Stops the socket thread and fails what waits; the first reason is the one ``closed()`` reports.
    private func finish(_ reason: BridgeError) async {
        await thread.stop()
        failWaiters(reason)
        let (waiters, first) = ending.withLock { state in
            let first = state.reason ?? reason
            state.reason = first
            defer { state.waiters.removeAll() }
            return (state.waiters, first)
        }
        for waiter in waiters { waiter.resume(returning: first) }
    }

    public func call(_ action: String, _ payload: JSONValue, timeout: Duration?,
                     onProgress: (@Sendable (JSONValue) -> Void)?) async throws -> JSONValue {
        try await link.call(action, payload, timeout: timeout ?? configuration.defaultTimeout, onProgress: onProgress)
    }

    public func post(_ action: String, _ payload: JSONValue) throws {
        try link.post(action, payload)
    }

    /// A call with an idempotency key whose progress messages arrive whole, with their `seq` and `skipped`: what
    /// ZeroBridgeJobs' job calls are made of (a job's `seq` is the job's own, for attaching again after it).
    package func call(_ action: String, _ payload: JSONValue, timeout: Duration, idempotencyKey: String?,
                      onProgressMessage: (@Sendable (ProgressMessage) -> Void)?) async throws -> JSONValue {
        try await link.call(action, payload, timeout: timeout, idempotencyKey: idempotencyKey, onProgressMessage: onProgressMessage)
    }

    /// A connected DEALER for the host: a new one after each loss.
    /// How long ``connect(timeout:)`` waits for a welcome by default: the same in Swift, Python and Node.
    public static let defaultConnectTimeout: Duration = .seconds(10)

    /// `127.0.0.1:5599` is an endpoint missing its `tcp://`: said so, rather than libzmq's "Invalid argument".
    private static func checkEndpointForm(_ endpoint: String) throws {
        guard !endpoint.contains("://") else { return }
        let looksLikeHostPort = endpoint.wholeMatch(of: /(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}/) != nil
        throw BridgeError(.invalidPayload, looksLikeHostPort
            ? "'\(endpoint)' is not an endpoint: write tcp://\(endpoint)"
            : "'\(endpoint)' is not an endpoint (tcp://host:port, ipc:///path or inproc://name); for a connection file, "
              + "read it with ConnectionFile.read(_:)")
    }

    /// Why the first connect cannot succeed, known before any welcome: no socket file at an `ipc://` endpoint, or
    /// libzmq's attempts refused; nil once a connection was made or a session welcomed.
    private func firstConnectUnreachable() -> BridgeError? {
        if let known = welcomed.withLock({ $0.welcome == nil ? $0.unreachable : nil }) { return known }
        let endpoint = configuration.endpoint
        guard endpoint.hasPrefix("ipc://"), !endpoint.hasPrefix("ipc://@"), welcome == nil,
              !FileManager.default.fileExists(atPath: String(endpoint.dropFirst(6))) else { return nil }
        return BridgeError(.unreachable, "no host listens at \(endpoint): the socket file does not exist (is the host running?)")
    }

    private static func dealer(_ configuration: Configuration, _ context: Context, connecting: Bool = true) throws -> Socket {
        let dealer = try Socket(.dealer, context: context)
        try dealer.set(.linger(milliseconds: 1000), .reconnectInterval(milliseconds: 50),
                       .reconnectIntervalMax(milliseconds: 1000),
                       .maxMessageSize(Int64(configuration.maxMessageBytes) + 65536))
        if let curve = configuration.curve {
            try dealer.set(.curveServerKey(curve.serverKey), .curvePublicKey(curve.keyPair.publicKey),
                           .curveSecretKey(curve.keyPair.secretKey))
        }
        if connecting { try dealer.connect(configuration.endpoint) }
        return dealer
    }

    /// On the thread: the first connection's monitor. A refusal known at once fails a connect() waiting for it.
    private func connectionEvent(_ event: SocketMonitor.Event) {
        switch event.kind {
        case .handshakeSucceeded:
            handshook = true
            welcomed.withLock { $0.unreachable = nil }
        case .connectRetried where !handshook:
            let error = BridgeError(.unreachable, "no host listens at \(configuration.endpoint): the connection was refused "
                                    + "(is the host running?)")
            welcomed.withLock { $0.unreachable = error }
            failConnecting(error)
        case .handshakeFailedAuth, .handshakeFailedNoDetail, .handshakeFailedProtocol:
            let why = event.kind == .handshakeFailedAuth
                ? "the host refused this peer's CURVE key \(configuration.curve?.keyPair.publicKey ?? "(none)"): is it on the host's allow-list?"
                : "the handshake failed: is \(configuration.curve?.serverKey ?? "(no CURVE key)") the host's key, and does it use CURVE?"
            failConnecting(BridgeError(.unauthorized, "cannot connect to \(configuration.endpoint): \(why)"))
        default:
            break
        }
    }

    /// On the thread: the first connect cannot succeed (the host or the kernel said so): fail it now, not at its
    /// timeout, and stop saying hello. After a welcome the peer keeps reconnecting as before.
    private func failConnecting(_ error: BridgeError) {
        guard welcome == nil, lastSessionID == nil else { return }
        welcomed.withLock { $0.refusal = error }
        connecting = false
        failWaiters(error)
    }

    // MARK: On the thread

    private func sayHello() {
        lastHello = .now
        let hello = Message.hello(.init(
            peer: configuration.name, actions: handlers.actionNames, features: ["batch"],
            session: welcome?.sessionID ?? lastSessionID, resumeToken: lastResumeToken,
            heartbeatMs: configuration.heartbeat.map { Int($0 / .milliseconds(1)) }, catalogue: handlers.catalogue.hash,
            topics: topics.sorted()))
        link.send(hello)
    }

    private func announceActions() {
        thread.perform { [self] in if connecting && welcome != nil { sayHello() } }
    }

    private func received(_ frames: [Frame]) {
        if signing == nil, frames.count >= 2, frames[0].count == 1, frames[0].withUnsafeBytes({ $0[0] == Signature.batchForm }) {
            return receivedBatch(frames)  // without a key, frame 0 is ignored but for the byte that marks a batch
        }
        if let signing, frames.count >= 2 {
            switch signing.accept(frames, logger: configuration.logger) {
            case .accepted: break
            case .acceptedBatch: return receivedBatch(frames)
            case .dropped: return
            case .refusedByHost(let error):
                // Why connecting fails if no welcome comes in time (not at once: the answer is unsigned). The first
                // refusal names the cause; the hellos retried on the refused channel are refused for being on it.
                if welcome == nil { welcomed.withLock { if $0.refusal?.code != .unauthorized { $0.refusal = error } } }
                failConnecting(error)
                return
            }
        }
        process(frames)
    }

    /// A batch (SPEC 3.3), signed for the channel when keyed: its messages are read in order, each as if it had come
    /// alone.
    private func receivedBatch(_ frames: [Frame]) {
        guard frames.count == 2 else {
            return link.refuse(nil, BridgeError(.badMessage, "a batch is frame 0 and frame 1; got \(frames.count) frames (SPEC 3.3)"))
        }
        let bound = configuration.maxMessageBytes + KeyedConnections.batchSlackBytes
        guard frames[1].count <= bound else {
            return link.refuse(nil, BridgeError(.tooLarge, "the batch has \(frames[1].count) bytes; the limit is \(bound)"))
        }
        let channel = signing?.channelNonce
        let refusal = frames[1].withUnsafeBytes { batch in
            WebSocketFraming.readSignedBatch(batch) { entry in
                // A message of the batch may end the connection (`bye`): what follows it was for the lost one.
                guard signing?.channelNonce == channel else { return false }
                switch entry {
                case .failure(let refusal): link.refuse(nil, BridgeError(.badMessage, refusal.reason))
                case .success(let parts): process(parts)
                }
                return true
            }
        }
        if let refusal { link.refuse(nil, BridgeError(.badMessage, refusal.reason)) }
    }

    /// One message from the host whose signature, on a keyed connection, is accepted.
    private func process<Parts: RandomAccessCollection>(_ frames: Parts) where Parts.Element: ContiguousBytes {
        guard let message = link.read(frames, maxBytes: configuration.maxMessageBytes) else { return }
        switch message {
        case .welcome(let message):
            link.outbox.batches = message.batch
            let welcome = Welcome(host: message.host, sessionID: message.session, actions: message.actions,
                                  heartbeat: .milliseconds(message.heartbeatMs), maxMessageBytes: message.maxMessageBytes,
                                  maxInFlight: message.maxInFlight, catalogue: message.catalogue,
                                  info: message.info?.objectValue, libraryVersion: message.libraryVersion)
            heartbeat = welcome.heartbeat
            lastSessionID = welcome.sessionID
            lastResumeToken = message.resumeToken
            unansweredLimit = Self.firstUnansweredLimit
            thread.tick(by: .now + heartbeat / 4)
            link.reopen()
            let waiters = welcomed.withLock { state in
                state.welcome = welcome
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters.values { waiter.resume(returning: welcome) }
        case .bye:
            lost(BridgeError(.peerLost, "the host said bye"))
        case .hello:
            link.answer(nil, BridgeError(.badMessage, "'hello' is sent by a peer, not to it"))
        case .response(let response) where response.id == nil && welcome == nil:
            if case .failure(let error) = response.outcome, error.code == .unauthorized {
                // A peer without a key (with one, the signing check above takes the answer) at a keyed host.
                let refusal = BridgeError(.unauthorized, "the host refused this peer's messages as "
                    + "unauthorized (\(error.message)): it requires a key; connect through its connection file")
                welcomed.withLock { $0.refusal = refusal }
                failConnecting(refusal)
                return link.receive(message)
            }
            guard case .failure(let error) = response.outcome, error.code == .nameTaken else { return link.receive(message) }
            // Not yet: another live session holds the name. The tick says hello again; connect() fails with this
            // only when its timeout passes.
            configuration.logger.notice("the host refused the name: another live session holds it",
                                        metadata: ["name": "\(configuration.name)"])
            welcomed.withLock { $0.refusal = error }
            unansweredSince = .now
            if !configuration.waitsForName {
                failConnecting(BridgeError(.nameTaken, "the host at \(configuration.endpoint) refused the name "
                    + "'\(configuration.name)': another live session holds it (\(error.message)); close that peer, pick "
                    + "another name, or set waitsForName", data: error.data))
            }
        default:
            link.receive(message)
        }
    }

    private func lost(_ reason: BridgeError) {
        configuration.logger.info("host lost", metadata: ["reason": "\(reason.message)"])
        welcomed.withLock { $0.welcome = nil }
        link.close(reason)
        if configuration.endsWithHost {
            // A launched peer never reconnects by itself (SPEC 10.1): its host launches a new one when it comes back.
            connecting = false
            Task { await finish(reason) }  // not here: stopping the socket thread waits for this very thread
            return
        }
        // Nothing queued for the lost host may arrive later (SPEC 7.3): a new connection, and the old one's queue
        // dropped with it. Calls made until the next welcome fail at once: the link is closed.
        openNewConnection()
    }

    private func openNewConnection() {
        signing?.renew()  // a new connection opens a new channel, which has no batches before its welcome says so
        link.outbox.batches = false
        thread.discard(link.outbox)
        do {
            thread.replaceSocket(with: try Self.dealer(configuration, context))
            unansweredSince = .now
        } catch {
            configuration.logger.error("could not open a new connection to the host", metadata: ["error": "\(error)"])
        }
    }

    private func tick(_ now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        if welcome != nil {
            switch link.liveness(at: now, interval: heartbeat) {
            case .alive: break
            case .ping: link.sendPing()
            case .lost(let silence): lost(BridgeError(.peerLost, "no message from the host for \(silence)"))
            }
        } else if connecting && now - unansweredSince >= unansweredLimit {
            // Hellos taken and never answered: the connection may be half-open (its host died without closing it)
            // or held by a host that hung, and libzmq would keep it. A new one, tried less often each time.
            configuration.logger.info("no welcome on this connection; opening a new one",
                                      metadata: ["waited": "\(now - unansweredSince)"])
            unansweredLimit = min(unansweredLimit * 2, .seconds(60))
            openNewConnection()
            sayHello()
        } else if connecting && now - lastHello >= min(heartbeat, .seconds(1)) {
            sayHello()  // the host may be restarting; libzmq reconnects underneath
        }
        return now + max(min(heartbeat, .seconds(1)) / 4, .milliseconds(10))
    }

    private func failWaiters(_ error: BridgeError) {
        let waiters = welcomed.withLock { state in
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume(throwing: error) }
    }
}

/// The peer's side of a keyed connection (SPEC 3.1): the current connection's channel, opened by the first `hello`.
/// Confined to the peer's socket thread, apart from the count.
private final class PeerSigning: @unchecked Sendable {
    let key: ConnectionKey
    private var channel: KeyedChannel
    private var opened = false
    let refused = Atomic<Int>(0)
    /// Batches read from the host and sent to it (SPEC 3.3), for diagnostics and tests.
    let batchesRead = Atomic<Int>(0)
    let batchesSent = Atomic<Int>(0)

    init(key: ConnectionKey) {
        self.key = key
        channel = .peer(key)
    }

    func renew() {
        channel = .peer(key)
        opened = false
    }

    /// The current channel's nonce (a new connection has a new one).
    var channelNonce: String { channel.nonce }

    /// Frame 0 for a batch whose frame 1 is `batch` (SPEC 3.3): after the opening, like every message.
    func signBatch(_ batch: [UInt8]) -> [UInt8]? {
        guard opened else { return nil }
        batchesSent.add(1, ordering: .relaxed)
        return channel.signBatch(batch)
    }

    /// Frame 0 for the next message; nil for anything before the opening `hello`.
    func frame0(for frames: [[UInt8]]) -> [UInt8]? {
        if opened { return channel.sign(frames) }
        guard frames.first?.starts(with: Array(#"{"v":1,"type":"hello""#.utf8)) == true else { return nil }
        opened = true
        return channel.opening(frames, ms: Int64(WallClock.milliseconds))
    }

    enum Verdict {
        case accepted
        /// A batch signed for the channel (SPEC 3.3).
        case acceptedBatch
        case dropped
        /// The host's unsigned `unauthorized` answer: why it refused this peer's messages, and the likely cause.
        case refusedByHost(BridgeError)
    }

    /// Whether a message from the host is signed for this channel. An unsigned `unauthorized` answer is logged and
    /// said why (it is unsigned, so it is only believed as a diagnostic); anything else refused is dropped.
    func accept(_ frames: [Frame], logger: Logger) -> Verdict {
        let body = frames.dropFirst()  // signed in place, not copied
        switch channel.accept(frames[0], body) {
        case .message?: return .accepted
        case .batch?:
            batchesRead.add(1, ordering: .relaxed)
            return .acceptedBatch
        case nil: break
        }
        refused.add(1, ordering: .relaxed)
        if frames[0].count == 0, let answer = try? JSONValue.parse(body[body.startIndex].bytes), answer["type"] == "response",
           answer["id"] == .null, answer["error"]?["code"] == "unauthorized" {
            let cause = ClockSkew.diagnosis(of: answer["error"]) ?? "is the key the host's?"
            let error = BridgeError(.unauthorized, "the host refused this peer's messages as unauthorized "
                                    + "(\(answer["error"]?["message"]?.stringValue ?? "")): \(cause)",
                                    data: answer["error"]?["data"])
            logger.warning("message from the host not processed: \(error.message)")
            return .refusedByHost(error)
        }
        logger.warning("message from the host not processed: \(frames[0].count == 0 ? "an unsigned message" : "a wrong or replayed signature")")
        return .dropped
    }
}
