// The anchors of `make bench` (bench/run.py's anchors section drives them): what a user would otherwise pick to connect
// a front-end to a Swift service, doing the JSON work ZeroBridge's echo does. Each command prints one line: a server
// "ready HOST:PORT" once it listens, a client one JSON object with what it measured.
//
//   zerobridge-anchors grpc-server                            grpc-swift-2, HTTP/2 over plaintext TCP on 127.0.0.1
//   zerobridge-anchors http-server                            Hummingbird 2, HTTP/1.1 on 127.0.0.1
//   zerobridge-anchors grpc-client   --endpoint HOST:PORT --window W [limits]   unary Echo; W 1 = sequential
//   zerobridge-anchors grpc-progress --endpoint HOST:PORT --events N             server-streaming Count
//
// Limits: --seconds S (wall time of the measured phase) and --max N (requests), whichever comes first. Every client's
// result has `warmup` (calls or events before the measured phase, so bench/run.py can divide a server's CPU time over
// the whole run) and `cpu_us_per_request`: this process's CPU time over the measured phase, per call or event.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    let options = try Options(arguments)
    switch options.command {
    case "grpc-server": try await serveGRPC()
    case "http-server": try await serveHTTP()
    case "grpc-client": try await grpcEchoBench(options)
    case "grpc-progress": try await grpcProgressBench(options)
    default: throw Usage("unknown command \(options.command)")
    }
} catch {
    FileHandle.standardError.write(Data("zerobridge-anchors: \(error)\n".utf8))
    exit(1)
}
