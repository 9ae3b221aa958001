import Foundation
import Testing
import TestSupport
@testable import ZeroMQ

@Suite("CURVE and Z85", .timeLimit(.minutes(3)))
struct CurveTests {
    @Test("Z85 encodes the RFC 32 test vector and round-trips")
    func z85() throws {
        let vector: [UInt8] = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]
        #expect(try Z85.encode(vector) == "HelloWorld")
        #expect(try Z85.decode("HelloWorld") == vector)
        let random = (0..<32).map { _ in UInt8.random(in: 0...255) }
        #expect(try Z85.decode(try Z85.encode(random)) == random)
        #expect(throws: ZMQError.invalidArgument) { try Z85.encode([1, 2, 3]) }
        #expect(throws: ZMQError.invalidArgument) { try Z85.decode("Hell\"") }
        #expect(throws: ZMQError.invalidArgument) { try Z85.decode("Hell") }
    }

    @Test("generated key pairs are 40-character Z85 and the public key derives from the secret")
    func keyPairs() throws {
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.utf8.count == 40 && pair.secretKey.utf8.count == 40)
        #expect(try Z85.decode(pair.publicKey).count == 32)
        #expect(try CurveKeyPair.publicKey(forSecretKey: pair.secretKey) == pair.publicKey)
        #expect(try CurveKeyPair.generate() != pair)
    }

    @Test("a CURVE client with the server's key talks; one with a wrong key never gets through", arguments: [Transport.ipc, .tcp])
    func handshake(transport: Transport) throws {
        #expect(Context.hasCapability("curve"))
        let context = try Context()
        let server = try CurveKeyPair.generate()
        let client = try CurveKeyPair.generate()

        let router = try makeSocket(.router, context)
        try router.set(.curveServer(true), .curveSecretKey(server.secretKey))
        try router.bind(transport.bindEndpoint())
        let endpoint = try router.lastEndpoint
        let monitor = try SocketMonitor(watching: router, events: [.handshakeSucceeded, .handshakeFailedProtocol, .handshakeFailedNoDetail, .handshakeFailedAuth])

        let dealer = try makeSocket(.dealer, context)
        try dealer.set(.curveServerKey(server.publicKey), .curvePublicKey(client.publicKey), .curveSecretKey(client.secretKey))
        try dealer.connect(endpoint)
        try dealer.send([bytes("secret hello")])
        let message = try #require(try router.receiveBytes())
        #expect(message[1] == bytes("secret hello"))
        #expect(try monitor.next(timeoutMilliseconds: Int(patienceMilliseconds))?.kind == .handshakeSucceeded)

        let impostor = try makeSocket(.dealer, context)
        let wrongServer = try CurveKeyPair.generate()
        try impostor.set(.curveServerKey(wrongServer.publicKey), .curvePublicKey(client.publicKey), .curveSecretKey(client.secretKey))
        try impostor.connect(endpoint)
        try impostor.send([bytes("let me in")])
        let failure = try #require(try monitor.next(timeoutMilliseconds: Int(patienceMilliseconds)))
        #expect(failure.kind != .handshakeSucceeded)
        #expect(try router.receive(dontWait: true) == nil)
    }
}
