import CZeroMQ
import Foundation

/// One part of a multipart message, held in libzmq's own message storage.
///
/// Received frames are read in place (``withUnsafeBytes(_:)``), with no copy. Sending a frame hands its
/// storage to libzmq and leaves the frame empty.
public final class Frame: @unchecked Sendable {
    let message: UnsafeMutablePointer<zmq_msg_t>

    /// An empty frame.
    public init() {
        message = .allocate(capacity: 1)
        zmq_msg_init(message)
    }

    /// A frame holding a copy of `bytes` (libzmq must own what it sends; this is the one copy).
    public init(copying bytes: UnsafeRawBufferPointer) {
        message = .allocate(capacity: 1)
        zmq_msg_init_size(message, bytes.count)
        if bytes.count > 0, let base = bytes.baseAddress {
            zmq_msg_data(message).copyMemory(from: base, byteCount: bytes.count)
        }
    }

    /// A frame holding a copy of `bytes`.
    public convenience init(_ bytes: [UInt8]) {
        self.init(count: bytes.count)
        bytes.withUnsafeBytes { copy(from: $0) }
    }

    /// A frame holding the UTF-8 bytes of `text`.
    public convenience init(_ text: String) {
        var text = text
        self.init(count: text.utf8.count)
        text.withUTF8 { copy(from: UnsafeRawBufferPointer($0)) }
    }

    private init(count: Int) {
        message = .allocate(capacity: 1)
        zmq_msg_init_size(message, count)
    }

    private func copy(from source: UnsafeRawBufferPointer) {
        if let base = source.baseAddress { zmq_msg_data(message).copyMemory(from: base, byteCount: source.count) }
    }

    deinit {
        zmq_msg_close(message)
        message.deallocate()
    }

    /// The number of bytes in the frame.
    public var count: Int { zmq_msg_size(message) }

    /// Calls `body` with the frame's bytes, valid only during the call.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: zmq_msg_data(message), count: zmq_msg_size(message)))
    }

    /// The file descriptor of the connection a received frame came over (`ZMQ_SRCFD`), nil when there is none
    /// (inproc). File descriptors are reused once a connection closes: pair this with disconnect events in order.
    public var sourceFileDescriptor: Int32? {
        let fd = zmq_msg_get(message, ZMQ_SRCFD)
        return fd >= 0 ? fd : nil
    }

    /// A metadata property of a received frame (`zmq_msg_gets`), such as `"User-Id"` (set by a ZAP handler) or
    /// `"Peer-Address"`; nil when the connection has none.
    public func metadata(_ property: String) -> String? {
        guard let value = zmq_msg_gets(message, property) else { return nil }
        return String(cString: value)
    }

    /// A copy of the frame's bytes (``withUnsafeBytes(_:)`` reads them in place).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// The frame's bytes as UTF-8 text (invalid sequences replaced).
    public var text: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
}

/// Read in place by whatever takes `ContiguousBytes`, such as hashing and signing received frames without copying them.
extension Frame: ContiguousBytes {}
