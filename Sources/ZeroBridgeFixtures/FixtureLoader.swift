import Foundation
@_spi(Fixtures) import ZeroBridge

/// Finds and reads fixture files (protocol/SPEC.md, section 14).
///
/// For example:
/// ```swift
/// let conversations = try FixtureLoader.conversations(at: ["protocol/fixtures/conversations", "my-service.json"])
/// let cases = try FixtureLoader.messageCases(at: ["protocol/fixtures/messages"])
/// ```
public enum FixtureLoader {
    /// The conversations in these files and folders. A folder contributes every `.json` file under it that holds
    /// a conversation (a JSON object), sorted by path; case files (JSON arrays) and schemas in it are passed
    /// over. A file named directly must be a conversation.
    /// Peer conversations (section 14.3, `"plays": "host"`) are passed over in folders and refused when named:
    /// they need a peer to run, see ``peerConversations(at:)``.
    public static func conversations(at paths: [String]) throws(FixtureError) -> [Conversation] {
        try load(paths, playsHost: false)
    }

    /// The peer conversations (section 14.3) in these files and folders, for ``PeerConversationRunner``; other
    /// files in folders are passed over.
    public static func peerConversations(at paths: [String]) throws(FixtureError) -> [Conversation] {
        try load(paths, playsHost: true)
    }

    private static func load(_ paths: [String], playsHost: Bool) throws(FixtureError) -> [Conversation] {
        var conversations: [Conversation] = []
        for (file, named) in try jsonFiles(at: paths) {
            let value = try read(file)
            guard case .object(let members) = value, members["steps"] != nil || members["format"] != nil else {
                if named { throw FixtureError(file: file, path: "$", reason: "not a conversation (a JSON object with steps)") }
                continue
            }
            guard (members["plays"] != nil) == playsHost else {
                if named {
                    throw FixtureError(file: file, path: "$", reason: playsHost
                        ? "a conversation with a host, not a peer conversation (\"plays\": \"host\")"
                        : "a peer conversation (\"plays\": \"host\"): it runs against a peer library, not a host")
                }
                continue
            }
            conversations.append(try Conversation(value: value, file: file))
        }
        return conversations
    }

    /// The message cases (section 14.1) in these files and folders: every group's every case, in file order.
    /// A folder contributes its `.json` files that hold case files (JSON arrays).
    public static func messageCases(at paths: [String]) throws(FixtureError) -> [MessageCase] {
        var cases: [MessageCase] = []
        for (file, named) in try jsonFiles(at: paths) {
            let value = try read(file)
            guard case .array(let groups) = value else {
                if named { throw FixtureError(file: file, path: "$", reason: "a case file is a JSON array of groups") }
                continue
            }
            let reader = FixtureReader(file: file)
            let name = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
            for (groupIndex, groupValue) in groups.enumerated() {
                let groupPath = "$[\(groupIndex)]"
                let group = try reader.object(groupValue, groupPath)
                try reader.allowOnly(group, ["description", "tests"], groupPath)
                let groupName = try reader.nonEmptyString(group["description"], "\(groupPath).description")
                guard let tests = group["tests"]?.arrayValue, !tests.isEmpty else {
                    throw reader.fail("\(groupPath).tests", "must be a non-empty array of cases")
                }
                for (caseIndex, caseValue) in tests.enumerated() {
                    let casePath = "\(groupPath).tests[\(caseIndex)]"
                    let test = try reader.object(caseValue, casePath)
                    try reader.allowOnly(test, ["description", "data", "valid", "error", "trace"], casePath)
                    let description = try reader.nonEmptyString(test["description"], "\(casePath).description")
                    guard let data = test["data"] else { throw reader.fail(casePath, "needs data") }
                    guard let valid = test["valid"]?.boolValue else { throw reader.fail("\(casePath).valid", "must be a boolean") }
                    var error: String?
                    if let code = test["error"] {
                        guard let text = code.stringValue, ["bad_message", "unsupported_version"].contains(text), !valid else {
                            throw reader.fail("\(casePath).error", "must be bad_message or unsupported_version, on an invalid case only")
                        }
                        error = text
                    }
                    // The trace context the body decodes to (SPEC 7.18, 14.1): checked by each decoder's own tests.
                    if let trace = test["trace"] {
                        guard valid, trace == .null || trace.objectValue != nil else {
                            throw reader.fail("\(casePath).trace", "must be an object or null, on a valid case only")
                        }
                    }
                    cases.append(MessageCase(file: name, group: groupName, name: description, data: data, valid: valid, error: error))
                }
            }
        }
        return cases
    }

    /// The `.json` files at these paths, each with whether it was named directly (not found in a folder).
    private static func jsonFiles(at paths: [String]) throws(FixtureError) -> [(path: String, named: Bool)] {
        var files: [(String, Bool)] = []
        for path in paths {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                throw FixtureError(file: path, path: "", reason: "no such file or folder")
            }
            guard isFolder.boolValue else {
                files.append((path, true))
                continue
            }
            guard let walker = FileManager.default.enumerator(atPath: path) else {
                throw FixtureError(file: path, path: "", reason: "cannot list the folder")
            }
            let found = walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".json") }.sorted()
            files += found.map { ((path as NSString).appendingPathComponent($0), false) }
        }
        return files
    }

    private static func read(_ file: String) throws(FixtureError) -> JSONValue {
        let bytes: [UInt8]
        do {
            bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        } catch {
            throw FixtureError(file: file, path: "", reason: "cannot read: \(error.localizedDescription)")
        }
        do throws(BridgeError) {
            // Deeper than a body's 64 levels: a body sits a few levels down in its file.
            return try FixtureCodec.parse(bytes, maxDepth: 512)
        } catch {
            throw FixtureError(file: file, path: "$", reason: "not JSON: \(error.message)")
        }
    }
}

/// One case of a message fixture file (protocol/SPEC.md, section 14.1): a body and whether a receiver accepts
/// it, and if not, the error code it answers with.
public struct MessageCase: Sendable, CustomStringConvertible {
    /// The file's name without `.json`.
    public let file: String
    public let group: String
    /// The case's own description.
    public let name: String
    public let data: JSONValue
    public let valid: Bool
    /// For an invalid body: `bad_message` or `unsupported_version`.
    public let error: String?

    /// `"<file>: <group>: <case>"`, as SPEC 14.1 names each case's test.
    public var description: String { "\(file): \(group): \(name)" }

    /// Runs the case through ZeroBridge's own decoder: nil when the decoder accepts exactly the valid bodies and
    /// refuses the invalid ones with the case's code, else what went wrong.
    public func disagreementWithDecoder() -> String? {
        let refusal = FixtureCodec.refusal(of: Array(data.description.utf8))
        switch (valid, refusal) {
        case (true, nil): return nil
        case (true, let refusal?): return "a valid body was refused: \(refusal)"
        case (false, nil): return "an invalid body was accepted"
        case (false, let refusal?):
            guard let error, refusal.code.rawValue != error else { return nil }
            return "refused with \(refusal.code.rawValue) (\(refusal.message)), the case says \(error)"
        }
    }
}
