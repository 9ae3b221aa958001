import CZeroMQ
import Foundation
import Synchronization

/// A ZAP handler (ZeroMQ RFC 27): libzmq asks it, over `inproc://zeromq.zap.01` in the context, whether each
/// connecting client may complete its handshake. One per context. It answers on a thread of its own until ``stop()``.
///
/// For example, only listed CURVE clients:
/// ```swift
/// let zap = try ZAPHandler(context: context) { request in
///     allowed.contains(request.curvePublicKey ?? "") ? .allow(userID: request.curvePublicKey!) : .deny("not listed")
/// }
/// ```
public final class ZAPHandler: @unchecked Sendable {
    /// What libzmq asks about one handshake.
    public struct Request: Sendable {
        public var domain: String
        /// The client's address, such as `127.0.0.1` (empty for ipc).
        public var address: String
        public var mechanism: String
        /// The client's long-term public key in Z85, for the CURVE mechanism.
        public var curvePublicKey: String?
    }

    public enum Decision: Sendable {
        /// The handshake completes; `userID` becomes the connection's `User-Id` metadata on every message.
        case allow(userID: String)
        case deny(String)
    }

    public static let endpoint = "inproc://zeromq.zap.01"

    private let socket: Socket
    private let wake: WakeSignal
    private let decide: @Sendable (Request) -> Decision
    private let finished = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)

    /// Binds the handler's endpoint in `context` (EADDRINUSE: the context has one already) and starts answering.
    public init(context: Context, decide: @escaping @Sendable (Request) -> Decision) throws {
        socket = try Socket(.rep, context: context)
        try socket.set(.linger(milliseconds: 0))
        try socket.bind(Self.endpoint)
        wake = try WakeSignal()
        self.decide = decide
        let thread = Thread { [self] in serve() }
        thread.name = "zerobridge-zap"
        thread.start()
    }

    /// Stops answering and unbinds; handshakes after this fail. Waits for the thread to end.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        finished.wait()
    }

    deinit { stop() }

    private func serve() {
        defer {
            socket.close()
            finished.signal()
        }
        var poller = Poller()
        let socketIndex = poller.add(socket, for: .readable)
        _ = poller.add(fileDescriptor: wake.fileDescriptor, for: .readable)
        while !stopping.load(ordering: .acquiring) {
            guard (try? poller.poll(timeoutMilliseconds: nil)) != nil else { return }
            guard poller.events(at: socketIndex).contains(.readable) else { continue }
            while let frames = try? socket.receiveBytes(dontWait: true) { answer(frames) }
        }
    }

    private func answer(_ frames: [[UInt8]]) {
        // version, request id, domain, address, identity, mechanism, credentials...
        guard frames.count >= 6 else { return reply(requestID: [], code: "500", text: "malformed ZAP request", userID: "") }
        let text = { (index: Int) in String(decoding: frames[index], as: UTF8.self) }
        guard text(0) == "1.0" else { return reply(requestID: frames[1], code: "500", text: "unknown ZAP version", userID: "") }
        let mechanism = text(5)
        let key = mechanism == "CURVE" && frames.count >= 7 && frames[6].count == 32 ? try? Z85.encode(frames[6]) : nil
        let request = Request(domain: text(2), address: text(3), mechanism: mechanism, curvePublicKey: key)
        switch decide(request) {
        case .allow(let userID): reply(requestID: frames[1], code: "200", text: "OK", userID: userID)
        case .deny(let reason): reply(requestID: frames[1], code: "400", text: reason, userID: "")
        }
    }

    private func reply(requestID: [UInt8], code: String, text: String, userID: String) {
        _ = try? socket.send([Array("1.0".utf8), requestID, Array(code.utf8), Array(text.utf8), Array(userID.utf8), []])
    }
}
