import Foundation
import Testing
import TestSupport
@testable import ZeroMQ

@Suite("Poller, wake signal and monitor", .timeLimit(.minutes(3)))
struct PollerTests {
    @Test("the poller wakes for a socket and for a plain file descriptor")
    func pollerWithFileDescriptor() throws {
        let context = try Context()
        let (pull, endpoint) = try bound(.pull, context, .inproc)
        let push = try makeSocket(.push, context)
        try push.connect(endpoint)
        let wake = try WakeSignal()

        var poller = Poller()
        let socketIndex = poller.add(pull, for: .readable)
        let wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)

        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)

        // Signalled from another thread while the poller waits.
        let thread = Thread { wake.signal(); wake.signal() }
        thread.start()
        #expect(try poller.poll(timeoutMilliseconds: Int(patienceMilliseconds)) == 1)
        #expect(poller.events(at: wakeIndex).contains(.readable))
        #expect(!poller.events(at: socketIndex).contains(.readable))
        wake.drain()
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0, "signals coalesce and drain clears them")

        try push.send([bytes("x")])
        #expect(try poller.poll(timeoutMilliseconds: Int(patienceMilliseconds)) == 1)
        #expect(poller.events(at: socketIndex).contains(.readable))
        #expect(try pull.receiveBytes() == [bytes("x")])
        #expect(try pull.pendingEvents.contains(.readable) == false)
    }

    @Test("the poller times out when nothing is ready")
    func pollerTimeout() throws {
        var poller = Poller()
        let wake = try WakeSignal()
        poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
        let start = ContinuousClock.now
        #expect(try poller.poll(timeoutMilliseconds: 30) == 0)
        #expect(ContinuousClock.now - start >= .milliseconds(25))
    }

    @Test("the signal poller wakes for a socket's signalling descriptor once a receive found nothing, and for a plain descriptor")
    func signalPoller() throws {
        let context = try Context()
        let (pull, endpoint) = try bound(.pull, context, .inproc)
        let push = try makeSocket(.push, context)
        try push.connect(endpoint)
        let wake = try WakeSignal()

        var poller = SignalPoller()
        let socketIndex = try poller.add(signalOf: pull)
        let wakeIndex = poller.add(fileDescriptor: wake.fileDescriptor)
        #expect(try pull.receive(dontWait: true) == nil)  // what makes waiting on the descriptor safe

        let thread = Thread { wake.signal() }
        thread.start()
        try poller.wait(timeoutMilliseconds: Int(patienceMilliseconds))
        #expect(poller.isReadable(at: wakeIndex))
        wake.drain()

        // Messages sent while nobody waits are announced to the next wait: the descriptor keeps its signal.
        for text in ["a", "b", "c"] { try push.send([bytes(text)]) }
        try poller.wait(timeoutMilliseconds: Int(patienceMilliseconds))
        #expect(poller.isReadable(at: socketIndex))
        #expect(!poller.isReadable(at: wakeIndex))
        var read: [[[UInt8]]] = []
        while let frames = try pull.receiveBytes(dontWait: true) { read.append(frames) }
        #expect(read == [[bytes("a")], [bytes("b")], [bytes("c")]])

        // Nothing more: the wait ends at its timeout with nothing readable.
        let start = ContinuousClock.now
        try poller.wait(timeoutMilliseconds: 30)
        #expect(!poller.isReadable(at: socketIndex) && !poller.isReadable(at: wakeIndex))
        #expect(ContinuousClock.now - start >= .milliseconds(25))
    }

    @Test("the monitor reports accepted, handshake and disconnected on the bound side", arguments: [Transport.ipc, .tcp])
    func monitorEvents(transport: Transport) throws {
        let context = try Context()
        let (router, endpoint) = try bound(.router, context, transport)
        let monitor = try SocketMonitor(watching: router, events: [.accepted, .handshakeSucceeded, .disconnected])

        let dealer = try makeSocket(.dealer, context)
        try dealer.connect(endpoint)
        var kinds: [SocketMonitor.Kind] = []
        while kinds.count < 2, let event = try monitor.next(timeoutMilliseconds: Int(patienceMilliseconds)) {
            kinds.append(event.kind)
            #expect(!event.endpoint.isEmpty)
        }
        #expect(kinds == [.accepted, .handshakeSucceeded])

        dealer.close()
        let event = try #require(try monitor.next(timeoutMilliseconds: Int(patienceMilliseconds)))
        #expect(event.kind == .disconnected)
    }

    @Test("the monitor reports connected on the connecting side")
    func monitorConnected() throws {
        let context = try Context()
        let (router, endpoint) = try bound(.router, context, .tcp)
        _ = router
        let dealer = try makeSocket(.dealer, context)
        let monitor = try SocketMonitor(watching: dealer, events: .connected)
        try dealer.connect(endpoint)
        let event = try #require(try monitor.next(timeoutMilliseconds: Int(patienceMilliseconds)))
        #expect(event.kind == .connected)
        #expect(event.endpoint == endpoint)
    }
}
