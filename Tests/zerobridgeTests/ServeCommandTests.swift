import Foundation
import Testing
import ZeroMQ

/// The built `zerobridge` executable, next to this test bundle in the build folder.
let executable: URL = {
    if let path = ProcessInfo.processInfo.environment["ZEROBRIDGE_BIN"], FileManager.default.isExecutableFile(atPath: path) {
        return URL(fileURLWithPath: path)
    }
    return Bundle.main.bundleURL.appendingPathComponent("zerobridge")
}()

@Suite("zerobridge serve", .startsProcesses, .timeLimit(.minutes(3)))
struct ServeCommandTests {
    @Test("serve --conformance prints its ready line with the bound endpoint, writes a connection file and stops on SIGTERM")
    func serveConformance() async throws {
        let folder = try temporaryFolder()
        let connectionFile = folder + "/connection.json"
        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                                           "--connection-file", connectionFile], in: folder)
        let line = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
        #expect(line.hasPrefix("zerobridge ready tcp://127.0.0.1:"))
        let endpoint = String(line.dropFirst("zerobridge ready ".count))
        #expect(!endpoint.hasSuffix("*"))

        let attributes = try FileManager.default.attributesOfItem(atPath: connectionFile)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: connectionFile))) as? [String: Any]
        #expect(file?["endpoint"] as? String == endpoint)
        #expect(file?["protocol"] as? Int == 1)
        #expect(file?["host"] as? String == "conformance")

        serve.process.terminate()
        #expect(await serve.exitStatus() == 0, "stderr: \(serve.errors)")
        #expect(!FileManager.default.fileExists(atPath: connectionFile), "the connection file is removed on shutdown")
    }

    @Test("serve without something to serve, or with a bad endpoint, exits non-zero with a clear message")
    func badArguments() async throws {
        let plain = try await runZerobridge(["serve"])
        #expect(plain.status != nil && plain.status != 0)
        let badEndpoint = try await runZerobridge(["serve", "--conformance", "--endpoint", "carrier-pigeon://x"])
        #expect(badEndpoint.status != nil && badEndpoint.status != 0)
        #expect(!badEndpoint.errors.isEmpty, "says why")
    }

    @Test("serve --curve-secret-key-file keeps the host's key between runs and puts its public key in the connection file; --allow-peer-keys is checked")
    func serveWithCurve() async throws {
        let folder = try temporaryFolder()
        let keyFile = folder + "/host.key", connectionFile = folder + "/connection.json"
        let allowFile = folder + "/peers.txt"
        // '#' is a Z85 character: a key that holds one (or starts with one) is still a key.
        var peer = try CurveKeyPair.generate()
        while !peer.publicKey.contains("#") { peer = try CurveKeyPair.generate() }
        try "# the one peer\n\(peer.publicKey)  # its note\n".write(toFile: allowFile, atomically: true, encoding: .utf8)
        var publicKeys: [String] = []
        for _ in 0..<2 {
            let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                                               "--curve-secret-key-file", keyFile, "--allow-peer-keys", allowFile,
                                               "--connection-file", connectionFile], in: folder)
            _ = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
            let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: connectionFile))) as? [String: Any]
            publicKeys.append(try #require(file?["curve_server_key"] as? String))
            serve.process.terminate()
            #expect(await serve.exitStatus() == 0, "stderr: \(serve.errors)")
        }
        #expect(publicKeys[0] == publicKeys[1], "the same key on the second run")
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)

        try "not-a-key\n".write(toFile: allowFile, atomically: true, encoding: .utf8)
        let refused = try await runZerobridge(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*", "--allow-peer-keys", allowFile])
        #expect(refused.status != nil && refused.status != 0)
        #expect(refused.errors.contains("peers.txt:1: not a CURVE public key"), "\(refused.errors)")
    }

    @Test("past what its open-file limit allows, serve sheds new connections and says so in its log, without spinning, and accepts again once some are free")
    func outOfDescriptors() async throws {
        let folder = try temporaryFolder()
        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*"], in: folder,
                                          openFileLimit: 64)
        let line = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
        let endpoint = String(line.dropFirst("zerobridge ready ".count))
        let context = try Context()
        var dealers: [Socket] = []
        for _ in 0..<100 {
            let dealer = try Socket(.dealer, context: context)
            try dealer.set(.linger(milliseconds: 0))
            try dealer.connect(endpoint)
            try dealer.send([[], Array(#"{"v":1,"type":"ping"}"#.utf8)])
            dealers.append(dealer)
        }
        // A limit of 64 leaves the host its reserve of 64 and 1 connection (SPEC 7.17): the rest are shed.
        #expect(try await eventually { serve.errors.contains("connection shed") }, "stderr: \(serve.errors)")

        // Not spinning: over two seconds of wall time, the host uses far less than two seconds of CPU (a core spun by
        // libzmq's failing accept would use all of it), even on a loaded machine.
        let before = try cpuTime(of: serve.process.processIdentifier)
        try await Task.sleep(for: .seconds(2))
        let used = try cpuTime(of: serve.process.processIdentifier) - before
        #expect(used < .milliseconds(1200), "the host used \(used) of CPU in 2 s")

        for dealer in dealers { dealer.close() }
        dealers.removeAll()
        // The host learns of those closes as it reads their events, and until then a newcomer may be shed too; a
        // shed connection loses what was sent on it, so the newcomer tries again on a new connection each second.
        var newcomer: Socket?
        var lastTry = ContinuousClock.now - .seconds(1)
        let answered = try await eventually {
            if ContinuousClock.now - lastTry >= .seconds(1) {
                newcomer?.close()
                let socket = try Socket(.dealer, context: context)
                try socket.set(.linger(milliseconds: 0))
                try socket.connect(endpoint)
                try socket.send([[], Array(#"{"v":1,"type":"request","id":"e","action":"echo","payload":"back"}"#.utf8)])
                newcomer = socket
                lastTry = ContinuousClock.now
            }
            guard let frames = try newcomer?.receiveBytes(dontWait: true) else { return false }
            return String(decoding: frames[1], as: UTF8.self).contains(#""result":"back""#)
        }
        #expect(answered, "listening again once descriptors are free; stderr: \(serve.errors)")
        newcomer?.close()
        serve.process.terminate()
        #expect(await serve.exitStatus() == 0)
    }
}

/// The CPU time (user and system) a process has used, from /proc.
private func cpuTime(of pid: Int32) throws -> Duration {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // Fields after the command name (which is in parentheses and may hold spaces): utime and stime are 14 and 15.
    let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
    let ticks = (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    return .milliseconds(ticks * 1000 / Int(sysconf(Int32(_SC_CLK_TCK))))
}
