import Foundation

extension Message {
    /// The message as the frames after the signature: the body, then one attachment frame for each bytes
    /// value in its payload, result or error data, in the order the body refers to them.
    func frames() -> [[UInt8]] {
        encoded().frames
    }

    /// ``frames()``, refusing with `code` a message whose `value` (its payload or result) JSON cannot carry
    /// (SPEC 7.14): the writer notes it as it goes, and only then is the value walked, to name the path.
    func frames(refusing value: JSONValue, at root: String, as code: BridgeError.Code) throws(BridgeError) -> [[UInt8]] {
        let (frames, uncarriable) = encoded()
        if uncarriable { throw BridgeError(code, value.uncarriable(at: root) ?? "\(root) cannot be carried in JSON") }
        return frames
    }

    private func encoded() -> (frames: [[UInt8]], uncarriable: Bool) {
        var body: [UInt8] = []
        body.reserveCapacity(estimatedSize)
        var attachments = AttachmentCollector(collects: true)
        write(to: &body, attachments: &attachments)
        return (attachments.frames.isEmpty ? [body] : [body] + attachments.frames, attachments.uncarriable)
    }

    /// Decodes a body and its attachment frames: each `{"$attachment": i}` in a payload, result or error data
    /// becomes `.bytes` of frame i. A reference to a frame that is not there is `bad_message`.
    static func decode(_ body: UnsafeRawBufferPointer, attachments: [[UInt8]], maxDepth: Int = 64) -> Result<Message, DecodeFailure> {
        let decoded = decode(body, maxDepth: maxDepth)
        // Most bodies refer to no attachment; only those that mention one are walked.
        guard case .success(let message) = decoded, mentionsAttachment(body) else { return decoded }
        do throws(BridgeError) {
            return .success(try message.resolvingAttachments(attachments))
        } catch {
            return .failure(DecodeFailure(id: message.id, error: error))
        }
    }

    private func resolvingAttachments(_ frames: [[UInt8]]) throws(BridgeError) -> Message {
        switch self {
        case .request(var request):
            request.payload = try request.payload.resolvingAttachments(frames)
            return .request(request)
        case .response(var response):
            switch response.outcome {
            case .success(let result): response.outcome = .success(try result.resolvingAttachments(frames))
            case .failure(var error):
                error.data = try error.data?.resolvingAttachments(frames)
                response.outcome = .failure(error)
            }
            return .response(response)
        case .progress(var progress):
            progress.payload = try progress.payload.resolvingAttachments(frames)
            return .progress(progress)
        case .event(var event):
            event.payload = try event.payload.resolvingAttachments(frames)
            return .event(event)
        default:
            return self
        }
    }

    private static let marker = Array(#""$attachment""#.utf8)

    /// Whether the body may hold an attachment reference: it has the name `"$attachment"` as written, or a `\u`
    /// escape of one of its characters (`$` is U+0024, its letters U+0061 to U+0074). Member names count as
    /// decoded, so `"\u0024attachment"` and `"$\u0061ttachment"` are references too (SPEC 3). One pass, no
    /// allocation; a false alarm only costs the walk.
    private static func mentionsAttachment(_ body: UnsafeRawBufferPointer) -> Bool {
        let count = body.count, marker = Self.marker
        // Every reference has a `$` or a `\`: most bodies have neither, which memchr finds far faster than the walk.
        guard let start = body.baseAddress,
              memchr(start, Int32(UInt8(ascii: "$")), count) != nil || memchr(start, Int32(JSONByte.backslash), count) != nil
        else { return false }
        var index = 0
        while index < count {
            switch body[index] {
            case JSONByte.quote:
                if index + marker.count <= count, matches(marker, in: body, at: index) { return true }
            case JSONByte.backslash:
                if index + 5 < count, body[index + 1] == JSONByte.letterU, body[index + 2] == JSONByte.zero,
                   body[index + 3] == JSONByte.zero {
                    switch body[index + 4] {
                    case UInt8(ascii: "2"), UInt8(ascii: "6"), UInt8(ascii: "7"): return true
                    default: break
                    }
                }
            default:
                break
            }
            index += 1
        }
        return false
    }

    @inline(__always)
    private static func matches(_ marker: [UInt8], in body: UnsafeRawBufferPointer, at index: Int) -> Bool {
        for offset in 1 ..< marker.count where body[index + offset] != marker[offset] { return false }
        return true
    }
}

extension JSONValue {
    /// A value as one compact JSON text and the byte strings it holds, taken out as `{"$attachment": i}` in the
    /// order they occur, as a message carries them (SPEC 5): for keeping a value outside a message (the job journal).
    package var textAndAttachments: (text: [UInt8], attachments: [[UInt8]]) {
        var text: [UInt8] = []
        var attachments = AttachmentCollector(collects: true)
        write(to: &text, attachments: &attachments)
        return (text, attachments.frames)
    }

    /// The value ``textAndAttachments`` took apart (with no attachments, the text as it is).
    package init(text: [UInt8], attachments: [[UInt8]]) throws {
        let value = try JSONValue.parse(text)
        self = attachments.isEmpty ? value : try value.resolvingAttachments(attachments)
    }

    /// The value with every `{"$attachment": i}` (an object with exactly that one member, i a non-negative
    /// integer) replaced by the bytes of frame i.
    func resolvingAttachments(_ frames: [[UInt8]]) throws(BridgeError) -> JSONValue {
        switch self {
        case .object(let members):
            if members.count == 1, let reference = members["$attachment"] {
                guard let index = reference.intValue, index >= 0 else {
                    throw BridgeError(.badMessage, "an attachment reference takes a non-negative integer, not \(reference)")
                }
                guard index < frames.count else {
                    throw BridgeError(.badMessage, "the body refers to attachment \(index), but the message has \(frames.count)")
                }
                return .bytes(frames[index])
            }
            var resolved: [String: JSONValue] = [:]
            resolved.reserveCapacity(members.count)
            for (key, value) in members { resolved[key] = try value.resolvingAttachments(frames) }
            return .object(resolved)
        case .array(let elements):
            var resolved: [JSONValue] = []
            resolved.reserveCapacity(elements.count)
            for element in elements { resolved.append(try element.resolvingAttachments(frames)) }
            return .array(resolved)
        default:
            return self
        }
    }
}
