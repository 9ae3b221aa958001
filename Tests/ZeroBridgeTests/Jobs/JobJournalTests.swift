import Foundation
import Synchronization
import Testing
import TestSupport
import ZeroMQ
@testable import ZeroBridge
@testable import ZeroBridgeJobs
import ZeroBridgeConformance

/// Jobs that say what will happen to them, journals that belong to one host and say what is wrong with them, and
/// jobs that belong to their starter (SPEC 7.16, revision 1.6).
@Suite("Jobs: suspension, the journal file, owners", .timeLimit(.minutes(3)))
struct JobJournalTests {
    private static func journalPath() -> String {
        scratchDirectory + "zb-journal-\(UUID().uuidString.prefix(8)).sqlite"
    }

    private static func host(journal: String, retention: Duration? = nil, setUp: (BridgeHost) throws -> Void = { _ in }) throws -> BridgeHost {
        var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("ipc"), name: "conformance")
        configuration.jobs.journal = .file(journal)
        if let retention { configuration.jobs.retention = retention }
        let host = BridgeHost(configuration: configuration)
        try Conformance.install(on: host)
        try setUp(host)
        try host.start()
        return host
    }

    @Test("a graceful stop tells a checkpointed job's caller 'suspended' (it resumes at the next start), an unchecked one's 'interrupted'")
    func suspendedOnGracefulStop() async throws {
        let journal = Self.journalPath()
        let first = try Self.host(journal: journal)
        let peer = try await connectPeer(first)
        let resumable = peer.stream("countJob", ["n": 1000, "delay_ms": 50, "checkpoint": true], idempotencyKey: "resumable")
        let plain = peer.stream("countJob", ["n": 1000, "delay_ms": 50], idempotencyKey: "plain")
        for call in [resumable, plain] {
            for try await _ in call.progress { break }
        }
        let stopping = Task { await first.shutdown() }
        #expect(await bridgeError { _ = try await resumable.result }?.code == .suspended)
        #expect(await bridgeError { _ = try await plain.result }?.code == .interrupted)
        await stopping.value
        await peer.close()

        let second = try Self.host(journal: journal)
        defer { Task { await second.shutdown() } }
        let again = try await connectPeer(second)
        defer { Task { await again.close() } }
        let records = try await again.jobs(action: "countJob")
        let resumed = try #require(records.first { $0.key == "resumable" })
        #expect(resumed.state == .running && resumed.runs == 2, "the suspended job resumed: \(resumed)")
        #expect(records.first { $0.key == "plain" }?.state == .interrupted)
        _ = try await again.cancelJob(resumed.id)
    }

    @Test("a symbolic link or a hard link to a journal another host holds is refused, naming the file; so is a lone symbolic link")
    func journalLinksRefused() async throws {
        let journal = Self.journalPath()
        let first = try startConformanceHost { $0.jobs.journal = .file(journal) }
        defer { Task { await first.shutdown() } }
        // A second host on the same path is refused by the lock on the file itself.
        let locked = #expect(throws: JournalError.self) { try startConformanceHost { $0.jobs.journal = .file(journal) } }
        #expect(locked?.description.contains(journal) == true && locked?.description.contains("in use") == true)
        let symlink = Self.journalPath(), hardLink = Self.journalPath()
        try FileManager.default.createSymbolicLink(atPath: symlink, withDestinationPath: journal)
        try FileManager.default.linkItem(atPath: journal, toPath: hardLink)
        defer { for path in [symlink, hardLink] { try? FileManager.default.removeItem(atPath: path) } }
        for (path, why) in [(symlink, "symbolic link"), (hardLink, "hard links")] {
            let error = #expect(throws: JournalError.self) { try startConformanceHost { $0.jobs.journal = .file(path) } }
            #expect(error?.description.contains(path) == true && error?.description.contains(why) == true, "\(error.map(String.init(describing:)) ?? "")")
        }
    }

    @Test("a journal and its -wal and -shm are created 0600")
    func journalPrivate() async throws {
        let journal = Self.journalPath()
        let previous = umask(0o022)
        defer { umask(previous) }
        let host = try startConformanceHost { $0.jobs.journal = .file(journal) }
        defer { Task { await host.shutdown() } }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }
        #expect(try await peer.stream("countJob", ["n": 2], idempotencyKey: "private").result == ["n": 2])
        for path in [journal, journal + "-wal", journal + "-shm"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(path) is \(String(mode, radix: 8))")
        }
    }

    @Test("a journal with a damaged page is refused at start, with an error naming the file")
    func damagedJournalRefused() async throws {
        let journal = Self.journalPath()
        let first = try Self.host(journal: journal)
        let peer = try await connectPeer(first)
        for index in 0..<4 {
            #expect(try await peer.stream("countJob", ["n": 100], idempotencyKey: "fill-\(index)").result == ["n": 100])
        }
        await peer.close()
        await first.shutdown()
        // Garbage over the tables' pages, the header page (and the pointer map) left whole: only a check finds it.
        let handle = try #require(FileHandle(forUpdatingAtPath: journal))
        let size = try handle.seekToEnd()
        #expect(size > 8 * 4096)
        try handle.seek(toOffset: 4 * 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 5 * 4096))
        try handle.close()
        let error = #expect(throws: JournalError.self) { _ = try Self.host(journal: journal) }
        #expect(error?.description.contains(journal) == true && error?.description.contains("damaged") == true,
                "\(error.map(String.init(describing:)) ?? "")")
    }

    @Test("retention gives the space it frees back to the disk (auto_vacuum=INCREMENTAL, incremental_vacuum)")
    func retentionReclaimsSpace() async throws {
        let journal = try JobJournal(.file(Self.journalPath()), durability: .normal, maxProgressPerJob: 100_000)
        defer { journal.release() }
        let filler = JSONValue.string(String(repeating: "x", count: 2000))
        for index in 0..<10 {
            let id = "job-\(index)"
            _ = try await journal.insert(id: id, action: "fill", key: nil, owner: "", payload: nil, nowMs: 1)
            for _ in 0..<20 { _ = try await journal.appendProgress(job: id, payload: filler, checkpoint: nil) }
            try await journal.finish(job: id, .success(nil), nowMs: 2)
        }
        let pages = { try await journal.pageCounts() }
        let before = try await pages()
        try await journal.purge(finishedBefore: 3)
        let after = try await pages()
        #expect(after.free == 0, "pages left on the free list: \(after.free)")
        #expect(after.total * 4 < before.total, "\(before.total) pages before the purge, \(after.total) after")
    }

    @Test("a full disk fails the job journal_full at once: its caller is told why, and its record is failed, not running",
          .enabled(if: getuid() == 0, "mounting a small tmpfs for a disk that fills needs root"))
    func diskFull() async throws {
        let directory = scratchDirectory + "zb-full-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try run("/bin/mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", directory)
        defer {
            try? run("/bin/umount", "-l", directory)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let host = try Self.host(journal: directory + "/journal.sqlite") { host in
            try host.job("fill") { _, job in
                let filler = JSONValue.string(String(repeating: "x", count: 64 * 1024))
                while true { try await job.progress(["pad": filler]) }
            }
        }
        let peer = try await connectPeer(host)
        let call = peer.stream("fill", nil, idempotencyKey: "fill-the-disk")
        let error = await bridgeError { _ = try await call.result }
        #expect(error?.code == .journalFull && error?.message.contains("journal.sqlite") == true, "\(String(describing: error))")
        let record = try #require(try await peer.jobs(action: "fill").first)
        #expect(record.state == .failed && record.error?.code == .journalFull, "\(record)")
        await peer.close()
        await host.shutdown()
    }

    @Test("a job belongs to its starter: another peer lists none of it, its key finds the other's own job, and an anonymous peer lists nothing")
    func ownersByName() async throws {
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        let alice = try await connectPeer(host, name: "alice")
        let bob = try await connectPeer(host, name: "bob")
        defer { Task { await bob.close() } }
        let (started, _) = try await alice.startJob("countJob", ["n": 1000, "delay_ms": 50], key: "alice-key")
        #expect(try await alice.jobs().map(\.id) == [started.id])
        #expect(try await bob.jobs().isEmpty)
        #expect(await bridgeError { _ = try await bob.attachJob(action: "countJob", key: "alice-key").result }?.code == .unknownJob)
        let bobs = try await bob.startJob("countJob", ["n": 1], key: "alice-key")
        #expect(bobs.created && bobs.record.id != started.id)

        let anonymous = try RawPeer(host.boundEndpoint!)
        try anonymous.request("l1", "$job.list", nil)
        #expect(try await anonymous.receiveSkippingPings()?["result"] == ["jobs": []])
        try anonymous.request("c1", "$job.cancel", ["action": "countJob", "key": "alice-key"])
        #expect(try await anonymous.receiveSkippingPings()?["error"]?["code"] == "unknown_job")

        // Alice, started again under her name, re-attaches by her key and cancels her job.
        await alice.close()
        let restarted = try await connectPeer(host, name: "alice")
        defer { Task { await restarted.close() } }
        #expect(try await restarted.jobs().map(\.id) == [started.id])
        let attached = restarted.attachJob(action: "countJob", key: "alice-key")
        for try await _ in attached.progress { break }
        #expect(try await restarted.cancelJob(started.id).state == .cancelled)
        #expect(await bridgeError { _ = try await attached.result }?.code == .cancelled)
    }

    @Test("with CURVE a job is its starter's key's alone: another key naming its id hears of no such job")
    func ownersByCurveKey() async throws {
        let (host, server) = try SecurityTests.curveHost()
        defer { Task { await host.shutdown() } }
        let ownerKeys = try CurveKeyPair.generate()
        let owner = try SecurityTests.curvePeer(host, serverKey: server.publicKey, keyPair: ownerKeys, name: "owner")
        let other = try SecurityTests.curvePeer(host, serverKey: server.publicKey, keyPair: try CurveKeyPair.generate(), name: "other")
        try await owner.connect(timeout: patience)
        try await other.connect(timeout: patience)
        defer { Task { await owner.close(); await other.close() } }
        let (started, _) = try await owner.startJob("countJob", ["n": 1000, "delay_ms": 50])
        #expect(await bridgeError { _ = try await other.cancelJob(started.id) }?.code == .unknownJob)
        #expect(await bridgeError { _ = try await other.attachJob(started.id).result }?.code == .unknownJob)
        #expect(try await other.jobs().isEmpty)
        // The same key under another name is still the owner.
        await owner.close()
        let again = try SecurityTests.curvePeer(host, serverKey: server.publicKey, keyPair: ownerKeys, name: "owner-renamed")
        try await again.connect(timeout: patience)
        defer { Task { await again.close() } }
        #expect(try await again.jobs().map(\.id) == [started.id])
        #expect(try await again.cancelJob(started.id).state == .cancelled)
    }
}

/// Runs a program and waits for it; throws when it fails.
private func run(_ executable: String, _ arguments: String...) throws {
    let process = try SpawnedProcess.capturingOutput(executable, arguments)
    process.waitUntilExit()
    let output = String(decoding: process.output(), as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw JournalError(description: "\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(output)")
    }
}
