import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files that hold a secret: a connection file with its key, a CURVE secret key. They are readable by their owner
/// only from their first byte, and one that others may read is refused rather than trusted.
///
/// FileManager's `createFile(atPath:contents:attributes:)` writes a temporary file with `0666 & ~umask`, renames
/// it and only then applies the permissions: for that moment any local user could open it and keep reading.
package enum SecretFile {
    /// Replaces `path` with `contents`: written to a new file beside it that is created mode 0600 (never following a
    /// link, never reusing a file), flushed to disk, then renamed over `path` and the folder flushed, so nobody else
    /// can read it at any moment and a reader never sees half of it. The temporary file is removed on failure.
    package static func write(_ contents: [UInt8], to path: String) throws(Failure) {
        let temporary = path + ".tmp-" + String(UInt64.random(in: .min ... .max), radix: 16)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw Failure("cannot create \(temporary)", errno: errno) }
        var failure: Failure?
        var written = 0
        while failure == nil, written < contents.count {
            let count = contents.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count > 0 {
                written += count
            } else if count == 0 || errno != EINTR {  // a regular file never takes 0 bytes: do not spin on it
                failure = Failure("cannot write \(temporary)", errno: count == 0 ? EIO : errno)
            }
        }
        if failure == nil, fsync(descriptor) != 0 { failure = Failure("cannot flush \(temporary)", errno: errno) }
        if close(descriptor) != 0, failure == nil { failure = Failure("cannot close \(temporary)", errno: errno) }
        if failure == nil, rename(temporary, path) != 0 { failure = Failure("cannot rename \(temporary) to \(path)", errno: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
        // The rename is durable once the folder is flushed; a file system that cannot flush a folder loses nothing
        // it has not already written, so that failure is not the caller's.
        let parent = (path as NSString).deletingLastPathComponent
        let folder = open(parent.isEmpty ? "." : parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }

    /// The bytes of the secret file at `path` (at most `limit` of them), refused when its group or others have any
    /// access to it, as OpenSSH refuses such a private key: whoever else could read it holds the secret too.
    package static func read(_ path: String, what: String, limit: Int = 65_536) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("cannot read the \(what) \(path)", errno: errno) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Failure("cannot read the \(what) \(path)", errno: errno) }
        let access = status.st_mode & 0o777
        guard access & 0o077 == 0 else {
            throw Failure("permissions \(String(format: "%04o", access)) for '\(path)' are too open: the \(what) must be "
                          + "readable by its owner only, so others cannot take it; run chmod 600 \(path)")
        }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure("cannot read the \(what) \(path)", errno: errno)
            }
            filled += count
        }
        guard filled <= limit else { throw Failure("the \(what) \(path) is larger than \(limit) bytes") }
        return Array(bytes[..<filled])
    }

    /// Why a secret file could not be written or read, with the system's reason.
    package struct Failure: Error, CustomStringConvertible, LocalizedError {
        package let description: String
        init(_ text: String, errno code: Int32? = nil) {
            description = code.map { "\(text): \(String(cString: strerror($0)))" } ?? text
        }
        package var errorDescription: String? { description }
    }
}
