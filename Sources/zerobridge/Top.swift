import ArgumentParser
import Foundation
import ZeroBridge
import ZeroMQ

/// `zerobridge top`: a running host's `$stats` (SPEC 7.8), refreshed in place, as `top` shows processes.
struct Top: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Watch a running host: sessions, requests in flight, rates, refusals, jobs and supervised peers.",
        discussion: """
            Reads the host's $stats (SPEC 7.8), which a host serves only to callers its configuration admits: a \
            CURVE key on its list, or the holders of its connection key. Refreshes in place until Ctrl-C; --once \
            prints one view and exits, --json prints each snapshot as one line of JSON. For example:
              zerobridge top --connection-file .demo/import-host.json
              zerobridge top --endpoint tcp://127.0.0.1:5555 --json --once
            """)

    @OptionGroup var host: HostOptions

    @Option(help: "With a CURVE host: this peer's CURVE secret key (Z85, in a file of mode 0600), the key the host admits to $stats.")
    var curveSecretKeyFile: String?

    @Option(help: "Milliseconds between refreshes.")
    var intervalMs = 1000

    @Flag(help: "Print one view (or one snapshot with --json) and exit.")
    var once = false

    @Flag(help: "Print each snapshot as one line of JSON (schema: protocol/schema/stats.schema.json) instead of a view.")
    var json = false

    // Unique per process, like `call`'s: a name is not what admits top (SPEC 7.8).
    @Option(help: "The peer name to say hello with (default: zerobridge-top-<pid>).")
    var name = "zerobridge-top-\(getpid())"

    func validate() throws {
        guard host.isGiven else { throw ValidationError("give the host as exactly one of --endpoint or --connection-file") }
        guard intervalMs >= 100 else { throw ValidationError("--interval-ms must be at least 100") }
    }

    func run() async throws {
        let stop = ShutdownSignal(trapping: [SIGINT, SIGTERM])
        let keyPair = try curveSecretKeyFile.map(Self.loadKeyPair)
        let peer: BridgePeer
        do {
            peer = try await host.connectedPeer(name: name, keyPair: keyPair)
        } catch let error as BridgeError {
            FileHandle.standardError.write(Data("error \(error.code): \(error.message)\n".utf8))
            throw ExitCode(1)
        }
        let watching = Task { try await watch(peer) }
        let watcher = Task {
            await stop.wait()
            watching.cancel()
        }
        let outcome = await watching.result
        watcher.cancel()
        await peer.close()
        if !json && !once { Self.write(StatsView.showCursor) }
        switch outcome {
        case .success, .failure(is CancellationError): return
        case .failure(let error as BridgeError) where error.code == .cancelled: return
        case .failure(let error as BridgeError):
            let hint = error.code == .notAllowed ? "\nhint: the host admits callers to $stats by configuration (SPEC 7.8): a CURVE key on its list, or its connection key's holders" : ""
            FileHandle.standardError.write(Data("error \(error.code): \(error.message)\(hint)\n".utf8))
            throw ExitCode(1)
        case .failure(let error):
            throw error
        }
    }

    private func watch(_ peer: BridgePeer) async throws {
        var previous: JSONValue?
        while !Task.isCancelled {
            let snapshot = try await peer.call("$stats", nil, timeout: .seconds(10))
            if json {
                Self.write("\(snapshot)\n")
            } else {
                let view = StatsView(snapshot: snapshot, previous: previous).text
                // In place: home and clear, then the view; once, just the view.
                Self.write(once ? view : StatsView.hideCursor + "\u{1B}[H\u{1B}[2J" + view)
            }
            if once { return }
            previous = snapshot
            try await Task.sleep(for: .milliseconds(intervalMs))
        }
    }

    private static func loadKeyPair(_ path: String) throws -> CurveKeyPair {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("--curve-secret-key-file: \(path) does not exist")
        }
        return try CurveKeys.load(orCreate: path)
    }

    private static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// One screen of `zerobridge top`, from a `$stats` snapshot and the one before it (for rates).
struct StatsView {
    static let hideCursor = "\u{1B}[?25l"
    static let showCursor = "\u{1B}[?25h"
    /// Sessions shown; the count says how many more there are.
    static let maxSessionRows = 20

    let snapshot: JSONValue
    let previous: JSONValue?

