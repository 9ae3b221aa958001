import Foundation

/// A peer under test, started with `posix_spawnp` (``spawnProcess(_:searchingPath:stdoutPath:stderrPath:)``):
/// Foundation's `Process.run()` was seen to crash when several threads start processes at once (the fixture tests
/// run peer conversations in parallel).
final class ChildProcess {
    let processIdentifier: pid_t
    private var exitStatus: Int32?

    /// Starts `arguments[0]` (looked up on PATH when it has no slash) with stdin and stdout on /dev/null and stderr
    /// appended to `stderrPath`.
    init(_ arguments: [String], stderrPath: String) throws {
        processIdentifier = try spawnProcess(arguments, searchingPath: true, stdoutPath: "/dev/null", stderrPath: stderrPath)
    }

    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        guard waitpid(processIdentifier, &status, WNOHANG) == processIdentifier else { return true }
        // WIFEXITED: the low 7 bits are 0; then the status is in bits 8-15. Otherwise report the signal as negative.
        exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : -(status & 0x7f)
        return false
    }

    /// The exit status, or minus the signal that ended it; meaningful once `isRunning` is false.
    var terminationStatus: Int32 { exitStatus ?? 0 }

    func terminate() { kill(processIdentifier, SIGTERM) }
}

/// Starts `arguments[0]` (looked up on PATH when `searchingPath` and it has no slash) with this process's environment,
/// stdin on /dev/null and stdout and stderr appended to the given files (created 0600), and returns its pid. Its
/// signal mask is cleared and SIGTERM and SIGINT set to their defaults: a child started from one of Swift's threads
/// would otherwise inherit a mask that blocks the signals that stop it. Shared by the fixture runners and the tests.
package func spawnProcess(_ arguments: [String], searchingPath: Bool, stdoutPath: String, stderrPath: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var nothingBlocked = sigset_t()
    sigemptyset(&nothingBlocked)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGTERM)
    sigaddset(&defaults, SIGINT)
    posix_spawnattr_setsigmask(&attributes, &nothingBlocked)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let result = searchingPath ? posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
                               : posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ)
    guard result == 0 else {
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "\(arguments[0]): \(String(cString: strerror(result)))"])
    }
    return pid
}
