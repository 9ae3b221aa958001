import Foundation
import Testing

/// protocol/fixtures/catalogues/conformance-host.json: what the conformance host's `$describe` answers.
private let conformanceCatalogue = URL(fileURLWithPath: conversationsFolder)
    .deletingLastPathComponent().appendingPathComponent("catalogues/conformance-host.json").path

@Suite("zerobridge types", .startsProcesses, .timeLimit(.minutes(3)))
struct TypesCommandTests {
    @Test("types writes the same clients from the saved conformance catalogue and from a live conformance host, and saves the catalogue as the fixture has it")
    func fileAndLiveHostAgree() async throws {
        let folder = try temporaryFolder()
        let fromFile = try await runZerobridge([
            "types", "--catalogue", conformanceCatalogue, "--class-name", "ConformanceClient",
            "--python", folder + "/file.py", "--typescript", folder + "/file",
        ])
        #expect(fromFile.status == 0, "stderr: \(fromFile.errors)")

        let serve = try ZerobridgeProcess(["serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*"], in: folder)
        defer { serve.process.terminate() }
        let line = try #require(try await serve.line(startingWith: "zerobridge ready "), "stderr: \(serve.errors)")
        let endpoint = String(line.dropFirst("zerobridge ready ".count))
        // No --class-name: named after the host, `conformance`.
        let fromHost = try await runZerobridge([
            "types", "--endpoint", endpoint, "--python", folder + "/live.py", "--typescript", folder + "/live.d.ts",
            "--save-catalogue", folder + "/live.json",
        ])
        #expect(fromHost.status == 0, "stderr: \(fromHost.errors)")
        #expect(fromHost.output.contains("ConformanceClient: 12 actions"), "\(fromHost.output)")

        func read(_ name: String) throws -> String { try String(contentsOfFile: folder + "/" + name, encoding: .utf8) }
        #expect(try read("live.json") == (try String(contentsOfFile: conformanceCatalogue, encoding: .utf8)))
        for suffix in [".py", ".js", ".d.ts"] {
            #expect(try read("live" + suffix) == (try read("file" + suffix)), "live\(suffix) differs from file\(suffix)")
        }

        let python = try read("live.py")
        for declaration in [
            "from __future__ import annotations",
            #"CATALOGUE = "e97d86d1c0c293fc5a555ebcd0b6f8892075f8370a7bb035c801cec80cafdb1d""#,
            "class CountPayload(TypedDict):\n    \"\"\"The payload of `count`.\"\"\"\n\n    delay_ms: NotRequired[int | None]\n    n: int\n",
            "class CountProgress(TypedDict):", "class CountResult(TypedDict):", "class SleepResult(TypedDict):",
            "    arguments: NotRequired[dict[str, Any] | None]",
            "class TypedStream(Generic[ProgressT, ResultT]):",
            "class ConformanceClient:",
            "    def __init__(self, peer: zerobridge.Peer) -> None:",
            "        return self.peer.host_catalogue == CATALOGUE",
            "    async def add(self, payload: AddPayload, *, timeout: float | None = 30.0) -> float:",
            "    async def count(self, payload: CountPayload, *, timeout: float | None = 30.0) -> CountResult:",
            "        return cast(CountResult, await self.peer.call(\"count\", payload, timeout=timeout))",
            "    def count_stream(\n        self, payload: CountPayload, *, timeout: float | None = 30.0\n    ) -> TypedStream[CountProgress, CountResult]:",
            "        return TypedStream(self.peer.stream(\"count\", payload, timeout=timeout))",
            "    async def echo(self, payload: Any = None, *, timeout: float | None = 30.0) -> Any:",
            "    async def once(self, payload: Any = None, *, timeout: float | None = 30.0) -> Any:",
            "        \"\"\"Waits ms milliseconds; honours cancel and timeouts.\"\"\"",
            // countJob is a job (SPEC 7.16): its methods take an idempotency key and pass it on.
            "idempotency_key: str | None = None",
            "return TypedStream(self.peer.stream(\"countJob\", payload, timeout=timeout, idempotency_key=idempotency_key))",
        ] {
            #expect(python.contains(declaration), "the Python client lacks \(declaration)")
        }
        #expect(!python.contains("def sleep_stream"), "only count has progress")

        let declarations = try read("live.d.ts")
        for declaration in [
            "import type { CallOptions, Peer, StreamingCall } from 'zerobridge';",
            #"export declare const CATALOGUE: "e97d86d1c0c293fc5a555ebcd0b6f8892075f8370a7bb035c801cec80cafdb1d";"#,
            "export interface CountPayload {\n  delay_ms?: number | null;\n  n: number;\n}",
            "export interface EvaluatePayload {\n  arguments?: { [key: string]: unknown } | null;\n  script: string;\n}",
            "export declare class ConformanceClient {\n  constructor(peer: Peer);",
            "  catalogueIsCurrent(): boolean;",
            "  add(payload: AddPayload, options?: CallOptions): Promise<number>;",
            "  count(payload: CountPayload, options?: CallOptions): Promise<CountResult>;",
            "  countStream(payload: CountPayload, options?: CallOptions): StreamingCall<CountProgress, CountResult>;",
            "  echo(payload?: unknown, options?: CallOptions): Promise<unknown>;",
            "  sleep(payload: SleepPayload, options?: CallOptions): Promise<SleepResult>;",
        ] {
            #expect(declarations.contains(declaration), "the declarations lack \(declaration)")
        }
        let module = try read("live.js")
        for line in [
            #"export const CATALOGUE = "e97d86d1c0c293fc5a555ebcd0b6f8892075f8370a7bb035c801cec80cafdb1d";"#,
            "export class ConformanceClient {",
            "  countStream(payload, options) {\n    return this.peer.stream(\"count\", payload, options);\n  }",
            "  sleep(payload, options) {\n    return this.peer.call(\"sleep\", payload, options);\n  }",
        ] {
            #expect(module.contains(line), "the ES module lacks \(line)")
        }
    }

