import Foundation
@_spi(Fixtures) import ZeroBridge
import ZeroMQ

/// Runs conversations against a live host: one DEALER per client, every step in order.
///
/// Each run happens on a thread of its own (socket calls block), so awaiting it never ties up Swift's
/// cooperative threads, which an in-process host needs for its handlers. For example:
/// ```swift
/// let runner = ConversationRunner(endpoint: "tcp://127.0.0.1:41234")
/// for conversation in try FixtureLoader.conversations(at: ["protocol/fixtures/conversations"]) {
///     let result = await runner.run(conversation)
///     print(result.passed ? "ok" : "FAIL", result.description)
/// }
/// ```
public struct ConversationRunner: Sendable {
    /// The host's endpoint, as peers connect to it.
    public let endpoint: String
    /// Kills the host (SIGKILL), starts it again on the same journal and endpoint, and returns its endpoint: what a
    /// `restart_host` step does (SPEC 14.2). Called on the runner's own thread, so it may block.
    public let restartHost: (@Sendable () throws -> String)?

    /// A runner for `endpoint`; without `restartHost`, conversations that restart the host are reported not run.
    public init(endpoint: String, restartHost: (@Sendable () throws -> String)? = nil) {
        self.endpoint = endpoint
        self.restartHost = restartHost
    }

    /// Runs one conversation; a failure is in the result, never thrown.
    public func run(_ conversation: Conversation) async -> ConversationResult {
        if conversation.restartsHost, restartHost == nil {
            return ConversationResult(description: conversation.description, file: conversation.file, duration: .zero,
                                      failure: nil, notRun: "it restarts the host (a restart_host step), so it needs a host "
                                      + "of its own that the runner can kill and start again on its journal (SPEC 14.2)")
        }
        return await withCheckedContinuation { continuation in
            let thread = Thread { [endpoint, restartHost] in
                continuation.resume(returning: ConversationExecution(conversation, target: .host(endpoint: endpoint),
                                                                     restartHost: restartHost).run())
            }
            thread.name = "zerobridge-fixture"
            thread.stackSize = 8 << 20  // patterns recurse once per level of nesting
            thread.start()
        }
    }

    /// Runs conversations one after another, in order.
    public func run(_ conversations: [Conversation]) async -> [ConversationResult] {
        var results: [ConversationResult] = []
        for conversation in conversations { results.append(await run(conversation)) }
        return results
    }
}

/// Runs peer conversations (SPEC 14.3, `"plays": "host"`): plays the host against a peer library's conformance
/// peer, started afresh for each conversation as `command ENDPOINT [--evaluate]`.
///
/// For example:
/// ```swift
/// let runner = PeerConversationRunner(command: ["node", "peers/node/bin/conformance-peer.js"], language: "node")
/// for conversation in try FixtureLoader.peerConversations(at: ["protocol/fixtures/peer-conversations"]) {
///     print(await runner.run(conversation).passed)
/// }
/// ```
public struct PeerConversationRunner: Sendable {
    /// The conformance peer's command line, without the endpoint (a program found on PATH, or a path).
    public let command: [String]
    /// The peer's language, which picks the `$per_language` values (`python`, `node`, ...).
    public let language: String

    public init(command: [String], language: String) {
        self.command = command
        self.language = language
    }

    /// Runs one peer conversation; a failure (including the peer's stderr) is in the result, never thrown.
    public func run(_ conversation: Conversation) async -> ConversationResult {
        await withCheckedContinuation { continuation in
            let thread = Thread { [command, language] in
                continuation.resume(returning: ConversationExecution(conversation, target: .peer(command: command, language: language)).run())
            }
            thread.name = "zerobridge-peer-fixture"
            thread.stackSize = 8 << 20
            thread.start()
        }
    }
}

/// A step that failed: one line, then details (expected pattern, received body).
private struct StepFailure: Error {
    var summary: String
    var details: [String] = []
}

/// One run of one conversation, confined to the thread that runs it.
final class ConversationExecution {
    /// What the conversation talks to.
    enum Target {
        /// A live host: one DEALER per client connects to it.
        case host(endpoint: String)
        /// A peer library (SPEC 14.3): the runner binds a ROUTER and starts `command ENDPOINT [--evaluate]`.
        case peer(command: [String], language: String)
    }

    private let conversation: Conversation
    private var target: Target
    private let restartHost: (@Sendable () throws -> String)?
    private var context: Context?
    /// Host conversations: a DEALER per client.
    private var sockets: [String: Socket] = [:]
    /// Peer conversations: the ROUTER, the routing id the peer last spoke from, and the peer's process.
    private var router: Socket?
    private var peerRoutingID: [UInt8]?
    private var peer: ChildProcess?
    private var peerErrors: URL?
    private var poller = Poller()
    /// Each client's received bodies, in arrival order.
    private var queues: [String: [JSONValue]] = [:]
    private var variables: Variables = [:]

