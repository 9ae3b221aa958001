import NIOCore
import NIOWebSocket
import Synchronization
import ZeroMQ

/// One peer's WebSocket connection (SPEC 2.2), seen from the host's socket thread: it takes the session's messages
/// (``transmit(signature:frames:)``) and hands what the peer sends to the thread, each with its own bound.
final class WebSocketConnection: AttachedConnection, @unchecked Sendable {
    /// Bytes handed to NIO and not yet written to the kernel before the connection refuses more (SPEC 2.2: the
    /// transport's own queue, where a ZeroMQ connection has its high-water mark). The session's outbox holds the rest.
    static let maxUnwrittenBytes = 256 << 10
    /// Messages read and not yet taken by the socket thread before reading stops (libzmq's receive high-water mark
    /// on the ROUTER is the same 1000): a flooding peer waits in its own TCP window, not in the host's memory.
    static let maxUndelivered = 1000

    /// The host-generated routing id (SPEC 2.2): 0x00, "ws", then 128 random bits; libzmq's own ids are 5 bytes.
    let routingID: [UInt8]
    let channel: Channel
    private let unwritten = Atomic<Int>(0)
    private let undelivered = Atomic<Int>(0)
    private let ended = Atomic<Bool>(false)
    /// The host began the closing handshake: the peer's close frame then answers it, and is not a leaving.
    private let closedByHost = Atomic<Bool>(false)
    /// Messages for the event loop, taken all at once by one scheduled write (one hop per batch, not per message).
    private let outgoing = Mutex<(buffers: [ByteBuffer], scheduled: Bool)>(([], false))

    init(channel: Channel) {
        var generator = SystemRandomNumberGenerator()
        routingID = [0, UInt8(ascii: "w"), UInt8(ascii: "s")] + (0..<16).map { _ in generator.next() }
        self.channel = channel
    }

    /// Whether the connection has closed; nothing more is taken for it.
    var isEnded: Bool { ended.load(ordering: .relaxed) }

    func transmit(signature: [UInt8], frames: [[UInt8]]) -> SocketThread.Transmission {
        if ended.load(ordering: .relaxed) { return .unreachable }
        if unwritten.load(ordering: .relaxed) > Self.maxUnwrittenBytes { return .refused }
        let payload = WebSocketFraming.encode(signature: signature, frames: frames, allocator: channel.allocator)
        unwritten.add(payload.readableBytes, ordering: .relaxed)
        let schedule = outgoing.withLock { state in
            state.buffers.append(payload)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { channel.eventLoop.execute { [self] in writeOutgoing() } }
        return .sent
    }

    /// On the event loop: writes what the socket thread handed over, then flushes once.
    private func writeOutgoing() {
        let buffers = outgoing.withLock { state in
            state.scheduled = false
            defer { state.buffers.removeAll(keepingCapacity: true) }
            return state.buffers
        }
        for payload in buffers {
            let size = payload.readableBytes
            let promise = channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenComplete { [self] _ in unwritten.subtract(size, ordering: .relaxed) }
            channel.write(WebSocketFrame(fin: true, opcode: .binary, data: payload), promise: promise)
        }
        channel.flush()
    }

    /// A message was read and handed to the socket thread; returns whether reading should pause.
    func handedOver() -> Bool {
        undelivered.add(1, ordering: .relaxed).newValue >= Self.maxUndelivered
    }

    /// The socket thread took a message; reading resumes once it is back under the bound.
    func taken() {
        if undelivered.subtract(1, ordering: .relaxed).oldValue == Self.maxUndelivered { channel.read() }
    }

    /// Whether reading waits for the socket thread to catch up.
    var isBackedUp: Bool { undelivered.load(ordering: .relaxed) >= Self.maxUndelivered }

    func markEnded() { ended.store(true, ordering: .relaxed) }

    /// Whether the host sent its close frame first (then a close frame from the peer is its answer).
    var isClosedByHost: Bool { closedByHost.load(ordering: .relaxed) }

    /// Closes with a close frame carrying `code` (after what was already handed over), then the TCP connection.
    func close(_ code: WebSocketErrorCode) {
        closedByHost.store(true, ordering: .relaxed)
        channel.eventLoop.execute { [self] in
            writeOutgoing()
            var data = channel.allocator.buffer(capacity: 2)
            data.write(webSocketErrorCode: code)
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)).whenComplete { [channel] _ in
                channel.close(promise: nil)
            }
        }
    }
}

/// Where a WebSocket connection meets the host, on its socket thread (SPEC 2.2): the same session logic as ZeroMQ.
struct WebSocketSeam: Sendable {
    let thread: SocketThread
    /// A connection closed without a close frame from the peer (or after one). On the thread.
    let closed: @Sendable ([UInt8]) -> Void
    /// The peer sent a close frame (with its code, if it gave one): it is leaving, as with `bye`. On the thread.
    let left: @Sendable ([UInt8], Int?) -> Void
    /// A message that is not one (SPEC 3.2): answered `bad_message` with `"id": null`. On the thread.
    let refused: @Sendable ([UInt8], String) -> Void
}

/// The last handler of an upgraded connection: binary messages in, protocol messages to the socket thread.
final class WebSocketPeerHandler: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let seam: WebSocketSeam
    private var connection: WebSocketConnection?
    /// A read the channel asked for while the socket thread was behind.
    private var readWithheld = false

    init(seam: WebSocketSeam) {
        self.seam = seam
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let connection = WebSocketConnection(channel: context.channel)
        self.connection = connection
        let seam = seam
        seam.thread.perform { seam.thread.attach(connection, as: connection.routingID) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard let connection else { return }
        switch frame.opcode {
        case .binary:
            let routingID = connection.routingID
            let seam = seam
            switch WebSocketFraming.decode(frame.unmaskedData) {
            case .success(let frames):
                _ = connection.handedOver()
                seam.thread.perform {
                    connection.taken()
                    guard !connection.isEnded else { return }
                    seam.thread.deliver([Frame(routingID)] + frames)
                }
            case .failure(let refusal):
                seam.thread.perform { seam.refused(routingID, refusal.reason) }
            }
        case .text:
            let routingID = connection.routingID
            let seam = seam
            seam.thread.perform { seam.refused(routingID, "a text WebSocket message: send each message as one binary message (SPEC 3.2)") }
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readSlice(length: 2) ?? ByteBuffer()
            if !connection.isClosedByHost {
                // After the messages handed over before it: the thread runs its jobs in order.
                let routingID = connection.routingID
                let seam = seam
                let given = code.getInteger(at: code.readerIndex, as: UInt16.self).map(Int.init)
                seam.thread.perform { seam.left(routingID, given) }
            }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))).whenComplete { _ in
                context.close(promise: nil)
            }
        default:
            break
        }
    }

    /// Reading pauses while the socket thread has the most messages of this connection not yet taken.
    func read(context: ChannelHandlerContext) {
        if connection?.isBackedUp == true {
            readWithheld = true
            return
        }
        readWithheld = false
        context.read()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // The aggregator's bounds (SPEC 3.2: a message past the WebSocket bound is not read): 1009; anything else
        // the peer did wrong at the WebSocket level: 1002.
        let tooBig = (error as? NIOWebSocketFrameAggregator.Error).map {
            $0 == .accumulatedFrameSizeIsTooLarge || $0 == .tooManyFragments
        } ?? false
        connection?.close(tooBig ? .messageTooLarge : .protocolError)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let connection {
            connection.markEnded()
            let seam = seam
            seam.thread.perform {
                seam.thread.detach(connection.routingID)
                seam.closed(connection.routingID)
            }
        }
        context.fireChannelInactive()
    }
}
