import Crypto
import Foundation

/// The key of keyed connections (SPEC 3.1): the connection file's `key`, decoded.
public struct ConnectionKey: Sendable, Hashable {
    public let bytes: [UInt8]
    /// HMAC-SHA256 with this key, its padded key already hashed: every message's MAC starts from a copy of it.
    let authenticator: HMAC<SHA256>

    /// From hex digits (an even, non-zero number of them, either case); nil otherwise.
    public init?(hex: String) {
        guard let bytes = Signature.bytes(hex: hex), !bytes.isEmpty else { return nil }
        self.bytes = bytes
        authenticator = HMAC(key: SymmetricKey(data: bytes))
    }

    public static func == (a: ConnectionKey, b: ConnectionKey) -> Bool { a.bytes == b.bytes }

    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// 32 bytes from the system's CSPRNG.
    public static func generate() -> ConnectionKey {
        var generator = SystemRandomNumberGenerator()
        return ConnectionKey(hex: Signature.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }))!
    }

    public var hex: String { Signature.hex(bytes) }
}

/// Frame 0 of keyed connections (SPEC 3.1): `h.<nonce>.<ms>.<mac>` opens a connection's channel, `m.<counter>.<mac>`
/// signs everything after it.
enum Signature {
    enum Kind: String {
        case hello
        case peerToHost = "p2h"
        case hostToPeer = "h2p"
    }

    enum Parsed: Equatable {
        case opening(nonce: String, ms: Int64, mac: String)
        case message(counter: Int64, mac: String)
    }

    /// HMAC-SHA256 of the frames, each read in place (as received, or as about to be sent) after its length.
    static func authenticationCode<Frames: Sequence>(_ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                                     frames: Frames) -> HMAC<SHA256>.MAC where Frames.Element: ContiguousBytes {
        var hmac = key.authenticator
        var preamble = "zerobridge-1\n\(kind.rawValue)\n\(channel)\n\(stamp)\n"
        preamble.withUTF8 { hmac.update(data: UnsafeRawBufferPointer($0)) }
        for frame in frames {
            frame.withUnsafeBytes { bytes in
                withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { hmac.update(data: $0) }
                hmac.update(data: bytes)
            }
        }
        return hmac.finalize()
    }

    /// The MAC as frame 0 carries it: lowercase hex.
    static func mac<Frames: Sequence>(_ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                      frames: Frames) -> String where Frames.Element: ContiguousBytes {
        hex(authenticationCode(key, kind, channel: channel, stamp: stamp, frames: frames))
    }

    /// Whether `mac` (hex) is the frames' MAC, compared in constant time.
    static func isValid<Frames: Sequence>(_ mac: String, _ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                          frames: Frames) -> Bool where Frames.Element: ContiguousBytes {
        guard let expected = bytes(hex: mac) else { return false }
        return authenticationCode(key, kind, channel: channel, stamp: stamp, frames: frames) == expected
    }

    static func opening(_ key: ConnectionKey, channel: String, ms: Int64, frames: [[UInt8]]) -> String {
        "h.\(channel).\(ms).\(mac(key, .hello, channel: channel, stamp: ms, frames: frames))"
    }

    static func message(_ key: ConnectionKey, _ kind: Kind, channel: String, counter: Int64, frames: [[UInt8]]) -> String {
        "m.\(counter).\(mac(key, kind, channel: channel, stamp: counter, frames: frames))"
    }

    /// Frame 0 as written by the rules (lowercase hex, decimal without sign or leading zeros); nil otherwise.
    static func parse(_ frame: [UInt8]) -> Parsed? {
        let parts = frame.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Array.init)
        func number(_ digits: [UInt8]) -> Int64? {
            guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ (0x30...0x39).contains($0) }),
                  digits.count == 1 || digits[0] != 0x30 else { return nil }
            return Int64(String(decoding: digits, as: UTF8.self))
        }
        func lowerHex(_ digits: [UInt8], count: Int) -> String? {
            guard digits.count == count, digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
            return String(decoding: digits, as: UTF8.self)
        }
        if parts.count == 4, parts[0] == [UInt8(ascii: "h")], let nonce = lowerHex(parts[1], count: 32),
           let ms = number(parts[2]), let mac = lowerHex(parts[3], count: 64) {
            return .opening(nonce: nonce, ms: ms, mac: mac)
        }
        if parts.count == 3, parts[0] == [UInt8(ascii: "m")], let counter = number(parts[1]), counter >= 1,
           let mac = lowerHex(parts[2], count: 64) {
            return .message(counter: counter, mac: mac)
        }
        return nil
    }

    static func newNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return hex((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// From hex digits (an even number of them, either case); nil otherwise.
    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }
}

/// One keyed connection as one side sees it: its channel, the counter of what it sent, and the greatest counter it
/// accepted. Confined to the socket thread.
struct KeyedChannel {
    let key: ConnectionKey
    let nonce: String
    private let sending: Signature.Kind
    private let receiving: Signature.Kind
    private var sent: Int64 = 0
    private var received: Int64 = 0

    /// The peer's side of a new connection: a fresh nonce, opened by its first `hello`.
    static func peer(_ key: ConnectionKey, nonce: String = Signature.newNonce()) -> KeyedChannel {
        KeyedChannel(key: key, nonce: nonce, sending: .peerToHost, receiving: .hostToPeer)
    }

