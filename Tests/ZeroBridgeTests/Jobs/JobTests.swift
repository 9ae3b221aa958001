import Foundation
import Synchronization
import Testing
@testable import ZeroBridge
@testable import ZeroBridgeJobs
import ZeroBridgeConformance

/// Jobs (SPEC 7.16) on the Swift host, through the Swift peer and raw sockets: the journal, attaching, idempotency,
/// flow control, restarts and bounds.
@Suite("Jobs", .timeLimit(.minutes(3)))
struct JobTests {
    @Test("a job action streams like any request; its key attaches a retry to it; $job.list says it ran once")
    func streamAndRetry() async throws {
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }

        let first = peer.stream("countJob", ["n": 3], idempotencyKey: "stream-once")
        var seen: [JobProgress] = []
        for try await step in first.progress { seen.append(step) }
        #expect(try await first.result == ["n": 3])
        #expect(seen.map(\.seq) == [1, 2, 3])
        #expect(seen.map(\.payload) == [["i": 1, "n": 3], ["i": 2, "n": 3], ["i": 3, "n": 3]])

        // A retry with the same key (and another payload) attaches to the finished job: the same progress, result.
        let retry = peer.stream("countJob", ["n": 99], idempotencyKey: "stream-once")
        var replayed: [Int] = []
        for try await step in retry.progress { replayed.append(step.seq) }
        #expect(try await retry.result == ["n": 3])
        #expect(replayed == [1, 2, 3])

