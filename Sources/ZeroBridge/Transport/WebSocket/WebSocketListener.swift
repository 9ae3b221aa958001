import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// The host's HTTP listener (SPEC 2.2, decision 47): WebSocket connections at `/zerobridge`, the web root's files,
/// and the browser peer's modules at `/_zerobridge/`. Started from swift-nio's `NIOWebSocketServer` example: the
/// HTTP pipeline with a WebSocket upgrader, one handler per concern.
final class WebSocketListener: Sendable {
    /// The subprotocol a client must offer (SPEC 2.2).
    static let subprotocol = "zerobridge.1"
    /// The subprotocol a client may offer beside it, selected when offered: batches of messages (SPEC 3.2, since 1.9).
    static let batchSubprotocol = "zerobridge.1.batch"

    /// Whether `head` offers the batched subprotocol (besides `zerobridge.1`, which ``Policy/refusal(_:)`` requires).
    static func offersBatches(_ head: HTTPRequestHead) -> Bool {
        head.headers[canonicalForm: "Sec-WebSocket-Protocol"].contains { $0.trimmingCharacters(in: .whitespaces) == batchSubprotocol }
    }
    /// The bridge's path.
    static let bridgePath = "/zerobridge"
    /// Where the browser peer's own modules are served from.
    static let scriptsPrefix = "/_zerobridge/"
    /// What a WebSocket message may hold beyond `max_message_bytes` before it is not read (SPEC 3.2).
    static let slackBytes = 131_072

    /// What the listener serves and whom it lets in.
    struct Policy: Sendable {
        /// Origins allowed to open the bridge (SPEC 2.2), compared exactly (`http://127.0.0.1:8080`).
        var allowedOrigins: Set<String>
        /// `Host` headers the listener answers (`127.0.0.1:8080`): anything else is DNS rebinding (SPEC 2.2).
        var allowedHosts: Set<String>
        var webRoot: WebRoot?
        var scripts: WebRoot?
        /// The scripts injected into every HTML document of the web root.
        var injection: String
        var maxMessageBytes: Int
        /// How long a connection not yet upgraded may go without completing a request (SPEC 2.2).
        var idleTimeout: TimeAmount
        /// The most connections not yet upgraded at once; one past it is closed unread (SPEC 2.2).
        var maxNotUpgraded: Int

        /// Why a request may not open the bridge, as the HTTP status it is refused with; nil: it may.
        func refusal(_ head: HTTPRequestHead) -> HTTPResponseStatus? {
            if let hostRefusal = hostRefusal(head) { return hostRefusal }
            if let origin = head.headers.first(name: "Origin"), !allowedOrigins.contains(origin) { return .forbidden }
            let offered = head.headers[canonicalForm: "Sec-WebSocket-Protocol"]
            guard offered.contains(where: { $0.trimmingCharacters(in: .whitespaces) == WebSocketListener.subprotocol }) else {
                return .badRequest
            }
            return nil
        }

        /// 421 for a `Host` that is not one of the listener's own names, or more than one (every request, files included).
        func hostRefusal(_ head: HTTPRequestHead) -> HTTPResponseStatus? {
            let hosts = head.headers["Host"]
            guard hosts.count == 1, allowedHosts.contains(hosts[0].lowercased()) else { return .misdirectedRequest }
            return nil
        }
    }

    private let serverChannel: Channel
    let port: Int
    private let connections = Mutex<[ObjectIdentifier: Channel]>([:])

    private init(serverChannel: Channel, port: Int) {
        self.serverChannel = serverChannel
        self.port = port
    }

