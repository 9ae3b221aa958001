import Foundation
import Testing
@testable import ZeroBridge

/// One case of `protocol/fixtures/messages/*.json`: a body and whether a receiver must accept it.
struct MessageFixture: Sendable, CustomTestStringConvertible {
    var file: String
    var group: String
    var description: String
    var data: JSONValue
    var valid: Bool
    var error: BridgeError.Code?
    /// The trace context a receiver decodes (SPEC 7.18, 14.1): an object, null for none, nil when the case says nothing.
    var trace: JSONValue? = nil

    var testDescription: String { "\(file): \(group) / \(description)" }

    /// protocol/fixtures/messages, found from this file's place in the repository
    /// (Tests/ZeroBridgeTests/Protocol/ -> the root).
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/fixtures/messages")

    /// Every case, or the reason they could not be loaded.
    static let loaded: Result<[MessageFixture], FixtureLoadError> = load()

    static var all: [MessageFixture] { (try? loaded.get()) ?? [] }

    struct FixtureLoadError: Error, CustomStringConvertible {
        var description: String
    }

    private static func load() -> Result<[MessageFixture], FixtureLoadError> {
        let files: [URL]
        do {
            files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension == "json" }
                .sorted { $0.lastPathComponent < $1.lastPathComponent }
        } catch {
            return .failure(FixtureLoadError(description: "cannot list \(folder.path): \(error)"))
        }
        var fixtures: [MessageFixture] = []
        for file in files {
            let name = file.deletingPathExtension().lastPathComponent
            do {
                let document = try JSONValue.parse([UInt8](Data(contentsOf: file)), maxDepth: 512)
                guard let groups = document.arrayValue else { throw FixtureLoadError(description: "not an array of groups") }
                for group in groups {
                    guard let groupName = group["description"]?.stringValue, let tests = group["tests"]?.arrayValue else {
                        throw FixtureLoadError(description: "a group without description or tests")
                    }
                    for test in tests {
                        guard let description = test["description"]?.stringValue, let data = test["data"],
                              let valid = test["valid"]?.boolValue else {
                            throw FixtureLoadError(description: "a case without description, data or valid in '\(groupName)'")
                        }
                        fixtures.append(MessageFixture(file: name, group: groupName, description: description, data: data,
                                                       valid: valid, error: test["error"]?.stringValue.map(BridgeError.Code.init(rawValue:)),
                                                       trace: test["trace"]))
                    }
                }
            } catch {
                return .failure(FixtureLoadError(description: "\(file.lastPathComponent): \(error)"))
            }
        }
        return .success(fixtures)
    }

    /// The fields each type defines. A decoded message keeps exactly these, so they are what `json` is compared on.
    static let fields: [String: Set<String>] = [
        "request": ["id", "action", "payload", "timeout_ms", "deadline", "progress", "idempotency_key"],
        "response": ["id", "ok", "result", "error"],
        "progress": ["id", "seq", "payload", "skipped"],
        "event": ["action", "payload"],
        "cancel": ["id"],
        "hello": ["peer", "actions", "features", "session", "heartbeat_ms"],
        "welcome": ["host", "session", "actions", "heartbeat_ms", "limits", "library_version", "batch"],
        "ping": [], "pong": [], "bye": [],
    ]

    /// What a receiver's decoded message must be as JSON: the fixture's body without unknown fields (also inside
    /// `error` and `limits`), with the protocol's defaults filled in, and `"progress": false` dropped (the encoder
    /// writes only true).
    var expectedJSON: JSONValue {
        guard case .object(let members) = data, let type = members["type"]?.stringValue,
              let known = Self.fields[type] else { return data }
        var expected = members.filter { known.contains($0.key) || $0.key == "v" || $0.key == "type" }
        // Trace context is kept only as the case says it decodes: valid, or ignored (SPEC 7.18).
        if case .object(let trace)? = trace {
            expected["traceparent"] = trace["traceparent"]
            expected["tracestate"] = trace["tracestate"]
        }
        switch type {
        case "request":
            expected["payload"] = expected["payload"] ?? .null
            if expected["progress"] == false { expected["progress"] = nil }
        case "progress", "event":
            expected["payload"] = expected["payload"] ?? .null
        case "response":
            if expected["ok"] == true { expected["result"] = expected["result"] ?? .null }
            if case .object(let error)? = expected["error"] {
                expected["error"] = .object(error.filter { ["code", "message", "data"].contains($0.key) })
            }
        case "hello":
            expected["actions"] = expected["actions"] ?? []
            expected["features"] = expected["features"] ?? []
        case "welcome":
            if case .object(let limits)? = expected["limits"] {
                expected["limits"] = .object(limits.filter { ["max_message_bytes", "max_in_flight"].contains($0.key) })
            }
            if expected["batch"] == false { expected["batch"] = nil }  // the encoder writes only true
        default:
            break
        }
        return .object(expected)
    }
}

@Suite("Protocol message fixtures", .timeLimit(.minutes(3)))
struct MessageFixtureTests {
    @Test("the fixture files are present and readable")
    func fixturesLoad() throws {
        let fixtures = try MessageFixture.loaded.get()
        #expect(fixtures.count > 100, "only \(fixtures.count) cases in \(MessageFixture.folder.path)")
        #expect(fixtures.contains { $0.valid } && fixtures.contains { !$0.valid })
    }

    @Test("each fixture decodes as the protocol says", arguments: MessageFixture.all)
    func fixture(_ fixture: MessageFixture) {
        // Through the wire path (bytes) and through an already-parsed value.
        let outcomes = [("bytes", Message.decode(fixture.data.serialized())), ("value", Message.decode(fixture.data))]
        for (path, outcome) in outcomes {
            switch (fixture.valid, outcome) {
            case (true, .success(let message)):
                #expect(message.json == fixture.expectedJSON, "\(path)")
                // And the re-encoded message reads back the same.
                #expect((try? Message.decode(message.encoded()).get().json) == message.json, "\(path)")
            case (true, .failure(let failure)):
                Issue.record("\(path): rejected a valid body: \(failure)")
            case (false, .success(let message)):
                Issue.record("\(path): accepted an invalid body as \(message)")
            case (false, .failure(let failure)):
                if let code = fixture.error { #expect(failure.error.code == code, "\(path): \(failure)") }
                #expect(!failure.error.message.isEmpty)
                // The id is echoed only when it is readable.
                if let id = failure.id {
                    #expect(fixture.data["id"] == .string(id) && Message.isValidName(id), "\(path)")
                } else if case .string(let id)? = fixture.data["id"] {
                    #expect(!Message.isValidName(id), "\(path): a readable id was not echoed")
                }
            }
        }
    }
}
