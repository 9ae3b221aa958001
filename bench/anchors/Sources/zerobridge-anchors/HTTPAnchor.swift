import Foundation
import Hummingbird
import Logging

// HTTP/JSON, the way Hummingbird 2's docs write a service: its default router, handlers that decode the request's
// JSON and return a Codable value that the framework encodes. A stream is one chunked response of newline-delimited
// JSON events, written as the handler makes them.

extension Payload: ResponseCodable {}

func serveHTTP() async throws {
    let router = Router()
    router.post("echo") { request, context -> Payload in
        try await request.decode(as: Payload.self, context: context)
    }
    router.post("count") { request, context -> Response in
        let n = try await request.decode(as: CountRequest.self, context: context).n
        guard (0...BenchService.maxEvents).contains(n) else {
            throw HTTPError(.badRequest, message: "n is from 0 to \(BenchService.maxEvents)")
        }
        let encoder = context.responseEncoder
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: ResponseBody { writer in
            for i in stride(from: 1, through: n, by: 1) {
                var line = ByteBuffer(data: try encoder.encode(Progress(i: i, n: n)))
                line.writeInteger(UInt8(ascii: "\n"))
                try await writer.write(line)
            }
            try await writer.finish(nil)
        })
    }
    // Its log lines would come before the "ready" line bench/run.py reads.
    var logger = Logger(label: "zerobridge-anchors")
    logger.logLevel = .error
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in announce(host: "127.0.0.1", port: channel.localAddress?.port ?? 0) },
                          logger: logger)
    try await app.runService()
}
