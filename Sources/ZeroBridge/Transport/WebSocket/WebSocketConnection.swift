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

    /// The connection negotiated `zerobridge.1.batch` (SPEC 3.2, since 1.9): every WebSocket message is a batch.
    let isBatched: Bool

    init(channel: Channel, batched: Bool) {
        var generator = SystemRandomNumberGenerator()
        routingID = [0, UInt8(ascii: "w"), UInt8(ascii: "s")] + (0..<16).map { _ in generator.next() }
        self.channel = channel
        isBatched = batched
    }

    /// Whether the connection has closed; nothing more is taken for it.
    var isEnded: Bool { ended.load(ordering: .relaxed) }

    func transmit(signature: [UInt8], frames: [[UInt8]]) -> SocketThread.Transmission {
        if ended.load(ordering: .relaxed) { return .unreachable }
        if unwritten.load(ordering: .relaxed) > Self.maxUnwrittenBytes { return .refused }
        let payload = WebSocketFraming.encode(signature: signature, frames: frames, asBatchEntry: isBatched,
                                              allocator: channel.allocator)
        unwritten.add(payload.readableBytes, ordering: .relaxed)
        let schedule = outgoing.withLock { state in
            state.buffers.append(payload)
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if schedule { channel.eventLoop.execute { [self] in writeOutgoing() } }
        return .sent
    }

    /// On the event loop: writes what the socket thread handed over, then flushes once. On a batched connection the
    /// messages go out as few batches as SPEC 3.2's bounds allow.
    private func writeOutgoing() {
        let buffers = outgoing.withLock { state in
            state.scheduled = false
            defer { state.buffers.removeAll(keepingCapacity: true) }
            return state.buffers
        }
        guard isBatched, buffers.count > 1 else {
            for payload in buffers { write(payload) }
            channel.flush()
            return
        }
        var start = 0
        while start < buffers.count {
            var end = start + 1
            var size = buffers[start].readableBytes
            while end < buffers.count, end - start < WebSocketFraming.maxBatchMessages,
                  size + buffers[end].readableBytes <= WebSocketFraming.batchBytes {
                size += buffers[end].readableBytes
                end += 1
            }
            if end - start == 1 {
                write(buffers[start])
            } else {
                var batch = channel.allocator.buffer(capacity: size)
                for entry in buffers[start..<end] { batch.writeImmutableBuffer(entry) }
                write(batch)
            }
            start = end
        }
        channel.flush()
    }

    private func write(_ payload: ByteBuffer) {
        let size = payload.readableBytes
        let promise = channel.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { [self] _ in unwritten.subtract(size, ordering: .relaxed) }
        channel.write(WebSocketFrame(fin: true, opcode: .binary, data: payload), promise: promise)
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
    /// Messages decoded in this read burst, handed to the socket thread together when the burst ends (one hand-off,
    /// one wake-up at most, per burst rather than per message).
    private var arrived: [[Frame]] = []

    private let batched: Bool

    init(seam: WebSocketSeam, batched: Bool) {
        self.seam = seam
        self.batched = batched
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let connection = WebSocketConnection(channel: context.channel, batched: batched)
        self.connection = connection
        let seam = seam
        seam.thread.performHere { seam.thread.attach(connection, as: connection.routingID) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard let connection else { return }
        switch frame.opcode {
        case .binary where batched:
            switch WebSocketFraming.decodeBatch(frame.unmaskedData) {
            case .success(let messages): for message in messages { take(message, on: connection) }
            case .failure(let refusal): take(.failure(refusal), on: connection)
            }
        case .binary:
            take(WebSocketFraming.decode(frame.unmaskedData), on: connection)
        case .text:
            let routingID = connection.routingID
            let seam = seam
            handOver()
            seam.thread.performHere { seam.refused(routingID, "a text WebSocket message: send each message as one binary message (SPEC 3.2)") }
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readSlice(length: 2) ?? ByteBuffer()
            handOver()
            if !connection.isClosedByHost {
                // After the messages handed over before it: the thread runs its jobs in order.
                let routingID = connection.routingID
                let seam = seam
                let given = code.getInteger(at: code.readerIndex, as: UInt16.self).map(Int.init)
                seam.thread.performHere { seam.left(routingID, given) }
            }
            let channel = context.channel  // Sendable, unlike the context: the closure may run after this call
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))).whenComplete { _ in
                channel.close(promise: nil)
            }
        default:
            break
        }
    }

    /// One message read: kept for the burst's hand-over, or (not a message) answered in order after those before it.
    private func take(_ decoded: Result<[Frame], WebSocketFraming.Refusal>, on connection: WebSocketConnection) {
        switch decoded {
        case .success(let frames):
            _ = connection.handedOver()
            arrived.append([Frame(connection.routingID)] + frames)
        case .failure(let refusal):
            handOver()
            let routingID = connection.routingID
            let seam = seam
            seam.thread.performHere { seam.refused(routingID, refusal.reason) }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        handOver()
        context.fireChannelReadComplete()
    }

    /// Gives the socket thread the messages of this burst, in order, in one job.
    private func handOver() {
        guard !arrived.isEmpty, let connection else { return }
        let messages = arrived
        arrived.removeAll(keepingCapacity: true)
        let seam = seam
        seam.thread.performHere {
            for message in messages {
                connection.taken()
                guard !connection.isEnded else { continue }
                seam.thread.deliver(message)
            }
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
        handOver()
        if let connection {
            connection.markEnded()
            let seam = seam
            seam.thread.performHere {
                seam.thread.detach(connection.routingID)
                seam.closed(connection.routingID)
            }
        }
        context.fireChannelInactive()
    }
}
