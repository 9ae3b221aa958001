import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus

/// Where Prometheus scrapes a process's metrics: `GET /metrics` answered with the text format of a registry, over
/// SwiftNIO's HTTP/1 (issue 27). Only the executables use it; the ZeroBridge library only calls swift-metrics.
///
/// For example:
/// ```swift
/// let registry = MetricsEndpoint.bootstrapPrometheus()       // once, before the host is made
/// let endpoint = try await MetricsEndpoint.start(serving: registry, at: .parse("9464"))
/// print("metrics at http://\(endpoint.address)/metrics")
/// ```
public final class MetricsEndpoint: Sendable {
    /// The address actually bound (a port 0 resolved), as `host:port`.
    public let address: String
    /// Where to scrape: `http://address/metrics`.
    public var url: String { "http://\(address)/metrics" }
    private let channel: any Channel

    /// Connections served at once; more are closed as they arrive (a scraper needs one).
    static let maxConnections = 64
    /// A connection that sends nothing for this long is closed.
    static let idleTimeout = TimeAmount.seconds(10)

    private init(channel: any Channel, address: String) {
        self.channel = channel
        self.address = address
    }

    private static let bootstrapped = NIOLockedValueBox<PrometheusCollectorRegistry?>(nil)

    /// Makes swift-prometheus the process's swift-metrics backend, and returns its registry. swift-metrics takes one
    /// bootstrap per process, so later calls return the first registry.
    public static func bootstrapPrometheus() -> PrometheusCollectorRegistry {
        bootstrapped.withLockedValue { registry in
            if let registry { return registry }
            let made = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: made))
            registry = made
            return made
        }
    }

    /// A `--metrics` value: `HOST:PORT`, `[IPv6]:PORT`, or a bare `PORT` (loopback: metrics name the actions a host
    /// serves, so they are not offered to the network unless asked for).
    public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public static func parse(_ text: String) throws -> ListenAddress {
            let (host, port): (Substring, Substring)
            if let colon = text.lastIndex(of: ":") {
                host = text[..<colon]
                port = text[text.index(after: colon)...]
            } else {
                (host, port) = ("127.0.0.1", Substring(text))
            }
            let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? host.dropFirst().dropLast() : host
            guard let number = Int(port), (0...65535).contains(number), !bareHost.isEmpty, !bareHost.contains(":") || host.hasPrefix("[") else {
                throw ParseError(text: text)
            }
            return ListenAddress(host: String(bareHost), port: number)
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        public struct ParseError: Error, CustomStringConvertible {
            public let text: String
            public var description: String {
                "'\(text)' is not a metrics address: write PORT (loopback), HOST:PORT or [IPv6]:PORT, for example 9464 or 0.0.0.0:9464"
            }
        }
    }

    /// Listens at `address` and serves `registry` until ``stop()``.
    public static func start(serving registry: PrometheusCollectorRegistry, at address: ListenAddress) async throws -> MetricsEndpoint {
        let open = NIOLockedValueBox(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let admitted = open.withLockedValue { count in
                    guard count < maxConnections else { return false }
                    count += 1
                    return true
                }
                guard admitted else { return channel.close() }
                channel.closeFuture.whenComplete { _ in open.withLockedValue { $0 -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ScrapeHandler(registry: registry))
                }
            }
            .bind(host: address.host, port: address.port)
            .get()
        let port = channel.localAddress?.port ?? address.port
        return MetricsEndpoint(channel: channel, address: ListenAddress(host: address.host, port: port).description)
    }

    /// What an executable's `--metrics` does: bootstraps Prometheus, listens, and says where on stderr as
    /// `PROGRAM metrics http://HOST:PORT/metrics` (a port 0 resolved), before the program's ready line.
    public static func bootstrapAndStart(at address: String, announcingAs program: String) async throws -> MetricsEndpoint {
        let endpoint = try await start(serving: bootstrapPrometheus(), at: .parse(address))
        FileHandle.standardError.write(Data("\(program) metrics \(endpoint.url)\n".utf8))
        return endpoint
    }

    /// Stops listening; scrapes under way finish.
    public func stop() async {
        try? await channel.close()
    }
}

/// One HTTP connection: `GET /metrics` gets the registry's text, anything else a short error; then the connection
/// closes (a scraper connects once per scrape).
private final class ScrapeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break  // nothing is read from a body: a scrape has none, and a large one is not kept
        case .end:
            guard let head = request else { return }
            request = nil
            respond(to: head, context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent { context.close(promise: nil) } else { context.fireUserInboundEventTriggered(event) }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let (status, type, body): (HTTPResponseStatus, String, [UInt8])
        switch (head.method, path) {
        case (.GET, "/metrics"), (.HEAD, "/metrics"):
            (status, type, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", registry.emitToBuffer())
        case (_, "/metrics"):
            (status, type, body) = (.methodNotAllowed, "text/plain; charset=utf-8", Array("GET /metrics\n".utf8))
        default:
            (status, type, body) = (.notFound, "text/plain; charset=utf-8", Array("metrics are at /metrics\n".utf8))
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: String(body.count))
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
