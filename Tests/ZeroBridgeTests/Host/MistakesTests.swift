import Foundation
import Logging
import Testing
@testable import ZeroBridge

/// Each row of docs/errors.md provoked in Swift: the code, what the message says, and that a cause known at once fails
/// at once (well under the connect timeout).
@Suite("the mistakes table (docs/errors.md)")
struct MistakesTests {
    /// A cause the host or the kernel states at once fails within this, as in Python and Node. The failure is known
    /// in milliseconds; what took seconds (up to 23 s seen) was the test task waiting to resume on the cooperative
    /// pool that `swift test`'s ~230 concurrent tests share (2 threads on 2 cores), so ``failsAtOnce(_:)`` times the
    /// connect on a thread of its own (``DedicatedThread``): at most 0.1 s measured under `stress-ng --cpu 2` with the
    /// whole ZeroBridgeTests target running.
    static let atOnce: Duration = .seconds(1)
    /// The connect timeout these tests give, so only a failure at once is fast.
    static let long: Duration = .seconds(20)

    struct Greet: BridgeAction {
        static let name = "greet"
        struct Payload: Codable, Sendable { var name: String; var times: [Int]? }
        typealias Result = String
    }

    struct DiskFull: Error, CustomStringConvertible {
        var description: String { "no space left on /srv/secret/volume" }
    }

    enum QuotaError: BridgeErrorConvertible {
        case exceeded(limit: Int)
        var bridgeErrorCode: BridgeError.Code { "quota_exceeded" }
        var bridgeErrorMessage: String { "over the quota" }
        var bridgeErrorData: JSONValue? { if case .exceeded(let limit) = self { ["limit": .int(limit)] } else { nil } }
    }

    final class Greeter: BridgeHandler {
        typealias Action = Greet
        func handle(_ payload: Greet.Payload, request: BridgeRequest) async throws -> String { "hello \(payload.name)" }
    }

    /// `body` fails with a BridgeError within ``atOnce``, timed on a thread of its own; returns the error.
    func failsAtOnce(_ body: () async throws -> Void) async -> BridgeError? {
        let thread = DedicatedThread(name: "mistakes-timing")
        defer { thread.stop() }
        let (error, elapsed) = await withTaskExecutorPreference(thread) {
            let started = ContinuousClock.now
            let error = await bridgeError(body)
            return (error, ContinuousClock.now - started)
        }
        #expect(elapsed < Self.atOnce, "\(error?.description ?? "no error") after \(elapsed)")
        return error
    }

    func peer(_ endpoint: String, name: String, configure: (inout BridgePeer.Configuration) -> Void = { _ in }) throws -> BridgePeer {
        var configuration = BridgePeer.Configuration(endpoint: endpoint, name: name)
        configure(&configuration)
        return try BridgePeer(configuration: configuration)
    }

    @Test("a handler's plain error: logged on the host, handler_error with its type but not its description")
    func plainHandlerError() async throws {
        let log = CapturedLog()
        let host = try startConformanceHost { $0.logger = log.logger("host") }
        try host.handle("store") { _, _ in throw DiskFull() }
        let peer = try await connectPeer(host, name: "swift-caller")
        let failure = await bridgeError { _ = try await peer.call("store", ["size": 5]) }
        #expect(failure?.code == .handlerError)
        #expect(failure?.message == "the handler failed with DiskFull (the host logged what it said)")
        #expect(failure?.data == ["type": "DiskFull"])
        #expect(failure?.message.contains("/srv/secret") == false)
        #expect(try await eventually { log.text.contains("handler failed") })
        let line = log.text.split(separator: "\n").first { $0.contains("handler failed") }.map(String.init) ?? ""
        #expect(line.contains("store") && line.contains("swift-caller") && line.contains("/srv/secret/volume"), "\(line)")
        #expect(line.contains("id"))
        await peer.close()
        await host.shutdown()
    }

    @Test("the app opts in to descriptions; a BridgeErrorConvertible chooses code, message and data")
    func chosenErrors() async throws {
        let host = try startConformanceHost { $0.revealsErrorDescriptions = true }
        try host.handle("store") { _, _ in throw DiskFull() }
        try host.handle("spend") { _, _ in throw QuotaError.exceeded(limit: 10) }
        let peer = try await connectPeer(host)
        let revealed = await bridgeError { _ = try await peer.call("store") }
        #expect(revealed?.code == .handlerError && revealed?.message == "no space left on /srv/secret/volume")
        let chosen = await bridgeError { _ = try await peer.call("spend") }
        #expect(chosen?.code == "quota_exceeded" && chosen?.message == "over the quota" && chosen?.data == ["limit": 10])
        await peer.close()
        await host.shutdown()
    }

