import COpenBeneath
import Foundation
import ZeroBridge

/// The folders an import host reads from (`--import-root`), each opened once, as a directory descriptor, when the host
/// starts. What a request imports is opened beneath one of them without following any symbolic link, and then checked
/// as opened (a regular file with no other hard link): the check is on what is read, never on a path that can be
/// swapped for a link between a check and an open.
struct ImportRoots: Sendable {
    /// How a path is opened beneath a folder's descriptor.
    enum Opening: String, Sendable {
        /// One `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (Linux 5.6 and later).
        case openat2
        /// `openat` with `O_NOFOLLOW` for each component in turn, where the kernel has no `openat2`.
        case openatPerComponent = "openat per component"
    }

    private struct Root: Sendable {
        /// The folder as given (absolute, `..` taken out) and as the kernel names it (`realpath`): requests may use either.
        let given: String
        let canonical: String
        /// Open for the life of the process: everything imported is opened beneath it.
        let descriptor: Int32
    }

    private let roots: [Root]
    let opening: Opening

    /// Roots that do not exist are refused: a typo would otherwise allow nothing, silently. `allowOpenat2: false`
    /// forces the per-component fallback (for testing it on a kernel that has `openat2`).
    init(_ folders: [String], allowOpenat2: Bool = true) throws {
        roots = try folders.map { folder in
            guard let resolved = realpath(folder, nil) else {
                throw ImportRootError(folder: folder, reason: "no such folder")
            }
            defer { free(resolved) }
            let descriptor = open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { throw ImportRootError(folder: folder, reason: Beneath.describe(errno)) }
            return Root(given: URL(fileURLWithPath: folder).standardizedFileURL.path, canonical: String(cString: resolved),
                        descriptor: descriptor)
        }
        // openat2 is missing (ENOSYS) before Linux 5.6 and where a seccomp filter hides it (ENOSYS or EPERM).
        guard let first = roots.first else { throw ImportRootError(folder: "", reason: "no folder given") }
        let probe = allowOpenat2 ? zb_open_beneath(first.descriptor, ".", O_RDONLY | O_DIRECTORY) : -ENOSYS
        if probe >= 0 { close(probe) }
        opening = probe >= 0 ? .openat2 : .openatPerComponent
    }

    /// Opens the folder a request names: a root, or a folder below one reached without a symbolic link. Throws
    /// `not_allowed` for a folder outside the roots or through a link, `invalid_payload` for one that is missing or
    /// not a folder.
    func openFolder(_ path: String) throws -> OpenFolder {
        let folder = URL(fileURLWithPath: path).standardizedFileURL.path
        guard let (root, relative) = locate(folder) else {
            throw BridgeError(.notAllowed, "'\(path)' is outside the folders this host imports from (its --import-root)")
        }
        let beneath = Beneath(opening: opening)
        switch beneath.open(relative, in: root.descriptor, flags: Beneath.folderFlags) {
        case .success(let descriptor):
            return OpenFolder(path: folder, descriptor: descriptor, beneath: beneath)
        case .failure(let error) where error.code == ELOOP || error.code == EXDEV:
            throw BridgeError(.notAllowed, "'\(path)' is not imported: \(error)")
        case .failure(let error) where error.code == ENOENT || error.code == ENOTDIR:
            throw BridgeError(.invalidPayload, "'\(folder)' is not a folder")
        case .failure(let error):
            throw BridgeError(.invalidPayload, "cannot open '\(folder)': \(error)")
        }
    }

    /// The folders directly in each root, as `importFolder` takes them: at most `limit`, the rest counted.
    func folders(limit: Int = Folders.limit) throws -> Folders.Result {
        let all = try roots.flatMap { root in
            try openFolder(root.given).listFolders().map {
                Folders.Folder(path: root.given == "/" ? "/" + $0 : root.given + "/" + $0, name: $0)
            }
        }
        return .init(folders: Array(all.prefix(limit)), omitted: max(all.count - limit, 0))
    }

