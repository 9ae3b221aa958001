import CZeroMQ

/// Connection events of a socket (`zmq_socket_monitor`): connected, accepted, disconnected, handshakes.
///
/// For example:
/// ```swift
/// let monitor = try SocketMonitor(watching: router, events: [.accepted, .disconnected])
/// if let event = try monitor.next(timeoutMilliseconds: 1000) { print(event.kind, event.endpoint) }
/// ```
public final class SocketMonitor: @unchecked Sendable {
    /// A kind of event, usable as a set to choose what to watch.
    public struct Kind: OptionSet, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let connected = Kind(rawValue: UInt32(ZMQ_EVENT_CONNECTED))
        public static let connectDelayed = Kind(rawValue: UInt32(ZMQ_EVENT_CONNECT_DELAYED))
        public static let connectRetried = Kind(rawValue: UInt32(ZMQ_EVENT_CONNECT_RETRIED))
        public static let listening = Kind(rawValue: UInt32(ZMQ_EVENT_LISTENING))
        public static let bindFailed = Kind(rawValue: UInt32(ZMQ_EVENT_BIND_FAILED))
        public static let accepted = Kind(rawValue: UInt32(ZMQ_EVENT_ACCEPTED))
        public static let acceptFailed = Kind(rawValue: UInt32(ZMQ_EVENT_ACCEPT_FAILED))
        public static let closed = Kind(rawValue: UInt32(ZMQ_EVENT_CLOSED))
        public static let closeFailed = Kind(rawValue: UInt32(ZMQ_EVENT_CLOSE_FAILED))
        public static let disconnected = Kind(rawValue: UInt32(ZMQ_EVENT_DISCONNECTED))
        public static let monitorStopped = Kind(rawValue: UInt32(ZMQ_EVENT_MONITOR_STOPPED))
        public static let handshakeFailedNoDetail = Kind(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
        public static let handshakeSucceeded = Kind(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_SUCCEEDED))
        public static let handshakeFailedProtocol = Kind(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL))
        public static let handshakeFailedAuth = Kind(rawValue: UInt32(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
        public static let all = Kind(rawValue: UInt32(ZMQ_EVENT_ALL))

        public var description: String {
            let names: [(Kind, String)] = [
                (.connected, "connected"), (.connectDelayed, "connectDelayed"), (.connectRetried, "connectRetried"),
                (.listening, "listening"), (.bindFailed, "bindFailed"), (.accepted, "accepted"),
                (.acceptFailed, "acceptFailed"), (.closed, "closed"), (.closeFailed, "closeFailed"),
                (.disconnected, "disconnected"), (.monitorStopped, "monitorStopped"),
                (.handshakeFailedNoDetail, "handshakeFailedNoDetail"), (.handshakeSucceeded, "handshakeSucceeded"),
                (.handshakeFailedProtocol, "handshakeFailedProtocol"), (.handshakeFailedAuth, "handshakeFailedAuth"),
            ]
            return names.filter { contains($0.0) }.map(\.1).joined(separator: "|")
        }
    }

    /// One event: what happened, its value (a file descriptor, an errno or a retry interval), and where.
    public struct Event: Sendable, Hashable {
        public var kind: Kind
        public var value: UInt32
        public var endpoint: String
    }

    private let pair: Socket
    private let watched: Socket

    /// Starts monitoring `socket`; events arrive over a private `inproc://` PAIR socket.
    public init(watching socket: Socket, events: Kind = .all) throws(ZMQError) {
        let address = "inproc://zeromq-monitor-\(UInt(bitPattern: ObjectIdentifier(socket).hashValue))-\(Self.nextSerial())"
        try check(zmq_socket_monitor(try socket.open("zmq_socket_monitor"), address, Int32(bitPattern: events.rawValue)),
                  "zmq_socket_monitor")
        watched = socket
        pair = try Socket(.pair, context: socket.context)
        try pair.set(.linger(milliseconds: 0))
        try pair.connect(address)
    }

    deinit {
        if let handle = watched.handle { zmq_socket_monitor(handle, nil, 0) }
        pair.close()
    }

    /// The socket the events arrive on, to poll beside others (then read them with ``nextAvailable()``).
    public var eventSocket: Socket { pair }

    /// The next event if one is waiting, without blocking.
    public func nextAvailable() throws(ZMQError) -> Event? {
        guard let frames = try pair.receive(dontWait: true) else { return nil }
        return Self.event(from: frames)
    }

    /// The next event, waiting at most `timeoutMilliseconds` (nil: forever); nil when none came in time.
    public func next(timeoutMilliseconds: Int? = nil) throws(ZMQError) -> Event? {
        var poller = Poller()
        poller.add(pair, for: .readable)
        guard try poller.poll(timeoutMilliseconds: timeoutMilliseconds) > 0,
              let frames = try pair.receive(dontWait: true) else { return nil }
        return Self.event(from: frames)
    }

    private static func event(from frames: [Frame]) -> Event? {
        guard frames.count >= 2 else { return nil }
        // Frame 0: a 16-bit event id and a 32-bit value, in host byte order; frame 1: the endpoint.
        let (id, value) = frames[0].withUnsafeBytes { bytes -> (UInt16, UInt32) in
            guard bytes.count >= 6 else { return (0, 0) }
            return (bytes.loadUnaligned(as: UInt16.self), bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
        }
        return Event(kind: Kind(rawValue: UInt32(id)), value: value, endpoint: frames[1].text)
    }

    private static let serial = SerialCounter()
    private static func nextSerial() -> Int { serial.next() }
}

/// A process-wide counter, for unique inproc names.
final class SerialCounter: @unchecked Sendable {
    private var value = 0
    private var lock = pthread_mutex_t()
    init() { pthread_mutex_init(&lock, nil) }
    func next() -> Int {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        value += 1
        return value
    }
}