    @Test("types says what is wrong with a bad catalogue file, a missing one, an unreachable host, and bad arguments")
    func failures() async throws {
        let folder = try temporaryFolder()
        let notJSON = folder + "/not.json", notCatalogue = folder + "/bad.json"
        try "{\"catalogue\": ".write(toFile: notJSON, atomically: true, encoding: .utf8)
        try #"{"catalogue": "11b58985cb8c2add36d88b74c5665a1b43db2dbb79cfee825fa9371fcf7099b7", "actions": [{"doc": ""}]}"#
            .write(toFile: notCatalogue, atomically: true, encoding: .utf8)
        let cases: [([String], String)] = [
            (["--catalogue", notJSON], "not.json is not JSON"),
            (["--catalogue", notCatalogue], "bad.json is not a catalogue: actions[0] has no name"),
            (["--catalogue", folder + "/missing.json"], "cannot read the catalogue file"),
            (["--endpoint", "tcp://127.0.0.1:9", "--timeout-ms", "1000"], "no welcome from tcp://127.0.0.1:9"),
            (["--catalogue", notJSON, "--endpoint", "tcp://127.0.0.1:9"], "exactly one of --endpoint, --connection-file or --catalogue"),
            (["--catalogue", conformanceCatalogue, "--class-name", "class"], "--class-name must be an identifier"),
        ]
        for (arguments, message) in cases {
            let run = try await runZerobridge(["types"] + arguments + ["--python", folder + "/out.py"])
            #expect(run.status != nil && run.status != 0, "\(arguments)")
            #expect(run.errors.contains(message), "\(arguments): \(run.errors)")
        }
        let nothing = try await runZerobridge(["types", "--catalogue", conformanceCatalogue])
        #expect(nothing.status != 0 && nothing.errors.contains("nothing to write"), "\(nothing.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/out.py"))
    }
}
