import CoreMetrics
import ZeroBridge
import Foundation
import Logging
import Synchronization

/// The host's handle to a peer it launched and keeps running (SPEC 10.1): its state, what happened to it, and a way to
/// call it that waits for it through a restart.
///
/// Calls made while the peer is starting or restarting wait until it is up, within their own timeout, then go to its
/// new session. A call in flight when the peer is lost fails with `peer_lost` and is never sent again (the peer may
/// have done the work). Once the host has given up on the peer, or stopped it, calls fail at once with `peer_lost`
/// saying why. Events (``post(_:_:)``) cannot wait: they fail with `peer_lost` unless the peer is up.
///
/// For example:
/// ```swift
/// let etl = try host.supervise(SupervisedPeer(name: "etl", executable: "python3", arguments: ["etl_peer.py"]))
/// let report = try await etl.call(ImportFile.self, .init(path: "/data"), timeout: .seconds(30))
/// for await event in etl.events() { print(event) }   // started, up, exited, restarting, ...
/// ```
public final class Supervised: BridgeCaller, Sendable {
    /// Where the peer is in its life.
    public enum State: Sendable, Equatable {
        /// Its program runs (or is being started) and it has not been welcomed yet.
        case starting
        /// Its session is alive.
        case up(pid: Int32)
        /// It is down, and starts again after this backoff.
        case restarting(after: Duration)
        /// It restarted too often; the host does not start it again by itself.
        case gaveUp(reason: String)
        /// The host stopped it (``stop()``, or the host's shutdown).
        case stopped
    }

    /// How a program ended.
    public enum Exit: Sendable, Equatable, CustomStringConvertible {
        /// It exited with this status.
        case code(Int32)
        /// A signal ended it (9: SIGKILL, 15: SIGTERM).
        case signal(Int32)

        public var description: String {
            switch self {
            case .code(let code): "exit code \(code)"
            case .signal(let signal): "signal \(signal)"
            }
        }
    }

    /// What happened to the peer, in order.
    public enum Event: Sendable, Equatable {
        /// Its process started.
        case started(pid: Int32)
        /// It said `hello` and was welcomed: calls go to it now.
        case up(pid: Int32)
        /// Its process ended, and how.
        case exited(pid: Int32, Exit)
        /// Not welcomed within the ready timeout, or its session was lost while its process ran: it is killed.
        case hung(reason: String)
        /// It is started again after this backoff.
        case restarting(after: Duration)
        /// It restarted too often; the host does not start it again by itself.
        case gaveUp(reason: String)
        /// The host stopped it (``stop()``, or the host's shutdown).
        case stopped
    }

    /// What the host launches, and how it supervises it.
    public let configuration: SupervisedPeer
    private let defaultTimeout: Duration
    private let logger: Logger
    private let inner = Mutex(Inner())
    /// Its restarts for a metrics backend (issue 27), labelled with the name the host's owner configured.
    private let restartsCounter: Counter

    /// Everything that changes, under one lock.
    private struct Inner {
        weak var host: BridgeHost?
        var state: State = .starting
        var pid: Int32?
        /// Its session while up; nil otherwise (a call waits).
        var session: RemotePeer?
        /// A process of the current launch exists, or is being spawned.
        var running = false
        /// Counts launches, so that a late timer or callback of an earlier one changes nothing.
        var launch = 0
        /// When the current launch was welcomed.
        var upSince: ContinuousClock.Instant?
        var restarts = 0
        var stopping = false
        /// Set once the host gave up on the peer or stopped it: calls fail at once with it.
        var ended: BridgeError?
        /// Signals for the current launch's process.
        var commands: AsyncStream<PeerProcess.Command>.Continuation?
        var readyTimer: Task<Void, Never>?
        var backoff: Task<Void, Never>?
        var runner: Task<Void, Never>?
        var watcher: Task<Void, Never>?
        /// The private folder (0700) holding the peer's connection file.
        var folder: String?
        var waiters: [UUID: CheckedContinuation<RemotePeer, Error>] = [:]
        var listeners: [UUID: AsyncStream<Event>.Continuation] = [:]

        /// Events are yielded under the lock, so every listener sees them in the order they happened.
        func emit(_ event: Event) {
            for listener in listeners.values { listener.yield(event) }
        }
    }

    init(_ configuration: SupervisedPeer, defaultTimeout: Duration, logger: Logger) {
        self.configuration = configuration
        self.defaultTimeout = defaultTimeout
        restartsCounter = Counter(label: "zerobridge_supervised_restarts_total", dimensions: [("peer", configuration.name)])
        var logger = logger
        logger[metadataKey: "peer"] = "\(configuration.name)"
        self.logger = logger
    }