    /// Binds `host:port` (0: an ephemeral port) and serves. `policy` is made once the port is known (origins name it).
    static func start(host: String, port: Int, seam: WebSocketSeam, budget: OtherConnections, logger: Logger,
                      policy makePolicy: @Sendable (Int) -> Policy) throws -> WebSocketListener {
        let policyBox = Mutex<Policy?>(nil)
        let listenerBox = Mutex<WebSocketListener?>(nil)
        let notUpgraded = NotUpgradedConnections()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                guard let policy = policyBox.withLock({ $0 }), let listener = listenerBox.withLock({ $0 }) else {
                    return channel.close()
                }
                // Shed past the host's connection bound (SPEC 7.17): closed at once, unread.
                guard budget.admit() else {
                    logger.debug("connection shed: the host keeps its most connections (SPEC 7.17)")
                    return channel.close()
                }
                channel.closeFuture.whenComplete { _ in budget.closed() }
                // Plain HTTP is bounded apart (SPEC 2.2): slowloris connections cannot take the places of peers.
                guard let slot = notUpgraded.admit(bound: policy.maxNotUpgraded) else {
                    logger.debug("connection shed: the most connections not yet upgraded are open (SPEC 2.2)",
                                 metadata: ["bound": "\(policy.maxNotUpgraded)"])
                    return channel.close()
                }
                channel.closeFuture.whenComplete { _ in slot.release() }
                listener.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try Self.configure(channel, policy: policy, seam: seam, slot: slot, logger: logger)
                }
            }
        let serverChannel = try bootstrap.bind(host: host, port: port).wait()
        let bound = serverChannel.localAddress?.port ?? port
        let listener = WebSocketListener(serverChannel: serverChannel, port: bound)
        policyBox.withLock { $0 = makePolicy(bound) }
        listenerBox.withLock { $0 = listener }
        return listener
    }

    private func track(_ channel: Channel) {
        let id = ObjectIdentifier(channel)
        connections.withLock { $0[id] = channel }
        channel.closeFuture.whenComplete { [self] _ in _ = connections.withLock { $0.removeValue(forKey: id) } }
    }

    /// Stops listening and closes every connection (the peers were told `bye` before): WebSocket ones with 1001.
    func stop() async {
        try? await serverChannel.close()
        let open = connections.withLock { Array($0.values) }
        for channel in open {
            var data = channel.allocator.buffer(capacity: 2)
            data.write(webSocketErrorCode: .goingAway)
            // Only an upgraded channel has a frame encoder; a plain HTTP one just closes.
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
            _ = try? await channel.writeAndFlush(frame).get()
            try? await channel.close()
        }
    }

    private static func configure(_ channel: Channel, policy: Policy, seam: WebSocketSeam, slot: NotUpgradedConnections.Slot,
                                  logger: Logger) throws {
        let http = HTTPFileHandler(policy: policy)
        let limit = policy.maxMessageBytes + slackBytes
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: min(limit, Int(UInt32.max)),
            automaticErrorHandling: true,
            shouldUpgrade: { channel, head in
                guard head.uri.split(separator: "?").first == Substring(bridgePath), policy.refusal(head) == nil else {
                    return channel.eventLoop.makeSucceededFuture(nil)  // the HTTP handler answers why
                }
                let selected = offersBatches(head) ? batchSubprotocol : subprotocol
                return channel.eventLoop.makeSucceededFuture(["Sec-WebSocket-Protocol": selected])
            },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 1, maxAccumulatedFrameCount: 65_536,
                                                    maxAccumulatedFrameSize: limit),
                        WebSocketPeerHandler(seam: seam, batched: offersBatches(head)))
                }
            })
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withServerUpgrade: (upgraders: [upgrader], completionHandler: { context in
                context.pipeline.syncOperations.removeHandler(name: HTTPFileHandler.name, promise: nil)
                slot.release()
            }))
        try channel.pipeline.syncOperations.addHandler(http, name: HTTPFileHandler.name)
    }
}

/// Connections not yet upgraded (SPEC 2.2): how many are open, each holding a slot until its upgrade or its close.
final class NotUpgradedConnections: Sendable {
    private let open = Atomic<Int>(0)

    /// A slot, or nil when `bound` connections already hold one.
    func admit(bound: Int) -> Slot? {
        guard open.add(1, ordering: .relaxed).newValue <= bound else {
            open.subtract(1, ordering: .relaxed)
            return nil
        }
        return Slot(owner: self)
    }

    /// One connection's place, given back once: on its upgrade or on its close, whichever comes first.
    final class Slot: Sendable {
        private let owner: NotUpgradedConnections
        private let released = Atomic<Bool>(false)

        fileprivate init(owner: NotUpgradedConnections) {
            self.owner = owner
        }

        func release() {
            if !released.exchange(true, ordering: .relaxed) { owner.open.subtract(1, ordering: .relaxed) }
        }
    }
}

