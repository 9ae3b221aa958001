import Logging
import Synchronization

/// The handlers one side serves, by action name. Registration happens on any thread; lookups on the socket thread.
///
/// Its methods are used through ``BridgeHandling``; the type is public only so the protocol can name it.
public final class HandlerTable: Sendable {
    package typealias Handler = @Sendable (JSONValue, BridgeRequest) async throws -> JSONValue
    /// A synchronous handler, run on the socket thread as its request is read (``BridgeHandling/handleInline(_:describedAs:replacing:_:)``).
    package typealias InlineHandler = @Sendable (JSONValue, BridgeRequest) throws -> JSONValue

    enum Lookup {
        case found(Handler)
        case inline(InlineHandler)
        /// A weakly held handler whose object has been released.
        case gone
        case unknown
    }

    private struct Entry {
        var handler: Handler
        /// Set for a handler that runs on the socket thread; `handler` then calls it (reserved for nothing else).
        var inline: InlineHandler?
        /// Nil for closures; for objects, whether the object is still alive.
        var isAlive: (@Sendable () -> Bool)?
        var description: ActionDescription
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Called after the set of served actions changes (a peer re-announces itself with `hello`).
    let onChange = Mutex<(@Sendable () -> Void)?>(nil)

    /// Serves the reserved actions every side answers alike (SPEC 7.8): `$actions` and `$describe`.
    init() {
        try! add("$actions", replacing: true) { [unowned self] _, _ in .array(actionNames.map(JSONValue.string)) }
        try! add("$describe", replacing: true) { [unowned self] _, _ in catalogue.json }
    }

    func lookup(_ action: String) -> Lookup {
        guard let entry = entries.withLock({ $0[action] }) else { return .unknown }
        if let isAlive = entry.isAlive, !isAlive() { return .gone }
        if let inline = entry.inline { return .inline(inline) }
        return .found(entry.handler)
    }

    /// The actions served, sorted; reserved (`$`) names and released handlers left out.
    var actionNames: [String] { served.map(\.name).sorted() }

    /// Actions registered with an object that has been released since (``BridgeHandling/register(_:replacing:)``
    /// holds it weakly): they answer `handler_gone`.
    var releasedActions: [String] {
        entries.withLock { entries in entries.filter { $0.value.isAlive?() == false }.map(\.key).sorted() }
    }

    /// Logs an error for each action whose object was released before the side started serving: most likely a
    /// temporary (`register(Greeter())`) that nothing else held, which would otherwise fail only at the first call.
    func warnAboutReleasedHandlers(_ logger: Logger) {
        for action in releasedActions {
            logger.error("""
                the object registered for '\(action)' was released before serving started: register(_:) holds it \
                weakly, so keep a reference to it (a stored property), or serve the action with a closure (handle)
                """, metadata: ["action": "\(action)"])
        }
    }

    /// What `$describe` answers, and its hash for `hello` and `welcome` (SPEC 7.8).
    var catalogue: Catalogue { Catalogue(served) }

    private var served: [(name: String, description: ActionDescription)] {
        entries.withLock { entries in
            entries.filter { !$0.key.hasPrefix("$") && $0.value.isAlive?() != false }.map { ($0.key, $0.value.description) }
        }
    }

    package func add(_ action: String, replacing: Bool, isAlive: (@Sendable () -> Bool)? = nil,
             describedAs description: ActionDescription = .init(), inline: InlineHandler? = nil,
             _ handler: @escaping Handler) throws(BridgeRegistrationError) {
        guard !action.isEmpty, action.unicodeScalars.count <= 128 else {
            throw BridgeRegistrationError(action: action, reason: "an action name has 1 to 128 characters")
        }
        try entries.withLock { entries throws(BridgeRegistrationError) in
            // A released object's registration no longer serves anything, so taking its name is no replacement.
            if !replacing, let existing = entries[action], existing.isAlive?() != false {
                throw BridgeRegistrationError(action: action, reason: "already has a handler; pass replacing: true to replace it")
            }
            entries[action] = Entry(handler: handler, inline: inline, isAlive: isAlive, description: description)
        }
        onChange.withLock { $0 }?()
    }

