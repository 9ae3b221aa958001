import Foundation
internal import ZeroBridgeFixtures

/// A child process started with `posix_spawn`, for tests that start many: Foundation's `Process.run()` on Linux
/// (Swift 6.3.1) reads past a buffer while it lists /proc/self/fd and crashes the test process now and then
/// (swift-corelibs-foundation PR 5472). Standard input is /dev/null; standard output and error go to files.
public final class SpawnedProcess: ChildOfTest, @unchecked Sendable {  // its state is the child's, read through waitpid
    public let processIdentifier: pid_t
    private let status = NSLock()
    private var exitStatus: Int32?
    private var outputPath: String?

    /// Starts `executable` with `arguments` (not including argv[0]) and this process's environment.
    public init(_ executable: String, _ arguments: [String], stdoutPath: String, stderrPath: String) throws {
        processIdentifier = try spawnProcess([executable] + arguments, searchingPath: false, stdoutPath: stdoutPath,
                                             stderrPath: stderrPath)
    }

    public var isRunning: Bool {
        status.lock()
        defer { status.unlock() }
        if exitStatus != nil { return false }
        var raw: Int32 = 0
        guard waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier else { return true }
        // WIFEXITED: the low 7 bits are 0, and the status is in bits 8-15; otherwise the signal, as Process reports it.
        exitStatus = raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
        return false
    }

    /// The exit status, or the signal that ended it (as Foundation's `Process` reports it); meaningful once
    /// `isRunning` is false.
    public var terminationStatus: Int32 {
        status.lock()
        defer { status.unlock() }
        return exitStatus ?? 0
    }

    /// Blocks until the process has exited (for a process just sent SIGKILL).
    public func waitUntilExit() {
        while isRunning { usleep(1_000) }
    }

    /// Starts `executable` with its standard output and error going to one new temporary file: read it with
    /// ``output`` once the process has exited.
    public static func capturingOutput(_ executable: String, _ arguments: [String]) throws -> SpawnedProcess {
        let path = URL(fileURLWithPath: scratchDirectory).appendingPathComponent("spawned-\(UUID().uuidString).out").path
        let process = try SpawnedProcess(executable, arguments, stdoutPath: path, stderrPath: path)
        process.outputPath = path
        return process
    }

    /// What a process started by ``capturingOutput(_:_:)`` wrote (standard output and error, interleaved); the file
    /// is removed once read.
    public func output() -> Data {
        guard let outputPath else { return Data() }
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        return FileManager.default.contents(atPath: outputPath) ?? Data()
    }

    public func terminate() { kill(processIdentifier, SIGTERM) }
    public func interrupt() { kill(processIdentifier, SIGINT) }
}