    /// The root a folder lies in (its path as written), and the folder's path relative to it.
    private func locate(_ folder: String) -> (Root, String)? {
        for root in roots {
            for prefix in [root.given, root.canonical] {
                if folder == prefix { return (root, "") }
                let below = prefix == "/" ? prefix : prefix + "/"
                if folder.hasPrefix(below) { return (root, String(folder.dropFirst(below.count))) }
            }
        }
        return nil
    }
}

struct ImportRootError: Error, CustomStringConvertible {
    let folder: String
    let reason: String
    var description: String { "--import-root \(folder): \(reason)" }
}

/// A folder opened beneath an import root. Listing it and reading its files go through its descriptor, never its path.
final class OpenFolder: Sendable {
    /// As the request named it (absolute, `..` taken out): what the catalogue records.
    let path: String
    private let descriptor: Int32
    private let beneath: Beneath

    fileprivate init(path: String, descriptor: Int32, beneath: Beneath) {
        self.path = path
        self.descriptor = descriptor
        self.beneath = beneath
    }

    deinit { close(descriptor) }

    /// What lies below the folder, hidden names left out, as paths relative to it, sorted: regular files, and every
    /// entry that is neither file nor folder (a symbolic link, a socket), so that reading it reports why it is not
    /// imported. Subfolders are opened as files are (beneath, no links): one swapped for a link meanwhile is listed,
    /// and reported when read, never walked through.
    func listFiles() throws -> [String] {
        var names: [String] = []
        var folders = [""]
        while let relative = folders.popLast() {
            guard let entries = try entries(of: relative) else {
                names.append(relative)  // swapped for a link since it was listed: reported when read
                continue
            }
            for (name, isFolder) in entries {
                let child = relative.isEmpty ? name : relative + "/" + name
                if isFolder { folders.append(child) } else { names.append(child) }
            }
        }
        return names.sorted()
    }

    /// The folders directly in this one (hidden names left out, no symbolic links), sorted by name.
    func listFolders() throws -> [String] {
        try entries(of: "")?.filter(\.isFolder).map(\.name).sorted() ?? []
    }

    /// The entries of a folder below this one (`""`: this one), hidden names left out; nil when it can no longer be
    /// opened beneath (it was swapped for a link since it was listed). Throws when this folder itself cannot be listed.
    private func entries(of relative: String) throws -> [(name: String, isFolder: Bool)]? {
        // A descriptor of its own for each listing: fdopendir takes it, and reading moves its offset.
        let directory: OpaquePointer
        switch beneath.open(relative, in: descriptor, flags: Beneath.folderFlags) {
        case .success(let opened):
            guard let stream = fdopendir(opened) else {
                let code = errno
                close(opened)
                throw BridgeError(.invalidPayload, "cannot list '\(path)/\(relative)': \(Beneath.describe(code))")
            }
            directory = stream
        case .failure(let error):
            if relative.isEmpty { throw BridgeError(.invalidPayload, "cannot list '\(path)': \(error)") }
            return nil
        }
        defer { closedir(directory) }
        var entries: [(name: String, isFolder: Bool)] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard !name.hasPrefix(".") else { continue }
            entries.append((name, Self.isFolder(entry.pointee.d_type, name, in: dirfd(directory))))
        }
        return entries
    }

    /// Whether an entry is a folder (not a link to one), asking the file system when the listing does not say.
    private static func isFolder(_ type: UInt8, _ name: String, in directory: Int32) -> Bool {
        if Int(type) != Int(DT_UNKNOWN) { return Int(type) == Int(DT_DIR) }
        var status = stat()
        return fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// Opens a file below the folder (`name` relative to it) without following any link, and checks what was opened:
    /// a regular file, with no other hard link (one may lie outside the import roots). Reading goes through the handle.
    func openFile(_ name: String) -> Result<OpenFile, ImportFolder.FileError> {
        func refused(_ why: String) -> Result<OpenFile, ImportFolder.FileError> {
            .failure(.init(file: name, kind: .unreadable, message: why))
        }
        // O_NONBLOCK: a pipe swapped in must not hold the import waiting for a writer (regular files ignore it).
        let descriptor: Int32
        switch beneath.open(name, in: self.descriptor, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) {
        case .success(let opened): descriptor = opened
        case .failure(let error): return refused("not read: \(error)")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return refused("cannot read: \(Beneath.describe(errno))") }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            return refused("not a regular file (a folder, a pipe, a socket or a device): not read")
        }
        guard status.st_nlink <= 1 else {
            return refused("the file has \(status.st_nlink) hard links, and another may lie outside the folders this host "
                           + "imports from: not read")
        }
        return .success(OpenFile(handle: handle, size: Int(status.st_size)))
    }
}