    init(_ conversation: Conversation, target: Target, restartHost: (@Sendable () throws -> String)? = nil) {
        self.conversation = conversation
        self.target = target
        self.restartHost = restartHost
    }

    private var endpoint: String {
        switch target {
        case .host(let endpoint): endpoint
        case .peer: (try? router?.lastEndpoint) ?? "the runner's ROUTER"
        }
    }

    private var language: String? {
        if case .peer(_, let language) = target { return language }
        return nil
    }

    func run() -> ConversationResult {
        let start = ContinuousClock.now
        var failure: ConversationResult.Failure?
        do throws(StepFailure) {
            try open()
            for (index, step) in conversation.steps.enumerated() {
                do throws(StepFailure) {
                    try perform(step)
                } catch {
                    let place = "step \(index + 1) of \(conversation.steps.count) (\(step.kindName), client \"\(step.client)\")"
                    var details = error.details
                    if let note = step.note { details.append("note: \(note)") }
                    failure = .init(step: index + 1, summary: "\(place): \(error.summary)", details: details)
                    break
                }
            }
        } catch {
            failure = .init(step: nil, summary: error.summary, details: error.details)
        }
        if let failed = failure, peer != nil, !failed.details.contains("peer stderr:") {
            failure = .init(step: failed.step, summary: failed.summary, details: failed.details + peerStderr())
        }
        close()
        return ConversationResult(description: conversation.description, file: conversation.file,
                                  duration: ContinuousClock.now - start, failure: failure)
    }

    // MARK: Sockets

    private func open() throws(StepFailure) {
        if case .peer(let command, _) = target {
            try startPeer(command)
            return
        }
        do throws(ZMQError) {
            let context = try Context()
            self.context = context
            for client in conversation.clients {
                let socket = try Socket(.dealer, context: context)
                // A send that cannot be queued in 5 s (no host, queue full) fails the step rather than hanging.
                try socket.set(.linger(milliseconds: 0), .sendTimeout(milliseconds: 5000))
                try socket.connect(endpoint)
                sockets[client] = socket
                queues[client] = []
                poller.add(socket, for: .readable)
            }
        } catch {
            throw StepFailure(summary: "cannot connect to \(endpoint): \(error)")
        }
    }

    /// Binds the ROUTER on a loopback port and starts the peer under test pointed at it.
    private func startPeer(_ command: [String]) throws(StepFailure) {
        guard !command.isEmpty else { throw StepFailure(summary: "no peer command to start") }
        let endpoint: String
        do throws(ZMQError) {
            let context = try Context()
            self.context = context
            let router = try Socket(.router, context: context)
            try router.set(.linger(milliseconds: 0), .sendTimeout(milliseconds: 5000))
            try router.bind("tcp://127.0.0.1:*")
            endpoint = try router.lastEndpoint
            self.router = router
            queues[Conversation.peerUnderTest] = []
            poller.add(router, for: .readable)
        } catch {
            throw StepFailure(summary: "cannot bind a ROUTER for the peer: \(error)")
        }
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("zerobridge-peer-\(UUID().uuidString).log")
        peerErrors = errors
        let arguments = command + [endpoint] + (conversation.evaluate ? ["--evaluate"] : [])
        let process: ChildProcess
        do {
            process = try ChildProcess(arguments, stderrPath: errors.path)
        } catch {
            throw StepFailure(summary: "cannot start the peer \(command.joined(separator: " ")): \(error.localizedDescription)")
        }
        peer = process
    }

    /// What the peer wrote to stderr, last lines first cut to a readable size.
    private func peerStderr() -> [String] {
        guard let peerErrors, let text = try? String(contentsOf: peerErrors, encoding: .utf8), !text.isEmpty else { return [] }
        return ["peer stderr:"] + text.split(separator: "\n").suffix(20).map { "  " + $0 }
    }

    private func close() {
        poller = Poller()
        for socket in sockets.values { socket.close() }
        sockets = [:]
        if let peer, peer.isRunning {
            // SPEC 14.3: SIGTERM, then SIGKILL after 5 s.
            peer.terminate()
            let deadline = ContinuousClock.now + .seconds(5)
            while peer.isRunning, ContinuousClock.now < deadline { usleep(5_000) }
            if peer.isRunning { kill(peer.processIdentifier, SIGKILL) }
        }
        if let peerErrors { try? FileManager.default.removeItem(at: peerErrors) }
        router?.close()
        router = nil
        context = nil
    }

