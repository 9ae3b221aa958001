import Foundation
import Testing
@_exported import TestSupport
@_spi(Fixtures) import ZeroBridge
import ZeroBridgeConformance
import ZeroMQ

/// protocol/fixtures/conversations, found from this file's place in the repository.
let conversationsFolder = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("protocol/fixtures/conversations").path

/// A fresh temporary folder for one test.
func temporaryFolder() throws -> String {
    let path = scratchDirectory + "zb-fixtures-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A `zerobridge` process whose output goes to files (no pipe to fill up), awaited without blocking a thread.
final class ZerobridgeProcess: @unchecked Sendable {  // the process is only started, polled and signalled
    let process: SpawnedProcess
    let outputPath: String
    let errorPath: String

    /// Starts `zerobridge` with `arguments`; with `openFileLimit`, under that limit (soft and hard, as `ulimit -n`).
    init(_ arguments: [String], in folder: String, openFileLimit: Int? = nil) throws {
        outputPath = folder + "/stdout-\(UUID().uuidString.prefix(6)).txt"
        errorPath = outputPath.replacingOccurrences(of: "stdout-", with: "stderr-")
        if let openFileLimit {
            process = try SpawnedProcess("/bin/sh", ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", executable.path] + arguments,
                                         stdoutPath: outputPath, stderrPath: errorPath)
        } else {
            process = try SpawnedProcess(executable.path, arguments, stdoutPath: outputPath, stderrPath: errorPath)
        }
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// The exit status, or nil (after killing the process) when it has not exited within `timeout`.
    func exitStatus(within timeout: Duration = patience) async -> Int32? {
        await waitForExit(process, limit: timeout) ? process.terminationStatus : nil
    }

    /// The first output line that starts with `prefix`, waiting up to `timeout` for it.
    func line(startingWith prefix: String, within timeout: Duration = patience) async throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) { return String(line) }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}

/// Runs `zerobridge` with arguments to the end: its exit status and what it printed.
func runZerobridge(_ arguments: [String]) async throws -> (status: Int32?, output: String, errors: String) {
    let process = try ZerobridgeProcess(arguments, in: try temporaryFolder())
    let status = await process.exitStatus()
    return (status, process.output, process.errors)
}

/// An in-process host serving the conformance actions on a fresh TCP port, with the limits the fixtures assume.
func startConformanceHost(_ change: (BridgeHost) throws -> Void = { _ in }) throws -> BridgeHost {
    var configuration = BridgeHost.Configuration(endpoint: "tcp://127.0.0.1:*", name: "conformance")
    configuration.maxMessageBytes = 1_048_576
    configuration.maxInFlight = 256
    configuration.info = Conformance.info
    configuration.statsAccess = Conformance.statsAccess
    let host = BridgeHost(configuration: configuration)
    try Conformance.install(on: host)
    try change(host)
    try host.start()
    return host
}

/// A bare DEALER, as a user's own peer would be. It polls rather than blocks, so waiting tests do not hold the
/// cooperative threads an in-process host needs.
final class ScriptedPeer: @unchecked Sendable {
    let socket: Socket

    init(connectingTo endpoint: String) throws {
        socket = try Socket(.dealer, context: Context())
        try socket.set(.linger(milliseconds: 0))
        try socket.connect(endpoint)
    }

    func send(_ body: JSONValue) throws { try socket.send([[], Array(body.description.utf8)]) }

    func receive(timeout: Duration = patience) async throws -> JSONValue? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let frames = try socket.receiveBytes(dontWait: true), frames.count >= 2 {
                return try FixtureCodec.parse(frames[1])
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }
}
