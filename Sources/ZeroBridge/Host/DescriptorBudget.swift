import Foundation
import Synchronization

/// The host's connections against its open-file limit (SPEC 7.17). Confined to the host's socket thread.
///
/// libzmq's listener reacts to a failed `accept` (EMFILE, ENFILE) by reporting it and returning, with the listening
/// socket still readable: it tries again at once, for ever, and spins a core. Unbinding to stop that would close
/// every connection accepted there (libzmq's listener owns them). So the host keeps its endpoint bound and sheds
/// instead: it keeps a few spare descriptors, and past its connection bound, or once a failed accept made it give
/// up its spares, it shuts down each newly accepted connection at once (libzmq then closes it). Connected peers are
/// never the ones shed.
///
/// The bound is what keeps the process from running out at all, and it matters beyond libzmq: libdispatch (under
/// Swift concurrency) aborts the process when it cannot open a file it monitors its threads with. So running out is
/// treated as the bound being too high: it is lowered to the connections open then, less the spares. (On ipc, libzmq
/// 4.3.4 itself aborts on EMFILE: there the bound is the only defence.)
struct DescriptorBudget {
    /// Descriptors held open (on /dev/null) to be given up when libzmq cannot accept.
    static let spareCount = 8
    /// Descriptors left for everything but peer connections (files, sockets, the spares, and the connections libzmq
    /// accepts before the host sheds them: peers shed reconnect, so a crowd keeps arriving) under the default bound: a
    /// quarter of the limit, at least 64. It must not run out: libzmq 4.3.4 aborts the process when an ipc accept
    /// fails with EMFILE (an assertion, ipc_listener.cpp:325), where a tcp accept is only retried.
    static func reserve(forLimit limit: Int) -> Int { max(64, limit / 4) }

    /// Connections kept at once (by default the open-file limit less ``reserve``); a newly accepted one past it is shed.
    let maxConnections: Int
    /// Lowered when descriptors ran out below ``maxConnections``.
    private var ceiling = Int.max
    private var open: Set<Int32> = []
    private var spares: [Int32] = []
    /// Connections shed since the host started.
    private(set) var shedCount = 0
    /// Connections the host has beside its ROUTER (the HTTP listener's, WebSocket ones included), counted by the
    /// listener as it accepts them: they share the descriptors, so they share the bound.
    let others = OtherConnections()

    init(maxConnections: Int?) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let fromLimit = limit.rlim_cur >= rlim_t(Int.max) ? Int.max
            : max(Int(limit.rlim_cur) - Self.reserve(forLimit: Int(limit.rlim_cur)), 1)
        self.maxConnections = maxConnections ?? fromLimit
        others.publish(zeroMQ: 0, bound: self.maxConnections)
        takeSpares()
    }

    /// Connections kept at most now.
    var bound: Int { min(maxConnections, ceiling) }

    /// Connections open now.
    var connectionCount: Int { open.count + others.count }

    /// libzmq accepted a connection over `fd`: whether it is kept (otherwise it was shed).
    mutating func accepted(_ fd: Int32) -> Bool {
        guard connectionCount < bound, spares.count == Self.spareCount else {
            endConnection(fd)
            shedCount += 1
            return false
        }
        open.insert(fd)
        others.publish(zeroMQ: open.count, bound: bound)
        return true
    }

    /// The connection over `fd` closed: its descriptor goes back to the spares first, if they are short.
    mutating func disconnected(_ fd: Int32) {
        open.remove(fd)
        others.publish(zeroMQ: open.count, bound: bound)
        takeSpares()
    }

    /// An accept failed for want of descriptors: the spares are given up, so libzmq's next accept succeeds (and that
    /// connection is shed) instead of spinning. Returns whether there were spares to give.
    mutating func exhausted() -> Bool {
        ceiling = min(ceiling, max(connectionCount - Self.spareCount, 1))
        others.publish(zeroMQ: open.count, bound: bound)
        guard !spares.isEmpty else { return false }
        for fd in spares { close(fd) }
        spares.removeAll()
        return true
    }

    /// Takes back spare descriptors while some are missing and the process has them.
    mutating func takeSpares() {
        while spares.count < Self.spareCount {
            let fd = Foundation.open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            spares.append(fd)
        }
    }

    /// Gives the spares back to the process (the host stopped).
    mutating func release() {
        for fd in spares { close(fd) }
        spares.removeAll()
    }
}

/// Ends a connection libzmq owns without closing its descriptor under it: libzmq sees the end and closes it.
private func endConnection(_ fd: Int32) {
    _ = shutdown(fd, Int32(SHUT_RDWR))
}

/// The connections of the host's HTTP listener, against the same bound as its ROUTER's (SPEC 2.2, 7.17): the listener
/// admits one while all connections together are under the bound, and sheds it otherwise. Readable from any thread.
final class OtherConnections: Sendable {
    private let open = Atomic<Int>(0)
    private let zeroMQ = Atomic<Int>(0)
    private let bound = Atomic<Int>(Int.max)

    var count: Int { open.load(ordering: .relaxed) }

    /// The ROUTER's side, published by the budget on the socket thread.
    func publish(zeroMQ count: Int, bound: Int) {
        zeroMQ.store(count, ordering: .relaxed)
        self.bound.store(bound, ordering: .relaxed)
    }

    /// A connection accepted: whether it is kept (then ``closed()`` must follow), or shed.
    func admit() -> Bool {
        let now = open.add(1, ordering: .relaxed).newValue
        guard now + zeroMQ.load(ordering: .relaxed) <= bound.load(ordering: .relaxed) else {
            open.subtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func closed() {
        open.subtract(1, ordering: .relaxed)
    }
}
