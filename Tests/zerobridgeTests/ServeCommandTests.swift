import Foundation
import Testing

/// The built `zerobridge` executable, next to this test bundle in the build folder.
let executable: URL = {
    if let path = ProcessInfo.processInfo.environment["ZEROBRIDGE_BIN"], FileManager.default.isExecutableFile(atPath: path) {
        return URL(fileURLWithPath: path)
    }
    return Bundle.main.bundleURL.appendingPathComponent("zerobridge")
}()

/// Runs `zerobridge` with arguments, returning the process and its stdout.
func launch(_ arguments: [String]) throws -> (Process, FileHandle) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    return (process, output.fileHandleForReading)
}

/// Waits for the process to exit; kills it after `limit`, so a regression fails the test instead of hanging the run.
func waitForExit(_ process: Process, limit: Duration = .seconds(10)) {
    let watchdog = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(limit.components.seconds)), execute: watchdog)
    process.waitUntilExit()
    watchdog.cancel()
}

/// Reads one line from a pipe, byte by byte (the process keeps the pipe open).
func readLine(_ handle: FileHandle) -> String {
    var bytes: [UInt8] = []
    while let byte = try? handle.read(upToCount: 1), let first = byte.first, first != 0x0A { bytes.append(first) }
    return String(decoding: bytes, as: UTF8.self)
}

@Suite("zerobridge serve")
struct ServeCommandTests {
    @Test("serve --conformance prints its ready line with the bound endpoint, writes a connection file and stops on SIGTERM")
    func serveConformance() throws {
        let connectionFile = NSTemporaryDirectory() + "zb-\(UUID().uuidString.prefix(8)).json"
        let (process, output) = try launch(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                                            "--connection-file", connectionFile])
        let line = readLine(output)
        #expect(line.hasPrefix("zerobridge ready tcp://127.0.0.1:"))
        let endpoint = String(line.dropFirst("zerobridge ready ".count))
        #expect(!endpoint.hasSuffix("*"))

        let attributes = try FileManager.default.attributesOfItem(atPath: connectionFile)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: connectionFile))) as? [String: Any]
        #expect(file?["endpoint"] as? String == endpoint)
        #expect(file?["protocol"] as? Int == 1)
        #expect(file?["host"] as? String == "conformance")

        process.terminate()
        waitForExit(process)
        #expect(process.terminationStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: connectionFile), "the connection file is removed on shutdown")
    }

    @Test("serve without something to serve, or with a bad endpoint, exits non-zero with a clear message")
    func badArguments() throws {
        let (plain, _) = try launch(["serve"])
        waitForExit(plain)
        #expect(plain.terminationStatus != 0)
        let (badEndpoint, _) = try launch(["serve", "--conformance", "--endpoint", "carrier-pigeon://x"])
        waitForExit(badEndpoint)
        #expect(badEndpoint.terminationStatus != 0)
    }
}
