import CZeroMQ

/// A socket option that this layer knows how to set.
///
/// For example:
/// ```swift
/// try router.set(.routerMandatory(true), .linger(milliseconds: 0), .maxMessageSize(1 << 20))
/// ```
public enum SocketOption: Sendable, Hashable {
    /// How long unsent messages are kept after close; 0 drops them, -1 waits forever.
    case linger(milliseconds: Int32)
    /// Outbound queue limit, in messages (0: none).
    case sendHighWaterMark(Int32)
    /// Inbound queue limit, in messages (0: none).
    case receiveHighWaterMark(Int32)
    /// ROUTER: fail sends to unknown routing ids with `EHOSTUNREACH` (and full queues with `EAGAIN`) instead of
    /// dropping them silently.
    case routerMandatory(Bool)
    /// Largest inbound message libzmq accepts before dropping the connection (-1: no limit).
    case maxMessageSize(Int64)
    /// The identity this socket presents to a ROUTER (1 to 255 bytes, not starting with 0).
    case routingID([UInt8])
    /// ZMTP heartbeats: send a PING this often on an idle connection.
    case heartbeatInterval(milliseconds: Int32)
    /// ZMTP heartbeats: close the connection when nothing arrives this long after a PING.
    case heartbeatTimeout(milliseconds: Int32)
    /// ZMTP heartbeats: how long the other side may wait before it considers this side gone.
    case heartbeatTTL(milliseconds: Int32)
    /// Queue messages only to completed connections.
    case immediate(Bool)
    /// Delays between reconnection attempts: the first, and the most (doubling in between).
    case reconnectInterval(milliseconds: Int32)
    case reconnectIntervalMax(milliseconds: Int32)
    /// Blocking send/receive timeouts (-1: forever).
    case sendTimeout(milliseconds: Int32)
    case receiveTimeout(milliseconds: Int32)
    /// CURVE: act as the server (needs ``curveSecretKey(_:)``).
    case curveServer(Bool)
    /// CURVE: this socket's long-term key pair (Z85 text, 40 characters).
    case curvePublicKey(String)
    case curveSecretKey(String)
    /// CURVE: the server's public key, on a client (Z85 text).
    case curveServerKey(String)
    /// The ZAP authentication domain.
    case zapDomain(String)
    /// SUB: receive messages starting with these bytes (empty: all).
    case subscribe([UInt8])
    case unsubscribe([UInt8])
}

extension Socket {
    /// Sets options in order; the first that libzmq refuses throws (`EINVAL` for a bad value).
    public func set(_ options: SocketOption...) throws(ZMQError) {
        for option in options { try set(option) }
    }