    private func send(_ frames: [[UInt8]], as client: String) throws(StepFailure) {
        if router != nil, peerRoutingID == nil {
            throw StepFailure(summary: "nothing to send to: the peer has not sent anything yet (a peer conversation starts by expecting its hello)")
        }
        do throws(ZMQError) {
            if let router, let routingID = peerRoutingID {
                try router.send([routingID] + frames)
            } else {
                try sockets[client]!.send(frames)
            }
        } catch {
            throw StepFailure(summary: "could not send within 5 s (\(error)); is the other side at \(endpoint) running?")
        }
    }

    /// Waits up to `milliseconds` for anything, then takes in everything that has arrived on every socket.
    private func pump(waitingUpTo milliseconds: Int) throws(StepFailure) {
        var arrived: [(client: String, frames: [[UInt8]])] = []
        do throws(ZMQError) {
            // A peer that exits is noticed within 100 ms, not at the end of a long wait.
            try poller.poll(timeoutMilliseconds: peer == nil ? milliseconds : min(milliseconds, 100))
            if let router {
                while let frames = try router.receiveBytes(dontWait: true), let routingID = frames.first {
                    peerRoutingID = routingID  // answers go where the peer last spoke from
                    arrived.append((Conversation.peerUnderTest, Array(frames.dropFirst())))
                }
            } else {
                for client in conversation.clients {
                    while let frames = try sockets[client]!.receiveBytes(dontWait: true) { arrived.append((client, frames)) }
                }
            }
        } catch {
            throw StepFailure(summary: "receiving failed: \(error)")
        }
        for message in arrived { try accept(message.frames, from: message.client) }
        if let peer, !peer.isRunning {
            throw StepFailure(summary: "the peer under test exited (status \(peer.terminationStatus)) before the conversation ended",
                              details: peerStderr())
        }
    }

