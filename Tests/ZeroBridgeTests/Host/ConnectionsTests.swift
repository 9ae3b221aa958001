import Testing
@testable import ZeroBridge

/// Which connection a disconnect event ends (SPEC 7.1, 7.6): file descriptors are reused, and libzmq takes turns
/// among connections, so a closed connection's last messages can be read after a newer connection's first.
@Suite("Connections: disconnects end the right session")
struct ConnectionsTests {
    private let named: [UInt8] = [0, 0, 0, 0, 1]
    private let fresh: [UInt8] = [0, 0, 0, 0, 2]
    private let fd: Int32 = 7

    @Test("a closed connection's late message, read after a newer connection's over the same descriptor, does not end the newer one")
    func lateMessageAfterANewerConnection() {
        var connections = Connections()
        #expect(connections.message(over: fd, from: named) == nil)
        // The named peer left; a new connection got its descriptor, and its request was read before the old
        // connection's disconnect event.
        #expect(connections.message(over: fd, from: fresh) == named)
        // What the named peer sent just before leaving is read now: it says nothing about the new connection.
        #expect(connections.message(over: fd, from: named) == nil, "the new connection was taken for closed")
        #expect(connections.disconnected(fd) == nil, "the named peer's event was known ahead")
        #expect(connections.disconnected(fd) == fresh, "the new connection's own disconnect still ends it")
    }

    @Test("a late message read after its connection's disconnect event neither reopens it nor hides the next connection's disconnect")
    func lateMessageAfterItsDisconnect() {
        var connections = Connections()
        #expect(connections.message(over: fd, from: named) == nil)
        #expect(connections.disconnected(fd) == named)
        #expect(connections.isNew(named, over: fd) == false)
        #expect(connections.message(over: fd, from: named) == nil)
        #expect(connections.isNew(fresh, over: fd))
        #expect(connections.message(over: fd, from: fresh) == nil, "no open connection was over the descriptor")
        #expect(connections.disconnected(fd) == fresh)
    }

    @Test("closed connections are remembered per descriptor up to a bound")
    func boundedMemory() {
        var connections = Connections()
        for index in 0..<(Connections.closedRemembered + 4) {
            let id: [UInt8] = [0, 0, 0, 1, UInt8(index)]
            #expect(connections.message(over: fd, from: id) == nil)
            #expect(connections.disconnected(fd) == id)
        }
        #expect(connections.isNew([0, 0, 0, 1, 0], over: fd), "the oldest is forgotten")
        #expect(!connections.isNew([0, 0, 0, 1, UInt8(Connections.closedRemembered + 3)], over: fd))
    }
}
