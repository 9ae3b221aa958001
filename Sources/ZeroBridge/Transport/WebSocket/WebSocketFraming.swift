import NIOCore
import ZeroMQ

/// One protocol message as the payload of one binary WebSocket message (SPEC 3.2): each frame as a 4-byte big-endian
/// length and its bytes, back to back. `protocol/fixtures/websocket-frames.json` pins it down.
enum WebSocketFraming {
    /// Why a payload is not a message: answered `bad_message` with `"id": null`.
    struct Refusal: Error, Equatable {
        let reason: String
    }

    /// Bytes one frame's length takes.
    static let lengthBytes = 4
    /// Frames one message may have (frame 0, the body, 16,384 attachments): without it, a payload of empty frames
    /// would cost the host far more memory (an allocation per frame) than its size (SPEC 3.2).
    static let maxFrames = 16_386

    /// The frames of `payload` (frame 0 first), or why it is not a message. Frames are copied once, into the
    /// storage the host reads received frames from.
    static func decode(_ payload: ByteBuffer) -> Result<[Frame], Refusal> {
        payload.withUnsafeReadableBytes { bytes in
            var frames: [Frame] = []
            var at = 0
            while at < bytes.count {
                guard bytes.count - at >= lengthBytes else {
                    return .failure(Refusal(reason: "the message ends inside a frame's 4-byte length (SPEC 3.2)"))
                }
                guard frames.count < maxFrames else {
                    return .failure(Refusal(reason: "a message has at most \(maxFrames) frames (SPEC 3.2)"))
                }
                let length = bytes[at..<at + lengthBytes].reduce(0) { $0 << 8 | Int($1) }
                at += lengthBytes
                guard length <= bytes.count - at else {
                    return .failure(Refusal(reason: "frame \(frames.count) says \(length) bytes; \(bytes.count - at) follow (SPEC 3.2)"))
                }
                frames.append(Frame(copying: UnsafeRawBufferPointer(rebasing: bytes[at..<at + length])))
                at += length
            }
            guard frames.count >= 2 else {
                return .failure(Refusal(reason: "a message has a signature frame and a body frame; got \(frames.count) frame(s)"))
            }
            return .success(frames)
        }
    }

    /// The payload for frame 0 (`signature`) and frames 1..n, written into one buffer.
    static func encode(signature: [UInt8], frames: [[UInt8]], allocator: ByteBufferAllocator) -> ByteBuffer {
        let size = frames.reduce(signature.count + lengthBytes * (frames.count + 1)) { $0 + $1.count }
        var buffer = allocator.buffer(capacity: size)
        buffer.writeInteger(UInt32(signature.count))
        buffer.writeBytes(signature)
        for frame in frames {
            buffer.writeInteger(UInt32(frame.count))
            buffer.writeBytes(frame)
        }
        return buffer
    }
}
