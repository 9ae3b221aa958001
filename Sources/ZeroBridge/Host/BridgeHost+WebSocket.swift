import Foundation
import Logging
import NIOCore

/// WebSocket connections for browser peers, and the page they load (SPEC 2.2, decisions 46 and 47).
///
/// For example:
/// ```swift
/// var configuration = BridgeHost.Configuration(endpoint: "tcp://127.0.0.1:0", name: "app")
/// configuration.webSocket = .init(port: 8080, webRoot: "web/dist")
/// let host = BridgeHost(configuration: configuration)
/// try host.start()
/// print(host.pageURL!)   // http://127.0.0.1:8080/
/// ```
public struct WebSocketOptions: Sendable {
    /// The address to listen on: loopback unless you mean every page on the network to reach the bridge.
    public var host: String
    /// The port; 0 picks a free one (``BridgeHost/pageURL`` tells which).
    public var port: Int
    /// A folder served at `/` (a Vite or Svelte build output as it is), each HTML document with the bridge's
    /// configuration injected at the start of its `<head>`; nil serves no page.
    public var webRoot: String?
    /// Origins allowed beside the host's own (`http://127.0.0.1:PORT`, `http://localhost:PORT`), such as a dev
    /// server's `http://localhost:5173`.
    public var allowedOrigins: [String]
    /// Where the browser peer's modules (`webkit.js`, `browser.js` and the core they import) are, served at
    /// `/_zerobridge/`; by default this package's `peers/node/src`, when it is there.
    public var scriptsDirectory: String?
    /// The largest file served.
    public var maxFileBytes: Int = 64 << 20
    /// How long a connection that has not upgraded to WebSocket may go without completing a request (a page's file
    /// fetches, or the upgrade itself) before the host closes it (SPEC 2.2): a connection that sends nothing, or half a
    /// request, holds nothing for longer.
    public var idleTimeout: Duration = .seconds(10)
    /// The most connections not yet upgraded at once (SPEC 2.2); the host closes one accepted past it at once, unread.
    /// WebSocket connections in session are not counted.
    public var maxPendingConnections = 256
    /// Opens sessions on WebSocket connections without a connection key. Only for tests and development: any page
    /// of an allowed origin, and any local process, can then use the host. Logged as a warning.
    public var allowsUnkeyedConnections = false

    /// A listener on `host`:`port` (loopback, and a port the kernel picks, by default) that serves `webRoot` (a folder,
    /// or none) and accepts upgrades from the host's own origins plus `allowedOrigins`; `/_zerobridge/` serves the browser
    /// peer's modules from `scriptsDirectory` (this package's `peers/node/src` by default).
    public init(host: String = "127.0.0.1", port: Int = 0, webRoot: String? = nil, allowedOrigins: [String] = [],
                scriptsDirectory: String? = WebSocketOptions.bundledScripts) {
        self.host = host
        self.port = port
        self.webRoot = webRoot
        self.allowedOrigins = allowedOrigins
        self.scriptsDirectory = scriptsDirectory
    }

    /// This package's browser peer, `peers/node/src` beside `Sources/`, if this build was made from a checkout.
    public static let bundledScripts: String? = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }  // Host/, ZeroBridge/, Sources/
        let scripts = url.appendingPathComponent("peers/node/src").path
        return FileManager.default.fileExists(atPath: scripts + "/peer.js") ? scripts : nil
    }()

    /// `host:port` for URLs, an IPv6 address in brackets.
    static func authority(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

extension BridgeHost {
    /// The page's address (`http://127.0.0.1:PORT/`) once the host has started with a web root; nil otherwise.
    public var pageURL: String? {
        guard configuration.webSocket?.webRoot != nil, let port = webSocketPort else { return nil }
        return "http://\(WebSocketOptions.authority(configuration.webSocket!.host, port))/"
    }

    /// Where browser peers connect (`ws://127.0.0.1:PORT/zerobridge`) once the host has started; nil without
    /// ``Configuration/webSocket``.
    public var webSocketEndpoint: String? {
        guard let options = configuration.webSocket, let port = webSocketPort else { return nil }
        return "ws://\(WebSocketOptions.authority(options.host, port))\(WebSocketListener.bridgePath)"
    }

    /// Starts the HTTP listener on the host's thread (SPEC 2.2). Called by ``start()`` once the thread runs.
    func startWebSocketListener(_ options: WebSocketOptions, thread: SocketThread, key: ConnectionKey?,
                                budget: OtherConnections) throws -> WebSocketListener {
        let logger = configuration.logger
        if key == nil {
            logger.warning("WebSocket connections without a key: any page of an allowed origin, and any local process, can use this host (tests and development only)")
        }
        if !(options.host == "localhost" || options.host == "::1" || options.host.hasPrefix("127.")) {
            logger.warning("WebSocket listener off loopback: reachable from the network", metadata: ["host": "\(options.host)"])
        }
        let seam = WebSocketSeam(
            thread: thread,
            closed: { [weak self] routingID in self?.connectionClosed(routingID) },
            left: { [weak self] routingID, code in self?.peerClosedConnection(routingID, code: code) },
            refused: { [weak self] routingID, reason in self?.refuseUndecodable(routingID, reason) })
        let info = configuration.info.map(JSONValue.object)
        let maxMessageBytes = configuration.maxMessageBytes
        return try WebSocketListener.start(host: options.host, port: options.port, seam: seam, budget: budget, logger: logger) { port in
            let own = ["127.0.0.1", "localhost", options.host].map { WebSocketOptions.authority($0, port) }
            let origins = Set(own.map { "http://\($0)" } + options.allowedOrigins)
            let hosts = own + options.allowedOrigins.compactMap { origin -> String? in
                guard let url = URL(string: origin), let host = url.host else { return nil }
                return url.port.map { WebSocketOptions.authority(host, $0) } ?? host
            }
            let endpoint = "ws://\(WebSocketOptions.authority(options.host, port))\(WebSocketListener.bridgePath)"
            return WebSocketListener.Policy(
                allowedOrigins: origins, allowedHosts: Set(hosts.map { $0.lowercased() }),
                webRoot: options.webRoot.map { WebRoot(directory: $0, maxFileBytes: options.maxFileBytes) },
                scripts: options.scriptsDirectory.map { WebRoot(directory: $0, maxFileBytes: options.maxFileBytes) },
                injection: PageInjection.scripts(endpoint: endpoint, key: key?.hex, info: info),
                maxMessageBytes: maxMessageBytes,
                idleTimeout: .nanoseconds(Int64(options.idleTimeout / .nanoseconds(1))),
                maxNotUpgraded: options.maxPendingConnections)
        }
    }
}

extension BridgeHost {
    /// On the thread: a WebSocket message that is not a message (SPEC 3.2), answered `bad_message` with `"id": null`,
    /// signed when the connection's channel is open.
    func refuseUndecodable(_ routingID: [UInt8], _ reason: String) {
        let error = BridgeError(.badMessage, reason)
        if let session = sessions[routingID] { session.link.answer(nil, error) } else { answerWithoutSession(routingID, error) }
    }
}
