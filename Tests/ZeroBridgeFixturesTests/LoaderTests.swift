import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import ZeroBridge
import ZeroBridgeFixtures

/// A message case as a test argument, named `"<file>: <group>: <case>"` (SPEC 14.1).
struct MessageCaseArgument: Sendable, CustomTestStringConvertible {
    let messageCase: MessageCase
    var testDescription: String { messageCase.description }

    static let all: [MessageCaseArgument] = {
        (try? FixtureLoader.messageCases(at: [fixturesFolder + "/messages"]))?.map(MessageCaseArgument.init) ?? []
    }()
}

@Suite("Loading fixtures", .timeLimit(.minutes(3)))
struct LoaderTests {
    @Test("the message case files load, every type with valid and invalid cases")
    func messageCasesLoad() throws {
        let cases = try FixtureLoader.messageCases(at: [fixturesFolder + "/messages"])
        #expect(cases.count == MessageCaseArgument.all.count)
        #expect(cases.count >= 100)
        #expect(cases.contains { $0.valid } && cases.contains { !$0.valid && $0.error != nil })
    }

    @Test(arguments: MessageCaseArgument.all)
    func messageCase(_ argument: MessageCaseArgument) {
        #expect(argument.messageCase.disagreementWithDecoder() == nil)
    }

    @Test("a folder yields its conversations only: case files and the schema are passed over")
    func foldersHoldMixedFiles() throws {
        let all = try FixtureLoader.conversations(at: [fixturesFolder])
        let conversations = try FixtureLoader.conversations(at: [fixturesFolder + "/conversations"])
        #expect(all.map(\.description) == conversations.map(\.description))
        #expect(throws: FixtureError.self) { try FixtureLoader.conversations(at: [fixturesFolder + "/messages/hello.json"]) }
    }

    static let brokenFixtures: [(text: String, error: String)] = [
        (#"{"format": 2, "description": "d", "clients": ["p"], "steps": [{"expect_nothing_ms": 1}]}"#, "$.format: must be 1"),
        (#"{"format": 1, "description": "", "clients": ["p"], "steps": [{"expect_nothing_ms": 1}]}"#, "$.description: must be a non-empty string"),
        (#"{"format": 1, "description": "d", "clients": ["Peer"], "steps": [{"expect_nothing_ms": 1}]}"#, "$.clients[0]: must be a client name"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"wait": 1}]}"#, "$.steps[0]: must have exactly one of"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"expect_nothing_ms": 0}]}"#, "$.steps[0].expect_nothing_ms: must be an integer from 1 to 600000"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"expect": {"v": {"$anything": 1}}}]}"#, "$.steps[0].expect.v: $anything is not a matcher"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"expect": {"v": {"$any": "float"}}}]}"#, "$.steps[0].expect.v.$any: must be one of"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"send": {"id": {"$capture": "x"}}}]}"#, "$.steps[0].send.id: $capture is not a template"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"send": {"v": 1}, "within_ms": 5}]}"#, "$.steps[0].within_ms: is not a field of this object"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"send_frames": [{"hex": "00"}]}]}"#, "$.steps[0].send_frames[0]: a frame is one of"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"send": {"v": 1}, "repeat": 0}]}"#, "$.steps[0].repeat: must be an integer from 1 to 100000"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": [{"expect": {"id": {"$var": "9x"}}}]}"#, "$.steps[0].expect.id.$var: must be a variable name"),
        (#"{"format": 1, "description": "d", "clients": ["p"], "steps": []"#, "$: not JSON"),
    ]

    @Test("a fixture that breaks the format is refused with the path of what is wrong")
    func brokenFixturesAreRefused() {
        for (text, expected) in Self.brokenFixtures {
            do {
                _ = try Conversation(json: Array(text.utf8), file: "broken.json")
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.description.hasPrefix("broken.json: \(error.path)"))
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }
}

@Suite("JUnit XML", .timeLimit(.minutes(3)))
struct JUnitReportTests {
    @Test("counts, and descriptions and diffs with XML's special characters, survive a real XML parser")
    func parsable() async throws {
        let host = try ScriptedRouter { _ in ScriptedRouter.frames(#"{"v":1,"type":"pong"}"#) }
        defer { host.stop() }
        let runner = ConversationRunner(endpoint: host.endpoint)
        let passing = try Conversation(json: Array(#"""
            {"format": 1, "description": "pong <&> \"quoted\" 'single'", "clients": ["p"],
             "steps": [{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "pong"}}]}
            """#.utf8), file: "a&b.json")
        let failing = try Conversation(json: Array(#"""
            {"format": 1, "description": "wants <ping>\u0001", "clients": ["p"],
             "steps": [{"send": {"v": 1, "type": "ping"}}, {"expect": {"v": 1, "type": "ping", "x": "<&>"}}]}
            """#.utf8))
        let results = await runner.run([passing, failing])
        let xml = JUnitReport.xml(for: results)

        final class Reader: NSObject, XMLParserDelegate {
            var suites: [[String: String]] = []
            var names: [String] = []
            var failureMessages: [String] = []
            var text = ""
            func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
                        attributes: [String: String] = [:]) {
                if element == "testsuite" { suites.append(attributes) }
                if element == "testcase" { names.append(attributes["name"] ?? "") }
                if element == "failure" { failureMessages.append(attributes["message"] ?? "") }
            }
            func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
        }
        let reader = Reader()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = reader
        #expect(parser.parse(), "\(xml)")
        #expect(reader.suites.first?["tests"] == "2")
        #expect(reader.suites.first?["failures"] == "1")
        #expect(reader.names == ["pong <&> \"quoted\" 'single'", "wants <ping>\u{FFFD}"])
        #expect(reader.failureMessages.first?.contains(#"$.type: expected "ping", got "pong""#) == true)
        #expect(reader.text.contains(#"expected: {"v": 1, "type": "ping", "x": "<&>"}"#))
    }
}
