import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2

// gRPC without TLS, the way grpc-swift-2's docs and examples set it up for speed: its async server and client over
// the posix HTTP/2 transport (SwiftNIO), plaintext TCP on loopback. No protoc: the messages are JSON, through GRPCCore's
// own serializer protocols (as grpc-swift-2's tests do), so each end does the JSON work ZeroBridge's echo does.

/// Encodes a message as JSON: what a service without protobuf would put on the wire.
struct JSONSerializer<Message: Encodable & Sendable>: MessageSerializer {
    let encoder = JSONEncoder()

    func serialize<Bytes: GRPCContiguousBytes>(_ message: Message) throws -> Bytes {
        do {
            return Bytes(try encoder.encode(message))
        } catch {
            throw RPCError(code: .internalError, message: "can't encode the message as JSON: \(error)")
        }
    }
}

/// Decodes a JSON message; bytes that are not one are an invalid argument, answered as such.
struct JSONDeserializer<Message: Decodable & Sendable>: MessageDeserializer {
    let decoder = JSONDecoder()

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
        do {
            return try serializedMessageBytes.withUnsafeBytes { try decoder.decode(Message.self, from: Data($0)) }
        } catch {
            throw RPCError(code: .invalidArgument, message: "not a JSON \(Message.self): \(error)")
        }
    }
}

enum AnchorMethods {
    static let service = ServiceDescriptor(fullyQualifiedService: "zerobridge.anchor.Bench")
    /// Unary: returns the payload it was sent.
    static let echo = MethodDescriptor(service: service, method: "Echo")
    /// Server streaming: `n` Progress messages, 1 to n, then OK.
    static let count = MethodDescriptor(service: service, method: "Count")
}

/// The echo and count of ZeroBridge's conformance host, as a gRPC service.
struct BenchService: RegistrableRPCService {
    /// The most events one Count sends: a client can't make the server stream for ever.
    static let maxEvents = 100_000_000

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: AnchorMethods.echo, deserializer: JSONDeserializer<Payload>(),
                               serializer: JSONSerializer<Payload>()) { request, _ in
            let single = try await ServerRequest(stream: request)
            return StreamingServerResponse(single: ServerResponse(message: single.message))
        }
        router.registerHandler(forMethod: AnchorMethods.count, deserializer: JSONDeserializer<CountRequest>(),
                               serializer: JSONSerializer<Progress>()) { request, _ in
            let n = try await ServerRequest(stream: request).message.n
            guard (0...Self.maxEvents).contains(n) else {
                return StreamingServerResponse(error: RPCError(code: .invalidArgument,
                                                               message: "n is from 0 to \(Self.maxEvents)"))
            }
            return StreamingServerResponse { writer in
                for i in stride(from: 1, through: n, by: 1) { try await writer.write(Progress(i: i, n: n)) }
                return [:]
            }
        }
    }
}

func serveGRPC() async throws {
    let server = GRPCServer(
        transport: .http2NIOPosix(address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext),
        services: [BenchService()])
    try await withThrowingDiscardingTaskGroup { group in
        group.addTask { try await server.serve() }
        guard let address = try await server.listeningAddress?.ipv4 else { throw Usage("the server did not listen") }
        announce(host: address.host, port: address.port)
    }
}

/// A client of the anchor's gRPC server, for as long as `body` runs.
func withBenchClient<Result: Sendable>(
    _ options: Options, _ body: (GRPCClient<HTTP2ClientTransport.Posix>) async throws -> Result
) async throws -> Result {
    let (host, port) = try options.hostAndPort()
    return try await withGRPCClient(
        transport: try .http2NIOPosix(target: .ipv4(address: host, port: port), transportSecurity: .plaintext),
        handleClient: body)
}

func grpcEchoBench(_ options: Options) async throws {
    try await withBenchClient(options) { client in
        let result = try await measureEcho(options) {
            let answer = try await client.unary(
                request: ClientRequest(message: Payload.bench), descriptor: AnchorMethods.echo,
                serializer: JSONSerializer<Payload>(), deserializer: JSONDeserializer<Payload>(),
                options: .defaults) { try $0.message }
            guard answer == .bench else { throw Usage("Echo returned something else: \(answer)") }
        }
        try emit(result)
    }
}

func grpcProgressBench(_ options: Options) async throws {
    try await withBenchClient(options) { client in
        /// Streams `n` events; how many arrived and how many out of order.
        @Sendable func count(_ n: Int) async throws -> (received: Int, outOfOrder: Int) {
            try await client.serverStreaming(
                request: ClientRequest(message: CountRequest(n: n)), descriptor: AnchorMethods.count,
                serializer: JSONSerializer<CountRequest>(), deserializer: JSONDeserializer<Progress>(),
                options: .defaults
            ) { response in
                var expected = 1
                var outOfOrder = 0
                for try await event in response.messages {
                    if event.i != expected || event.n != n { outOfOrder += 1 }
                    expected += 1
                }
                return (expected - 1, outOfOrder)
            }
        }
        let warmup = 1000
        _ = try await count(warmup)
        let clock = Stopwatch()
        let (received, outOfOrder) = try await count(options.events)
        var result = clock.result(received, warmup: warmup)
        result.merge(["events": options.events, "received": received, "out_of_order": outOfOrder,
                      "in_order_and_complete": received == options.events && outOfOrder == 0]) { _, b in b }
        try emit(result)
    }
}
