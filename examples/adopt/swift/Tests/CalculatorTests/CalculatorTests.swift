import Calculator
import Testing
import ZeroBridge

@Test func aSwiftPeerCallsTheHostThroughTheDependency() async throws {
    let host = try makeCalculatorHost(endpoint: "tcp://127.0.0.1:*")
    try host.start()
    let endpoint = try #require(host.boundEndpoint)
    let peer = try BridgePeer(configuration: .init(endpoint: endpoint, name: "adopter"))
    // Generous: CI builds other things on the same 2 cores.
    let welcome = try await peer.connect(timeout: .seconds(30))
    #expect(welcome.libraryVersion == zeroBridgeVersion)

    #expect(try await peer.call(Add.self, .init(a: 2, b: 3)) == 5)

    let counting = peer.stream(CountTo.self, .init(n: 3))
    var seen: [Int] = []
    for try await progress in counting.progress { seen.append(progress.i) }
    #expect(seen == [1, 2, 3])
    #expect(try await counting.result == 3)

    await peer.close()
    await host.shutdown()
}
