import Foundation
import Synchronization
import Testing
import ZeroMQ
@testable import ZeroBridge
@testable import ZeroBridgeSupervision

/// Supervised peers (SPEC 10.1) with real processes: a Python peer, and shell commands that misbehave.
@Suite("supervised peers", .startsProcesses, .timeLimit(.minutes(3)))
struct SupervisionTests {
    private typealias Support = SupervisionSupport

    @Test("a supervised peer is launched when the host starts, says hello with the name and key from its file, and is called through its handle; nothing secret is on its command line")
    func launchAndCall() async throws {
        let key = ConnectionKey.generate()
        var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("tcp"), name: "supervisor")
        configuration.signing = .key(key)
        let keyed = BridgeHost(configuration: configuration)
        var peer = try Support.pythonPeer(name: "etl")
        let workingDirectory = URL(fileURLWithPath: NSTemporaryDirectory()).resolvingSymlinksInPath().path
        peer.workingDirectory = workingDirectory
        let etl = try keyed.supervise(peer)
        #expect(etl.state == .starting)
        #expect(etl.pid == nil, "nothing is launched before the host starts")
        try keyed.start()
        try await Support.wait(for: etl, "up", Support.isUp)

        let me = try await etl.call("whoami", nil, timeout: patience)
        let pid = try #require(etl.pid)
        #expect(try await etl.call(Whoami.self, nil, timeout: patience).name == "etl", "typed calls work through the handle")
        #expect(me["name"] == "etl")
        #expect(me["file_peer"] == "etl")
        #expect(me["pid"]?.intValue == Int(pid))
        #expect(me["key"] == .string(key.hex))
        #expect(me["cwd"] == .string(workingDirectory))
        let commandLine = try Support.commandLine(of: pid)
        #expect(!commandLine.contains(key.hex), "the key is never on the command line")
        #expect(!commandLine.contains("connection"), "nor is the connection file: \(commandLine)")

        let file = try #require(me["file"]?.stringValue)
        let fileMode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber
        let folderMode = try FileManager.default.attributesOfItem(atPath: (file as NSString).deletingLastPathComponent)[.posixPermissions] as? NSNumber
        #expect(fileMode?.intValue == 0o600)
        #expect(folderMode?.intValue == 0o700)
        let written = try ConnectionFile.read(file)
        #expect(written.endpoint == keyed.boundEndpoint)
        #expect(written.peer == "etl")
        #expect(written.key == key)

