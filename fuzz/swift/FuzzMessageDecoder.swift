// libFuzzer target for the message decoder (Sources/ZeroBridge/Protocol/Message+Decoding.swift and the attachment
// references of Message+Attachments.swift). Built by `make fuzz` like FuzzJSONParser.swift.
//
// The input is a body; two attachment frames ride along, so references to frames 0 and 1 resolve and others fail.
// Besides "never crashes", a message the decoder accepts must survive a round trip: encoded into frames and decoded
// again, it is the same message.

private let attachments: [[UInt8]] = [Array("first attachment".utf8), [0, 0xFF, 0x7B]]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMessageDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = UnsafeRawBufferPointer(start: data, count: size)
    guard case .success(let message) = Message.decode(body, attachments: attachments) else { return 0 }
    let frames = message.frames()
    let again = frames[0].withUnsafeBytes { Message.decode($0, attachments: Array(frames.dropFirst())) }
    switch again {
    case .success(let decoded):
        precondition(decoded == message, "a decoded message, encoded and decoded again, is another message")
    case .failure(let failure):
        fatalError("a decoded message, encoded again, is refused: \(failure.error)")
    }
    return 0
}
