import Foundation

/// A folder served over HTTP (SPEC decision 47): files beneath it only, found without following any symbolic link
/// (a link inside the folder could point anywhere), each at most ``maxFileBytes``.
struct WebRoot: Sendable {
    /// Why a path is not served, as an HTTP status.
    enum Refusal: Error, Equatable {
        case notFound, forbidden, tooLarge
    }

    /// An opened regular file; the caller owns (and closes) the descriptor.
    struct OpenedFile {
        let descriptor: Int32
        let size: Int
        let contentType: String
        var isHTML: Bool { contentType.hasPrefix("text/html") }
    }

    let directory: String
    let maxFileBytes: Int

    /// Opens the file for a URL path (`/`, `/assets/app.js`, `/docs/`: `index.html` where a folder is named).
    /// Each component is opened relative to the last with `O_NOFOLLOW`, so neither `..` nor a link leaves the folder,
    /// and nothing can be swapped in between checking and opening.
    func open(urlPath: String) -> Result<OpenedFile, Refusal> {
        guard let components = Self.components(of: urlPath) else { return .failure(.forbidden) }
        var folder = Foundation.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return .failure(.notFound) }
        for (index, name) in components.enumerated() {
            let last = index == components.count - 1
            let next = openat(folder, name, (last ? O_RDONLY : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            let failure = errno
            Foundation.close(folder)
            guard next >= 0 else { return .failure(failure == ELOOP || failure == ENOTDIR ? .forbidden : .notFound) }
            folder = next
        }
        var status = stat()
        guard fstat(folder, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            Foundation.close(folder)
            return .failure(.notFound)
        }
        guard Int(status.st_size) <= maxFileBytes else {
            Foundation.close(folder)
            return .failure(.tooLarge)
        }
        return .success(OpenedFile(descriptor: folder, size: Int(status.st_size),
                                   contentType: Self.contentType(of: components.last ?? "")))
    }

    /// The names along a URL path, percent-decoded, `index.html` added for a folder; nil for a path that tries to
    /// leave the folder or name something hidden (`..`, `.`, `.git`, a NUL, a backslash).
    static func components(of urlPath: String) -> [String]? {
        let path = urlPath.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path.hasPrefix("/"), let decoded = path.removingPercentEncoding else { return nil }
        var names = decoded.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if decoded.hasSuffix("/") || names.isEmpty { names.append("index.html") }
        for name in names where name.hasPrefix(".") || name.contains("\0") || name.contains("\\") { return nil }
        return names
    }

    /// The types a Vite or Svelte build output holds; others are served as bytes.
    static func contentType(of name: String) -> String {
        let suffix = name.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return switch suffix {
        case "html", "htm": "text/html; charset=utf-8"
        case "js", "mjs", "cjs": "text/javascript; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "json", "map": "application/json"
        case "webmanifest": "application/manifest+json"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "webp": "image/webp"
        case "avif": "image/avif"
        case "ico": "image/x-icon"
        case "woff": "font/woff"
        case "woff2": "font/woff2"
        case "ttf": "font/ttf"
        case "otf": "font/otf"
        case "wasm": "application/wasm"
        case "txt": "text/plain; charset=utf-8"
        case "xml": "application/xml"
        default: "application/octet-stream"
        }
    }
}

/// What a `WKUserScript` at document start would give the page (SPEC decision 47): its bridge's configuration, then
/// the WebKit compatibility layer, at the start of `<head>`.
enum PageInjection {
    /// The two script elements, the configuration written as JSON that cannot end the script early.
    static func scripts(endpoint: String, key: String?, info: JSONValue?) -> String {
        let configuration: JSONValue = ["endpoint": .string(endpoint), "key": key.map(JSONValue.string) ?? nil, "info": info ?? nil]
        return "<script>globalThis.__zerobridge = \(scriptSafe(configuration.description));</script>"
            + "<script src=\"/_zerobridge/webkit.js\"></script>"
    }

    /// `<`, `>`, `&` and the two JavaScript line terminators escaped, so no string in the JSON (an app's `info`) can
    /// close the script element or open a comment in it.
    static func scriptSafe(_ json: String) -> String {
        var out = ""
        out.reserveCapacity(json.utf8.count)
        for scalar in json.unicodeScalars {
            switch scalar {
            case "<": out += "\\u003c"
            case ">": out += "\\u003e"
            case "&": out += "\\u0026"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `html` with `scripts` right after its `<head>` tag; without one, after `<html>`; without that, first.
    static func inject(_ scripts: String, into html: [UInt8]) -> [UInt8] {
        let at = endOfTag("<head", in: html) ?? endOfTag("<html", in: html) ?? 0
        return Array(html[..<at]) + Array(scripts.utf8) + Array(html[at...])
    }

    /// The index just past the `>` of the first tag named `name` (ASCII case-insensitive, `<head` but not `<header`).
    private static func endOfTag(_ name: String, in html: [UInt8]) -> Int? {
        let pattern = Array(name.utf8)
        guard html.count > pattern.count else { return nil }
        var index = 0
        while index + pattern.count < html.count {
            let matches = (0..<pattern.count).allSatisfy { html[index + $0] | 0x20 == pattern[$0] | 0x20 }
            let after = html[index + pattern.count]
            if matches, after == UInt8(ascii: ">") || after == UInt8(ascii: " ") || after == UInt8(ascii: "\t")
                || after == UInt8(ascii: "\n") || after == UInt8(ascii: "\r") || after == UInt8(ascii: "/") {
                guard let close = html[(index + pattern.count)...].firstIndex(of: UInt8(ascii: ">")) else { return nil }
                return close + 1
            }
            index += 1
        }
        return nil
    }
}