    @discardableResult
    func remove(_ action: String) -> Bool {
        let removed = entries.withLock { $0.removeValue(forKey: action) != nil }
        if removed { onChange.withLock { $0 }?() }
        return removed
    }
}

/// Registering a handler failed: the name is taken (and `replacing` was not set), or the name is not valid.
public struct BridgeRegistrationError: Error, Sendable, CustomStringConvertible {
    /// The action name the registration was for.
    public var action: String
    /// Why it was refused: the name is taken, or it is not a valid action name.
    public var reason: String
    public var description: String { "cannot register a handler for '\(action)': \(reason)" }
}

/// An object that answers one typed action; registered **weakly**, like a leak-free `WKScriptMessageHandler`.
///
/// For example:
/// ```swift
/// final class Importer: BridgeHandler {
///     typealias Action = ImportFile
///     func handle(_ payload: ImportFile.Payload, request: BridgeRequest) async throws -> ImportFile.Result { ... }
/// }
/// try host.register(importer)   // the host does not keep `importer` alive
/// ```
public protocol BridgeHandler: AnyObject, Sendable {
    /// The action this object answers: its name, payload and result types.
    associatedtype Action: BridgeAction
    /// Answers one request: the decoded payload in, the result out (or a thrown error: see <doc:Errors>).
    func handle(_ payload: Action.Payload, request: BridgeRequest) async throws -> Action.Result
}

/// A side that serves actions: ``BridgeHost`` (to its peers) and ``BridgePeer`` (to its host).
public protocol BridgeHandling: AnyObject, Sendable {
    /// The table behind the methods below.
    var handlers: HandlerTable { get }
}

extension BridgeHandling {
    /// Serves an untyped action with a closure. Events to `action` run the same closure, without a reply.
    /// `$describe` gives it `description`: any payload and result unless said, or the types of a ``BridgeAction``
    /// for JSON handling that `Codable` cannot express, with a contract that still comes from types.
    ///
    /// For example:
    /// ```swift
    /// try host.handle("echo") { payload, request in payload }
    /// try host.handle("add", describedAs: ActionDescription(Add.self)) { payload, request in ... }
    /// ```
    public func handle(_ action: String, describedAs description: ActionDescription = .init(), replacing: Bool = false,
                       _ body: @escaping @Sendable (JSONValue, BridgeRequest) async throws -> JSONValue) throws {
        try handlers.add(action, replacing: replacing, describedAs: description, body)
    }

    /// Serves an untyped action with a synchronous closure that runs on the socket thread as the request is read (for
    /// a WebSocket peer's request, on the event loop that read it when the socket thread is idle, in its place): no
    /// task and no hand-off between threads, so a quick answer (an echo, a lookup in memory) costs the least. While it
    /// runs this side reads and sends nothing else, so it must not block, wait or compute for long: use
    /// ``handle(_:describedAs:replacing:_:)`` for that. Events to `action` run it too, without a reply.
    ///
    /// ```swift
    /// try host.handleInline("echo") { payload, request in payload }
    /// ```
    public func handleInline(_ action: String, describedAs description: ActionDescription = .init(), replacing: Bool = false,
                             _ body: @escaping @Sendable (JSONValue, BridgeRequest) throws -> JSONValue) throws {
        try handlers.add(action, replacing: replacing, describedAs: description, inline: body) { try body($0, $1) }
    }

    /// Serves a typed action with a closure; a payload that does not decode is answered `invalid_payload`.
    public func handle<A: BridgeAction>(_ action: A.Type, replacing: Bool = false,
                                        _ body: @escaping @Sendable (A.Payload, BridgeRequest) async throws -> A.Result) throws {
        try handlers.add(A.name, replacing: replacing, describedAs: ActionDescription(A.self)) { payload, request in
            try A.encodeResult(try await body(try A.decodePayload(payload), request))
        }
    }

    /// Serves a typed action with an object held **weakly**: once the object is released, requests for the
    /// action are answered `handler_gone`. Keep a reference to it: an object nothing else holds
    /// (`register(Greeter())`) is gone as soon as this returns, and starting the host (or connecting the peer) logs an
    /// error naming its action.
    public func register<H: BridgeHandler>(_ handler: H, replacing: Bool = false) throws {
        let reference = WeakReference(handler)
        try handlers.add(H.Action.name, replacing: replacing, isAlive: { reference.object != nil },
                         describedAs: ActionDescription(H.Action.self)) { payload, request in
            guard let handler = reference.object else {
                throw BridgeError(.handlerGone, "the handler for '\(H.Action.name)' has been released")
            }
            return try H.Action.encodeResult(try await handler.handle(try H.Action.decodePayload(payload), request: request))
        }
    }

    /// Stops serving an action; returns whether it was served.
    @discardableResult
    public func removeHandler(for action: String) -> Bool { handlers.remove(action) }

    /// Stops serving a typed action; returns whether it was served.
    @discardableResult
    public func removeHandler<A: BridgeAction>(for action: A.Type) -> Bool { handlers.remove(A.name) }
}

private final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    // `weak` needs a var; it is written once, in init.
    nonisolated(unsafe) weak var object: Object?
    init(_ object: Object) { self.object = object }
}

extension BridgeAction {
    package static func decodePayload(_ value: JSONValue) throws -> Payload { try decode(value, "payload") }
    static func decodeResult(_ value: JSONValue) throws -> Result { try decode(value, "result") }
    static func decodeProgress(_ value: JSONValue) throws -> Progress { try decode(value, "progress") }

    package static func encodeResult(_ result: Result) throws -> JSONValue {
        try JSONValueEncoder().encode(result)
    }

    /// A typed value from JSON; a mismatch is `invalid_payload` naming the path, what was expected and what was
    /// there (`payload.name: expected a string, got 5`), as the Python and Node peers say it.
    private static func decode<T: Decodable>(_ value: JSONValue, _ root: String) throws -> T {
        do {
            return try JSONValueDecoder().decode(T.self, from: value)
        } catch let error as DecodingError {
            throw BridgeError(.invalidPayload, error.pathDescription(in: value, root: root))
        } catch {
            throw BridgeError(.invalidPayload, "\(root) of '\(name)': \(error)")
        }
    }
}