    @Test("a typed payload error names the path, what was expected and what was there")
    func typedPayload() async throws {
        let host = try startConformanceHost()
        try host.handle(Greet.self) { payload, _ in "hello \(payload.name)" }
        let peer = try await connectPeer(host)
        #expect(try await peer.call("greet", ["name": "Ada"]) == "hello Ada")
        let cases: [(JSONValue, String)] = [
            (["name": 5], "payload.name: expected a string, got 5"),
            (["name": "Ada", "times": [1, "two"]], #"payload.times[1]: expected an integer, got the string "two""#),
            ([:], #"payload: the required member "name" is missing"#),
            (["name": nil], "payload.name: expected a string, got null"),
            ("Ada", #"payload: expected an object, got the string "Ada""#),
        ]
        for (payload, message) in cases {
            let failure = await bridgeError { _ = try await peer.call("greet", payload) }
            #expect(failure?.code == .invalidPayload)
            #expect(failure?.message == message)
        }
        await peer.close()
        await host.shutdown()
    }

    @Test("no host at a tcp endpoint, or no socket file at an ipc one: unreachable at once")
    func unreachable() async throws {
        let port = try closedTCPPort()
        for endpoint in ["tcp://127.0.0.1:\(port)", "ipc://\(scratchDirectory)zb-nobody-\(UUID().uuidString.prefix(8)).sock"] {
            let nobody = try peer(endpoint, name: "swift-nobody")
            let failure = await failsAtOnce { try await nobody.connect(timeout: Self.long) }
            #expect(failure?.code == .unreachable)
            #expect(failure?.message.contains("no host listens at \(endpoint)") == true)
            #expect(failure?.message.contains("is the host running?") == true)
            await nobody.close()
        }
    }

    @Test("a wrong key or none: unauthorized at once")
    func unauthorized() async throws {
        let host = try startConformanceHost(transport: "tcp") { $0.signing = .key(.generate()) }
        let wrong = try peer(host.boundEndpoint!, name: "swift-wrong-key") { $0.key = .generate() }
        let failure = await failsAtOnce { try await wrong.connect(timeout: Self.long) }
        #expect(failure?.code == .unauthorized)
        #expect(failure?.message.contains("is the key the host's?") == true)
        let none = try peer(host.boundEndpoint!, name: "swift-no-key")
        let unkeyed = await failsAtOnce { try await none.connect(timeout: Self.long) }
        #expect(unkeyed?.code == .unauthorized && unkeyed?.message.contains("connect through its connection file") == true)
        await wrong.close()
        await none.close()
        await host.shutdown()
    }

    @Test("a taken name: name_taken at once, unless the peer waits for it")
    func nameTaken() async throws {
        let host = try startConformanceHost()
        let first = try await connectPeer(host, name: "swift-taken")
        let second = try peer(host.boundEndpoint!, name: "swift-taken")
        let failure = await failsAtOnce { try await second.connect(timeout: Self.long) }
        #expect(failure?.code == .nameTaken)
        #expect(failure?.message.contains("'swift-taken'") == true && failure?.message.contains("waitsForName") == true)
        let waiting = try peer(host.boundEndpoint!, name: "swift-taken") { $0.waitsForName = true }
        let started = ContinuousClock.now
        let waited = await bridgeError { try await waiting.connect(timeout: .milliseconds(500)) }
        #expect(waited?.code == .nameTaken && ContinuousClock.now - started >= .milliseconds(500))
        for peer in [first, second, waiting] { await peer.close() }
        await host.shutdown()
    }

    @Test("127.0.0.1:5599 without its scheme: told to write tcp://127.0.0.1:5599", arguments: ["127.0.0.1:5599", "localhost:5599", "[::1]:5599"])
    func schemeless(_ endpoint: String) throws {
        #expect {
            _ = try peer(endpoint, name: "swift-schemeless")
        } throws: { error in
            (error as? BridgeError)?.message == "'\(endpoint)' is not an endpoint: write tcp://\(endpoint)"
        }
    }

    @Test("register(_:) of an object nothing else holds is logged as an error when the host starts")
    func releasedHandler() async throws {
        let log = CapturedLog()
        var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("ipc"), name: "released")
        configuration.logger = log.logger("host")
        let host = BridgeHost(configuration: configuration)
        try host.register(Greeter())
        let kept = Greeter()
        try host.handle("other") { _, _ in nil }
        try host.start()
        #expect(log.text.contains("the object registered for 'greet' was released before serving started"))
        #expect(host.handlers.releasedActions == ["greet"])
        try host.register(kept, replacing: true)
        #expect(host.handlers.releasedActions.isEmpty)
        await host.shutdown()
    }

    @Test("runUntilSignalled: the signal says bye to the peers and removes the connection file")
    func runUntilSignalled() async throws {
        let path = scratchDirectory + "zb-signalled-\(UUID().uuidString.prefix(8)).json"
        var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("ipc"), name: "signalled")
        configuration.connectionFile = path
        let host = BridgeHost(configuration: configuration)
        // SIGUSR2, not SIGTERM: the test runner's own SIGTERM must still end this process.
        let running = Task { try await host.runUntilSignalled([SIGUSR2]) }
        #expect(try await eventually { FileManager.default.fileExists(atPath: path) })
        let file = try ConnectionFile.read(path)
        let peer = try self.peer(file.endpoint, name: "swift-signalled") { $0.key = file.key; $0.endsWithHost = true }
        try await peer.connect(timeout: patience)
        kill(getpid(), SIGUSR2)  // to the process: a thread of the pool may block it
        try await running.value
        let why = await peer.closed()
        #expect(why.code == .peerLost && why.message.contains("bye"), "\(why)")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("the defaults: connect timeout 10 s, call timeout 30 s")
    func defaults() {
        #expect(BridgePeer.defaultConnectTimeout == .seconds(10))
        #expect(BridgePeer.Configuration(endpoint: "tcp://127.0.0.1:1", name: "d").defaultTimeout == .seconds(30))
        #expect(BridgeHost.Configuration(endpoint: "tcp://127.0.0.1:1").defaultTimeout == .seconds(30))
    }

    /// A loopback port nothing listens on (bound, then released, by this process).
    func closedTCPPort() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