    /// The host's side of a channel a peer opened.
    static func host(_ key: ConnectionKey, nonce: String) -> KeyedChannel {
        KeyedChannel(key: key, nonce: nonce, sending: .hostToPeer, receiving: .peerToHost)
    }

    /// Frame 0 for the opening `hello` (the peer's first message on the connection).
    func opening(_ frames: [[UInt8]], ms: Int64) -> [UInt8] {
        Array(Signature.opening(key, channel: nonce, ms: ms, frames: frames).utf8)
    }

    /// Frame 0 for the next message sent.
    mutating func sign(_ frames: [[UInt8]]) -> [UInt8] {
        sent += 1
        return Array(Signature.message(key, sending, channel: nonce, counter: sent, frames: frames).utf8)
    }

    /// Whether a message that arrived is signed for this channel by the other side, after what was accepted before.
    mutating func accept<Frames: Sequence>(_ frame0: [UInt8], _ frames: Frames) -> Bool where Frames.Element: ContiguousBytes {
        guard case .message(let counter, let mac)? = Signature.parse(frame0), counter > received,
              Signature.isValid(mac, key, receiving, channel: nonce, stamp: counter, frames: frames) else { return false }
        received = counter
        return true
    }
}

/// The host's memory of accepted openings (SPEC 3.1): nonces for 10 minutes, at most 65,536 of them; forgetting one
/// early raises a floor that refuses every opening not later than it, so no nonce is ever accepted twice.
struct OpeningHistory {
    static let clockBound: Int64 = 300_000
    static let remembered: Int64 = 600_000
    let capacity: Int
    private var nonces: [String: Int64] = [:]
    private var order: [(nonce: String, ms: Int64)] = []
    private var head = 0
    private var floor = Int64.min

    init(capacity: Int = 65_536) { self.capacity = capacity }

    /// Whether an opening with this nonce and clock may be accepted now (its MAC checked already); remembers it if so.
    mutating func accept(nonce: String, ms: Int64, now: Int64) -> Bool {
        forget(before: now - Self.remembered)
        guard abs(ms - now) <= Self.clockBound, ms > floor, nonces[nonce] == nil else { return false }
        nonces[nonce] = ms
        order.append((nonce, ms))
        while nonces.count > capacity {
            let oldest = order[head]
            head += 1
            nonces[oldest.nonce] = nil
            floor = max(floor, oldest.ms)
        }
        if head > capacity { order.removeFirst(head); head = 0 }
        return true
    }

    /// Openings older than the clock bound are refused by it anyway: their nonces need not be kept.
    private mutating func forget(before cutoff: Int64) {
        while head < order.count, order[head].ms < cutoff {
            nonces[order[head].nonce] = nil
            head += 1
        }
        if head > 1024, head * 2 > order.count { order.removeFirst(head); head = 0 }
    }

    var count: Int { nonces.count }
}

/// The host's side of keyed connections (SPEC 3.1): one channel per connection (routing id), opened by a signed
/// `hello`, and the history that keeps an opening from being replayed. Confined to the host's socket thread.
struct KeyedConnections {
    let key: ConnectionKey
    private var history = OpeningHistory()
    private var channels: [[UInt8]: KeyedChannel] = [:]

    init(key: ConnectionKey) { self.key = key }

    enum Verdict: Equatable {
        case accepted
        case refused(String)
    }

    /// Checks a message that arrived on `connection`. `isHello` tells whether its body is a `hello` (asked only for
    /// an opening); `now` is the host's wall clock in milliseconds.
    mutating func receive<Frames: Sequence>(on connection: [UInt8], frame0: [UInt8], frames: Frames, now: Int64,
                                            isHello: () -> Bool) -> Verdict where Frames.Element: ContiguousBytes {
        if channels[connection] != nil {
            return channels[connection]!.accept(frame0, frames) ? .accepted : .refused(Self.reason(frame0, opened: true))
        }
        guard case .opening(let nonce, let ms, let mac)? = Signature.parse(frame0) else {
            return .refused(frame0.isEmpty ? "no signature" : "the first message on a keyed connection must be a signed hello")
        }
        guard Signature.isValid(mac, key, .hello, channel: nonce, stamp: ms, frames: frames) else {
            return .refused("wrong signature")
        }
        guard isHello() else { return .refused("an opening signature on a message that is not hello") }
        guard history.accept(nonce: nonce, ms: ms, now: now) else {
            return .refused("an opening replayed, or its clock more than 300 s from the host's")
        }
        channels[connection] = .host(key, nonce: nonce)
        return .accepted
    }

    /// Frame 0 for a message to `connection`; nil while it has no channel (nothing may be signed for it yet).
    mutating func sign(for connection: [UInt8], _ frames: [[UInt8]]) -> [UInt8]? {
        channels[connection]?.sign(frames)
    }

    /// The connection's channel is over (its session ended or moved): what still arrives on it is refused.
    mutating func close(_ connection: [UInt8]) { channels[connection] = nil }

    private static func reason(_ frame0: [UInt8], opened: Bool) -> String {
        switch Signature.parse(frame0) {
        case nil: frame0.isEmpty ? "no signature" : "not a signature"
        case .opening?: "a second opening on a connection whose channel is open"
        case .message?: "wrong signature, or a replayed or reordered counter"
        }
    }
}
