import Foundation
import Testing
import TestSupport
@testable import ZeroBridge

/// RFC 8785 in Swift (`JSONValue.canonicalText`, the catalogue hash of SPEC 7.8) against PyPI's rfc8785: random
/// values from fuzz/differential/reference.py, parsed by the Swift parser, must canonicalise to rfc8785's bytes.
@Suite("Canonical JSON against rfc8785", .startsProcesses, .timeLimit(.minutes(3)))
struct CanonicalJSONDifferentialTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("3000 random values (seed 1) canonicalise byte for byte as rfc8785 writes them")
    func agreesWithRFC8785() async throws {
        let python = Self.root.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make deps` to create .venv with rfc8785")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.root.appendingPathComponent("fuzz/differential/reference.py").path, "canonical",
                             "--seed", "1", "--count", "3000"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = try await onOwnThread { output.fileHandleForReading.readDataToEndOfFile() }
        #expect(await waitForExit(process))
        try #require(process.terminationStatus == 0, "fuzz/differential/reference.py failed (is rfc8785 installed? `make deps`)")

        var compared = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            let entry = try JSONValue.parse([UInt8](line))
            let text = try #require(entry["text"]?.stringValue)
            let expected = try #require(entry["canonical"]?.stringValue)
            let canonical = try JSONValue.parse(Array(text.utf8)).canonicalText
            #expect(Array(canonical.utf8) == Array(expected.utf8), "the value \(text)")
            compared += 1
        }
        #expect(compared == 3000)
    }
}
