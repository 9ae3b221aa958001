import CZeroMQ

/// An error reported by libzmq: the errno code it set, and the call that failed.
///
/// Equality is on the code only, so a specific error can be caught by name.
/// For example:
/// ```swift
/// do { try router.send(parts, dontWait: true) }
/// catch ZMQError.hostUnreachable { /* the routing id is not connected */ }
/// ```
public struct ZMQError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The errno value (`EAGAIN`, `ETERM`, ... or one of libzmq's own, such as `EFSM`).
    public let code: Int32
    /// The libzmq call that failed, for the message.
    public let operation: String

    public init(code: Int32, operation: String = "") {
        self.code = code
        self.operation = operation
    }

    /// The error libzmq reports for the call just made on this thread.
    static func last(_ operation: String) -> ZMQError {
        ZMQError(code: czmq_errno(), operation: operation)
    }

    public var description: String {
        let text = String(cString: zmq_strerror(code))
        return operation.isEmpty ? "\(text) (errno \(code))" : "\(operation): \(text) (errno \(code))"
    }

    public static func == (lhs: ZMQError, rhs: ZMQError) -> Bool { lhs.code == rhs.code }

    /// Lets `catch ZMQError.wouldBlock { ... }` match by code.
    public static func ~= (pattern: ZMQError, error: any Error) -> Bool {
        (error as? ZMQError)?.code == pattern.code
    }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `EAGAIN`: a non-blocking call would have blocked (or a send hit the high-water mark).
    public static let wouldBlock = ZMQError(code: EAGAIN)
    /// `ETERM`: the socket's context was terminated.
    public static let contextTerminated = ZMQError(code: ETERM)
    /// `EHOSTUNREACH`: a ROUTER with `ROUTER_MANDATORY` was asked to send to an unknown routing id.
    public static let hostUnreachable = ZMQError(code: EHOSTUNREACH)
    /// `EINTR`: a signal interrupted the call.
    public static let interrupted = ZMQError(code: EINTR)
    /// `EINVAL`: an argument (endpoint, option value) was invalid.
    public static let invalidArgument = ZMQError(code: EINVAL)
    /// `EFSM`: the operation is not valid in the socket's state (REQ/REP ordering).
    public static let invalidState = ZMQError(code: 156384763)  // ZMQ_HAUSNUMERO + 51
    /// `EADDRINUSE`: the address is already bound.
    public static let addressInUse = ZMQError(code: EADDRINUSE)
    /// `EPROTONOSUPPORT`: the endpoint's transport is not supported.
    public static let protocolNotSupported = ZMQError(code: EPROTONOSUPPORT)
    /// `ENOTSUP`: the operation or option is not supported here.
    public static let notSupported = ZMQError(code: ENOTSUP)
    /// `ENOTSOCK`: the socket was already closed.
    public static let notSocket = ZMQError(code: ENOTSOCK)
}

/// Calls a libzmq function that returns -1 on failure and throws its errno.
@inline(__always)
func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(ZMQError) {
    if result == -1 { throw ZMQError(code: czmq_errno(), operation: operation()) }
}

extension String {
    /// Text from a C buffer that libzmq filled, up to its first NUL.
    init(nulTerminated buffer: [CChar]) {
        let end = buffer.firstIndex(of: 0) ?? buffer.endIndex
        self = String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