    /// The name the peer says `hello` with.
    public var name: String { configuration.name }
    /// Where the peer is now: starting, up, restarting, gave up or stopped.
    public var state: State { inner.withLock { $0.state } }
    /// The pid of its program while one runs.
    public var pid: Int32? { inner.withLock { $0.pid } }
    /// How many times its program was started again.
    public var restarts: Int { inner.withLock { $0.restarts } }

    /// What happens to the peer from now on; the stream ends once the peer is stopped.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        let id = UUID()
        let over = inner.withLock { inner -> Bool in
            guard inner.state != .stopped else { return true }
            inner.listeners[id] = continuation
            return false
        }
        if over { continuation.finish() }
        continuation.onTermination = { [weak self] _ in _ = self?.inner.withLock { $0.listeners.removeValue(forKey: id) } }
        return stream
    }

    // MARK: Calls

    public func call(_ action: String, _ payload: JSONValue, timeout: Duration?,
                     onProgress: (@Sendable (JSONValue) -> Void)?) async throws -> JSONValue {
        let timeout = timeout ?? defaultTimeout
        let deadline = ContinuousClock.now + timeout
        let session = try await session(before: deadline, timeout: timeout)
        return try await session.call(action, payload, timeout: max(deadline - .now, .milliseconds(1)), onProgress: onProgress)
    }

    public func post(_ action: String, _ payload: JSONValue) throws {
        let (session, why) = inner.withLock { inner in
            (inner.session, inner.ended ?? BridgeError(.peerLost, "peer '\(name)' is not up (\(inner.state)): an event cannot wait for it"))
        }
        guard let session else { throw why }
        try session.post(action, payload)
    }

    /// The peer's current session, waiting up to `timeout` for the peer to be up (through a start or a restart). Calls
    /// made on it go to that one process and fail with `peer_lost` once it is gone, where calls on the handle itself
    /// wait for the next one: for a caller that decides itself whether to send a call again. Throws `timeout` when the
    /// peer is not up in time, `peer_lost` once the host gave up on it or stopped it.
    ///
    /// For example:
    /// ```swift
    /// let session = try await etl.session(waitingUpTo: .seconds(5))
    /// let rows = try await session.call(ImportFile.self, .init(path: "/data/a.csv"), timeout: .seconds(20))
    /// ```
    public func session(waitingUpTo timeout: Duration) async throws -> RemotePeer {
        try await session(before: .now + timeout, timeout: timeout)
    }

    /// The peer's session once it is up, waiting for it until `deadline`.
    private func session(before deadline: ContinuousClock.Instant, timeout: Duration) async throws -> RemotePeer {
        let id = UUID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = inner.withLock { inner -> Result<RemotePeer, Error>? in
                    if let ended = inner.ended { return .failure(ended) }
                    if let session = inner.session, session.isConnected { return .success(session) }
                    if Task.isCancelled { return .failure(BridgeError(.cancelled, "the call was cancelled")) }
                    inner.waiters[id] = continuation
                    return nil
                }
                if let ready { return continuation.resume(with: ready) }
                Task { [weak self, name] in
                    try? await Task.sleep(until: deadline)
                    self?.resume(waiter: id, throwing: BridgeError(.timeout, "peer '\(name)' was not up within \(timeout)"))
                }
            }
        } onCancel: { [weak self] in
            self?.resume(waiter: id, throwing: BridgeError(.cancelled, "the call was cancelled"))
        }
    }

    private func resume(waiter id: UUID, throwing error: BridgeError) {
        inner.withLock { $0.waiters.removeValue(forKey: id) }?.resume(throwing: error)
    }

    // MARK: Supervising

    /// Writes the peer's connection file and starts supervising; once only. The host has started.
    func launch(on host: BridgeHost) {
        guard let endpoint = host.boundEndpoint else { return }
        let claimed = inner.withLock { inner -> Bool in
            guard inner.host == nil, !inner.stopping else { return false }
            inner.host = host
            return true
        }
        guard claimed else { return }
        let folder: String
        do {
            folder = try Self.writeConnectionFile(for: name, of: host, endpoint: endpoint)
        } catch {
            return giveUp("its connection file could not be written: \(error)")
        }
        let environment = configuration.environment.merging([
            BridgePeer.Configuration.connectionFileVariable: folder + "/connection.json",
            BridgePeer.Configuration.peerNameVariable: name,
        ]) { _, ours in ours }
        // Subscribed before the first process exists, so that its welcome cannot be missed.
        let peerEvents = host.peerEvents()
        let started = inner.withLock { inner -> Bool in
            inner.folder = folder
            guard !inner.stopping else { return false }  // stopped meanwhile: nothing to launch
            inner.watcher = Task { [weak self] in
                for await event in peerEvents { self?.sessionChanged(event) }
            }
            inner.runner = Task { await self.supervise(host, environment: environment) }
            return true
        }
        if !started { removeConnectionFile() }
    }

    /// Launches, waits for the exit, and launches again after the backoff, until stopped or given up.
    private func supervise(_ host: BridgeHost, environment: [String: String]) async {
        var backoff = configuration.backoff
        var recentRestarts: [ContinuousClock.Instant] = []
        while true {
            let (commands, continuation) = AsyncStream<PeerProcess.Command>.makeStream()
            let launch = inner.withLock { inner -> Int? in
                guard !inner.stopping else { return nil }
                inner.launch += 1
                inner.running = true
                inner.upSince = nil
                inner.commands = continuation
                inner.state = .starting
                return inner.launch
            }
            guard let launch else { break }
            let outcome = await PeerProcess.run(configuration, environment: environment, logger: logger,
                                                commands: commands) { [weak self] pid in self?.started(pid, launch: launch) }
            let (upFor, what, stopping) = ended(outcome)
            // The process is gone, so its session is too: its calls fail now, and the name is free for the next one.
            await host.endSession(named: name, BridgeError(.peerLost, "peer '\(name)' \(what)"), sayingBye: false)
            if stopping { break }
            if let upFor, upFor >= .seconds(60) { backoff = configuration.backoff }
            let now = ContinuousClock.now
            recentRestarts.removeAll { now - $0 >= configuration.restartWindow }
            guard recentRestarts.count < configuration.restartLimit else {
                giveUp("it was restarted \(recentRestarts.count) times within \(configuration.restartWindow), and then \(what)")
                break
            }
            recentRestarts.append(now)
            logger.warning("supervised peer down: restarting", metadata: ["why": "\(what)", "after": "\(backoff)"])
            guard await rest(backoff) else { break }
            inner.withLock { $0.restarts += 1 }
            restartsCounter.increment()
            backoff = min(backoff * 2, configuration.maxBackoff)
        }
    }

    private func started(_ pid: Int32, launch: Int) {
        logger.info("supervised peer started", metadata: ["pid": "\(pid)"])
        inner.withLock { inner in
            guard inner.launch == launch, inner.running else { return }
            inner.pid = pid
            inner.emit(.started(pid: pid))
            let timeout = configuration.readyTimeout
            inner.readyTimer = Task { [weak self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self?.hung(launch: launch, "not welcomed within \(timeout) of its start", unlessUp: true)
            }
            promoteIfUp(&inner)
        }
    }

    /// The peer's session began or ended (the host's peer events).
    private func sessionChanged(_ event: BridgeHost.PeerEvent) {
        switch event {
        case .joined(let session) where session.name == name:
            inner.withLock { inner in
                guard inner.running, !inner.stopping, inner.session == nil else { return }
                inner.session = session
                promoteIfUp(&inner)
            }
        case .left(let session, let reason) where session.name == name:
            let launch = inner.withLock { inner -> Int? in
                guard inner.session === session else { return nil }
                inner.session = nil
                return inner.launch
            }
            if let launch { hung(launch: launch, "its session was lost while its process runs (\(reason.message))", unlessUp: false) }
        default:
            break
        }
    }

    /// Up once both its pid and its session are known (either may come first).
    private func promoteIfUp(_ inner: inout Inner) {
        guard let pid = inner.pid, let session = inner.session, inner.upSince == nil else { return }
        inner.upSince = .now
        inner.state = .up(pid: pid)
        inner.readyTimer?.cancel()
        inner.readyTimer = nil
        for waiter in inner.waiters.values { waiter.resume(returning: session) }
        inner.waiters.removeAll()
        inner.emit(.up(pid: pid))
        logger.info("supervised peer up", metadata: ["pid": "\(pid)"])
    }

    /// Kills the launch's process: it never got welcomed (`unlessUp`), or its session is gone while it runs.
    private func hung(launch: Int, _ reason: String, unlessUp: Bool) {
        inner.withLock { inner in
            guard inner.launch == launch, inner.running, !inner.stopping, !(unlessUp && inner.upSince != nil) else { return }
            logger.warning("supervised peer hung: killing it", metadata: ["why": "\(reason)", "pid": "\(inner.pid.map(String.init) ?? "-")"])
            inner.emit(.hung(reason: reason))
            inner.commands?.yield(.kill)
        }
    }

    /// The launch's process is gone: how long it was up, what happened, and whether the peer is being stopped.
    private func ended(_ outcome: PeerProcess.Outcome) -> (upFor: Duration?, what: String, stopping: Bool) {
        inner.withLock { inner in
            let what: String
            switch outcome {
            case .exited(let exit):
                what = "exited (\(exit))"
                if let pid = inner.pid { inner.emit(.exited(pid: pid, exit)) }
            case .couldNotStart(let why):
                what = "could not be started: \(why)"
                logger.error("supervised peer could not be started", metadata: ["why": "\(why)"])
            }
            let upFor = inner.upSince.map { ContinuousClock.now - $0 }
            inner.running = false
            inner.pid = nil
            inner.session = nil
            inner.upSince = nil
            inner.readyTimer?.cancel()
            inner.readyTimer = nil
            inner.commands?.finish()
            inner.commands = nil
            return (upFor, what, inner.stopping)
        }
    }

    /// Waits out the backoff; false when the peer is stopped meanwhile.
    private func rest(_ backoff: Duration) async -> Bool {
        let nap = inner.withLock { inner -> Task<Void, Never>? in
            guard !inner.stopping else { return nil }
            inner.state = .restarting(after: backoff)
            inner.emit(.restarting(after: backoff))
            let nap = Task { _ = try? await Task.sleep(for: backoff) }
            inner.backoff = nap
            return nap
        }
        guard let nap else { return false }
        await nap.value
        return inner.withLock { inner in
            inner.backoff = nil
            return !inner.stopping
        }
    }

    private func giveUp(_ reason: String) {
        logger.error("gave up on supervised peer: it is not started again", metadata: ["why": "\(reason)"])
        let (waiters, error) = inner.withLock { inner in
            inner.state = .gaveUp(reason: reason)
            inner.ended = BridgeError(.peerLost, "the host gave up on peer '\(name)': \(reason)")
            inner.emit(.gaveUp(reason: reason))
            defer { inner.waiters.removeAll() }
            return (Array(inner.waiters.values), inner.ended!)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
        removeConnectionFile()
    }

    /// Stops the peer (SPEC 10.1): `bye` to its session, up to ``SupervisedPeer/stopGrace`` for its process to exit,
    /// SIGTERM, the grace again, then SIGKILL; its connection file is removed. Returns once the process is gone.
    ///
    /// For example:
    /// ```swift
    /// await etl.stop()   // etl.state == .stopped; its calls fail with peer_lost from now on
    /// ```
    public func stop() async {
        let stopped = BridgeError(.peerLost, "peer '\(name)' was stopped")
        let (first, waiters, error, host, hasSession, commands, backoff, runner) = inner.withLock { inner in
            let first = !inner.stopping
            inner.stopping = true
            if inner.ended == nil { inner.ended = stopped }
            defer { inner.waiters.removeAll() }
            return (first, Array(inner.waiters.values), inner.ended!, inner.host, inner.session != nil, inner.commands,
                    inner.backoff, inner.runner)
        }
        for waiter in waiters { waiter.resume(throwing: error) }
        // A second stop (the host's shutdown while the peer is being stopped) waits for the first, and does not cut
        // its grace short.
        if first {
            backoff?.cancel()
            if hasSession, let host {
                await host.endSession(named: name, BridgeError(.peerLost, "the host stopped peer '\(name)'"), sayingBye: true)
            }
            commands?.yield(.stop(grace: configuration.stopGrace, saidBye: hasSession))
        }
        await runner?.value
        removeConnectionFile()
        let (listeners, watcher) = inner.withLock { inner in
            let listeners = inner.state == .stopped ? [] : Array(inner.listeners.values)
            if inner.state != .stopped {
                inner.state = .stopped
                inner.emit(.stopped)
                logger.info("supervised peer stopped")
            }
            inner.listeners.removeAll()
            return (listeners, inner.watcher)
        }
        watcher?.cancel()
        // Outside the lock: finishing a stream runs its termination handler, which takes the lock.
        for listener in listeners { listener.finish() }
    }

    // MARK: The connection file

    /// A private folder (mode 0700) with the peer's connection file (mode 0600): the host's endpoint and keys, and
    /// the name the peer must say `hello` with. Returns the folder.
    private static func writeConnectionFile(for name: String, of host: BridgeHost, endpoint: String) throws -> String {
        var template = Array((NSTemporaryDirectory() + "zerobridge-peer-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "mkdtemp failed: errno \(errno)"])
        }
        let folder = String(cString: made)
        let file = ConnectionFile(endpoint: endpoint, host: host.configuration.name, key: host.connectionKey,
                                  curveServerKey: host.configuration.curve?.keyPair.publicKey, peer: name)
        do {
            try file.write(to: folder + "/connection.json")
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
        return folder
    }

    private func removeConnectionFile() {
        guard let folder = inner.withLock({ $0.folder }) else { return }
        try? FileManager.default.removeItem(atPath: folder)
    }
}
