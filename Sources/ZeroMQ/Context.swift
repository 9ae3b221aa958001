import CZeroMQ

/// A libzmq context: the I/O threads and the `inproc://` namespace that its sockets share.
///
/// Thread-safe. It is terminated when the last socket made from it has gone (each socket holds its context).
/// For example:
/// ```swift
/// let context = try Context()
/// let router = try Socket(.router, context: context)
/// ```
public final class Context: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    /// - Parameter ioThreads: libzmq's background I/O threads; one is enough below about a gigabyte per second.
    public init(ioThreads: Int32 = 1) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        self.handle = handle
        try check(zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads), "zmq_ctx_set(ZMQ_IO_THREADS)")
        // Without this, terminating waits forever for unsent messages of sockets that kept the default linger.
        try check(zmq_ctx_set(handle, ZMQ_BLOCKY, 0), "zmq_ctx_set(ZMQ_BLOCKY)")
    }

    deinit {
        while zmq_ctx_term(handle) == -1 && czmq_errno() == EINTR {}
    }

    /// libzmq's version as (major, minor, patch).
    public static var libraryVersion: (major: Int32, minor: Int32, patch: Int32) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (major, minor, patch)
    }

    /// Whether libzmq was built with a capability, such as `"curve"` or `"ipc"`.
    public static func hasCapability(_ name: String) -> Bool { zmq_has(name) == 1 }
}
