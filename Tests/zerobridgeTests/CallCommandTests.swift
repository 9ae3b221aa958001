import Foundation
import Testing

@Suite("zerobridge call", .timeLimit(.minutes(3)))
struct CallCommandTests {
    @Test("call with a wrong key or no key reports the host's unauthorized answer with a hint, not that the host did not answer")
    func unauthorized() async throws {
        let folder = try temporaryFolder()
        let connectionFile = folder + "/host.json"
        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                                           "--connection-file", connectionFile], in: folder)
        let line = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
        let endpoint = String(line.dropFirst("zerobridge ready ".count))

        let right = try await runZerobridge(["call", "echo", "\"hi\"", "--connection-file", connectionFile])
        #expect(right.status == 0 && right.output == "\"hi\"\n", "stderr: \(right.errors)")

        // The connection file of an earlier run of the host: another key.
        var file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: connectionFile))) as? [String: Any])
        file["key"] = String(repeating: "ab", count: 32)
        let stale = folder + "/stale.json"
        try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: stale))
        let wrongKey = try await runZerobridge(["call", "echo", "\"hi\"", "--connection-file", stale])
        #expect(wrongKey.status == 1)
        #expect(wrongKey.errors.hasPrefix("error unauthorized: no welcome from \(endpoint): the host refused this peer's messages as unauthorized (wrong signature): is the key the host's?"),
                "\(wrongKey.errors)")
        #expect(wrongKey.errors.contains("hint: \(stale) must be the connection file of the host running now"), "\(wrongKey.errors)")
        #expect(!wrongKey.errors.contains("did not answer"))

        let noKey = try await runZerobridge(["call", "echo", "\"hi\"", "--endpoint", endpoint])
        #expect(noKey.status == 1)
        #expect(noKey.errors.hasPrefix("error unauthorized: "), "\(noKey.errors)")
        #expect(noKey.errors.contains("hint: this host requires a key: give its connection file (--connection-file)"), "\(noKey.errors)")
        serve.process.terminate()
        #expect(await serve.exitStatus() == 0, "stderr: \(serve.errors)")
    }
}