        let records = try await peer.jobs(action: "countJob")
        let record = try #require(records.first { $0.key == "stream-once" })
        #expect(record.state == .succeeded && record.runs == 1 && record.lastSeq == 3 && record.finishedMs != nil)
        #expect(records.filter { $0.key == "stream-once" }.count == 1)
        let (again, created) = try await peer.startJob("countJob", ["n": 1], key: "stream-once")
        #expect(!created && again.id == record.id)
    }

    @Test("a caller that goes away detaches; started again, it attaches after the last seq it saw and gets the rest exactly once")
    func attachAfterDisconnect() async throws {
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        let first = try await connectPeer(host, name: "first")
        let started = first.stream("countJob", ["n": 40, "delay_ms": 10], idempotencyKey: "handover")
        var seen: [JobProgress] = []
        for try await step in started.progress {
            seen.append(step)
            if seen.count == 5 { break }
        }
        await first.close()

        // The same front-end started again (its name, its key): a job is its starter's (SPEC 7.16). The first one's
        // bye and this one's hello come over two connections, and a loaded host may read the hello first: it waits
        // for the name, as a restarted front-end does (name_taken at once failed this test in a full run).
        var restarted = BridgePeer.Configuration(endpoint: host.boundEndpoint!, name: "first")
        restarted.context = host.configuration.context
        restarted.waitsForName = true
        let second = try BridgePeer(configuration: restarted)
        try await second.connect(timeout: patience)
        defer { Task { await second.close() } }
        let attached = second.attachJob(action: "countJob", key: "handover", afterSeq: seen.last!.seq)
        for try await step in attached.progress { seen.append(step) }
        #expect(try await attached.result == ["n": 40])
        #expect(seen.map(\.seq) == Array(1...40))
        #expect(seen.map { $0.payload["i"] } == (1...40).map { .int($0) })
        #expect(seen.allSatisfy { $0.skipped == nil })
    }

    @Test("a stalled reader holds up neither the job nor the host's memory, and then gets every message, none coalesced")
    func stalledReader() async throws {
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }
        let n = 20_000
        let (record, _) = try await peer.startJob("countJob", ["n": .int(n)])

        let reader = try RawPeer(host.boundEndpoint!)
        try reader.request("a1", "$job.attach", ["job": .string(record.id)], extra: ["progress": true])
        // The reader takes nothing while the job runs to its end: the job waits only for its journal.
        #expect(try await eventually { try await host.jobRecord(record.id)?.state == .succeeded })
        let queued = try #require(await host.sessionOutboxBytes().max())
        #expect(queued <= Outbox.maxQueuedBytes + JobService.batch * 256, "\(queued) bytes queued for a stalled reader")

        var seqs: [Int] = []
        while let body = try await reader.receiveSkippingPings() {
            if body["type"] == "response" {
                #expect(body["result"] == ["n": .int(n)])
                break
            }
            #expect(body["skipped"] == nil)
            seqs.append(body["seq"]!.intValue!)
        }
        #expect(seqs == Array(1...n))
    }

    @Test("idempotency keys are per action, recorded before the handler starts: concurrent starts with one key run it once")
    func keysRunOnce() async throws {
        let runs = Atomic<Int>(0)
        let host = try startConformanceHost()
        defer { Task { await host.shutdown() } }
        for action in ["tally", "other"] {
            try host.job(action) { payload, _ in
                runs.add(1, ordering: .relaxed)
                return payload
            }
        }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }
        let starts = try await withThrowingTaskGroup(of: (JobRecord, Bool).self) { group in
            for _ in 0..<20 { group.addTask { try await peer.startJob("tally", 1, key: "shared") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(starts.map(\.0.id)).count == 1)
        #expect(starts.filter(\.1).count == 1)
        let other = try await peer.startJob("other", 2, key: "shared")
        #expect(other.created && other.record.id != starts[0].0.id)
        #expect(try await peer.attachJob(other.record.id).result == 2)
        #expect(try await eventually { runs.load(ordering: .relaxed) == 2 })
    }

    @Test("a host shut down mid-job: the next one on the journal resumes a checkpointed job; one without is interrupted")
    func restartOnTheJournal() async throws {
        let journal = scratchDirectory + "zb-journal-\(UUID().uuidString.prefix(8)).sqlite"
        let started = Atomic<Int>(0)
        let released = Atomic<Bool>(false)
        // Job actions are registered before start(), so that recovery finds their handlers.
        func host() throws -> BridgeHost {
            var configuration = BridgeHost.Configuration(endpoint: freshEndpoint("ipc"), name: "conformance")
            configuration.jobs.journal = .file(journal)
            let host = BridgeHost(configuration: configuration)
            try Conformance.install(on: host)
            try host.job("hold") { _, job in
                try await job.checkpoint(["stage": 1])
                started.add(1, ordering: .relaxed)
                while !released.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(5)) }
                return ["resumed": job.resumedFrom ?? nil]
            }
            try host.start()
            return host
        }
        let first = try host()
        let peer = try await connectPeer(first)
        let plain = try await peer.startJob("countJob", ["n": 1000, "delay_ms": 50])
        let held = try await peer.startJob("hold")
        #expect(try await eventually { started.load(ordering: .relaxed) == 1 })
        await peer.close()
        await first.shutdown()

        let second = try host()
        defer { Task { await second.shutdown() } }
        let plainAfter = try #require(try await second.jobRecord(plain.record.id))
        #expect(plainAfter.state == .interrupted && plainAfter.error?.code == .interrupted && plainAfter.runs == 1)
        #expect(try await eventually { started.load(ordering: .relaxed) == 2 })
        released.store(true, ordering: .relaxed)
        let again = try await connectPeer(second)
        defer { Task { await again.close() } }
        #expect(try await again.attachJob(held.record.id).result == ["resumed": ["stage": 1]])
        #expect(try await second.jobRecord(held.record.id)?.runs == 2)
        #expect(await bridgeError { _ = try await again.attachJob(plain.record.id).result }?.code == .interrupted)
    }

    @Test("a journal file belongs to one host process: a second one is refused")
    func journalLocked() async throws {
        let journal = scratchDirectory + "zb-journal-\(UUID().uuidString.prefix(8)).sqlite"
        let first = try startConformanceHost { $0.jobs.journal = .file(journal) }
        defer { Task { await first.shutdown() } }
        #expect(throws: JournalError.self) { try startConformanceHost { $0.jobs.journal = .file(journal) } }
    }

    @Test("finished jobs are forgotten after the retention time; too many at once are overloaded")
    func retentionAndBounds() async throws {
        // A short retention, raced by nothing: the request that starts a job is answered with its outcome however
        // short the retention, and forgetting is waited for, not assumed.
        let host = try startConformanceHost {
            $0.jobs.retention = .milliseconds(300)
            $0.jobs.maxRunning = 2
        }
        defer { Task { await host.shutdown() } }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }
        #expect(try await peer.stream("countJob", ["n": 1], idempotencyKey: "short-lived").result == ["n": 1])
        #expect(try await eventually {
            (await bridgeErrorQuietly { _ = try await peer.attachJob(action: "countJob", key: "short-lived").result })?.code == .unknownJob
        })
        // The key is free again once its job is forgotten: it starts a new job (n: 2), not the forgotten one's outcome.
        #expect(try await peer.stream("countJob", ["n": 2], idempotencyKey: "short-lived").result == ["n": 2])

        let long = try await (peer.startJob("countJob", ["n": 1000, "delay_ms": 50]), peer.startJob("countJob", ["n": 1000, "delay_ms": 50]))
        #expect(await bridgeError { _ = try await peer.startJob("countJob", ["n": 1]) }?.code == .overloaded)
        _ = try await (peer.cancelJob(long.0.record.id), peer.cancelJob(long.1.record.id))
        #expect(try await eventually { (try? await peer.startJob("countJob", ["n": 1])) != nil })
    }

    @Test("past maxProgressPerJob the oldest progress is pruned: an attach from the start is told how many it missed")
    func pruned() async throws {
        let host = try startConformanceHost { $0.jobs.maxProgressPerJob = 128 }
        defer { Task { await host.shutdown() } }
        let peer = try await connectPeer(host)
        defer { Task { await peer.close() } }
        let (record, _) = try await peer.startJob("countJob", ["n": 1000])
        #expect(try await peer.attachJob(record.id).result == ["n": 1000])
        let attached = peer.attachJob(record.id)
        var steps: [JobProgress] = []
        for try await step in attached.progress { steps.append(step) }
        let first = try #require(steps.first)
        #expect(first.skipped == first.seq - 1 && first.seq > 1)
        #expect(steps.map(\.seq) == Array(first.seq...1000))
        #expect(steps.count <= 128 + 128 / 64)
    }

    @Test("the journal stores bytes, nested values and errors as they were")
    func storedValues() throws {
        let value: JSONValue = ["bytes": .bytes([0, 1, 255]), "list": [1, 2.5, "x", nil, true, ["$attachment": 0, "beside": "plain data"]]]
        #expect(try StoredJSON.decode(StoredJSON.encode(value)) == value)
        #expect(try StoredJSON.decode(StoredJSON.encode("plain")) == "plain")
        #expect(throws: JournalError.self) { try StoredJSON.decode(Data([0, 9, 9])) }
    }
}

/// The error `body` throws, or nil (for polling: no issue is recorded when it succeeds).
private func bridgeErrorQuietly(_ body: () async throws -> Void) async -> BridgeError? {
    do { try await body() } catch let error as BridgeError { return error } catch {}
    return nil
}