/// Answers plain HTTP requests: the web root, the browser peer's modules, and why `/zerobridge` was not upgraded.
/// Until the upgrade removes it, it also closes a connection that completes no request within the idle timeout
/// (SPEC 2.2): counted from the connection's start or its last response, so a request trickled in a byte at a time
/// (slowloris) is cut off like one never sent; a response being written holds the timer.
final class HTTPFileHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    static let name = "zerobridge.http"

    private let policy: WebSocketListener.Policy
    private var request: HTTPRequestHead?
    private var idleClose: Scheduled<Void>?
    private var removed = false

    init(policy: WebSocketListener.Policy) {
        self.policy = policy
    }

    func handlerAdded(context: ChannelHandlerContext) {
        armIdleClose(context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        idleClose?.cancel()
        idleClose = nil
    }

    private func armIdleClose(_ context: ChannelHandlerContext) {
        idleClose?.cancel()
        guard !removed else { return }
        let channel = context.channel
        idleClose = context.eventLoop.scheduleTask(in: policy.idleTimeout) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break  // GET and HEAD have none worth reading
        case .end:
            guard let head = request else { return }
            request = nil
            idleClose?.cancel()  // until the response is written
            idleClose = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        if let status = policy.hostRefusal(head) {
            return send(status, "this server answers only its own host names (DNS rebinding)", head: head, context: context)
        }
        guard head.method == .GET || head.method == .HEAD else {
            return send(.methodNotAllowed, "GET or HEAD", head: head, context: context)
        }
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        if path == WebSocketListener.bridgePath {
            let status = policy.refusal(head) ?? .upgradeRequired
            let why = switch status {
            case .forbidden: "this Origin may not open the bridge (SPEC 2.2)"
            case .badRequest: "offer the WebSocket subprotocol \(WebSocketListener.subprotocol) (SPEC 2.2)"
            default: "a WebSocket upgrade request is expected here"
            }
            return send(status, why, head: head, context: context)
        }
        let served: (root: WebRoot?, path: String) = path.hasPrefix(WebSocketListener.scriptsPrefix)
            ? (policy.scripts, "/" + path.dropFirst(WebSocketListener.scriptsPrefix.count))
            : (policy.webRoot, path)
        guard let root = served.root else { return send(.notFound, "nothing is served here", head: head, context: context) }
        switch root.open(urlPath: served.path) {
        case .failure(.forbidden): send(.forbidden, "not served", head: head, context: context)
        case .failure(.notFound): send(.notFound, "not found", head: head, context: context)
        case .failure(.tooLarge): send(.payloadTooLarge, "the file is larger than the server serves", head: head, context: context)
        case .success(let file):
            if file.isHTML, root.directory == policy.webRoot?.directory {
                serveHTML(file, head: head, context: context)
            } else {
                serveFile(file, head: head, context: context)
            }
        }
    }

    /// The page with its configuration injected (decision 47): read whole (HTML is bounded like any file), never cached.
    private func serveHTML(_ file: WebRoot.OpenedFile, head: HTTPRequestHead, context: ChannelHandlerContext) {
        var bytes = [UInt8](repeating: 0, count: file.size)
        let read = bytes.withUnsafeMutableBytes { pread(file.descriptor, $0.baseAddress, file.size, 0) }
        close(file.descriptor)
        guard read == file.size else { return send(.internalServerError, "could not read the page", head: head, context: context) }
        let page = PageInjection.inject(policy.injection, into: bytes)
        var headers = Self.securityHeaders(contentType: file.contentType, length: page.count)
        headers.replaceOrAdd(name: "Cache-Control", value: "no-store")  // it holds the key
        var body = context.channel.allocator.buffer(capacity: page.count)
        body.writeBytes(page)
        write(.ok, headers, head.method == .HEAD ? nil : .byteBuffer(body), head: head, context: context)
    }

    /// Any other file, sent from its descriptor by the kernel (no copy in the host's memory).
    private func serveFile(_ file: WebRoot.OpenedFile, head: HTTPRequestHead, context: ChannelHandlerContext) {
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: file.descriptor)
        let headers = Self.securityHeaders(contentType: file.contentType, length: file.size)
        let body: IOData? = head.method == .HEAD || file.size == 0 ? nil
            : .fileRegion(FileRegion(fileHandle: handle, readerIndex: 0, endIndex: file.size))
        write(.ok, headers, body, head: head, context: context) { try? handle.close() }
    }

    private func send(_ status: HTTPResponseStatus, _ text: String, head: HTTPRequestHead, context: ChannelHandlerContext) {
        let bytes = Array((text + "\n").utf8)
        var body = context.channel.allocator.buffer(capacity: bytes.count)
        body.writeBytes(bytes)
        write(status, Self.securityHeaders(contentType: "text/plain; charset=utf-8", length: bytes.count),
              head.method == .HEAD ? nil : .byteBuffer(body), head: head, context: context)
    }

    private func write(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, _ body: IOData?, head: HTTPRequestHead,
                       context: ChannelHandlerContext, whenWritten: @escaping @Sendable () -> Void = {}) {
        var headers = headers
        let keepAlive = head.isKeepAlive && status == .ok
        headers.replaceOrAdd(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        let channel = context.channel
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            whenWritten()
            if keepAlive { handler.value.0.armIdleClose(handler.value.1) } else { channel.close(promise: nil) }
        }
    }

    /// Sent with every response (SECURITY.md, the browser): no type sniffing, no framing by other sites, no referrer,
    /// and no reading of these files by other origins' pages (`<script src>` included).
    static func securityHeaders(contentType: String, length: Int) -> HTTPHeaders {
        [
            "Content-Type": contentType,
            "Content-Length": String(length),
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "frame-ancestors 'none'",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
            "Cross-Origin-Resource-Policy": "same-origin",
            "Cache-Control": "no-cache",
        ]
    }
}