    var text: String {
        var lines: [String] = []
        let uptime = snapshot["uptime_ms"]?.intValue ?? 0
        lines.append("host \(snapshot["host"]?.stringValue ?? "?")  library \(snapshot["library_version"]?.stringValue ?? "?")  up \(Self.duration(uptime))")
        let totals = snapshot["totals"]
        lines.append("requests \(count(totals, "requests")) (\(rate("requests"))/s)  failed \(count(totals, "failed"))  events \(count(totals, "events"))  in \(Self.bytes(count(totals, "bytes_in"))) (\(Self.bytes(rateValue("bytes_in")))/s)  out \(Self.bytes(count(totals, "bytes_out"))) (\(Self.bytes(rateValue("bytes_out")))/s)")
        lines.append("progress sent \(count(totals, "progress_sent")) coalesced \(count(totals, "progress_coalesced"))  broadcasts delivered \(count(totals, "broadcasts_delivered")) skipped \(count(totals, "broadcasts_skipped"))")
        let refusals = (snapshot["refusals"]?.objectValue ?? [:]).sorted { $0.key < $1.key }
        lines.append("refusals " + (refusals.isEmpty ? "none" : refusals.map { "\($0.key) \($0.value.intValue ?? 0)" }.joined(separator: "  ")))
        let inFlight = (snapshot["in_flight"]?["requests"]?.objectValue ?? [:]).sorted { $0.key < $1.key }
        lines.append("in flight " + (inFlight.isEmpty ? "none" : inFlight.map { "\($0.key) \($0.value.intValue ?? 0)" }.joined(separator: "  "))
                     + "  events \(snapshot["in_flight"]?["events"]?.intValue ?? 0)")
        if let jobs = snapshot["jobs"]?.objectValue {
            lines.append("jobs " + (jobs.isEmpty ? "none" : jobs.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.intValue ?? 0)" }.joined(separator: "  ")))
        }
        let supervised = snapshot["supervised"]?.arrayValue ?? []
        if !supervised.isEmpty {
            lines.append("supervised " + supervised.map {
                "\($0["name"]?.stringValue ?? "?") \($0["state"]?.stringValue ?? "?") (restarts \($0["restarts"]?.intValue ?? 0))"
            }.joined(separator: "  "))
        }
        let sessions = snapshot["sessions"]?.arrayValue ?? []
        lines.append("")
        lines.append("sessions \(snapshot["session_count"]?.intValue ?? sessions.count)")
        lines.append(Self.row("NAME", "TRANSPORT", "AGE", "IN FLIGHT", "SESSION"))
        for session in sessions.prefix(Self.maxSessionRows) {
            lines.append(Self.row(session["name"]?.stringValue ?? "(anonymous)", session["transport"]?.stringValue ?? "?",
                                  Self.duration(session["age_ms"]?.intValue ?? 0), "\(session["in_flight"]?.intValue ?? 0)",
                                  session["id"]?.stringValue ?? "?"))
        }
        if sessions.count > Self.maxSessionRows { lines.append("... \(sessions.count - Self.maxSessionRows) more") }
        return lines.joined(separator: "\n") + "\n"
    }

    private func count(_ object: JSONValue?, _ key: String) -> Int { object?[key]?.intValue ?? 0 }

    /// Per second, between the previous snapshot and this one; 0 for the first.
    private func rateValue(_ key: String) -> Int {
        guard let previous else { return 0 }
        let elapsed = (snapshot["uptime_ms"]?.intValue ?? 0) - (previous["uptime_ms"]?.intValue ?? 0)
        guard elapsed > 0 else { return 0 }
        let change = count(snapshot["totals"], key) - count(previous["totals"], key)
        return max(0, change) * 1000 / elapsed
    }

    private func rate(_ key: String) -> String { previous == nil ? "-" : "\(rateValue(key))" }

    private static func row(_ name: String, _ transport: String, _ age: String, _ inFlight: String, _ id: String) -> String {
        func pad(_ text: String, _ width: Int) -> String { text.count >= width ? String(text.prefix(width - 1)) + " " : text + String(repeating: " ", count: width - text.count) }
        return pad(name, 28) + pad(transport, 10) + pad(age, 10) + pad(inFlight, 10) + id
    }

    static func duration(_ ms: Int) -> String {
        let seconds = ms / 1000
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m\(seconds % 60)s" }
        return "\(seconds / 3600)h\(seconds / 60 % 60)m"
    }

    static func bytes(_ count: Int) -> String {
        if count < 10_000 { return "\(count) B" }
        if count < 10_000_000 { return "\(count / 1000) kB" }
        return "\(count / 1_000_000) MB"
    }
}
