import ZeroBridge
import Foundation
import Logging
import Subprocess
import Synchronization

/// One run of a supervised peer's program (SPEC 10.1), through swift-subprocess: started with its environment, its
/// output read line by line into the host's log, signalled on command, and waited for until it exits.
///
/// Each run is the leader of a process group of its own: what it starts (a shell's children, workers) is in that
/// group, so every signal goes to the whole group, and whatever of the group outlives the program is stopped too.
enum PeerProcess {
    /// What the supervisor asks of a running process.
    enum Command: Sendable {
        /// SIGKILL now (hung, or never ready).
        case kill
        /// Stopping: when the peer was told `bye`, wait up to `grace` for it to exit; then SIGTERM, wait up to
        /// `grace` again, then SIGKILL.
        case stop(grace: Duration, saidBye: Bool)
    }

    /// How a run ended.
    enum Outcome: Sendable {
        case exited(Supervised.Exit)
        /// The program could not be started at all (not found, not executable, ...).
        case couldNotStart(String)
    }

    /// A line longer than this goes to the log in pieces of this size (SPEC 10.1: 16 KiB).
    static let maxLineBytes = 16 * 1024

    /// Runs the program until it exits. `started` is told its pid as soon as it runs; `commands` signal it meanwhile.
    static func run(_ peer: SupervisedPeer, environment: [String: String], logger: Logger,
                    commands: AsyncStream<Command>, started: @escaping @Sendable (Int32) -> Void) async -> Outcome {
        let executable: Executable = peer.executable.contains("/") ? .path(.init(peer.executable)) : .name(peer.executable)
        let variables = Dictionary(uniqueKeysWithValues: environment.map { (Environment.Key(stringLiteral: $0.key), Optional($0.value)) })
        var options = PlatformOptions()
        options.processGroupID = 0  // a new group, led by the program (its pid is the group's id)
        let leader = Mutex<Int32?>(nil)
        let outcome: Outcome
        do {
            let result = try await Subprocess.run(
                executable, arguments: Arguments(peer.arguments), environment: .inherit.updating(variables),
                workingDirectory: peer.workingDirectory.map { .init($0) }, platformOptions: options,
                input: .none, output: .sequence, error: .sequence
            ) { execution in
                let pid = execution.processIdentifier.value
                leader.withLock { $0 = pid }
                started(pid)
                // Signals go through the execution (a pidfd on Linux), so a pid the kernel has reused is never hit.
                let signalling = Task { for await command in commands { await perform(command, on: execution) } }
                await withTaskGroup(of: Void.self) { group in
                    // Both pipes are read as fast as the program writes, so it never blocks on a full one. They end
                    // once it has exited: swift-subprocess stops reading them then, even if a grandchild holds them.
                    group.addTask { await forward(execution.standardOutput, "stdout", pid: pid, peer: peer.name, to: logger) }
                    group.addTask { await forward(execution.standardError, "stderr", pid: pid, peer: peer.name, to: logger) }
                    group.addTask { await waitForExit(execution) }
                }
                signalling.cancel()
                await signalling.value
            }
            switch result.terminationStatus {
            case .exited(let code): outcome = .exited(.code(code))
            case .signaled(let signal): outcome = .exited(.signal(signal))
            }
        } catch {
            outcome = .couldNotStart("\(error)")
        }
        if let pid = leader.withLock({ $0 }) { await stopGroup(pid, grace: peer.stopGrace) }
        return outcome
    }

    /// swift-subprocess 1.0.2 has no public "wait for exit" inside the body (its own monitor is internal), but its
    /// teardown returns as soon as the process exits: signal 0 sends nothing, and its wait is as long as any program
    /// may run (a year; then it is killed, as teardown always ends).
    private static func waitForExit(_ execution: Execution<NoInput, SequenceOutput, SequenceOutput>) async {
        await execution.teardown(using: [.send(signal: Signal(rawValue: 0), allowedDurationToNextStep: .seconds(365 * 86_400))])
    }

    private static func perform(_ command: Command, on execution: Execution<NoInput, SequenceOutput, SequenceOutput>) async {
        switch command {
        case .kill:
            await execution.teardown(using: [.send(signal: .kill, toProcessGroup: true, allowedDurationToNextStep: .zero)])
        case .stop(let grace, saidBye: true):
            // The last step's group reaches the final SIGKILL too.
            await execution.teardown(using: [.send(signal: Signal(rawValue: 0), allowedDurationToNextStep: grace),
                                             .gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: grace)])
        case .stop(let grace, saidBye: false):
            await execution.teardown(using: [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: grace)])
        }
    }

    /// Once the program has exited, whatever is left of its group (children it started, which the program's own
    /// exit does not end) gets SIGTERM, up to `grace` to exit, then SIGKILL. The group's id stays taken while any
    /// member lives, so the signals reach no one else.
    static func stopGroup(_ leader: Int32, grace: Duration) async {
        guard kill(-leader, SIGTERM) == 0 else { return }  // ESRCH: the group is empty
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            guard hasLiveMember(group: leader) else { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
        kill(-leader, SIGKILL)
    }

    /// Whether a process of the group still runs. Read from /proc, because `kill(-group, 0)` also counts members
    /// that have exited and wait to be reaped (by init, once orphaned), which would make every stop wait its grace.
    static func hasLiveMember(group: Int32) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return kill(-group, 0) == 0 }
        return entries.contains { entry in
            guard entry.first?.isNumber == true,
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let nameEnd = stat.lastIndex(of: ")") else { return false }
            // After the command's name: state, parent, process group.
            let fields = stat[stat.index(after: nameEnd)...].split(separator: " ", maxSplits: 3)
            return fields.count > 2 && fields[0] != "Z" && Int32(fields[2]) == group
        }
    }

    /// Reads one of the program's pipes line by line into the log, with the peer's name and the stream.
    private static func forward(_ output: SubprocessOutputSequence, _ stream: String, pid: Int32, peer: String,
                                to logger: Logger) async {
        // The program's stderr is where its failures go: visible at the host's usual level (warning).
        let level: Logger.Level = stream == "stderr" ? .warning : .info
        var lines = OutputLines(maxLineBytes: maxLineBytes)
        let log = { (line: String) in
            logger.log(level: level, "\(line)", metadata: ["peer": "\(peer)", "stream": "\(stream)", "pid": "\(pid)"])
        }
        do {
            for try await buffer in output {
                buffer.withUnsafeBytes { bytes in lines.append(bytes) { log($0) } }
            }
        } catch {
            // The pipe was cut off as the program exited: what was read is logged below.
        }
        lines.finish { log($0) }
    }
}

/// Bytes cut into lines (`\n`, a `\r` before it dropped), a line over the limit cut into pieces of the limit, so
/// that memory stays bounded whatever the program writes.
struct OutputLines {
    let maxLineBytes: Int
    private var pending: [UInt8] = []

    init(maxLineBytes: Int) { self.maxLineBytes = maxLineBytes }

    mutating func append(_ bytes: some Collection<UInt8>, _ emit: (String) -> Void) {
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if pending.last == UInt8(ascii: "\r") { pending.removeLast() }
                flush(emit)
            } else {
                pending.append(byte)
                if pending.count >= maxLineBytes { flush(emit) }
            }
        }
    }

    /// What is left without a final newline.
    mutating func finish(_ emit: (String) -> Void) {
        if !pending.isEmpty { flush(emit) }
    }

    private mutating func flush(_ emit: (String) -> Void) {
        emit(String(decoding: pending, as: UTF8.self))
        pending.removeAll(keepingCapacity: true)
    }
}
