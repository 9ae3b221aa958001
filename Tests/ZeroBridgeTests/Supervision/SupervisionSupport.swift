import Foundation
import Testing
@testable import ZeroBridge
@testable import ZeroBridgeSupervision

/// Small real peer programs for supervision tests, and what the tests check about processes.
enum SupervisionSupport {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The repository's Python with the Python peer installed (`make deps`).
    static func python() throws -> String {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make deps` to create .venv with the Python peer")
        return python
    }

    /// A Python peer that finds its host only through its environment (SPEC 10.1). `TEST_MODE` (in its environment)
    /// may hold `ignore-sigterm` and `long-line`; `TEST_HEARTBEAT_MS` asks the host for a heartbeat.
    static let pythonPeerSource = """
        import asyncio, json, logging, os, signal, sys
        import zerobridge

        async def main() -> None:
            path = os.environ["ZEROBRIDGE_CONNECTION_FILE"]
            name = os.environ["ZEROBRIDGE_PEER_NAME"]
            mode = os.environ.get("TEST_MODE", "")
            if "ignore-sigterm" in mode:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # The library's own lines (such as losing the host to its bye) go to stdout, into the host's log.
            logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
            print(f"peer {name} starting", flush=True)
            print(f"peer {name} says this on stderr", file=sys.stderr, flush=True)
            if "long-line" in mode:
                print("x" * 40000, flush=True)
            with open(path) as file:
                connection = json.load(file)
            heartbeat = int(os.environ.get("TEST_HEARTBEAT_MS", "0")) or None

            async def whoami(payload):
                return {"name": name, "pid": os.getpid(), "key": connection["key"], "file_peer": connection.get("peer"),
                        "file": path, "cwd": os.getcwd()}

            async def sleep(payload):
                print(f"sleeping {payload['ms']} ms", flush=True)
                await asyncio.sleep(payload["ms"] / 1000)
                return {"slept_ms": payload["ms"]}

            async with zerobridge.connect(path, name=name, handlers={"whoami": whoami, "sleep": sleep}, heartbeat_ms=heartbeat):
                await asyncio.Event().wait()

        asyncio.run(main())
        """

    /// The Python peer above, written to a fresh folder; the arguments to give Python.
    static func pythonPeer(name: String) throws -> SupervisedPeer {
        let folder = scratchDirectory + "zerobridge-supervision-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let script = folder + "/supervised_peer.py"
        try pythonPeerSource.write(toFile: script, atomically: true, encoding: .utf8)
        var peer = SupervisedPeer(name: name, executable: try python(), arguments: [script])
        peer.readyTimeout = patience
        peer.stopGrace = .seconds(2)
        return peer
    }

    /// A conformance host supervising the Python peer above, once that peer is up: the host, the peer's handle and
    /// its pid.
    static func upPythonPeer(
        _ name: String, host configureHost: (inout BridgeHost.Configuration) -> Void = { _ in },
        peer configurePeer: (inout SupervisedPeer) -> Void = { _ in }
    ) async throws -> (BridgeHost, Supervised, Int32) {
        let host = try startConformanceHost(transport: "tcp", configure: configureHost)
        var peer = try pythonPeer(name: name)
        configurePeer(&peer)
        let supervised = try host.supervise(peer)
        try await wait(for: supervised, "up", isUp)
        return (host, supervised, try #require(supervised.pid))
    }

    /// A program under `/bin/sh -c`.
    static func shell(name: String, _ command: String) -> SupervisedPeer {
        SupervisedPeer(name: name, executable: "/bin/sh", arguments: ["-c", command])
    }

    /// Whether a process with this pid exists (the host reaps its children, so an exited one does not).
    static func isRunning(_ pid: Int32) -> Bool { kill(pid, 0) == 0 }

    /// Whether a process with this pid runs: it exists and is not a zombie (an orphan that exited and waits for init).
    static func isLive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let nameEnd = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: nameEnd)...].split(separator: " ").first != "Z"
    }

    /// A process's command line, its arguments joined by spaces.
    static func commandLine(of pid: Int32) throws -> String {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))
        return String(decoding: bytes.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }

    /// Waits until the supervised peer is in a state `matching` says.
    static func wait(for supervised: Supervised, _ what: String = "the expected state",
                     _ matching: @escaping (Supervised.State) -> Bool) async throws {
        let reached = try await eventually { matching(supervised.state) }
        try #require(reached, "\(supervised.name) never reached \(what); it is \(supervised.state)")
    }

    static func isUp(_ state: Supervised.State) -> Bool {
        if case .up = state { return true }
        return false
    }
}