    public func set(_ option: SocketOption) throws(ZMQError) {
        switch option {
        case .linger(let ms): try setInt(ZMQ_LINGER, ms, "ZMQ_LINGER")
        case .sendHighWaterMark(let n): try setInt(ZMQ_SNDHWM, n, "ZMQ_SNDHWM")
        case .receiveHighWaterMark(let n): try setInt(ZMQ_RCVHWM, n, "ZMQ_RCVHWM")
        case .routerMandatory(let on): try setInt(ZMQ_ROUTER_MANDATORY, on ? 1 : 0, "ZMQ_ROUTER_MANDATORY")
        case .maxMessageSize(let bytes):
            var value = bytes
            try setRaw(ZMQ_MAXMSGSIZE, &value, MemoryLayout<Int64>.size, "ZMQ_MAXMSGSIZE")
        case .routingID(let id): try setBytes(ZMQ_ROUTING_ID, id, "ZMQ_ROUTING_ID")
        case .heartbeatInterval(let ms): try setInt(ZMQ_HEARTBEAT_IVL, ms, "ZMQ_HEARTBEAT_IVL")
        case .heartbeatTimeout(let ms): try setInt(ZMQ_HEARTBEAT_TIMEOUT, ms, "ZMQ_HEARTBEAT_TIMEOUT")
        case .heartbeatTTL(let ms): try setInt(ZMQ_HEARTBEAT_TTL, ms, "ZMQ_HEARTBEAT_TTL")
        case .immediate(let on): try setInt(ZMQ_IMMEDIATE, on ? 1 : 0, "ZMQ_IMMEDIATE")
        case .reconnectInterval(let ms): try setInt(ZMQ_RECONNECT_IVL, ms, "ZMQ_RECONNECT_IVL")
        case .reconnectIntervalMax(let ms): try setInt(ZMQ_RECONNECT_IVL_MAX, ms, "ZMQ_RECONNECT_IVL_MAX")
        case .sendTimeout(let ms): try setInt(ZMQ_SNDTIMEO, ms, "ZMQ_SNDTIMEO")
        case .receiveTimeout(let ms): try setInt(ZMQ_RCVTIMEO, ms, "ZMQ_RCVTIMEO")
        case .curveServer(let on): try setInt(ZMQ_CURVE_SERVER, on ? 1 : 0, "ZMQ_CURVE_SERVER")
        case .curvePublicKey(let key): try setText(ZMQ_CURVE_PUBLICKEY, key, "ZMQ_CURVE_PUBLICKEY")
        case .curveSecretKey(let key): try setText(ZMQ_CURVE_SECRETKEY, key, "ZMQ_CURVE_SECRETKEY")
        case .curveServerKey(let key): try setText(ZMQ_CURVE_SERVERKEY, key, "ZMQ_CURVE_SERVERKEY")
        case .zapDomain(let domain): try setText(ZMQ_ZAP_DOMAIN, domain, "ZMQ_ZAP_DOMAIN")
        case .subscribe(let prefix): try setBytes(ZMQ_SUBSCRIBE, prefix, "ZMQ_SUBSCRIBE")
        case .unsubscribe(let prefix): try setBytes(ZMQ_UNSUBSCRIBE, prefix, "ZMQ_UNSUBSCRIBE")
        }
    }

    /// The routing id this socket presents (or was given by libzmq).
    public var routingID: [UInt8] {
        get throws(ZMQError) {
            var buffer = [UInt8](repeating: 0, count: 256)
            var size = buffer.count
            try check(zmq_getsockopt(try open("zmq_getsockopt"), ZMQ_ROUTING_ID, &buffer, &size),
                      "zmq_getsockopt(ZMQ_ROUTING_ID)")
            return Array(buffer[..<size])
        }
    }

    /// The linger period in milliseconds.
    public var linger: Int32 {
        get throws(ZMQError) { try intOption(ZMQ_LINGER, "ZMQ_LINGER") }
    }

    // MARK: Plumbing

    private func setInt(_ name: Int32, _ value: Int32, _ label: String) throws(ZMQError) {
        var value = value
        try setRaw(name, &value, MemoryLayout<Int32>.size, label)
    }

    private func setBytes(_ name: Int32, _ bytes: [UInt8], _ label: String) throws(ZMQError) {
        let handle = try open("zmq_setsockopt(\(label))")
        let result = bytes.withUnsafeBytes { zmq_setsockopt(handle, name, $0.baseAddress, $0.count) }
        try check(result, "zmq_setsockopt(\(label))")
    }

    private func setText(_ name: Int32, _ text: String, _ label: String) throws(ZMQError) {
        try setBytes(name, Array(text.utf8), label)
    }

    private func setRaw(_ name: Int32, _ value: UnsafeRawPointer, _ size: Int, _ label: String) throws(ZMQError) {
        try check(zmq_setsockopt(try open("zmq_setsockopt(\(label))"), name, value, size), "zmq_setsockopt(\(label))")
    }

    func intOption(_ name: Int32, _ label: String) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try check(zmq_getsockopt(try open("zmq_getsockopt"), name, &value, &size), "zmq_getsockopt(\(label))")
        return value
    }

    func stringOption(_ name: Int32, _ label: String) throws(ZMQError) -> String {
        var buffer = [CChar](repeating: 0, count: 1024)
        var size = buffer.count
        try check(zmq_getsockopt(try open("zmq_getsockopt"), name, &buffer, &size), "zmq_getsockopt(\(label))")
        return String(nulTerminated: buffer)
    }
}
