import ArgumentParser
import Dispatch
import Foundation
import Logging
import ZeroBridge

/// The import service: a ZeroBridge host serving `importFolder`, `search` and `stats` over a SQLite database,
/// with Markdown parsing delegated to a connected Node ETL peer.
@main
struct ImportHostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-host",
        abstract: "Import folders of CSV, JSON and Markdown files into SQLite; search them. Prints `zerobridge ready <endpoint>` once it listens.")

    @Option(help: "Where to bind: tcp://127.0.0.1:5570 (port * picks a free one), or ipc:///path.")
    var endpoint = "tcp://127.0.0.1:*"

    @Option(help: "The SQLite database (created, and migrated, as needed).")
    var database = ".demo/import.sqlite"

    @Option(help: "Where to write the connection file front-ends read (mode 0600); removed at exit.")
    var connectionFile = ".demo/import-host.json"

    @Option(help: "The name of the peer that parses Markdown (it serves parseMarkdown).")
    var etlPeer = "etl"

    @Option(help: "How long one parseMarkdown call to the ETL peer may take, in milliseconds.")
    var etlTimeoutMs = 5000

    @Option(help: "A folder importFolder may read, with everything below it (repeatable; default: the current folder). Paths outside, through .. or symbolic links, are refused.")
    var importRoot: [String] = []

    @Option(help: "The job journal (SQLite): importFolder runs as a job that outlives its caller's connection and this host process (SPEC 7.16), so a front-end that comes back re-attaches to it.")
    var journal = ".demo/import-jobs.sqlite"

    @Flag(help: "Serve importFolder as an ordinary request instead of a job, without a journal (for comparing their cost: make bench).")
    var noJobs = false

    @Flag(help: "Run without a connection key (by default the connection file carries a new one, and every message must be signed with it). For tools that speak unsigned, such as zerobridge record and replay.")
    var noKey = false

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .warning

    func validate() throws {
        guard etlTimeoutMs > 0 else { throw ValidationError("--etl-timeout-ms must be positive") }
    }

    func run() async throws {
        var logger = Logger(label: "import-host")
        logger.logLevel = logLevel
        let catalog = try Catalog(path: URL(fileURLWithPath: database).standardizedFileURL.path)

        var configuration = BridgeHost.Configuration(endpoint: endpoint, name: "import-host")
        try FileManager.default.createDirectory(atPath: (connectionFile as NSString).deletingLastPathComponent.nonEmpty ?? ".",
                                                withIntermediateDirectories: true)
        configuration.connectionFile = connectionFile
        configuration.logger = logger
        if noKey { configuration.signing = .none }
        if !noJobs {
            let journalPath = URL(fileURLWithPath: journal).standardizedFileURL
            try FileManager.default.createDirectory(at: journalPath.deletingLastPathComponent(), withIntermediateDirectories: true)
            configuration.jobs.journal = .file(journalPath.path)
        }
        // An import in flight at shutdown is cancelled after this; whole files only are ever written.
        configuration.drainTimeout = .seconds(2)
        let host = BridgeHost(configuration: configuration)

        let importer = FolderImport(
            catalog: catalog, roots: try ImportRoots(importRoot.isEmpty ? ["."] : importRoot),
            etlPeer: { [weak host, etlPeer] in host?.peers.first { $0.name == etlPeer } },
            etlName: etlPeer, etlTimeout: .milliseconds(etlTimeoutMs))
        if noJobs {
            try host.handle(ImportFolder.self) { payload, request in
                try await importer.run(payload) { try await request.progress($0) }
            }
        } else {
            // A job: its progress and result are journaled, and survive the caller (SPEC 7.16). It keeps no
            // checkpoint: a host restart leaves it `interrupted` (each file is in the database whole or not at all).
            try host.job(ImportFolder.self) { payload, job in
                try await importer.run(payload) { try await job.progress($0) }
            }
        }
        try host.handle(Search.self) { payload, _ in try await catalog.search(payload) }
        try host.handle(Stats.self) { _, _ in try await catalog.stats() }

        try host.start()
        // Signals are caught before the ready line, so a stop sent right after it is not lost.
        let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
        FileHandle.standardOutput.write(Data("zerobridge ready \(host.boundEndpoint ?? endpoint)\n".utf8))
        FileHandle.standardError.write(Data("import-host: database \(catalog.path)\n".utf8))
        await stop.wait()
        await host.shutdown()
    }
}

private extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
