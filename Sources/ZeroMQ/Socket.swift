import CZeroMQ

/// A libzmq socket.
///
/// Like libzmq's, it is not thread-safe: use it from one thread at a time (the bridge gives each socket one
/// I/O thread). It is closed by ``close()`` or when it goes away.
/// For example:
/// ```swift
/// let dealer = try Socket(.dealer, context: context)
/// try dealer.connect("tcp://127.0.0.1:5555")
/// try dealer.send([[], Array("hello".utf8)])
/// let reply = try dealer.receive()
/// ```
public final class Socket: @unchecked Sendable {
    /// The kinds of socket this layer offers.
    public struct Kind: Sendable, Hashable {
        let rawValue: Int32
        public static let pair = Kind(rawValue: ZMQ_PAIR)
        public static let pub = Kind(rawValue: ZMQ_PUB)
        public static let sub = Kind(rawValue: ZMQ_SUB)
        public static let req = Kind(rawValue: ZMQ_REQ)
        public static let rep = Kind(rawValue: ZMQ_REP)
        public static let dealer = Kind(rawValue: ZMQ_DEALER)
        public static let router = Kind(rawValue: ZMQ_ROUTER)
        public static let pull = Kind(rawValue: ZMQ_PULL)
        public static let push = Kind(rawValue: ZMQ_PUSH)
    }

    public let kind: Kind
    public let context: Context
    private(set) var handle: UnsafeMutableRawPointer?

    public init(_ kind: Kind, context: Context) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, kind.rawValue) else { throw ZMQError.last("zmq_socket") }
        self.kind = kind
        self.context = context
        self.handle = handle
    }

    deinit { close() }

    /// Closes the socket; unsent messages are kept for the socket's linger period. Closing twice is harmless.
    public func close() {
        if let handle {
            zmq_close(handle)
            self.handle = nil
        }
    }

    func open(_ operation: @autoclosure () -> String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError(code: ENOTSOCK, operation: operation()) }
        return handle
    }

    // MARK: Endpoints

    /// Binds to an endpoint such as `tcp://127.0.0.1:*`, `ipc:///tmp/x.sock` or `inproc://name`.
    public func bind(_ endpoint: String) throws(ZMQError) {
        try check(zmq_bind(try open("zmq_bind"), endpoint), "zmq_bind(\(endpoint))")
    }

    /// Connects to an endpoint; libzmq connects (and reconnects) in the background.
    public func connect(_ endpoint: String) throws(ZMQError) {
        try check(zmq_connect(try open("zmq_connect"), endpoint), "zmq_connect(\(endpoint))")
    }

    public func unbind(_ endpoint: String) throws(ZMQError) {
        try check(zmq_unbind(try open("zmq_unbind"), endpoint), "zmq_unbind(\(endpoint))")
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        try check(zmq_disconnect(try open("zmq_disconnect"), endpoint), "zmq_disconnect(\(endpoint))")
    }

    /// The endpoint last bound or connected, with a wildcard port resolved (`tcp://127.0.0.1:41234`).
    public var lastEndpoint: String {
        get throws(ZMQError) { try stringOption(ZMQ_LAST_ENDPOINT, "ZMQ_LAST_ENDPOINT") }
    }

    // MARK: Sending

    /// Sends one part. Returns false instead of blocking when `dontWait` is set and the message cannot be queued.
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let handle = try open("zmq_send")
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        while true {
            if zmq_send(handle, bytes.baseAddress, bytes.count, flags) >= 0 { return true }
            let code = czmq_errno()
            if code == EINTR { continue }
            if code == EAGAIN && dontWait { return false }
            throw ZMQError(code: code, operation: "zmq_send")
        }
    }

    /// Sends a multipart message, one part per element. With `dontWait`, returns false when nothing was queued;
    /// libzmq queues the parts of a message all or none.
    @discardableResult
    public func send(_ parts: [[UInt8]], dontWait: Bool = false) throws(ZMQError) -> Bool {
        precondition(!parts.isEmpty, "a message has at least one part")
        for index in parts.indices {
            let more = index < parts.count - 1
            let sent: Result<Bool, ZMQError> = parts[index].withUnsafeBytes { bytes in
                Result { () throws(ZMQError) -> Bool in try send(bytes, more: more, dontWait: dontWait) }
            }
            if try !sent.get() { return false }  // only the first part can fail this way
        }
        return true
    }

    /// Sends frames as one multipart message; each frame's storage passes to libzmq and the frame is left empty.
    @discardableResult
    public func send(frames: [Frame], dontWait: Bool = false) throws(ZMQError) -> Bool {
        precondition(!frames.isEmpty, "a message has at least one part")
        let handle = try open("zmq_msg_send")
        for index in frames.indices {
            let flags = (index < frames.count - 1 ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
            while zmq_msg_send(frames[index].message, handle, flags) == -1 {
                let code = czmq_errno()
                if code == EINTR { continue }
                if code == EAGAIN && dontWait { return false }
                throw ZMQError(code: code, operation: "zmq_msg_send")
            }
        }
        return true
    }

    // MARK: Receiving

    /// Receives one whole multipart message. Returns nil instead of blocking when `dontWait` is set and none waits.
    public func receive(dontWait: Bool = false) throws(ZMQError) -> [Frame]? {
        let handle = try open("zmq_msg_recv")
        var frames: [Frame] = []
        while true {
            let frame = Frame()
            // Only the first part can be missing: libzmq delivers the parts of a message together.
            let flags = frames.isEmpty && dontWait ? ZMQ_DONTWAIT : 0
            while zmq_msg_recv(frame.message, handle, flags) == -1 {
                let code = czmq_errno()
                if code == EINTR { continue }
                if code == EAGAIN && frames.isEmpty && dontWait { return nil }
                throw ZMQError(code: code, operation: "zmq_msg_recv")
            }
            frames.append(frame)
            if zmq_msg_more(frame.message) == 0 { return frames }
        }
    }

    /// Receives one whole multipart message and returns copies of its parts.
    public func receiveBytes(dontWait: Bool = false) throws(ZMQError) -> [[UInt8]]? {
        try receive(dontWait: dontWait)?.map(\.bytes)
    }

    /// The descriptor that turns readable when commands reach the socket (`ZMQ_FD`): edge-triggered, see
    /// ``SignalPoller``.
    public var signalDescriptor: Int32 {
        get throws(ZMQError) { try intOption(ZMQ_FD, "ZMQ_FD") }
    }

    /// Whether a receive or a send would succeed now, without blocking (`ZMQ_EVENTS`).
    public var pendingEvents: Poller.Events {
        get throws(ZMQError) { Poller.Events(rawValue: Int16(try intOption(ZMQ_EVENTS, "ZMQ_EVENTS"))) }
    }
}