    /// Checks what the host sent (SPEC 14.2: two frames or more, an empty signature, a valid body), answers a
    /// ping when pings are automatic, and queues the rest.
    private func accept(_ frames: [[UInt8]], from client: String) throws(StepFailure) {
        func show(_ bytes: [UInt8]) -> String {
            let text = String(decoding: bytes.prefix(300), as: UTF8.self)
            return bytes.count > 300 ? text + "… (\(bytes.count) bytes)" : text
        }
        guard frames.count >= 2 else {
            throw StepFailure(summary: "client \"\(client)\" received a message of \(frames.count) frame; a host sends a signature frame and a body",
                              details: frames.map { "frame: \(show($0))" })
        }
        guard frames[0].isEmpty else {
            throw StepFailure(summary: "client \"\(client)\" received a message with a non-empty signature frame from a host without a key",
                              details: ["signature: \(show(frames[0]))", "body: \(show(frames[1]))"])
        }
        if let refusal = FixtureCodec.refusal(of: frames[1]) {
            throw StepFailure(summary: "client \"\(client)\" received an invalid body (\(refusal.code.rawValue): \(refusal.message))",
                              details: ["received: \(show(frames[1]))"])
        }
        let body: JSONValue
        do throws(BridgeError) {
            body = try FixtureCodec.parse(frames[1])
        } catch {
            throw StepFailure(summary: "client \"\(client)\" received a body that is not JSON: \(error.message)")
        }
        if conversation.autoPong, body["type"] == "ping" {
            try send([[], Array(#"{"v":1,"type":"pong"}"#.utf8)], as: client)
            return
        }
        queues[client]!.append(body)
    }

    /// The client's next message that matches no skip pattern, or nil when none comes before the deadline.
    private func next(for client: String, before deadline: ContinuousClock.Instant, skipping skip: [JSONValue]) throws(StepFailure) -> JSONValue? {
        try pump(waitingUpTo: 0)
        while true {
            while !queues[client]!.isEmpty {
                let body = queues[client]!.removeFirst()
                if try !matchesAny(skip, body) { return body }
            }
            let left = deadline - ContinuousClock.now
            if left <= .zero { return nil }
            let (seconds, attoseconds) = left.components
            try pump(waitingUpTo: Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
        }
    }

    private func matchesAny(_ patterns: [JSONValue], _ body: JSONValue) throws(StepFailure) -> Bool {
        for pattern in patterns {
            var scratch = variables  // a skip pattern's captures are not kept
            if try fixtureChecked({ () throws(FixtureFault) in try Pattern.match(pattern, body, variables: &scratch) }) == nil { return true }
        }
        return false
    }

    private func fixtureChecked<T>(_ body: () throws(FixtureFault) -> T) throws(StepFailure) -> T {
        do throws(FixtureFault) {
            return try body()
        } catch {
            throw StepFailure(summary: "the fixture is wrong: \(error.description)")
        }
    }

    // MARK: Steps

    private func perform(_ step: Step) throws(StepFailure) {
        switch step.action {
        case .send(let body, let attachments, let repeatCount):
            let attachmentBytes = attachments.map(Template.bytes(of:))
            for index in 1...(repeatCount ?? 1) {
                let written = repeatCount == nil ? body : Template.substituteIndex(body, index)
                let filled = try fixtureChecked { () throws(FixtureFault) in try Template.fill(written, variables, language: language) }
                try send([[], Array(filled.description.utf8)] + attachmentBytes, as: step.client)
            }

        case .sendFrames(let frames):
            try send(frames.map(Template.bytes(of:)), as: step.client)

        case .expect(let pattern, let withinMs, let skip, let repeatCount):
            for index in 1...(repeatCount ?? 1) {
                let expected = repeatCount == nil ? pattern : Template.substituteIndex(pattern, index)
                let skipping = repeatCount == nil ? skip : skip.map { Template.substituteIndex($0, index) }
                try expectOne(expected, within: withinMs, skipping: skipping, client: step.client,
                              repetition: repeatCount == nil ? nil : index)
            }

        case .expectUnordered(let items, let withinMs, let skip):
            var left: [JSONValue] = []
            for item in items {
                if let count = item.repeatCount {
                    left += (1...count).map { Template.substituteIndex(item.pattern, $0) }
                } else {
                    left.append(item.pattern)
                }
            }
            try expectUnordered(left, within: withinMs, skipping: skip, client: step.client)

        case .restartHost:
            guard let restartHost else { throw StepFailure(summary: "the runner cannot restart the host") }
            // What the old sockets held is dropped with them; the clients start afresh against the new process.
            close()
            do {
                target = .host(endpoint: try restartHost())
            } catch {
                throw StepFailure(summary: "the host could not be restarted: \(error)")
            }
            queues = [:]
            try open()

        case .expectNothing(let ms, let skip):
            let deadline = ContinuousClock.now + .milliseconds(ms)
            if let body = try next(for: step.client, before: deadline, skipping: skip) {
                throw StepFailure(summary: "expected nothing for \(ms) ms, but a message arrived",
                                  details: ["received: \(JSONText.write(body))"])
            }
        }
    }

    private func expectOne(_ pattern: JSONValue, within withinMs: Int, skipping skip: [JSONValue], client: String,
                           repetition: Int?) throws(StepFailure) {
        let deadline = ContinuousClock.now + .milliseconds(withinMs)
        let which = repetition.map { " (repetition \($0))" } ?? ""
        guard let body = try next(for: client, before: deadline, skipping: skip) else {
            throw StepFailure(summary: "nothing arrived within \(withinMs) ms\(which)",
                              details: ["expected: \(JSONText.write(pattern))"] + othersWaiting(besides: client))
        }
        if let mismatch = try fixtureChecked({ () throws(FixtureFault) in try Pattern.match(pattern, body, variables: &variables) }) {
            throw StepFailure(summary: "\(mismatch)\(which)",
                              details: ["expected: \(JSONText.write(pattern))", "received: \(JSONText.write(body))"])
        }
    }

    private func expectUnordered(_ patterns: [JSONValue], within withinMs: Int, skipping skip: [JSONValue],
                                 client: String) throws(StepFailure) {
        let deadline = ContinuousClock.now + .milliseconds(withinMs)
        var left = patterns
        var received: [JSONValue] = []
        while !left.isEmpty {
            guard let body = try next(for: client, before: deadline, skipping: skip) else {
                throw StepFailure(summary: "\(left.count) of \(patterns.count) messages did not arrive within \(withinMs) ms",
                                  details: left.map { "still expected: \(JSONText.write($0))" }
                                      + received.map { "received: \(JSONText.write($0))" } + othersWaiting(besides: client))
            }
            var mismatches: [Mismatch] = []
            var taken: Int?
            for index in left.indices {
                if let mismatch = try fixtureChecked({ () throws(FixtureFault) in try Pattern.match(left[index], body, variables: &variables) }) {
                    mismatches.append(mismatch)
                } else {
                    taken = index
                    break
                }
            }
            guard let taken else {
                // The closest item is the one whose mismatch lies deepest in the body.
                let closest = mismatches.max { $0.path.count < $1.path.count }!
                throw StepFailure(summary: "a message matches none of the \(left.count) expected messages left; closest: \(closest)",
                                  details: ["received: \(JSONText.write(body))"]
                                      + zip(left, mismatches).map { "expected: \(JSONText.write($0)) -- \($1)" })
            }
            left.remove(at: taken)
            received.append(body)
        }
    }

    /// What other clients have received and not yet taken: often the reason a message did not come to this one.
    private func othersWaiting(besides client: String) -> [String] {
        conversation.clients.filter { $0 != client && !queues[$0]!.isEmpty }.map { other in
            "queued for client \"\(other)\": " + queues[other]!.prefix(3).map(JSONText.write).joined(separator: " ")
        }
    }
}
