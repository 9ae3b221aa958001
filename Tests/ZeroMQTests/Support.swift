import Foundation
import Testing
import TestSupport
@testable import ZeroMQ

/// The transports every socket test repeats over.
enum Transport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inproc, ipc, tcp
    var testDescription: String { rawValue }

    /// A fresh endpoint to bind; tcp binds a wildcard port, so connect to the socket's `lastEndpoint`.
    func bindEndpoint() -> String {
        let unique = UUID().uuidString.prefix(8)
        switch self {
        case .inproc: return "inproc://zmq-test-\(unique)"
        case .ipc: return "ipc://\(scratchDirectory)zmq-test-\(unique).sock"
        case .tcp: return "tcp://127.0.0.1:*"
        }
    }
}

/// A socket that fails a test instead of hanging it when nothing arrives.
func makeSocket(_ kind: Socket.Kind, _ context: Context) throws -> Socket {
    let socket = try Socket(kind, context: context)
    try socket.set(.linger(milliseconds: 0), .receiveTimeout(milliseconds: patienceMilliseconds), .sendTimeout(milliseconds: patienceMilliseconds))
    return socket
}

/// A bound socket and the endpoint to connect to.
func bound(_ kind: Socket.Kind, _ context: Context, _ transport: Transport) throws -> (Socket, String) {
    let socket = try makeSocket(kind, context)
    try socket.bind(transport.bindEndpoint())
    return (socket, try socket.lastEndpoint)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
