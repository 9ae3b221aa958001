import ArgumentParser
import Foundation
import Synchronization
import ZeroBridge
import ZeroBridgeFixtures
import ZeroMQ

struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A recording proxy: forwards peers to a host unchanged and writes each peer session as a conversation fixture.",
        discussion: """
            Peers connect to --listen; each gets its own connection to the host at --forward. A session is written to
            --out when the peer says bye, when nothing has passed either way for --idle-ms, or when the recorder is
            stopped (SIGINT, SIGTERM). Prints `zerobridge recording <endpoint>` when ready, then
            `zerobridge recorded <file>` for each fixture. Replay them with `zerobridge replay`.
            """)

    @Option(help: "Where peers connect (tcp://127.0.0.1:* picks a port).")
    var listen: String

    @Option(help: "The host's endpoint, where the peers' messages go.")
    var forward: String

    @Option(help: "The folder to write fixtures in (made if missing).")
    var out: String

    @Option(help: "A session with no traffic either way for this many milliseconds is written.")
    var idleMs = 10_000

    func validate() throws {
        guard idleMs >= 10 else { throw ValidationError("--idle-ms must be at least 10") }
    }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        // Trap the signals before saying ready, so a stop right after the ready line is not lost.
        let stop = ShutdownSignal(trapping: [SIGTERM, SIGINT])
        let proxy = try RecordingProxy(listen: listen, forward: forward, folder: out, idle: .milliseconds(idleMs))
        Replay.write("zerobridge recording \(proxy.endpoint)\n", to: .standardOutput)
        await stop.wait()
        await proxy.stop()
    }
}

/// The proxy: a ROUTER for peers, one DEALER per peer towards the host, all owned by one thread.
final class RecordingProxy: @unchecked Sendable {  // the sockets and sessions are confined to `thread`
    let endpoint: String
    private let router: Socket
    private let context: Context
    private let forward: String
    private let folder: String
    private let idle: Duration
    private let wake: WakeSignal
    private let stopping = Atomic<Bool>(false)
    /// Whether the thread has finished, or who waits for it to.
    private let finished = Mutex<(done: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// One peer connection: its link to the host, and the recording of its current session.
    private final class PeerLink {
        let dealer: Socket
        var recorder = ConversationRecorder()
        var lastTraffic = ContinuousClock.now
        init(dealer: Socket) { self.dealer = dealer }
    }

    private var peers: [[UInt8]: PeerLink] = [:]

    init(listen: String, forward: String, folder: String, idle: Duration) throws {
        context = try Context()
        router = try Socket(.router, context: context)
        try router.set(.linger(milliseconds: 1000))
        do {
            try router.bind(listen)
        } catch {
            throw ValidationError("cannot listen on \(listen): \(error)")
        }
        endpoint = try router.lastEndpoint
        self.forward = forward
        self.folder = folder
        self.idle = idle
        wake = try WakeSignal()
        let thread = Thread { [self] in serve() }
        thread.name = "zerobridge-record"
        thread.start()
    }

    /// Writes the sessions still open and closes the sockets.
    func stop() async {
        stopping.store(true, ordering: .sequentiallyConsistent)
        wake.signal()
        await withCheckedContinuation { continuation in
            let alreadyDone = finished.withLock { state -> Bool in
                if !state.done { state.waiter = continuation }
                return state.done
            }
            if alreadyDone { continuation.resume() }
        }
    }

    private func serve() {
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                try pass()
            } catch {
                Replay.write("zerobridge record: \(error)\n", to: .standardError)
                break
            }
        }
        for link in peers.values where link.recorder.hasPeerMessages { write(link) }
        for link in peers.values { link.dealer.close() }
        router.close()
        finished.withLock { state -> CheckedContinuation<Void, Never>? in
            state.done = true
            return state.waiter
        }?.resume()
    }

    /// One round: wait for traffic (or a tick to notice idle sessions), forward and record it.
    private func pass() throws {
        var poller = Poller()
        poller.add(router, for: .readable)
        poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
        for link in peers.values { poller.add(link.dealer, for: .readable) }
        try poller.poll(timeoutMilliseconds: 100)
        wake.drain()
        let now = ContinuousClock.now

        while let frames = try router.receiveBytes(dontWait: true) {
            guard frames.count >= 2 else { continue }
            let routingID = frames[0]
            let message = Array(frames.dropFirst())
            let link = try peers[routingID] ?? connect(routingID)
            link.lastTraffic = now
            link.recorder.peerSent(message, at: now)
            if try !link.dealer.send(message, dontWait: true) {
                Replay.write("zerobridge record: the host is not taking messages; one from a peer was dropped\n", to: .standardError)
            }
            if message.count >= 2, Self.type(of: message[1]) == "bye" { finishSession(of: link) }
        }
        for (routingID, link) in peers {
            while let message = try link.dealer.receiveBytes(dontWait: true) {
                link.lastTraffic = now
                link.recorder.hostSent(message, at: now)
                _ = try? router.send([routingID] + message, dontWait: true)  // a peer that left misses it, as it would
                if message.count >= 2, Self.type(of: message[1]) == "bye" { finishSession(of: link) }
            }
            if now - link.lastTraffic > idle, link.recorder.hasPeerMessages { finishSession(of: link) }
        }
    }

    private func connect(_ routingID: [UInt8]) throws -> PeerLink {
        let dealer = try Socket(.dealer, context: context)
        try dealer.set(.linger(milliseconds: 1000))
        try dealer.connect(forward)
        let link = PeerLink(dealer: dealer)
        peers[routingID] = link
        return link
    }

    /// Writes the session so far and starts a new recording on the same connection.
    private func finishSession(of link: PeerLink) {
        if link.recorder.hasPeerMessages { write(link) }
        link.recorder = ConversationRecorder()
    }

    private func write(_ link: PeerLink) {
        let name = Self.fileName(link.recorder.peerName)
        var number = 1
        var path: String
        repeat {
            path = (folder as NSString).appendingPathComponent(String(format: "%@-%03d.json", name, number))
            number += 1
        } while FileManager.default.fileExists(atPath: path)
        let who = link.recorder.peerName.map { "peer \"\($0)\"" } ?? "an anonymous peer"
        let base = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        let text = link.recorder.fixture(description: "recorded session \(base) of \(who)")
        if FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) {
            Replay.write("zerobridge recorded \(path)\n", to: .standardOutput)
        } else {
            Replay.write("zerobridge record: cannot write \(path)\n", to: .standardError)
        }
    }

    /// A file name from a peer's name: lowercase letters, digits, - and _ only.
    private static func fileName(_ peer: String?) -> String {
        guard let peer else { return "anonymous" }
        let cleaned = String(peer.lowercased().unicodeScalars.map { scalar -> Character in
            CharacterSet.alphanumerics.contains(scalar) && scalar.isASCII || scalar == "-" || scalar == "_" ? Character(scalar) : "-"
        }.prefix(40))
        return cleaned.isEmpty ? "peer" : cleaned
    }

    private static func type(of body: [UInt8]) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["type"] as? String
    }
}
