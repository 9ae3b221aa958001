import ArgumentParser
import Dispatch
import Foundation
import Logging
import Tracing
import ZeroBridge
import ZeroBridgeJobs
import ZeroBridgeSupervision
import ZeroBridgePrometheus

/// The import service: a ZeroBridge host serving `importFolder`, `search` and `stats` over a SQLite database. It reads
/// the files; the Node ETL peer parses them (their bytes go to it as attachments); `catalogChanged` is broadcast on
/// the topic `catalog` when an import has written to the database.
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

    @Option(help: "The name of the peer that parses the files (it serves importFile).")
    var etlPeer = "etl"

    @Option(help: ArgumentHelp(
        "Launch the ETL peer and keep it running (SPEC 10.1): COMMAND runs as /bin/sh -c 'exec COMMAND', for example 'node examples/etl-peer/etl-peer.mjs'. Without it, an ETL peer started beside the host connects by itself.",
        discussion: "The peer finds this host through ZEROBRIDGE_CONNECTION_FILE and ZEROBRIDGE_PEER_NAME (--etl-peer) in its environment. It is restarted when it exits, hangs or is not welcomed within 10 s (backoff 0.25 s doubling to 8 s; after 5 restarts within 60 s the host gives up on it: stats says so, and files fail etl_unavailable), and stopped with the host (bye, SIGTERM, SIGKILL). Its output goes to the log at info (stdout) and warning (stderr).",
        valueName: "COMMAND"))
    var etlCommand: String?

    @Option(help: "How long one call to the ETL peer may take, in milliseconds, waiting for it to (re)connect included.")
    var etlTimeoutMs = 5000

    @Option(help: "The largest file importFolder reads, in bytes: a file goes whole to the ETL peer in one message, and its records come back in one.")
    var maxFileBytes = 4 << 20

    @Option(help: "A folder importFolder may read, with everything below it (repeatable; default: the current folder). Paths outside, through .. or through any symbolic link, are refused, and so are files with more than one hard link.")
    var importRoot: [String] = []

    @Option(help: "The job journal (SQLite): importFolder runs as a job that outlives its caller's connection and this host process (SPEC 7.16), so a front-end that comes back re-attaches to it.")
    var journal = ".demo/import-jobs.sqlite"

    @Option(help: ArgumentHelp(
        "Serve the import service's page from this folder (examples/web) on loopback, and accept the browser's WebSocket connections beside the ZeroMQ ones (SPEC 2.2); prints `zerobridge page URL`.",
        valueName: "DIR"))
    var webRoot: String?

    @Option(help: "With --web-root: the loopback port of the page and its WebSocket (0 picks a free one).")
    var webPort = 0

    @Flag(help: "Serve importFolder as an ordinary request instead of a job, without a journal (for comparing their cost: make bench).")
    var noJobs = false

    @Flag(help: "Run without a connection key (by default the connection file carries a new one, and every message must be signed with it). For tools that speak unsigned, such as zerobridge record and replay.")
    var noKey = false

    @Flag(help: "Record spans in memory, continuing and passing on W3C trace context (SPEC 7.18), and serve them as the action recordedSpans: to follow a trace from a front-end through this host into the ETL peer without a tracing backend.")
    var recordSpans = false

    @Option(help: "Which requests run in a span when spans are recorded: all, or sampled-by-caller (only those whose caller sampled their trace; the others carry it through unchanged, and cost the tracer nothing).")
    var tracedRequests: TracedRequestsChoice = .all

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .warning

    @Option(help: ArgumentHelp(
        "Serve Prometheus metrics over HTTP (GET /metrics) at PORT on loopback, or at HOST:PORT (0 picks a port); printed to stderr as `import-host metrics URL`.",
        valueName: "[HOST:]PORT"))
    var metrics: String?

    func validate() throws {
        guard (0...65535).contains(webPort) else { throw ValidationError("--web-port takes a port, 0 to 65535") }
        guard etlTimeoutMs > 0 else { throw ValidationError("--etl-timeout-ms must be positive") }
        guard (1...128).contains(etlPeer.count) else { throw ValidationError("--etl-peer takes a name of 1 to 128 characters") }
        if let etlCommand, etlCommand.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--etl-command takes a command, for example 'node examples/etl-peer/etl-peer.mjs'")
        }
        // The records of a file come back bigger than the file (its text twice: the body, and the fields): room for 3x.
        guard maxFileBytes > 0, maxFileBytes <= Self.maxMessageBytes / 3 else {
            throw ValidationError("--max-file-bytes must be between 1 and \(Self.maxMessageBytes / 3)")
        }
        if let metrics {
            do { _ = try MetricsEndpoint.ListenAddress.parse(metrics) } catch { throw ValidationError("--metrics: \(error)") }
        }
    }

    func run() async throws {
        var logger = Logger(label: "import-host")
        logger.logLevel = logLevel
        let spans = recordSpans ? SpanRecorder() : nil
        if let spans { InstrumentationSystem.bootstrap(spans) }
        let catalog = try Catalog(path: URL(fileURLWithPath: database).standardizedFileURL.path)

        var configuration = BridgeHost.Configuration(endpoint: endpoint, name: "import-host")
        try FileManager.default.createDirectory(atPath: (connectionFile as NSString).deletingLastPathComponent.nonEmpty ?? ".",
                                                withIntermediateDirectories: true)
        configuration.connectionFile = connectionFile
        configuration.maxMessageBytes = Self.maxMessageBytes
        configuration.logger = logger
        if noKey { configuration.signing = .none }
        configuration.tracedRequests = tracedRequests.policy
        // The page is a front-end like the others: the host injects the endpoint and key into it, and its WebSocket
        // session is keyed as theirs are.
        if let webRoot { configuration.webSocket = WebSocketOptions(port: webPort, webRoot: webRoot) }
        if !noJobs {
            let journalPath = URL(fileURLWithPath: journal).standardizedFileURL
            try FileManager.default.createDirectory(at: journalPath.deletingLastPathComponent(), withIntermediateDirectories: true)
            configuration.jobs.journal = .file(journalPath.path)
        }
        // An import in flight at shutdown is cancelled after this; whole files only are ever written.
        configuration.drainTimeout = .seconds(2)
        // `zerobridge top --connection-file` reads $stats with the key this host writes to its connection file, which
        // only its owner can read (mode 0600); with --no-key nobody may (SPEC 7.8).
        configuration.statsAccess = .init(connectionKeyHolders: true)
        // Bootstrapped before the host is made, which makes its metric objects against the backend it finds.
        var metricsEndpoint: MetricsEndpoint?
        if let metrics { metricsEndpoint = try await MetricsEndpoint.bootstrapAndStart(at: metrics, announcingAs: "import-host") }
        let host = BridgeHost(configuration: configuration)

        let etl = try etlCommand.map { command in
            EtlPeer.supervised(try host.supervise(.shell(name: etlPeer, command: command)), timeout: .milliseconds(etlTimeoutMs))
        } ?? EtlPeer.connecting(to: host, name: etlPeer, timeout: .milliseconds(etlTimeoutMs))
        // ZEROBRIDGE_IMPORT_NO_OPENAT2=1 forces the fallback that kernels without openat2 get (the tests run both).
        let roots = try ImportRoots(importRoot.isEmpty ? ["."] : importRoot,
                                    allowOpenat2: ProcessInfo.processInfo.environment["ZEROBRIDGE_IMPORT_NO_OPENAT2"] != "1")
        let importer = FolderImport(
            catalog: catalog, roots: roots, maxFileBytes: maxFileBytes,
            etl: etl,
            announce: { [weak host, logger] change in
                do {
                    try await host?.broadcast(CatalogChanged.self, change, topic: CatalogChanged.topic)
                } catch {
                    logger.warning("catalogChanged was not broadcast: \(error)")
                }
            })
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
        try host.handle(Folders.self) { _, _ in try roots.folders() }
        if let spans { try host.handle("recordedSpans") { _, _ in spans.finished } }
        try host.handle(Stats.self) { [weak host, etlPeer] _, _ in
            var stats = try await catalog.stats()
            stats.etl = etl.status(connected: host?.peers.contains { $0.name == etlPeer && $0.isConnected } ?? false)
            return stats
        }

        try host.start()
        let watching = etl.watch(host)
        // Signals are caught before the ready line, so a stop sent right after it is not lost.
        let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
        FileHandle.standardOutput.write(Data("zerobridge ready \(host.boundEndpoint ?? endpoint)\n".utf8))
        if let page = host.pageURL { FileHandle.standardOutput.write(Data("zerobridge page \(page)\n".utf8)) }
        FileHandle.standardError.write(Data("import-host: database \(catalog.path)\n".utf8))
        FileHandle.standardError.write(Data("import-host: files are opened beneath the import roots with \(roots.opening.rawValue)\n".utf8))
        await stop.wait()
        await host.shutdown()
        watching.cancel()
        await metricsEndpoint?.stop()
    }
}

extension ImportHostCommand {
    /// The host's `max_message_bytes` (its default): what one file's records may take on their way back.
    static let maxMessageBytes = 16 << 20
}

private extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// `--traced-requests`: ZeroBridge's ``TracedRequests`` as the command line spells it.
enum TracedRequestsChoice: String, ExpressibleByArgument, CaseIterable {
    case all
    case sampledByCaller = "sampled-by-caller"

    var policy: TracedRequests { self == .all ? .all : .sampledByCaller }
}
