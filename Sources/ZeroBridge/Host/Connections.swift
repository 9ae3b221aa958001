import Foundation

/// The host's view of its peers' connections, below sessions: which connection (file descriptor) each routing id's
/// messages come over, so a disconnect event can name the session it ends, and which connections are retired
/// (SPEC 6). Confined to the host's socket thread.
///
/// A disconnect event names only a file descriptor, and descriptors are reused once a connection closes. libzmq
/// reports a connection's disconnect before it closes its descriptor, so before a new connection's first message is
/// counted the host reads the events still pending (``isNew(_:over:)``): every earlier connection over that
/// descriptor is then known to be closed. Messages of a closed connection can still be read after a newer
/// connection's (libzmq takes turns among connections): they are recognised as late, and never taken to mean that
/// the newer connection closed.
struct Connections {
    /// Each descriptor's open connection.
    private var routingIDs: [Int32: [UInt8]] = [:]
    /// The latest connections closed over each descriptor, newest last: their late messages change nothing.
    private var closedOver: [Int32: [[UInt8]]] = [:]
    /// Disconnect events still to come for connections already known to be closed.
    private var closedAhead: [Int32: Int] = [:]
    private var retired = RetiredConnections()

    /// How many closed connections are remembered per descriptor: a late message of one closed this many connections
    /// over the same descriptor ago (each closed, accepted and handshaken while it waited) is not recognised.
    static let closedRemembered = 16

    /// Whether a message from `routingID` over `fd` is the first of a connection not known yet (not the descriptor's
    /// open connection, nor one closed over it).
    func isNew(_ routingID: [UInt8], over fd: Int32) -> Bool {
        routingIDs[fd] != routingID && closedOver[fd]?.contains(routingID) != true
    }

    /// A message from `routingID` came over `fd`; returns the routing id of a connection this shows to be closed.
    mutating func message(over fd: Int32, from routingID: [UInt8]) -> [UInt8]? {
        guard isNew(routingID, over: fd) else { return nil }
        guard let previous = routingIDs.updateValue(routingID, forKey: fd) else { return nil }
        // The descriptor's previous connection closed and its event has not been read (the caller reads pending
        // events first, so this is a safeguard): it is known closed now, and its event is skipped when it comes.
        closedAhead[fd, default: 0] += 1
        remember(previous, closedOver: fd)
        return previous
    }

    /// The connection over `fd` closed; returns its routing id, unless it was known to be closed already.
    mutating func disconnected(_ fd: Int32) -> [UInt8]? {
        if let ahead = closedAhead[fd] {
            closedAhead[fd] = ahead > 1 ? ahead - 1 : nil
            return nil
        }
        guard let closed = routingIDs.removeValue(forKey: fd) else { return nil }
        remember(closed, closedOver: fd)
        return closed
    }

    private mutating func remember(_ routingID: [UInt8], closedOver fd: Int32) {
        var closed = closedOver[fd] ?? []
        if closed.count == Self.closedRemembered { closed.removeFirst() }
        closed.append(routingID)
        closedOver[fd] = closed
    }

    /// What arrives on the connection from now on is answered `bye`, not processed.
    mutating func retire(_ routingID: [UInt8]) { retired.insert(routingID) }

    /// The peer said `hello` on a retired connection: it starts over there.
    mutating func restore(_ routingID: [UInt8]) { retired.remove(routingID) }

    func isRetired(_ routingID: [UInt8]) -> Bool { retired.contains(routingID) }
}
/// Routing ids of retired connections (SPEC 6), at most 65,536: the oldest are forgotten first. A forgotten one
/// can only be a connection silent for that many retirements since; its messages would open a new session.
struct RetiredConnections {
    let capacity: Int
    /// Each member with the serial of its latest retirement.
    private var members: [[UInt8]: UInt64] = [:]
    /// Retirements in order; an entry whose serial is no longer its member's is stale (removed, or retired again).
    private var order: [(routingID: [UInt8], serial: UInt64)] = []
    private var head = 0
    private var serial: UInt64 = 0

    init(capacity: Int = 65_536) { self.capacity = capacity }

    func contains(_ routingID: [UInt8]) -> Bool { members[routingID] != nil }

    /// Routing ids held, retired or not: what bounds its memory.
    var storedCount: Int { order.count }

    mutating func insert(_ routingID: [UInt8]) {
        serial += 1
        members[routingID] = serial
        order.append((routingID, serial))
        while members.count > capacity {
            let oldest = order[head]
            head += 1
            if members[oldest.routingID] == oldest.serial { members[oldest.routingID] = nil }
        }
        // The forgotten prefix and stale entries are dropped once either would double the list (each member keeps
        // exactly one entry), so the work is spread over many retirements and memory stays within 3 x capacity.
        if head > capacity || order.count - head > 2 * capacity {
            order = order[head...].filter { members[$0.routingID] == $0.serial }
            head = 0
        }
    }

    mutating func remove(_ routingID: [UInt8]) { members[routingID] = nil }
}
