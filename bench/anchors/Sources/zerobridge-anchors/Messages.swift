import Foundation

/// The ~100-byte payload every bench driver echoes (bench/common.py builds the same one).
struct Payload: Codable, Equatable, Sendable {
    var name: String
    var seq: Int
    var text: String

    static let bench = Payload(name: "bench", seq: 42, text: String(repeating: "x", count: 65))
}

/// A stream's request: send `n` events (ZeroBridge's conformance `count` takes the same payload).
struct CountRequest: Codable, Sendable {
    var n: Int
}

/// One event of a stream, shaped like the progress payloads of ZeroBridge's `count`.
struct Progress: Codable, Sendable {
    var i: Int
    var n: Int
}
