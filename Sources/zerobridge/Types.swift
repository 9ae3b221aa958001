import ArgumentParser
import Foundation
import ZeroBridge

/// `zerobridge types`: typed clients (Python, TypeScript) from a host's catalogue (`$describe`, SPEC 7.8).
struct Types: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate typed clients from a host's catalogue ($describe, SPEC 7.8): Python, TypeScript, or the catalogue itself.",
        discussion: """
            The catalogue comes from a running host (--endpoint or --connection-file) or from a file saved \
            earlier (--catalogue). The clients wrap a connected peer and check nothing at run time: they give \
            every action a typed method, and tell whether the host's catalogue has changed since. For example:
              zerobridge types --endpoint tcp://127.0.0.1:5555 --python client.py
              zerobridge types --connection-file host.json --typescript web/client \\
                --save-catalogue catalogue.json
              zerobridge types --catalogue catalogue.json --python client.py
            """)

    @OptionGroup var host: HostOptions

    @Option(help: ArgumentHelp("Read the catalogue from this file (a saved $describe result) instead of asking a host.",
                               valueName: "file"))
    var catalogue: String?

    @Option(help: ArgumentHelp("Write a typed Python module here: TypedDicts and an async client class.", valueName: "file.py"))
    var python: String?

    @Option(help: ArgumentHelp("Write an ES module client to BASE.js and its TypeScript declarations to BASE.d.ts.",
                               valueName: "base"))
    var typescript: String?

    @Option(help: ArgumentHelp("Write the catalogue here, pretty-printed, to commit beside the clients.", valueName: "file.json"))
    var saveCatalogue: String?

    @Option(help: "The client class's name (default: from the host's name or the catalogue file's, e.g. ConformanceClient).")
    var className: String?

    @Option(help: "Give up on the host when it has not welcomed this peer, or answered $describe, within this many milliseconds.")
    var timeoutMs = 5_000

    func validate() throws {
        guard host.isGiven != (catalogue != nil) else {
            throw ValidationError("take the catalogue from exactly one of --endpoint, --connection-file or --catalogue")
        }
        guard python != nil || typescript != nil || saveCatalogue != nil else {
            throw ValidationError("nothing to write: give --python, --typescript or --save-catalogue")
        }
        if let className, !Self.isClassName(className) {
            throw ValidationError("--class-name must be an identifier that starts with a capital letter, and not one the clients use: \(className)")
        }
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
    }

    func run() async throws {
        let (json, source, defaultName) = try await loadCatalogue()
        let model: ClientModel
        do {
            model = try ClientModel(catalogue: json, className: className ?? ClientModel.className(from: defaultName))
        } catch {
            throw Failure("\(source) is not a catalogue: \(error)")
        }
        var written: [String] = []
        if let saveCatalogue {
            try write(Self.pretty(json) + "\n", to: saveCatalogue)
            written.append(saveCatalogue)
        }
        if let python {
            try write(PythonClient(model: model).source(), to: python)
            written.append(python)
        }
        if let typescript {
            let base = Self.base(of: typescript)
            let client = TypeScriptClient(model: model)
            try write(client.javaScript(), to: base + ".js")
            try write(client.declarations(), to: base + ".d.ts")
            written += [base + ".js", base + ".d.ts"]
        }
        print("\(model.className): \(model.actions.count) actions, catalogue \(model.hash.prefix(12)); wrote \(written.joined(separator: ", "))")
    }

    /// The catalogue, where it came from (for messages), and the name the client class is named after by default.
    private func loadCatalogue() async throws -> (JSONValue, String, String) {
        if let catalogue {
            guard let data = FileManager.default.contents(atPath: catalogue) else {
                throw Failure("cannot read the catalogue file \(catalogue)")
            }
            guard let json = try? JSONDecoder().decode(JSONValue.self, from: data) else {
                throw Failure("\(catalogue) is not JSON")
            }
            let stem = URL(fileURLWithPath: catalogue).deletingPathExtension().lastPathComponent
            return (json, catalogue, stem)
        }
        let peer: BridgePeer
        let described: Result<JSONValue, any Error>
        do {
            peer = try await host.connectedPeer(name: "zerobridge-types-\(getpid())", timeout: .milliseconds(timeoutMs))
        } catch let error as BridgeError {
            throw Failure(error.message)
        }
        do {
            described = .success(try await peer.describe(timeout: .milliseconds(timeoutMs)))
        } catch {
            described = .failure(error)
        }
        let hostName = peer.welcome?.host ?? "host"
        await peer.close()
        switch described {
        case .success(let json):
            return (json, "the catalogue of \(host.endpoint ?? host.connectionFile ?? "the host")", hostName)
        case .failure(let error as BridgeError) where error.code == .unknownAction:
            throw Failure("the host does not serve $describe (it predates SPEC 1.3): \(error.message)")
        case .failure(let error as BridgeError):
            throw Failure("$describe failed: \(error.code): \(error.message)")
        case .failure(let error):
            throw error
        }
    }

    private func write(_ text: String, to path: String) throws {
        do {
            // The folder too, as generators are usually pointed at a build or source folder that may not exist yet.
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        } catch {
            throw Failure("cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// `client` for `client`, `client.js`, `client.d.ts` or `client.ts`.
    static func base(of path: String) -> String {
        for suffix in [".d.ts", ".js", ".ts"] where path.hasSuffix(suffix) { return String(path.dropLast(suffix.count)) }
        return path
    }

    /// An ASCII identifier starting with a capital (so no keyword of either language), and not a name the code uses.
    static func isClassName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, ("A"..."Z").contains(first),
              !["None", "True", "False"].contains(name), !ClientModel.reservedNames.contains(name) else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_") }
    }

    /// JSON text indented by two spaces, members sorted, as `json.dumps(value, indent=2, sort_keys=True)` writes it.
    static func pretty(_ value: JSONValue, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .array(let items) where !items.isEmpty:
            return "[\n" + items.map { inner + pretty($0, indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let members) where !members.isEmpty:
            let names = members.keys.sorted { $0.utf16.lexicographicallyPrecedes($1.utf16) }
            return "{\n" + names.map { inner + JSONValue.string($0).description + ": " + pretty(members[$0]!, indent: inner) }
                .joined(separator: ",\n") + "\n\(indent)}"
        default:
            return value.description
        }
    }

    /// A failure to report as it is, without the usage.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
