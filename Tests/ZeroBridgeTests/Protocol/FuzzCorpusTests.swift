import Foundation
import Testing
@testable import ZeroBridge

/// The fuzzers' corpora (fuzz/corpus/swift-json and swift-message, SECURITY.md), replayed on every test run: what the
/// fuzzers once found stays fixed. Each input is parsed or decoded, and what is accepted must survive a round trip,
/// as the fuzz targets (fuzz/swift/) check.
@Suite("Fuzz corpora replayed")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz/corpus")

    static func inputs(_ name: String) throws -> [(name: String, bytes: [UInt8])] {
        let folder = corpus.appendingPathComponent(name)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        return try names.map { ($0, [UInt8](try Data(contentsOf: folder.appendingPathComponent($0)))) }
    }

    @Test("every JSON parser input is parsed or refused, and what is accepted is written back to the same value")
    func jsonParser() throws {
        let inputs = try Self.inputs("swift-json")
        #expect(inputs.count > 100, "the corpus is missing: fuzz/corpus/swift-json")
        for input in inputs {
            _ = try? JSONValue.parse(input.bytes)
            guard let value = try? JSONValue.parse(input.bytes, maxDepth: JSONValue.maxSupportedDepth) else { continue }
            let written = value.serialized()
            let reparsed = try JSONValue.parse(written, maxDepth: JSONValue.maxSupportedDepth)
            #expect(reparsed == value, "\(input.name)")
            #expect(reparsed.serialized() == written, "\(input.name)")
        }
    }

    @Test("every message decoder input is decoded or refused, and a decoded message encodes to the same message")
    func messageDecoder() throws {
        let inputs = try Self.inputs("swift-message")
        #expect(inputs.count > 100, "the corpus is missing: fuzz/corpus/swift-message")
        let attachments: [[UInt8]] = [Array("first attachment".utf8), [0, 0xFF, 0x7B]]
        for input in inputs {
            let decoded = input.bytes.withUnsafeBytes { Message.decode($0, attachments: attachments) }
            guard case .success(let message) = decoded else { continue }
            let frames = message.frames()
            let again = frames[0].withUnsafeBytes { Message.decode($0, attachments: Array(frames.dropFirst())) }
            #expect(again == .success(message), "\(input.name)")
        }
    }
}
