import Synchronization

/// What a module that adds a capability to ``BridgeHost`` (ZeroBridgeJobs, ZeroBridgeSupervision) hooks into: the
/// host's start and shutdown. `package`, not public: the core stays free of those modules' dependencies (GRDB,
/// swift-subprocess) and its public API free of their internals; an app uses the capability's own API
/// (`host.job(...)`, `host.supervise(...)`).
package protocol HostExtension: AnyObject, Sendable {
    /// Bound, before anything is served: a start that throws here fails (jobs recover their journal).
    func hostStarting(_ host: BridgeHost) throws
    /// After the endpoint is bound and the connection file written (supervised peers launch).
    func hostStarted(_ host: BridgeHost)
    /// Shutdown's first step, while requests still drain (jobs end, answering the requests attached to them).
    func hostDraining(_ host: BridgeHost) async
    /// After draining, while the socket is still open (supervised peers are told `bye`, then stopped).
    func hostClosing(_ host: BridgeHost) async
    /// What the capability adds to the host's `$stats` snapshot (SPEC 7.8): members of its result, such as `jobs`.
    func stats() async throws -> [String: JSONValue]
}

extension HostExtension {
    package func hostStarting(_ host: BridgeHost) throws {}
    package func hostStarted(_ host: BridgeHost) {}
    package func hostDraining(_ host: BridgeHost) async {}
    package func hostClosing(_ host: BridgeHost) async {}
    package func stats() async throws -> [String: JSONValue] { [:] }
}

/// A host's extensions, one per type, in the order they were added.
final class HostExtensions: Sendable {
    private let installed = Mutex<[any HostExtension]>([])

    /// The extension of type `E`, made by `make` the first time; `made` tells whether this call made it.
    func of<E: HostExtension>(_ type: E.Type, makingIt make: () throws -> E) rethrows -> (E, made: Bool) {
        try installed.withLock { installed in
            if let existing = installed.lazy.compactMap({ $0 as? E }).first { return (existing, false) }
            let made = try make()
            installed.append(made)
            return (made, true)
        }
    }

    func existing<E: HostExtension>(_ type: E.Type) -> E? {
        installed.withLock { $0.lazy.compactMap { $0 as? E }.first }
    }

    /// A snapshot, so that hooks run outside the lock (they may add extensions or call back into the host).
    var all: [any HostExtension] { installed.withLock { $0 } }
}

extension BridgeHost {
    /// The host's extension of type `E`, made (once) by `make`; `made` is true for the call that made it.
    package func installExtension<E: HostExtension>(_ type: E.Type, makingIt make: () throws -> E) rethrows -> (E, made: Bool) {
        try extensions.of(type, makingIt: make)
    }

    /// The host's extension of type `E`, if one was made.
    package func installedExtension<E: HostExtension>(_ type: E.Type) -> E? {
        extensions.existing(type)
    }
}
