import Foundation

/// Where the tests put their files, folders and ipc sockets: one folder per test process under the temporary
/// directory, with a trailing slash, removed when the process exits, so a run leaves nothing behind (a run that
/// crashes leaves this one folder, which the next process with the same pid clears first).
public let scratchDirectory: String = {
    let path = NSTemporaryDirectory() + "zerobridge-tests-\(getpid())/"
    try? FileManager.default.removeItem(atPath: path)
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: scratchDirectory) }
    return path
}()
