/// A protocol error: a code from the protocol's list, a human-readable message, and optional data.
///
/// Errors are equal when their codes are, so callers can match on the code. For example:
///
/// ```swift
/// do {
///     _ = try await peer.call("render", ["page": 1], timeout: .seconds(2))
/// } catch let error as BridgeError where error.code == .timeout {
///     print("no answer in time")
/// }
/// ```
public struct BridgeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An error code as it appears on the wire (`"bad_message"`). Open: codes this build does not know are kept.
    public struct Code: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
        public let rawValue: String

        public init(rawValue: String) { self.rawValue = rawValue }
        /// A code by its wire name, for codes of an app's own (`"out_of_stock"`) or of a newer protocol.
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }

        public var description: String { rawValue }

        /// The message could not be understood: not JSON, not an object, a missing or wrong field, frames missing.
        public static let badMessage: Code = "bad_message"
        /// The message's `v` is an integer other than 1.
        public static let unsupportedVersion: Code = "unsupported_version"
        /// No handler serves the requested action.
        public static let unknownAction: Code = "unknown_action"
        /// The payload does not have the shape the action expects.
        public static let invalidPayload: Code = "invalid_payload"
        /// The action's handler was held weakly and has been released.
        public static let handlerGone: Code = "handler_gone"
        /// The handler failed: with a ``BridgeErrorConvertible`` or ``BridgeError`` it chose, the caller sees those;
        /// with any other error, its type (`data.type`) and, unless the host opts in, not its description.
        public static let handlerError: Code = "handler_error"
        /// No response within the request's timeout.
        public static let timeout: Code = "timeout"
        /// The request was cancelled.
        public static let cancelled: Code = "cancelled"
        /// The other side went away (said `bye` or stopped answering heartbeats).
        public static let peerLost: Code = "peer_lost"
        /// A request reused the id of one of the same sender's requests still in flight.
        public static let duplicateID: Code = "duplicate_id"
        /// The message is larger than the receiver's `max_message_bytes`.
        public static let tooLarge: Code = "too_large"
        /// More requests in flight than the receiver's `max_in_flight`, or the receiver is shutting down.
        public static let overloaded: Code = "overloaded"
        /// The receiver refuses the request (for example `$evaluate` when evaluation is off).
        public static let notAllowed: Code = "not_allowed"
        /// The message's signature is missing or wrong.
        public static let unauthorized: Code = "unauthorized"
        /// A `hello` named a peer that another live session holds (SPEC 6, Names).
        public static let nameTaken: Code = "name_taken"
        /// No such job: never started, or finished longer ago than the host keeps jobs (SPEC 7.16).
        public static let unknownJob: Code = "unknown_job"
        /// The job's host stopped while it ran, and it had no checkpoint to resume from (SPEC 7.16).
        public static let interrupted: Code = "interrupted"
        /// The job's host stopped gracefully while it ran; it resumes from its checkpoint when the host starts again
        /// on its journal: attach again then (SPEC 7.16).
        public static let suspended: Code = "suspended"
        /// The job failed because its host's journal could not be written: the disk is full (SPEC 7.16).
        public static let journalFull: Code = "journal_full"
        /// Local only: nothing listens at the endpoint (the connection was refused, or no `ipc://` socket file);
        /// a first connect fails with it at once.
        public static let unreachable: Code = "unreachable"
    }

    /// What went wrong, as a code callers can compare (`error.code == .timeout`).
    public var code: Code
    /// Human-readable text; compare ``code``, not this.
    public var message: String
    /// Anything more the sender chose to attach (the wire's `error.data`).
    public var data: JSONValue?

    /// An error to throw from a handler: the caller gets `code`, `message` and `data` as they are.
    public init(_ code: Code, _ message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static func == (lhs: BridgeError, rhs: BridgeError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { message.isEmpty ? code.rawValue : "\(code.rawValue): \(message)" }
}
