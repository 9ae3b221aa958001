import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import ZeroBridge
import ZeroBridgeConformance

/// What a JUnit file says, read with a real XML parser.
final class JUnitSummary: NSObject, XMLParserDelegate {
    var suiteAttributes: [String: String] = [:]
    var testcases: [String] = []
    var failures: [(testcase: String, message: String)] = []
    private var current = ""

    static func parse(_ path: String) -> JUnitSummary? {
        guard let parser = XMLParser(contentsOf: URL(fileURLWithPath: path)) else { return nil }
        let summary = JUnitSummary()
        parser.delegate = summary
        return parser.parse() ? summary : nil
    }

    func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        switch element {
        case "testsuite": suiteAttributes = attributes
        case "testcase":
            current = attributes["name"] ?? ""
            testcases.append(current)
        case "failure": failures.append((current, attributes["message"] ?? ""))
        default: break
        }
    }
}

@Suite("zerobridge replay", .startsProcesses, .timeLimit(.minutes(3)))
struct ReplayCommandTests {
    let add = conversationsFolder + "/add.json"
    let echo = conversationsFolder + "/echo.json"
    let count = conversationsFolder + "/count-progress.json"

    @Test("replay against the conformance host: one ok line per conversation, exit 0")
    func passingHost() async throws {
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        let run = try await runZerobridge(["replay", add, echo, count, "--endpoint", host.boundEndpoint!])
        #expect(run.status == 0, "\(run.output)\(run.errors)")
        let lines = run.output.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("ok   ") }.count == 3)
        #expect(lines.contains { $0.hasPrefix("ok   add sums two numbers") && $0.hasSuffix(" s)") })
        #expect(run.output.contains("3 conversations: 3 passed, 0 failed"))
    }

    @Test("replay against a host whose add is wrong: exit 1, a diff naming $.result, JUnit XML with the right counts")
    func brokenHost() async throws {
        let host = try startConformanceHost { host in
            try host.handle("add", replacing: true) { payload, _ in
                .int((payload["a"]?.intValue ?? 0) + (payload["b"]?.intValue ?? 0) + 1)  // deliberately off by one
            }
        }
        defer { Task { await host.shutdown() } }
        let junit = try temporaryFolder() + "/replay.xml"
        let run = try await runZerobridge(["replay", add, echo, "--endpoint", host.boundEndpoint!, "--junit", junit])

        #expect(run.status == 1, "\(run.output)\(run.errors)")
        #expect(run.output.contains("FAIL add sums two numbers"))
        #expect(run.output.contains("ok   echo answers its payload"))
        #expect(run.output.contains(#"step 2 of 14 (expect, client "peer"): $.result: expected 3, got 4"#), "\(run.output)")
        #expect(run.output.contains(#"expected: {"v": 1, "type": "response", "id": "a1", "ok": true, "result": 3}"#))
        #expect(run.output.contains(#"received: {"v": 1, "type": "response", "id": "a1", "ok": true, "result": 4}"#))
        #expect(run.output.contains("2 conversations: 1 passed, 1 failed"))

        let report = try #require(JUnitSummary.parse(junit), "the JUnit file is well-formed XML")
        #expect(report.suiteAttributes["tests"] == "2")
        #expect(report.suiteAttributes["failures"] == "1")
        #expect(report.suiteAttributes["errors"] == "0")
        #expect(report.testcases.count == 2)
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.testcase.hasPrefix("add sums two numbers") == true)
        #expect(report.failures.first?.message.contains("$.result: expected 3, got 4") == true)
    }

    @Test("replay finds the endpoint in a connection file without a key, and refuses a keyed one, saying why")
    func connectionFile() async throws {
        for signing in [BridgeHost.Signing.none, .automatic] {
            let file = try temporaryFolder() + "/host.json"
            var configuration = BridgeHost.Configuration(endpoint: "tcp://127.0.0.1:*", name: "conformance")
            configuration.connectionFile = file
            configuration.signing = signing
            let host = BridgeHost(configuration: configuration)
            try Conformance.install(on: host)
            try host.start()
            let run = try await runZerobridge(["replay", echo, "--connection-file", file])
            if case .none = signing {
                #expect(run.status == 0, "\(run.output)\(run.errors)")
            } else {
                #expect(run.status != 0 && run.errors.contains("has a key: replay speaks unsigned"), "\(run.errors)")
            }
            await host.shutdown()
        }
    }

    @Test("replay with no host, no such fixture, or a broken fixture exits non-zero and says why")
    func badInput() async throws {
        let noHost = try await runZerobridge(["replay", echo])
        #expect(noHost.status != 0 && noHost.status != nil)
        #expect(noHost.errors.contains("--endpoint"))

        let missing = try await runZerobridge(["replay", "/nonexistent/fixture.json", "--endpoint", "tcp://127.0.0.1:1"])
        #expect(missing.status == 2)
        #expect(missing.errors.contains("no such file or folder"))

        let broken = try temporaryFolder() + "/broken.json"
        try #"{"format": 1, "description": "x", "clients": ["peer"], "steps": [{"expect": {"v": 1, "type": "pong"}, "client": "nobody"}]}"#
            .write(toFile: broken, atomically: true, encoding: .utf8)
        let invalid = try await runZerobridge(["replay", broken, "--endpoint", "tcp://127.0.0.1:1"])
        #expect(invalid.status == 2)
        #expect(invalid.errors.contains("$.steps[0].client: 'nobody' is not one of the conversation's clients"), "\(invalid.errors)")
    }

    @Test("replay --peer plays the host against a conformance peer (here Node's) for peer conversations")
    func peerConversations() async throws {
        let peerConversations = conversationsFolder.replacingOccurrences(of: "/conversations", with: "/peer-conversations")
        let node = conversationsFolder.replacingOccurrences(of: "protocol/fixtures/conversations", with: "peers/node/bin/conformance-peer.js")
        let run = try await runZerobridge(["replay", peerConversations + "/echo.json", peerConversations + "/count-progress.json",
                                           "--peer", "node \(node)", "--language", "node"])
        #expect(run.status == 0, "\(run.output)\(run.errors)")
        #expect(run.output.contains("2 conversations: 2 passed, 0 failed"))

        let mixedUp = try await runZerobridge(["replay", peerConversations + "/echo.json", "--endpoint", "tcp://127.0.0.1:1"])
        #expect(mixedUp.status == 2)
        #expect(mixedUp.errors.contains("a peer conversation"))
        let noLanguage = try await runZerobridge(["replay", peerConversations, "--peer", "node \(node)"])
        #expect(noLanguage.status != 0 && noLanguage.status != nil)
    }
}
