import Foundation

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
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        // A child started from one of Swift's threads would inherit a mask that blocks the signals that stop it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var nothingBlocked = sigset_t()
        sigemptyset(&nothingBlocked)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &nothingBlocked)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "\(executable): \(String(cString: strerror(result)))"])
        }
        processIdentifier = pid
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
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spawned-\(UUID().uuidString).out").path
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
