import Foundation
import Testing
@testable import ZeroBridge

/// One case of `protocol/fixtures/json-texts.json` (SPEC 14.1b): a whole body, as bytes, and whether a receiver
/// accepts it as a valid event or refuses it with `bad_message`.
struct JSONTextCase: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var accept: Bool
    var why: String

    var testDescription: String { name }

    /// protocol/fixtures/json-texts.json, found from this file's place in the repository
    /// (Tests/ZeroBridgeTests/Protocol/ -> the root).
    static let file = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/fixtures/json-texts.json")

    /// Every case, or why they could not be loaded.
    static let loaded: Result<[JSONTextCase], JSONTextLoadError> = load()

    static var all: [JSONTextCase] { (try? loaded.get()) ?? [] }

    struct JSONTextLoadError: Error, CustomStringConvertible {
        var description: String
    }

    private static func load() -> Result<[JSONTextCase], JSONTextLoadError> {
        let document: JSONValue
        do {
            document = try JSONValue.parse([UInt8](Data(contentsOf: file)))
        } catch {
            return .failure(JSONTextLoadError(description: "cannot read \(file.path): \(error)"))
        }
        guard let items = document.arrayValue else { return .failure(JSONTextLoadError(description: "not a list of cases")) }
        var cases: [JSONTextCase] = []
        for (index, item) in items.enumerated() {
            guard let name = item["name"]?.stringValue, let hex = item["hex"]?.stringValue,
                  let verdict = item["verdict"]?.stringValue, verdict == "accept" || verdict == "refuse",
                  let why = item["why"]?.stringValue, let bytes = Self.bytes(hex: hex) else {
                return .failure(JSONTextLoadError(description: "case \(index) is malformed: \(item)"))
            }
            cases.append(JSONTextCase(name: name, bytes: bytes, accept: verdict == "accept", why: why))
        }
        return .success(cases)
    }

    private static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0") ... UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

@Suite("JSON texts: the shared decoder corpus", .timeLimit(.minutes(3)))
struct JSONTextFixtureTests {
    @Test("the corpus is present, with y_, n_ and i_ cases")
    func corpusLoads() throws {
        let cases = try JSONTextCase.loaded.get()
        for prefix in ["y_", "n_", "i_"] {
            #expect(cases.filter { $0.name.hasPrefix(prefix) }.count >= 30, "too few \(prefix) cases in \(JSONTextCase.file.path)")
        }
        #expect(Set(cases.map(\.name)).count == cases.count, "case names repeat")
    }

    /// Through the function the runtime decodes a received body with (Link's receive path), without attachments.
    @Test("each JSON text gets its verdict from Message.decode", arguments: JSONTextCase.all)
    func verdict(_ text: JSONTextCase) {
        let outcome = text.bytes.withUnsafeBytes { Message.decode($0, attachments: []) }
        switch (text.accept, outcome) {
        case (true, .success(let message)):
            guard case .event = message else {
                Issue.record("\(text.name): accepted, but as \(message), not an event")
                return
            }
        case (true, .failure(let failure)):
            Issue.record("\(text.name) (\(text.why)): refused: \(failure.error)")
        case (false, .success(let message)):
            Issue.record("\(text.name) (\(text.why)): accepted as \(String(describing: message).prefix(200))")
        case (false, .failure(let failure)):
            #expect(failure.error.code == .badMessage, "\(text.name): refused with \(failure.error.code), not bad_message")
        }
    }
}
