import CZeroMQ

/// Waits for any of several sockets and plain file descriptors to become readable or writable (`zmq_poll`).
///
/// For example:
/// ```swift
/// var poller = Poller()
/// let routerIndex = poller.add(router, for: .readable)
/// let wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
/// if try poller.poll(timeoutMilliseconds: 100) > 0, poller.events(at: routerIndex).contains(.readable) { ... }
/// ```
public struct Poller: @unchecked Sendable {
    /// What to wait for, and what happened.
    public struct Events: OptionSet, Sendable, Hashable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int16(ZMQ_POLLIN))
        public static let writable = Events(rawValue: Int16(ZMQ_POLLOUT))
        /// Only for plain file descriptors: an error condition.
        public static let error = Events(rawValue: Int16(ZMQ_POLLERR))
    }

    private var items: [zmq_pollitem_t] = []
    // Keeps the sockets open while they are in the poll set.
    private var sockets: [Socket?] = []

    public init() {}

    /// Adds a socket; returns its index for ``events(at:)``.
    @discardableResult
    public mutating func add(_ socket: Socket, for events: Events) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: -1, events: events.rawValue, revents: 0))
        sockets.append(socket)
        return items.count - 1
    }

    /// Adds a plain file descriptor (an eventfd, a pipe, a TCP socket); returns its index.
    @discardableResult
    public mutating func add(fileDescriptor: Int32, for events: Events) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        sockets.append(nil)
        return items.count - 1
    }

    /// Changes what to wait for on an item already added.
    public mutating func setEvents(_ events: Events, at index: Int) {
        items[index].events = events.rawValue
    }

    /// Waits until an item is ready or the timeout passes (nil: forever); returns how many items are ready.
    /// A signal interrupting the wait counts as a timeout with nothing ready.
    @discardableResult
    public mutating func poll(timeoutMilliseconds: Int? = nil) throws(ZMQError) -> Int {
        let timeout = timeoutMilliseconds.map { max(0, $0) } ?? -1
        let ready = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeout) }
        if ready == -1 {
            let code = czmq_errno()
            if code == EINTR { return 0 }
            throw ZMQError(code: code, operation: "zmq_poll")
        }
        return Int(ready)
    }

    /// What happened to the item at `index` in the last ``poll(timeoutMilliseconds:)``.
    public func events(at index: Int) -> Events { Events(rawValue: items[index].revents) }
}

/// Waits with one `poll(2)` on plain file descriptors and on sockets' signalling descriptors (`ZMQ_FD`), for a
/// thread that owns its sockets and reads them without waiting. `zmq_poll` asks every socket for `ZMQ_EVENTS` before
/// and after it waits and makes a pass that does not wait first: on an idle host, 11 `poll` and 13 `getpid` calls a
/// request (bench/RESULTS.md, issue 26).
///
/// A socket's signalling descriptor is edge-triggered: it turns readable when commands reach the socket, and any call
/// that takes them in (a receive, a send, `ZMQ_EVENTS`) may clear it while messages wait. Wait on a socket only
/// after a receive without waiting found nothing and nothing else called the socket since, or after
/// ``Socket/pendingEvents`` said it has nothing readable.
public struct SignalPoller: @unchecked Sendable {
    private var items: [pollfd] = []
    // Keeps the sockets open while their descriptors are in the poll set.
    private var sockets: [Socket] = []

    public init() {}

    /// Adds `socket`'s signalling descriptor; returns its index for ``isReadable(at:)``.
    @discardableResult
    public mutating func add(signalOf socket: Socket) throws(ZMQError) -> Int {
        sockets.append(socket)
        return add(fileDescriptor: try socket.signalDescriptor)
    }

    /// Adds a plain file descriptor, to wait until it is readable; returns its index.
    @discardableResult
    public mutating func add(fileDescriptor: Int32) -> Int {
        items.append(pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0))
        return items.count - 1
    }

    /// Waits until a descriptor is readable or `timeoutMilliseconds` pass (nil: forever); a signal interrupting the
    /// wait counts as a timeout with nothing readable.
    public mutating func wait(timeoutMilliseconds: Int?) throws(ZMQError) {
        let timeout = Int32(clamping: timeoutMilliseconds.map { max(0, $0) } ?? -1)
        let ready = items.withUnsafeMutableBufferPointer { CZeroMQ.poll($0.baseAddress, nfds_t($0.count), timeout) }
        if ready == -1 {
            let code = czmq_errno_sys()
            for index in items.indices { items[index].revents = 0 }
            if code == EINTR { return }
            throw ZMQError(code: code, operation: "poll")
        }
    }

    /// Whether the descriptor at `index` was readable (or in error: a read says which) after the last wait.
    public func isReadable(at index: Int) -> Bool { items[index].revents != 0 }
}

/// A file descriptor that one thread signals to wake another out of ``Poller/poll(timeoutMilliseconds:)`` (an eventfd).
///
/// Signals coalesce: many `signal()` calls before one `drain()` wake the poller once.
public final class WakeSignal: Sendable {
    public let fileDescriptor: Int32

    public init() throws(ZMQError) {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        if fd == -1 { throw ZMQError(code: czmq_errno_sys(), operation: "eventfd") }
        fileDescriptor = fd
    }

    deinit { _ = CZeroMQ.close(fileDescriptor) }

    /// Makes the descriptor readable. Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = write(fileDescriptor, &one, 8)
    }

    /// Makes the descriptor unreadable again; call after waking.
    public func drain() {
        var count: UInt64 = 0
        _ = read(fileDescriptor, &count, 8)
    }
}
