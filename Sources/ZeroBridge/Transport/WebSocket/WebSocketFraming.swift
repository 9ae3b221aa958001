import NIOCore
import ZeroMQ

/// One protocol message as the payload of one binary WebSocket message (SPEC 3.2): each frame as a 4-byte big-endian
/// length and its bytes, back to back. `protocol/fixtures/websocket-frames.json` pins it down. Batches of such payloads
/// are also frame 1 of a keyed ZeroMQ batch (SPEC 3.3), pinned by `protocol/fixtures/signatures.json`.
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
        payload.withUnsafeReadableBytes(decode(bytes:))
    }

    /// The same, read from `bytes`.
    static func decode(bytes: UnsafeRawBufferPointer) -> Result<[Frame], Refusal> {
        parts(of: bytes, as: Frame.init(copying:))
    }

    /// The frames of the message in `bytes` (frame 0 first), each as `make` turns its bytes (which are valid as long
    /// as `bytes` is) into a part.
    static func parts<Part>(of bytes: UnsafeRawBufferPointer,
                            as make: (UnsafeRawBufferPointer) -> Part) -> Result<[Part], Refusal> {
        var frames: [Part] = []
        if let refusal = split(bytes, { frames.append(make($0)) }) { return .failure(refusal) }
        return .success(frames)
    }

    /// Hands the frames of the message in `bytes` to `frame` in order, or says why it is not a message (then
    /// `frame` may have seen some of them): the one reading of a message's framing.
    private static func split(_ bytes: UnsafeRawBufferPointer, _ frame: (UnsafeRawBufferPointer) -> Void) -> Refusal? {
        var count = 0
        var at = 0
        while at < bytes.count {
            guard bytes.count - at >= lengthBytes else {
                return Refusal(reason: "the message ends inside a frame's 4-byte length (SPEC 3.2)")
            }
            guard count < maxFrames else {
                return Refusal(reason: "a message has at most \(maxFrames) frames (SPEC 3.2)")
            }
            let length = bytes[at..<at + lengthBytes].reduce(0) { $0 << 8 | Int($1) }
            at += lengthBytes
            guard length <= bytes.count - at else {
                return Refusal(reason: "frame \(count) says \(length) bytes; \(bytes.count - at) follow (SPEC 3.2)")
            }
            frame(UnsafeRawBufferPointer(rebasing: bytes[at..<at + length]))
            count += 1
            at += length
        }
        guard count >= 2 else {
            return Refusal(reason: "a message has a signature frame and a body frame; got \(count) frame(s)")
        }
        return nil
    }

    /// Messages one batch may hold (SPEC 3.2, since 1.9): the most a connection may have read and not yet taken.
    static let maxBatchMessages = 1000
    /// Bytes a sender puts in one batch before it starts another (SPEC 3.2); a larger message goes alone.
    static let batchBytes = 65_536

    /// The messages of a batch (SPEC 3.2, since 1.9), each decoded alone (an entry may be refused while the others
    /// are read), or why the whole batch is refused. The batch's own lengths are checked before any entry is read.
    static func decodeBatch(_ payload: ByteBuffer) -> Result<[Result<[Frame], Refusal>], Refusal> {
        payload.withUnsafeReadableBytes { bytes in
            entries(ofBatch: bytes).map { $0.map { decode(bytes: UnsafeRawBufferPointer(rebasing: bytes[$0])) } }
        }
    }

    /// Where each message of a batch is, or why the whole batch is refused (SPEC 3.2).
    private static func entries(ofBatch bytes: UnsafeRawBufferPointer) -> Result<[Range<Int>], Refusal> {
        var entries: [Range<Int>] = []
        if let refusal = walk(batch: bytes, { entries.append($0); return true }) { return .failure(refusal) }
        return .success(entries)
    }

    /// Hands where each message of a batch is to `entry`, in order, while it returns true; or says why the whole
    /// batch is refused (SPEC 3.2), having handed over what came before the fault: the one reading of a batch's
    /// lengths.
    private static func walk(batch bytes: UnsafeRawBufferPointer, _ entry: (Range<Int>) -> Bool) -> Refusal? {
        var count = 0
        var at = 0
        while at < bytes.count {
            guard count < maxBatchMessages else {
                return Refusal(reason: "a batch holds at most \(maxBatchMessages) messages (SPEC 3.2)")
            }
            guard bytes.count - at >= lengthBytes else {
                return Refusal(reason: "the batch ends inside a message's 4-byte length (SPEC 3.2)")
            }
            let length = bytes[at..<at + lengthBytes].reduce(0) { $0 << 8 | Int($1) }
            at += lengthBytes
            guard length <= bytes.count - at else {
                return Refusal(reason: "batch message \(count) says \(length) bytes; \(bytes.count - at) follow (SPEC 3.2)")
            }
            guard entry(at..<at + length) else { return nil }
            count += 1
            at += length
        }
        guard count > 0 else { return Refusal(reason: "an empty batch holds no message (SPEC 3.2)") }
        return nil
    }

    /// Reads the messages of a keyed ZeroMQ batch's frame 1 (SPEC 3.3) in place, in order, each as ``parts(of:as:)``
    /// reads one, while `take` returns true: a batch as above whose messages' frame 0 is empty (the batch's signature
    /// covers them); one whose frame 0 is not is refused on its own. Returns why the whole batch is refused, before
    /// any message is taken, or nil. Nothing is copied or allocated per message: the parts are on the stack, valid
    /// during `take` only.
    static func readSignedBatch(_ frame1: UnsafeRawBufferPointer,
                                _ take: (Result<UnsafeBufferPointer<UnsafeRawBufferPointer>, Refusal>) -> Bool) -> Refusal? {
        // The lengths are checked in a first walk, before any message is taken; the second takes them, with no
        // array of where they are (a batch of hundreds grew one, reallocating as it went).
        if let refusal = walk(batch: frame1, { _ in true }) { return refusal }
        _ = walk(batch: frame1) { entry in
            let message = UnsafeRawBufferPointer(rebasing: frame1[entry])
            var count = 0
            if let refusal = split(message, { _ in count += 1 }) { return take(.failure(refusal)) }
            func read(into parts: UnsafeMutableBufferPointer<UnsafeRawBufferPointer>) -> Bool {
                var filled = 0
                _ = split(message) { part in
                    parts.initializeElement(at: filled, to: part)  // a trivial type: nothing to deinitialize
                    filled += 1
                }
                guard parts[0].isEmpty else {
                    return take(.failure(Refusal(reason: "frame 0 of a message in a batch is empty: the batch is signed (SPEC 3.3)")))
                }
                return take(.success(UnsafeBufferPointer(parts)))
            }
            // The usual message's few parts on the stack; a hostile one's thousands (up to `maxFrames`, 16 bytes
            // each) on the heap, not on the socket thread's stack.
            if count <= partsOnStack {
                return withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: count, read)
            }
            var parts = [UnsafeRawBufferPointer](repeating: UnsafeRawBufferPointer(start: nil, count: 0), count: count)
            return parts.withUnsafeMutableBufferPointer { read(into: $0) }
        }
        return nil
    }

    /// The most parts of a batched message read on the stack.
    private static let partsOnStack = 64

    /// Appends one message to a keyed ZeroMQ batch's frame 1 (SPEC 3.3): behind its length, its frames with frame 0
    /// empty (the batch's signature covers it).
    static func appendBatchEntry(_ frames: [[UInt8]], to batch: inout [UInt8]) {
        func append(_ length: Int) {
            withUnsafeBytes(of: UInt32(length).bigEndian) { batch.append(contentsOf: $0) }
        }
        append(frames.reduce(lengthBytes * (frames.count + 1)) { $0 + $1.count })
        append(0)
        for frame in frames {
            append(frame.count)
            batch.append(contentsOf: frame)
        }
    }

    /// Bytes `frames` take in a batch (SPEC 3.3): the entry's length, frame 0's, and each frame behind its length.
    static func batchEntryBytes(_ frames: [[UInt8]]) -> Int {
        frames.reduce(lengthBytes * (frames.count + 2)) { $0 + $1.count }
    }

    /// The payload for frame 0 (`signature`) and frames 1..n, written into one buffer; as a batch entry (behind its
    /// own length, SPEC 3.2 since 1.9) when `asBatchEntry`.
    static func encode(signature: [UInt8], frames: [[UInt8]], asBatchEntry: Bool = false,
                       allocator: ByteBufferAllocator) -> ByteBuffer {
        let size = frames.reduce(signature.count + lengthBytes * (frames.count + 1)) { $0 + $1.count }
        var buffer = allocator.buffer(capacity: size + (asBatchEntry ? lengthBytes : 0))
        if asBatchEntry { buffer.writeInteger(UInt32(size)) }
        buffer.writeInteger(UInt32(signature.count))
        buffer.writeBytes(signature)
        for frame in frames {
            buffer.writeInteger(UInt32(frame.count))
            buffer.writeBytes(frame)
        }
        return buffer
    }
}