/// A regular file opened beneath an import root, and its size when it was opened.
struct OpenFile {
    let handle: FileHandle
    let size: Int
}

/// Opening a relative path beneath a folder's descriptor without following symbolic links: `openat2` in one call, or
/// `openat` with `O_NOFOLLOW` component by component.
struct Beneath: Sendable {
    let opening: ImportRoots.Opening

    static let folderFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW

    struct Failure: Error, CustomStringConvertible {
        /// The errno: ELOOP for a link on the way, EXDEV for `..` out of the folder.
        let code: Int32
        var description: String {
            switch code {
            case ELOOP: "the path is or goes through a symbolic link, and the host follows none below its import roots"
            case EXDEV: "the path leads out of its folder"
            default: Beneath.describe(code)
            }
        }
    }

    /// A new descriptor for `path` (relative, `/`-separated) beneath `folder`, opened with `flags` (`O_CLOEXEC` added).
    func open(_ path: String, in folder: Int32, flags: Int32) -> Result<Int32, Failure> {
        switch opening {
        case .openat2:
            // RESOLVE_NO_SYMLINKS refuses every link with ELOOP; O_NOFOLLOW | O_DIRECTORY would say ENOTDIR instead.
            let path = path.isEmpty ? "." : path  // the folder itself
            var descriptor = zb_open_beneath(folder, path, flags & ~O_NOFOLLOW)
            // EAGAIN: the kernel saw a rename race during the lookup and asks for another try; a few, then give up.
            for _ in 0..<3 where descriptor == -EAGAIN || descriptor == -EINTR {
                descriptor = zb_open_beneath(folder, path, flags & ~O_NOFOLLOW)
            }
            return descriptor >= 0 ? .success(descriptor) : .failure(Failure(code: -descriptor))
        case .openatPerComponent:
            return openPerComponent(path, in: folder, flags: flags)
        }
    }

    private func openPerComponent(_ path: String, in folder: Int32, flags: Int32) -> Result<Int32, Failure> {
        let components = path.split(separator: "/").filter { $0 != "." }.map(String.init)
        if components.contains("..") { return .failure(Failure(code: EXDEV)) }
        let wantsFolder = flags & O_DIRECTORY != 0
        var current = folder  // each folder on the way is closed once the next one is open
        func step(_ opened: Int32) { if current != folder { close(current) }; current = opened }
        for (index, component) in components.enumerated() {
            if index == components.count - 1 && !wantsFolder {
                // A file: O_NOFOLLOW makes a link fail ELOOP.
                let opened = openat(current, component, flags | O_NOFOLLOW | O_CLOEXEC)
                let code = errno
                step(opened)
                return opened >= 0 ? .success(opened) : .failure(Failure(code: code))
            }
            // A folder: the entry itself (O_PATH | O_NOFOLLOW opens a link as a link), then what was opened is checked,
            // so a link fails ELOOP even when it is swapped back right after.
            let opened = openat(current, component, zb_o_path() | O_NOFOLLOW | O_CLOEXEC)
            guard opened >= 0 else {
                let code = errno
                step(-1)
                return .failure(Failure(code: code))
            }
            var status = stat()
            let kind = fstat(opened, &status) == 0 ? status.st_mode & S_IFMT : 0
            step(opened)
            guard kind == S_IFDIR else {
                step(-1)
                return .failure(Failure(code: kind == S_IFLNK ? ELOOP : ENOTDIR))
            }
        }
        // The folder reached (or `folder` itself), opened for reading: the same folder, from its own descriptor.
        let opened = openat(current, ".", flags | O_CLOEXEC)
        let code = errno
        step(-1)
        return opened >= 0 ? .success(opened) : .failure(Failure(code: code))
    }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
