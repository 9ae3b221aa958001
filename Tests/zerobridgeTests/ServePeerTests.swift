import Foundation
import Testing
import ZeroBridge

/// `zerobridge serve --peer NAME=COMMAND` (SPEC 10.1, 11): a Node peer launched and kept running by the host, driven
/// through the conformance host's `callPeer`.
@Suite("zerobridge serve --peer", .startsProcesses, .timeLimit(.minutes(3)))
struct ServePeerTests {
    /// A Node peer that finds its host only through its environment and answers `whoami` with its pid.
    private static func nodePeer(in folder: String) throws -> String {
        let library = URL(fileURLWithPath: conversationsFolder).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("peers/node/index.js").path
        let script = folder + "/peer.mjs"
        try """
            import { connect } from '\(library)';
            const peer = await connect(process.env.ZEROBRIDGE_CONNECTION_FILE, {
              name: process.env.ZEROBRIDGE_PEER_NAME,
              actions: { whoami: () => ({ name: process.env.ZEROBRIDGE_PEER_NAME, pid: process.pid }) },
            });
            console.log(`node peer ${peer.name} up`);
            process.on('SIGTERM', async () => { await peer.close(); process.exit(0); });
            """.write(toFile: script, atomically: true, encoding: .utf8)
        return script
    }

    @Test("serve --peer launches the peer once it listens (one ready line), callPeer reaches it and waits for it through a crash, and SIGTERM stops it")
    func servePeer() async throws {
        let folder = try temporaryFolder()
        let script = try Self.nodePeer(in: folder)
        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*", "--log-level", "info",
                                           "--peer", "nodey=node '\(script)'"], in: folder)
        let line = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
        let endpoint = String(line.dropFirst("zerobridge ready ".count))
        let peer = try BridgePeer(configuration: .init(endpoint: endpoint, name: "driver"))
        try await peer.connect(timeout: patience)

        let timeout: JSONValue = .int(Int(patience / .milliseconds(1)))
        let first = try await peer.call("callPeer", ["peer": "nodey", "action": "whoami", "timeout_ms": timeout], timeout: patience)
        #expect(first["name"] == "nodey")
        let firstPID = try #require(first["pid"]?.intValue.map(Int32.init))
        let commandLine = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(firstPID)/cmdline")), as: UTF8.self)
        #expect(commandLine.contains("peer.mjs") && !commandLine.contains("/bin/sh"), "exec replaced the shell: \(commandLine)")

        kill(firstPID, SIGKILL)
        // A call made before the host notices the exit would go to the lost session and fail peer_lost (it cannot
        // know); once it has noticed (its log says so), a call waits for the restart.
        #expect(try await eventually { (serve.output + serve.errors).contains("supervised peer down: restarting") })
        let second = try await peer.call("callPeer", ["peer": "nodey", "action": "whoami", "timeout_ms": timeout], timeout: patience)
        let secondPID = try #require(second["pid"]?.intValue.map(Int32.init))
        #expect(secondPID != firstPID)

        let unknown = await #expect(throws: BridgeError.self) {
            try await peer.call("callPeer", ["peer": "nobody", "action": "whoami"], timeout: patience)
        }
        #expect(unknown?.code == .peerLost)
        let invalid = await #expect(throws: BridgeError.self) {
            try await peer.call("callPeer", ["peer": "nodey"], timeout: patience)
        }
        #expect(invalid?.code == .invalidPayload)
        await peer.close()

        serve.process.terminate()
        #expect(await serve.exitStatus() == 0, "stderr: \(serve.errors)")
        #expect(kill(secondPID, 0) != 0, "the host never leaves a peer it launched running")
        #expect(serve.output.split(separator: "\n").filter { $0.hasPrefix("zerobridge ready") }.count == 1)
        #expect(serve.output.contains("node peer nodey up") || serve.errors.contains("node peer nodey up"),
                "the peer's output is in the host's log")
    }

    @Test("serve refuses a --peer that is not NAME=COMMAND")
    func badPeerOption() async throws {
        for option in ["no-equals-sign", "=node x.js", "name="] {
            let result = try await runZerobridge(["serve", "--conformance", "--peer", option])
            #expect(result.status != nil && result.status != 0)
            #expect(result.errors.contains("NAME=COMMAND"), "\(result.errors)")
        }
    }
}
