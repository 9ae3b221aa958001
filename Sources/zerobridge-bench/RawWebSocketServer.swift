import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// `ws-raw-server --endpoint HOST:PORT`: a WebSocket server that echoes every binary message and does nothing else
/// (no JSON, no signature, no session), on the same swift-nio stack as the host's listener. What a page gets from it
/// is the floor a page peer's rate can reach on this machine: Chromium's own WebSocket path and the kernel's.
/// Prints `ready PORT`, then serves until killed.
func rawWebSocketServer(_ options: Options) throws {
    let parts = options.endpoint.split(separator: ":")
    guard parts.count == 2, let port = Int(parts[1]) else { throw Usage("--endpoint takes HOST:PORT (PORT 0: any)") }
    let upgrader = NIOWebSocketServerUpgrader(
        shouldUpgrade: { channel, head in
            // Selects what the page offers first, as a host would select its subprotocol.
            let offered = head.headers[canonicalForm: "Sec-WebSocket-Protocol"].first.map(String.init)
            return channel.eventLoop.makeSucceededFuture(offered.map { ["Sec-WebSocket-Protocol": $0] } ?? [:])
        },
        upgradePipelineHandler: { channel, _ in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(EchoHandler())
            }
        })
    let server = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            }
        }
        .bind(host: String(parts[0]), port: port).wait()
    FileHandle.standardOutput.write(Data("ready \(server.localAddress?.port ?? port)\n".utf8))
    try server.closeFuture.wait()
}

/// Echoes binary messages in the burst they were read, flushed once at the burst's end; answers pings and closes.
private final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .binary:
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: frame.unmaskedData)), promise: nil)
        case .ping:
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            let channel = context.channel  // Sendable, unlike the context the completion would otherwise capture
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
                .whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }
}