        await keyed.shutdown()
        #expect(etl.state == .stopped)
        #expect(!Support.isRunning(pid), "the host never leaves a child running")
        #expect(!FileManager.default.fileExists(atPath: file), "the connection file is removed")
        await #expect(throws: BridgeError.self) { try await etl.call("whoami", nil, timeout: .seconds(1)) }
    }

    @Test("kill -9: the call in flight fails peer_lost and is not resent, the peer is restarted, and a call made meanwhile waits and succeeds")
    func crashAndRestart() async throws {
        let log = CapturedLog()
        let (host, crashy, firstPID) = try await Support.upPythonPeer("crashy", host: { $0.logger = log.logger("supervisor") },
                                                                      peer: { $0.backoff = .milliseconds(500) })
        let events = crashy.events()

        let inFlight = Task { try await crashy.call("sleep", ["ms": 30_000], timeout: patience) }
        // The call is in flight once the peer's handler runs (it says so on stdout, into the host's log).
        #expect(try await eventually { log.text.contains("sleeping 30000 ms") })
        kill(firstPID, SIGKILL)
        do {
            _ = try await inFlight.value
            Issue.record("the call in flight should have failed")
        } catch let error as BridgeError {
            #expect(error.code == .peerLost, "\(error)")
        }
        try await Support.wait(for: crashy, "restarting") { if case .restarting = $0 { true } else { false } }
        let meanwhile = try await crashy.call("whoami", nil, timeout: patience)
        let secondPID = try #require(crashy.pid)
        #expect(secondPID != firstPID)
        #expect(meanwhile["pid"]?.intValue == Int(secondPID))
        #expect(crashy.restarts == 1)

        var seen: [Supervised.Event] = []
        for await event in events {
            seen.append(event)
            if case .up = event { break }
        }
        #expect(seen.first == .exited(pid: firstPID, .signal(SIGKILL)))
        #expect(seen.contains(.restarting(after: .milliseconds(500))))
        #expect(seen.contains(.started(pid: secondPID)))
        await host.shutdown()
        #expect(!Support.isRunning(secondPID))
    }

    @Test("session(waitingUpTo:) is the process's own session: its calls fail peer_lost once that process is gone, and the next one is waited for")
    func sessionOfOneProcess() async throws {
        let (host, peer, firstPID) = try await Support.upPythonPeer("sessions", peer: { $0.backoff = .milliseconds(300) })
        let first = try await peer.session(waitingUpTo: patience)
        #expect(try await first.call("whoami", nil, timeout: patience)["pid"]?.intValue == Int(firstPID))
        kill(firstPID, SIGKILL)
        try await Support.wait(for: peer, "restarting") { if case .restarting = $0 { true } else { false } }
        #expect(await bridgeError { _ = try await first.call("whoami", nil, timeout: patience) }?.code == .peerLost)
        let second = try await peer.session(waitingUpTo: patience)
        let secondPID = try #require(peer.pid)
        #expect(secondPID != firstPID)
        #expect(try await second.call("whoami", nil, timeout: patience)["pid"]?.intValue == Int(secondPID))
        await peer.stop()
        #expect(await bridgeError { _ = try await peer.session(waitingUpTo: patience) }?.code == .peerLost)
        await host.shutdown()
    }

    @Test("a stopped (SIGSTOP) peer misses heartbeats: it is found hung, SIGKILLed and started again")
    func hangIsDetected() async throws {
        // A peer is found hung after three silent heartbeats: 1 s each, so a loaded machine's slow (not stopped)
        // restarted peer is not taken for hung too, and the test still ends in seconds.
        let (host, sleepy, firstPID) = try await Support.upPythonPeer("sleepy", host: { $0.heartbeat = .seconds(1) },
                                                                      peer: { $0.backoff = .milliseconds(50) })
        let events = sleepy.events()
        kill(firstPID, SIGSTOP)

        var hung = false
        for await event in events {
            if case .hung = event { hung = true }
            if case .up = event { break }
        }
        #expect(hung)
        #expect(!Support.isRunning(firstPID), "the hung process was killed")
        #expect(sleepy.restarts == 1)
        #expect(try await sleepy.call("whoami", nil, timeout: patience)["pid"]?.intValue == Int(try #require(sleepy.pid)))
        await host.shutdown()
    }

    @Test("a program that never says hello is killed after the ready timeout and started again")
    func neverReady() async throws {
        let host = try startConformanceHost(transport: "tcp")
        var peer = Support.shell(name: "silent", "exec sleep 600")
        peer.readyTimeout = .milliseconds(300)
        peer.backoff = .milliseconds(10)
        let silent = try host.supervise(peer)
        let events = silent.events()
        let waited = await bridgeError { _ = try await silent.call("whoami", nil, timeout: .milliseconds(100)) }
        #expect(waited?.code == .timeout, "a call waits for the peer only within its own timeout")
        try await Support.wait(for: silent, "restarted") { _ in silent.restarts >= 1 }
        var hung: String?
        var firstPID: Int32?
        for await event in events {
            if case .started(let pid) = event, firstPID == nil { firstPID = pid }
            if case .hung(let reason) = event { hung = reason; break }
        }
        #expect(hung?.contains("not welcomed") == true, "\(hung ?? "no hung event")")
        if let firstPID { #expect(try await eventually { !Support.isRunning(firstPID) }) }
        await host.shutdown()
        #expect(silent.state == .stopped)
    }

    @Test("a program that exits at once is given up on after the restart limit; calls then fail at once with peer_lost saying why")
    func restartLimit() async throws {
        let host = try startConformanceHost(transport: "tcp")
        var peer = Support.shell(name: "broken", "exit 3")
        peer.restartLimit = 2
        peer.backoff = .milliseconds(10)
        let broken = try host.supervise(peer)
        try await Support.wait(for: broken, "given up") { if case .gaveUp = $0 { true } else { false } }
        #expect(broken.restarts == 2)
        let started = ContinuousClock.now
        do {
            _ = try await broken.call("whoami", nil, timeout: .seconds(30))
            Issue.record("a call to a peer given up on fails")
        } catch let error as BridgeError {
            #expect(error.code == .peerLost)
            #expect(error.message.contains("gave up") && error.message.contains("exit code 3"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(5), "at once, not after the call's timeout")
        #expect(throws: BridgeError.self) { try broken.post("anything", nil) }
        await host.shutdown()
    }

    @Test("a program that cannot be started counts as a failed start: the host gives up after the limit, saying why")
    func cannotStart() async throws {
        let host = try startConformanceHost(transport: "tcp")
        var peer = SupervisedPeer(name: "missing", executable: "/nonexistent/zerobridge-peer")
        peer.restartLimit = 1
        peer.backoff = .milliseconds(10)
        let missing = try host.supervise(peer)
        try await Support.wait(for: missing, "given up") { if case .gaveUp = $0 { true } else { false } }
        guard case .gaveUp(let reason) = missing.state else { return }
        #expect(reason.contains("could not be started"), "\(reason)")
        await host.shutdown()
    }

    @Test("with CURVE (no allow-list) the file carries the host's public key and the launched peer connects encrypted")
    func curve() async throws {
        let keyPair = try CurveKeyPair.generate()
        let (host, etl, _) = try await Support.upPythonPeer("encrypted", host: { $0.curve = .init(keyPair: keyPair) })
        let me = try await etl.call("whoami", nil, timeout: patience)
        let file = try ConnectionFile.read(try #require(me["file"]?.stringValue))
        #expect(file.curveServerKey == keyPair.publicKey)
        #expect(host.peers.first { $0.name == "encrypted" } != nil)
        await host.shutdown()
    }

    @Test("shutdown says bye, and a peer that ignores SIGTERM is SIGKILLed after the grace; output reaches the log by line, long lines in 16 KiB pieces")
    func stopAndOutput() async throws {
        let log = CapturedLog()
        let (host, stubborn, pid) = try await Support.upPythonPeer("stubborn", host: { $0.logger = log.logger("supervisor") }) {
            $0.environment = ["TEST_MODE": "ignore-sigterm long-line"]
            $0.stopGrace = .milliseconds(500)
        }
        let events = stubborn.events()

        await host.shutdown()
        #expect(!Support.isRunning(pid), "SIGKILL after SIGTERM was ignored")
        var seen: [Supervised.Event] = []
        for await event in events { seen.append(event) }
        #expect(seen == [.exited(pid: pid, .signal(SIGKILL)), .stopped])

        let lines = log.text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("peer stubborn starting") && $0.contains("stdout") && $0.hasPrefix("info") })
        #expect(lines.contains { $0.contains("says this on stderr") && $0.contains("stderr") && $0.hasPrefix("warning") })
        #expect(lines.contains { $0.contains("the host said bye") }, "the peer was told bye before it was killed")
        let piece = " " + String(repeating: "x", count: 16 * 1024) + " "
        let rest = " " + String(repeating: "x", count: 40000 - 2 * 16 * 1024) + " "
        #expect(lines.filter { $0.contains(piece) }.count == 2)
        #expect(lines.filter { $0.contains(rest) }.count == 1)
    }

    @Test("a supervised peer runs in a process group of its own, and shutdown stops the whole group: a child it started does not outlive the host")
    func childrenEndWithTheHost() async throws {
        let childFile = scratchDirectory + "zerobridge-child-\(UUID().uuidString.prefix(8)).pid"
        defer { try? FileManager.default.removeItem(atPath: childFile) }
        let (host, spawner, pid) = try await Support.upPythonPeer("spawner", peer: { peer in
            // The child ignores SIGTERM, as a careless worker might: only SIGKILL to the group ends it.
            let python = peer.executable, script = peer.arguments[0]
            peer = Support.shell(name: "spawner", "trap '' TERM; sleep 1000 & echo $! > \(childFile); exec \(python) \(script)")
            peer.readyTimeout = patience
            peer.stopGrace = .milliseconds(500)
        })
        #expect(getpgid(pid) == pid, "the peer leads a process group of its own")
        let child = try #require(Int32(try String(contentsOfFile: childFile, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(getpgid(child) == pid, "its child is in that group")
        #expect(Support.isLive(child))

        await host.shutdown()
        #expect(spawner.state == .stopped)
        #expect(!Support.isLive(pid))
        #expect(!Support.isLive(child), "the peer's child was stopped with it")
    }

    @Test("stop() stops one peer and leaves the host serving; supervising the same name again is allowed then")
    func stopOne() async throws {
        let host = try startConformanceHost(transport: "tcp")
        let first = try host.supervise(try Support.pythonPeer(name: "twice"))
        #expect(throws: BridgeError.self) { try host.supervise(Support.shell(name: "twice", "exit 0")) }
        try await Support.wait(for: first, "up", Support.isUp)
        let pid = try #require(first.pid)
        await first.stop()
        #expect(first.state == .stopped)
        #expect(!Support.isRunning(pid))
        let second = try host.supervise(try Support.pythonPeer(name: "twice"))
        try await Support.wait(for: second, "up", Support.isUp)
        #expect(try await second.call("whoami", nil, timeout: patience)["name"] == "twice")
        await host.shutdown()
    }

    @Test("supervise refuses a host with a CURVE allow-list and a host on inproc")
    func refusals() throws {
        var curved = BridgeHost.Configuration(endpoint: freshEndpoint("tcp"), name: "curved")
        curved.curve = .init(keyPair: try CurveKeyPair.generate(), allowedPeerKeys: [])
        #expect { try BridgeHost(configuration: curved).supervise(Support.shell(name: "p", "true")) } throws: { error in
            (error as? BridgeError)?.code == .notAllowed
        }
        let inproc = BridgeHost(configuration: .init(endpoint: freshEndpoint("inproc"), name: "inproc"))
        #expect(throws: BridgeError.self) { try inproc.supervise(Support.shell(name: "p", "true")) }
        let plain = BridgeHost(configuration: .init(endpoint: freshEndpoint("tcp"), name: "plain"))
        #expect(throws: BridgeError.self) { try plain.supervise(Support.shell(name: "", "true")) }
    }
}

/// The Python test peer's `whoami`, typed.
private enum Whoami: BridgeAction {
    static let name = "whoami"
    typealias Payload = JSONValue
    struct Result: Codable, Sendable { var name: String; var pid: Int }
}
