import Foundation
import Testing
import TestSupport
@testable import ZeroBridge

/// RFC 8785 in Swift (`JSONValue.canonicalText`, the catalogue hash of SPEC 7.8) against PyPI's rfc8785: random
/// values from fuzz/differential/reference.py, parsed by the Swift parser, must canonicalise to rfc8785's bytes.
///
/// One disagreement is known and not fixed here: Swift's `String` compares canonically equivalent texts as equal
/// ("\u{E9}" and "e\u{301}"), so a `JSONValue.object` keeps one of two members whose names differ only in Unicode
/// normalization, where RFC 8259/8785, Python and Node keep both (about 1 random value in 10,000 has such names).
private let equivalentNames = Comment(rawValue: "Swift's String treats canonically equivalent member names as one key")
@Suite("Canonical JSON against rfc8785", .timeLimit(.minutes(3)))
struct CanonicalJSONDifferentialTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("3000 random values (seed 1) canonicalise byte for byte as rfc8785 writes them", .startsProcesses)
    func agreesWithRFC8785() async throws {
        let python = Self.root.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make deps` to create .venv with rfc8785")
        let process = try SpawnedProcess.capturingOutput(python, [
            Self.root.appendingPathComponent("fuzz/differential/reference.py").path, "canonical", "--seed", "1", "--count", "3000"])
        #expect(await waitForExit(process))
        let data = process.output()
        try #require(process.terminationStatus == 0, "fuzz/differential/reference.py failed (is rfc8785 installed? `make deps`): \(String(decoding: data.suffix(2000), as: UTF8.self))")

        var compared = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            let entry = try JSONValue.parse([UInt8](line))
            let text = try #require(entry["text"]?.stringValue)
            let expected = try #require(entry["canonical"]?.stringValue)
            let canonical = try JSONValue.parse(Array(text.utf8)).canonicalText
            if entry["equivalent_names"]?.boolValue == true {
                withKnownIssue(equivalentNames) { #expect(Array(canonical.utf8) == Array(expected.utf8), "the value \(text)") }
            } else {
                #expect(Array(canonical.utf8) == Array(expected.utf8), "the value \(text)")
            }
            compared += 1
        }
        #expect(compared == 3000)
    }

    @Test("two member names that differ only in Unicode normalization are two members, as rfc8785 keeps them")
    func equivalentMemberNames() throws {
        let value = try JSONValue.parse(Array(#"{"\#u{E9}":1,"e\#u{301}":2}"#.utf8))
        withKnownIssue(equivalentNames) {
            #expect(value.canonicalText == #"{"e\#u{301}":2,"\#u{E9}":1}"#)
        }
    }
}
