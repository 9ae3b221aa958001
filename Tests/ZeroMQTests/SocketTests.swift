import Foundation
import Testing
@testable import ZeroMQ

@Suite("Sockets over inproc, ipc and tcp", .timeLimit(.minutes(3)))
struct SocketTests {
    @Test("DEALER to ROUTER round trip", arguments: Transport.allCases)
    func roundTrip(transport: Transport) throws {
        let context = try Context()
        let (router, endpoint) = try bound(.router, context, transport)
        let dealer = try makeSocket(.dealer, context)
        try dealer.connect(endpoint)

        try dealer.send([bytes("ping")])
        let request = try #require(try router.receiveBytes())
        #expect(request.count == 2)
        #expect(request[1] == bytes("ping"))

        try router.send([request[0], bytes("pong")])
        #expect(try dealer.receiveBytes() == [bytes("pong")])
    }

    @Test("multipart messages arrive whole and in order, empty and large parts included", arguments: Transport.allCases)
    func multipartIntegrity(transport: Transport) throws {
        let context = try Context()
        let (pull, endpoint) = try bound(.pull, context, transport)
        let push = try makeSocket(.push, context)
        try push.connect(endpoint)

        let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let parts: [[UInt8]] = [[], bytes("a"), large, [], (0..<255).map(UInt8.init), bytes("last")]
        for round in 0..<20 {
            try push.send(parts + [bytes("\(round)")])
        }
        for round in 0..<20 {
            let received = try #require(try pull.receiveBytes())
            #expect(received == parts + [bytes("\(round)")])
        }
    }

    @Test("frames sent as Frame objects are received in place", arguments: Transport.allCases)
    func framesSendAndReceive(transport: Transport) throws {
        let context = try Context()
        let (a, endpoint) = try bound(.pair, context, transport)
        let b = try makeSocket(.pair, context)
        try b.connect(endpoint)

        let frames = [Frame(), Frame("body"), Frame([UInt8](repeating: 7, count: 100_000))]
        try a.send(frames: frames)
        #expect(frames.allSatisfy { $0.count == 0 }, "sending hands the storage to libzmq")
        let received = try #require(try b.receive())
        #expect(received.map(\.count) == [0, 4, 100_000])
        #expect(received[1].text == "body")
        #expect(received[2].withUnsafeBytes { $0.allSatisfy { $0 == 7 } })
    }

    @Test("ROUTER routes replies by routing id to the right DEALER", arguments: Transport.allCases)
    func routerRoutesById(transport: Transport) throws {
        let context = try Context()
        let (router, endpoint) = try bound(.router, context, transport)
        var dealers: [Socket] = []
        for index in 0..<5 {
            let dealer = try makeSocket(.dealer, context)
            try dealer.set(.routingID(bytes("peer-\(index)")))
            try dealer.connect(endpoint)
            dealers.append(dealer)
        }
        for (index, dealer) in dealers.enumerated() { try dealer.send([bytes("from \(index)")]) }

        var seen: Set<[UInt8]> = []
        for _ in dealers.indices {
            let message = try #require(try router.receiveBytes())
            #expect(message[1] == bytes("from " + String(decoding: message[0].dropFirst(5), as: UTF8.self)))
            seen.insert(message[0])
            try router.send([message[0], bytes("to ") + message[0]])
        }
        #expect(seen.count == 5)
        for (index, dealer) in dealers.enumerated() {
            #expect(try dealer.receiveBytes() == [bytes("to peer-\(index)")])
            #expect(try dealer.routingID == bytes("peer-\(index)"))
        }
    }

    @Test("ROUTER_MANDATORY reports EHOSTUNREACH for an unknown routing id", arguments: Transport.allCases)
    func routerMandatory(transport: Transport) throws {
        let context = try Context()
        let (router, _) = try bound(.router, context, transport)
        try router.set(.routerMandatory(true))
        #expect(throws: ZMQError.hostUnreachable) {
            try router.send([bytes("nobody"), bytes("hello")])
        }
        // Without the option, the same send is dropped silently and succeeds.
        let (lenient, _) = try bound(.router, context, transport)
        #expect(try lenient.send([bytes("nobody"), bytes("hello")]))
    }

    @Test("a non-blocking receive with nothing waiting returns nil, a blocking one times out with EAGAIN")
    func nonBlockingReceive() throws {
        let context = try Context()
        let (pull, _) = try bound(.pull, context, .inproc)
        #expect(try pull.receive(dontWait: true) == nil)
        try pull.set(.receiveTimeout(milliseconds: 10))
        #expect(throws: ZMQError.wouldBlock) { try pull.receive() }
    }

    @Test("bad endpoints and closed sockets give clear errors")
    func errors() throws {
        let context = try Context()
        let socket = try makeSocket(.dealer, context)
        #expect(throws: ZMQError.protocolNotSupported) { try socket.bind("carrier-pigeon://nowhere") }
        #expect(throws: ZMQError.invalidArgument) { try socket.connect("tcp://") }
        let (first, endpoint) = try bound(.router, context, .tcp)
        _ = first
        #expect(throws: ZMQError.addressInUse) { try makeSocket(.router, context).bind(endpoint) }
        socket.close()
        socket.close()
        #expect(throws: ZMQError.notSocket) { try socket.send([bytes("x")]) }
        let error = ZMQError(code: EHOSTUNREACH, operation: "zmq_send")
        #expect(error.description.contains("zmq_send"))
    }

    @Test("options are applied and read back")
    func options() throws {
        let context = try Context()
        let socket = try makeSocket(.dealer, context)
        try socket.set(
            .linger(milliseconds: 250), .sendHighWaterMark(10), .receiveHighWaterMark(10), .maxMessageSize(1 << 20),
            .heartbeatInterval(milliseconds: 100), .heartbeatTimeout(milliseconds: 300), .heartbeatTTL(milliseconds: 500),
            .immediate(true), .reconnectInterval(milliseconds: 50), .reconnectIntervalMax(milliseconds: 1000),
            .zapDomain("global"), .routingID(bytes("me")))
        #expect(try socket.linger == 250)
        #expect(try socket.routingID == bytes("me"))
        #expect(throws: ZMQError.invalidArgument) { try socket.set(.routingID([])) }
    }
}
