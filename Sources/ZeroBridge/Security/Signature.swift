import Crypto
import Foundation

/// The key of keyed connections (SPEC 3.1): the connection file's `key`, decoded.
public struct ConnectionKey: Sendable, Hashable {
    /// The key's 32 bytes.
    public let bytes: [UInt8]
    /// HMAC-SHA256 with this key, its padded key already hashed: every message's MAC starts from a copy of it.
    let authenticator: ChannelMAC

    /// From hex digits (an even, non-zero number of them, either case); nil otherwise.
    public init?(hex: String) {
        guard let bytes = Signature.bytes(hex: hex), !bytes.isEmpty else { return nil }
        self.bytes = bytes
        authenticator = ChannelMAC(key: bytes)
    }

    public static func == (a: ConnectionKey, b: ConnectionKey) -> Bool { a.bytes == b.bytes }

    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    /// 32 bytes from the system's CSPRNG.
    public static func generate() -> ConnectionKey {
        var generator = SystemRandomNumberGenerator()
        return ConnectionKey(hex: Signature.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }))!
    }

    /// The key as 64 lowercase hex digits, as connection files hold it.
    public var hex: String { Signature.hex(bytes) }
}

/// HMAC-SHA256 (RFC 2104) over swift-crypto's `SHA256`: the inner and outer hashes with the padded key fed, each
/// message's MAC from copies of them. Why not swift-crypto's `HMAC<SHA256>`: it is generic and not inlinable, so every
/// `update` and `finalize` called from this module resolved generic metadata at run time, 1.1 of the 2.6 us that
/// signing and checking cost the host per request (perf, issue 26), while `SHA256` is a concrete type. Pinned to
/// `HMAC<SHA256>` by a differential test (SignatureTests).
struct ChannelMAC: Sendable {
    private var inner = SHA256()
    private var outer = SHA256()

    init(key: [UInt8]) {
        var block = [UInt8](repeating: 0, count: SHA256.blockByteCount)
        if key.count > block.count {
            block.replaceSubrange(0..<SHA256.byteCount, with: Array(SHA256.hash(data: key)))
        } else {
            block.replaceSubrange(0..<key.count, with: key)
        }
        for (hash, pad) in [(\Self.inner, UInt8(0x36)), (\Self.outer, UInt8(0x5c))] {
            let padded = block.map { $0 ^ pad }
            padded.withUnsafeBytes { self[keyPath: hash].update(bufferPointer: $0) }
        }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) { inner.update(bufferPointer: bytes) }

    func finalize() -> MAC {
        var outer = outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize().withUnsafeBytes { MAC($0) }
    }
}

/// An HMAC-SHA256 value: 32 bytes held inline (no allocation per message), compared in constant time.
struct MAC: Equatable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// From 32 bytes.
    init(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == 32, "an HMAC-SHA256 has 32 bytes")
        words = (bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                 bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }

    init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { MAC($0) } }

    /// From exactly 64 lowercase hex digits at the start of `digits`; nil for anything else there. Without a branch
    /// per digit: this runs for every message received.
    init?(lowerHex digits: UnsafeRawBufferPointer) {
        guard digits.count >= 64 else { return nil }
        var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var invalid: UInt8 = 0
        withUnsafeMutableBytes(of: &bytes) { out in
            func value(_ digit: UInt8) -> UInt8 {
                let decimal = digit &- 0x30, letter = digit &- 0x61
                invalid |= decimal < 10 || letter < 6 ? 0 : 1
                return decimal < 10 ? decimal : letter &+ 10
            }
            for offset in 0..<32 {
                out[offset] = value(digits[2 * offset]) << 4 | value(digits[2 * offset + 1])
            }
        }
        guard invalid == 0 else { return nil }
        words = bytes
    }

    /// Constant time: every word is compared, whatever differs first.
    static func == (a: MAC, b: MAC) -> Bool {
        ((a.words.0 ^ b.words.0) | (a.words.1 ^ b.words.1) | (a.words.2 ^ b.words.2) | (a.words.3 ^ b.words.3)) == 0
    }

    /// Calls `body` with the 32 bytes.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        Swift.withUnsafeBytes(of: words, body)
    }

    /// Lowercase hex, as frame 0 carries it.
    var hex: String { withUnsafeBytes { Signature.hex($0) } }
}

/// Frame 0 of keyed connections (SPEC 3.1): `h.<nonce>.<ms>.<mac>` opens a connection's channel, `m.<counter>.<mac>`
/// signs everything after it, and `b.<counter>.<mac>` a batch of messages (SPEC 3.3).
enum Signature {
    enum Kind: String {
        case hello
        case peerToHost = "p2h"
        case hostToPeer = "h2p"
        case peerToHostBatch = "p2h-batch"
        case hostToPeerBatch = "h2p-batch"

        /// The kind of a batch sent in this kind's direction (SPEC 3.3).
        var batch: Kind {
            switch self {
            case .peerToHost, .peerToHostBatch: .peerToHostBatch
            case .hostToPeer, .hostToPeerBatch: .hostToPeerBatch
            case .hello: .hello
            }
        }
    }

    /// The longest frame 0 the rules allow (an opening: 2 + 32 + 1 + 19 + 1 + 64 bytes), rounded up: a longer one
    /// is refused unread.
    static let maxFrameBytes = 128

    enum Parsed: Equatable {
        case opening(nonce: String, ms: Int64, mac: MAC)
        case message(counter: Int64, mac: MAC)
        /// A batch's signature (SPEC 3.3): its counter is in the same sequence as the messages'.
        case batch(counter: Int64, mac: MAC)
    }

    /// The first byte of a batch's frame 0 (SPEC 3.3).
    static let batchForm = UInt8(ascii: "b")

    /// HMAC-SHA256 with the key, the preamble's fixed start (`zerobridge-1`, the kind, the channel) already fed: a
    /// channel keeps one per direction, and every message's MAC starts from a copy of it.
    static func prefixed(_ key: ConnectionKey, _ kind: Kind, channel: String) -> ChannelMAC {
        var hmac = key.authenticator
        var start = "zerobridge-1\n\(kind.rawValue)\n\(channel)\n"
        start.withUTF8 { hmac.update(UnsafeRawBufferPointer($0)) }
        return hmac
    }

    /// HMAC-SHA256 of the preamble's end (the stamp) and the frames, each read in place (as received, or as about
    /// to be sent) after its length. The stamp and each length go in with one small update, from the stack.
    static func authenticationCode<Frames: Sequence>(_ prefixed: ChannelMAC, stamp: Int64,
                                                     frames: Frames) -> MAC where Frames.Element: ContiguousBytes {
        var hmac = prefixed
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { buffer in
            var used = decimal(stamp, into: buffer)
            buffer[used] = UInt8(ascii: "\n")
            used += 1
            for frame in frames {
                frame.withUnsafeBytes { bytes in
                    withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { length in
                        for byte in length { buffer[used] = byte; used += 1 }
                    }
                    hmac.update(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[..<used]))
                    used = 0
                    hmac.update(bytes)
                }
            }
            if used > 0 { hmac.update(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[..<used])) }
        }
        return hmac.finalize()
    }

    static func authenticationCode<Frames: Sequence>(_ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                                     frames: Frames) -> MAC where Frames.Element: ContiguousBytes {
        authenticationCode(prefixed(key, kind, channel: channel), stamp: stamp, frames: frames)
    }

    /// The MAC as frame 0 carries it: lowercase hex.
    static func mac<Frames: Sequence>(_ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                      frames: Frames) -> String where Frames.Element: ContiguousBytes {
        authenticationCode(key, kind, channel: channel, stamp: stamp, frames: frames).hex
    }

    /// Whether `mac` (hex) is the frames' MAC, compared in constant time.
    static func isValid<Frames: Sequence>(_ mac: String, _ key: ConnectionKey, _ kind: Kind, channel: String, stamp: Int64,
                                          frames: Frames) -> Bool where Frames.Element: ContiguousBytes {
        guard let expected = bytes(hex: mac), expected.count == 32 else { return false }
        return authenticationCode(key, kind, channel: channel, stamp: stamp, frames: frames) == MAC(expected)
    }

    static func opening(_ key: ConnectionKey, channel: String, ms: Int64, frames: [[UInt8]]) -> String {
        "h.\(channel).\(ms).\(mac(key, .hello, channel: channel, stamp: ms, frames: frames))"
    }

    /// `m.<counter>.<mac>`, or `b.<counter>.<mac>` for a kind of batch (then `frames` is the batch's frame 1).
    static func message(_ key: ConnectionKey, _ kind: Kind, channel: String, counter: Int64, frames: [[UInt8]]) -> String {
        let form = kind == kind.batch ? batchForm : UInt8(ascii: "m")
        return String(decoding: messageFrame(prefixed(key, kind, channel: channel), counter: counter, frames: frames, form: form),
                      as: UTF8.self)
    }

    /// `m.<counter>.<mac>` (or `b.`, `form`) as bytes, written once into the array that is sent.
    static func messageFrame<Frames: Sequence>(_ prefixed: ChannelMAC, counter: Int64, frames: Frames,
                                               form: UInt8 = UInt8(ascii: "m")) -> [UInt8] where Frames.Element: ContiguousBytes {
        let code = authenticationCode(prefixed, stamp: counter, frames: frames)
        return [UInt8](unsafeUninitializedCapacity: 2 + 20 + 1 + 64) { buffer, count in
            buffer[0] = form
            buffer[1] = UInt8(ascii: ".")
            var used = 2 + decimal(counter, into: UnsafeMutableBufferPointer(rebasing: buffer[2...]))
            buffer[used] = UInt8(ascii: ".")
            used += 1
            code.withUnsafeBytes { for byte in $0 { buffer[used] = hexDigits[Int(byte >> 4)]; buffer[used + 1] = hexDigits[Int(byte & 0xf)]; used += 2 } }
            count = used
        }
    }

    /// Writes `value` in decimal, as `"\(value)"` does, at the start of `buffer` (at least 20 bytes); returns the
    /// bytes written.
    private static func decimal(_ value: Int64, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var used = 0
        if value < 0 {
            buffer[0] = UInt8(ascii: "-")
            used = 1
        }
        let start = used
        var rest = value.magnitude
        repeat {
            buffer[used] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            used += 1
        } while rest > 0
        buffer[start..<used].reverse()
        return used
    }

    static func parse(_ frame: some ContiguousBytes) -> Parsed? {
        frame.withUnsafeBytes { parse(bytes: $0) }
    }

    /// Frame 0 as written by the rules (lowercase hex, decimal without sign or leading zeros); nil otherwise. Read in
    /// one pass, in place, the MAC decoded to its bytes.
    private static func parse(bytes frame: UnsafeRawBufferPointer) -> Parsed? {
        var index = 0
        func take(_ byte: UInt8) -> Bool {
            guard index < frame.count, frame[index] == byte else { return false }
            index += 1
            return true
        }
        func number() -> Int64? {
            let start = index
            while index < frame.count, index - start < 20, (0x30...0x39).contains(frame[index]) { index += 1 }
            let count = index - start
            guard count >= 1, count <= 19, count == 1 || frame[start] != 0x30 else { return nil }
            var value: Int64 = 0
            for digit in frame[start..<index] {
                let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
                let (sum, carry) = shifted.addingReportingOverflow(Int64(digit - 0x30))
                guard !overflow, !carry else { return nil }
                value = sum
            }
            return value
        }
        /// Exactly 64 lowercase hex digits, then the frame's end.
        func macAtEnd() -> MAC? {
            guard frame.count - index == 64 else { return nil }
            return MAC(lowerHex: UnsafeRawBufferPointer(rebasing: frame[index...]))
        }
        if take(UInt8(ascii: "m")) || take(batchForm), take(UInt8(ascii: ".")) {
            guard let counter = number(), counter >= 1, take(UInt8(ascii: ".")), let mac = macAtEnd() else { return nil }
            return frame[0] == batchForm ? .batch(counter: counter, mac: mac) : .message(counter: counter, mac: mac)
        }
        index = 0
        guard take(UInt8(ascii: "h")), take(UInt8(ascii: ".")), frame.count - index >= 32,
              (index..<index + 32).allSatisfy({ lowerHexValue(frame[$0]) != nil }) else { return nil }
        let nonce = String(decoding: frame[index..<index + 32], as: UTF8.self)
        index += 32
        guard take(UInt8(ascii: ".")), let ms = number(), take(UInt8(ascii: ".")), let mac = macAtEnd() else { return nil }
        return .opening(nonce: nonce, ms: ms, mac: mac)
    }

    private static func lowerHexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        default: nil
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func newNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return hex((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var text = [UInt8]()
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            text.append(hexDigits[Int(byte >> 4)])
            text.append(hexDigits[Int(byte & 0xf)])
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
    /// The MAC states of each direction with the preamble's fixed start fed (``Signature/prefixed(_:_:channel:)``).
    private let sending: ChannelMAC
    private let receiving: ChannelMAC
    /// The same for batches (SPEC 3.3), whose kinds are their own.
    private let sendingBatch: ChannelMAC
    private let receivingBatch: ChannelMAC
    /// One sequence per direction for messages and batches alike.
    private var sent: Int64 = 0
    private var received: Int64 = 0

    private init(key: ConnectionKey, nonce: String, sending: Signature.Kind, receiving: Signature.Kind) {
        self.key = key
        self.nonce = nonce
        self.sending = Signature.prefixed(key, sending, channel: nonce)
        self.receiving = Signature.prefixed(key, receiving, channel: nonce)
        sendingBatch = Signature.prefixed(key, sending.batch, channel: nonce)
        receivingBatch = Signature.prefixed(key, receiving.batch, channel: nonce)
    }

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
        return Signature.messageFrame(sending, counter: sent, frames: frames)
    }

    /// Frame 0 for the next batch sent, whose frame 1 is `batch` (SPEC 3.3).
    mutating func signBatch(_ batch: [UInt8]) -> [UInt8] {
        sent += 1
        return Signature.messageFrame(sendingBatch, counter: sent, frames: CollectionOfOne(batch), form: Signature.batchForm)
    }

    enum Accepted { case message, batch }

    /// Whether a message (or a batch) that arrived is signed for this channel by the other side, after what was
    /// accepted before; nil when it is not.
    mutating func accept<Frames: Sequence>(_ frame0: some ContiguousBytes, _ frames: Frames) -> Accepted?
    where Frames.Element: ContiguousBytes {
        let accepted: Accepted, counter: Int64, code: MAC
        switch Signature.parse(frame0) {
        case .message(let stamp, let mac)?: (accepted, counter, code) = (.message, stamp, mac)
        case .batch(let stamp, let mac)?: (accepted, counter, code) = (.batch, stamp, mac)
        default: return nil
        }
        guard counter > received,
              Signature.authenticationCode(accepted == .batch ? receivingBatch : receiving, stamp: counter, frames: frames) == code
        else { return nil }
        received = counter
        return accepted
    }
}

/// The host's memory of accepted openings (SPEC 3.1): each nonce for 10 minutes after it was accepted (an opening's
/// clock is within 5 minutes of the host's, so one is refused by its clock before its nonce is forgotten), at most
/// `capacity` of them. A full history refuses new openings rather than forgetting a nonce early: nothing an opening
/// claims about its clock can raise a floor that locks others out. The host's opening rates (``OpeningRates``) keep it
/// from filling: 10 minutes of the most they let through is under its capacity.
struct OpeningHistory {
    static let clockBound: Int64 = 300_000
    static let remembered: Int64 = 600_000
    let capacity: Int
    /// Openings signed before this (the host's start, for a key that may have served an earlier run) are refused:
    /// an earlier run's history is not kept, so its openings could otherwise be played again.
    let notBefore: Int64
    private var nonces: Set<String> = []
    /// Accepted nonces in the order they were accepted, with when (the host's clock).
    private var order: [(nonce: String, at: Int64)] = []
    private var head = 0

    init(capacity: Int = 65_536, notBefore: Int64 = .min) {
        self.capacity = capacity
        self.notBefore = notBefore
    }

    /// Why an opening with this nonce and clock may not be accepted now (its MAC checked already); nil: it is
    /// accepted, and remembered.
    mutating func refusal(nonce: String, ms: Int64, now: Int64) -> String? {
        forget(before: now - Self.remembered)
        if abs(ms - now) > Self.clockBound {
            return "the opening's clock is \((ms - now) / 1000) s from the host's; at most 300 s are accepted (check the clocks)"
        }
        if ms < notBefore { return "an opening signed before this host started (replayed from an earlier run with this key)" }
        if nonces.contains(nonce) { return "an opening replayed (its nonce was accepted before)" }
        if nonces.count >= capacity {
            return "the host accepted \(capacity) openings in the last 10 minutes, its most: try again later"
        }
        nonces.insert(nonce)
        order.append((nonce, now))
        return nil
    }

    private mutating func forget(before cutoff: Int64) {
        while head < order.count, order[head].at < cutoff {
            nonces.remove(order[head].nonce)
            head += 1
        }
        if head > 1024, head * 2 > order.count { order.removeFirst(head); head = 0 }
    }

    var count: Int { nonces.count }
}

/// The host's side of keyed connections (SPEC 3.1): one channel per connection (routing id), opened by a signed
/// `hello`, and the history that keeps an opening from being replayed. Confined to the host's socket thread.
struct KeyedConnections {
    /// The largest opening (frames 1..n of a keyed connection's first message) whose MAC is computed (SPEC 3.1): a
    /// larger one is refused by its size alone, so a forged opening costs the host what reading it costs.
    static let maxOpeningBytes = 131_072
    /// What a batch may hold beyond `max_message_bytes` before its MAC is computed (SPEC 3.3): the WebSocket layer's
    /// slack, for the same lengths and frame 0s.
    static let batchSlackBytes = 131_072

    let key: ConnectionKey
    let notBefore: Int64
    private var history: OpeningHistory
    private var rates = OpeningRates()
    private var channels: [[UInt8]: KeyedChannel] = [:]

    /// `notBefore`: openings signed earlier are refused (the host's start, for a key given to it).
    init(key: ConnectionKey, notBefore: Int64 = .min) {
        self.key = key
        self.notBefore = notBefore
        history = OpeningHistory(notBefore: notBefore)
    }

    enum Verdict: Equatable {
        case accepted
        /// A batch signed for the connection's channel (SPEC 3.3): its messages are read one by one.
        case acceptedBatch
        /// Why it is not processed; for an opening refused only for its clock, how far it is from the host's
        /// (its ms minus the host's clock), which the refusal carries so the peer can name the real cause.
        case refused(String, clockSkewMs: Int64? = nil)
        /// On an open channel, over `max_message_bytes`: not verified, answered `too_large` (SPEC 7.10).
        case tooLarge(String)
    }

    /// Checks a message that arrived on `connection`, by its size (frames 1..n) before its signature. `frames` are
    /// its frames 1..n, signed in place; `isHello` tells whether its body is a `hello` (asked only for an opening);
    /// `now` is the host's wall clock in milliseconds, read only for an opening. `frame0` is read in place.
    mutating func receive<Frames: Collection>(on connection: [UInt8], frame0: some ContiguousBytes, size: Int,
                                              maxMessageBytes: Int, frames: Frames, now: @autoclosure () -> Int64,
                                              isHello: () -> Bool) -> Verdict
    where Frames.Element: ContiguousBytes {
        if let open = channels.index(forKey: connection) {  // one lookup, the channel updated in place
            if frame0.withUnsafeBytes({ $0.first == Signature.batchForm }) {
                guard size <= maxMessageBytes + Self.batchSlackBytes else {
                    return .tooLarge("the batch has \(size) bytes; the limit is \(maxMessageBytes + Self.batchSlackBytes) (not verified)")
                }
            } else if size > maxMessageBytes {
                return .tooLarge("the message has \(size) bytes; the limit is \(maxMessageBytes) (not verified)")
            }
            switch channels.values[open].accept(frame0, frames) {
            case .message?: return .accepted
            case .batch?: return .acceptedBatch
            case nil: return .refused(Self.reason(frame0, opened: true))
            }
        }
        guard case .opening(let nonce, let ms, let mac)? = Signature.parse(frame0) else {
            let isEmpty = frame0.withUnsafeBytes { $0.isEmpty }
            return .refused(isEmpty ? "no signature" : "the first message on a keyed connection must be a signed hello")
        }
        guard size <= Self.maxOpeningBytes else {
            return .refused("an opening of \(size) bytes; at most \(Self.maxOpeningBytes) are verified")
        }
        guard Signature.authenticationCode(key, .hello, channel: nonce, stamp: ms, frames: frames) == mac else {
            return .refused("wrong signature")
        }
        guard isHello() else { return .refused("an opening signature on a message that is not hello") }
        let now = now()
        let skew = ms - now
        guard abs(skew) <= OpeningHistory.clockBound else {
            return .refused("the opening hello's clock is \(ClockSkew.describe(skew)) the host's, more than the "
                            + "\(OpeningHistory.clockBound / 1000) s window: are both clocks set right?", clockSkewMs: skew)
        }
        // Counted only once its MAC is right: one without the key cannot spend the key holders' openings.
        if let refusal = rates.refusal(on: connection, now: now) ?? history.refusal(nonce: nonce, ms: ms, now: now) {
            return .refused(refusal)
        }
        channels[connection] = .host(key, nonce: nonce)
        return .accepted
    }

    /// Frame 0 for a message to `connection`; nil while it has no channel (nothing may be signed for it yet).
    mutating func sign(for connection: [UInt8], _ frames: [[UInt8]]) -> [UInt8]? {
        // In place: `channels[connection]?.sign` copied the channel (seven references retained and released) per message.
        guard let open = channels.index(forKey: connection) else { return nil }
        return channels.values[open].sign(frames)
    }

    /// Frame 0 for a batch to `connection` whose frame 1 is `batch` (SPEC 3.3); nil while it has no channel.
    mutating func signBatch(for connection: [UInt8], _ batch: [UInt8]) -> [UInt8]? {
        guard let open = channels.index(forKey: connection) else { return nil }
        return channels.values[open].signBatch(batch)
    }

    /// Whether `connection` has a channel open.
    func isOpen(_ connection: [UInt8]) -> Bool { channels[connection] != nil }

    /// The connection's channel is over (its session ended or moved): what still arrives on it is refused.
    mutating func close(_ connection: [UInt8]) { channels[connection] = nil }

    /// The same key and start, without channels (the host stopped).
    func withoutChannels() -> KeyedConnections { KeyedConnections(key: key, notBefore: notBefore) }

    private static func reason(_ frame0: some ContiguousBytes, opened: Bool) -> String {
        switch Signature.parse(frame0) {
        case nil: frame0.withUnsafeBytes { $0.isEmpty } ? "no signature" : "not a signature"
        case .opening?: "a second opening on a connection whose channel is open"
        case .message?: "wrong signature, or a replayed or reordered counter"
        case .batch?: "wrong batch signature, or a replayed or reordered counter"
        }
    }
}

/// Words for a clock skew (SPEC 3.1): the host's refusal of an opening outside the window, and the peer's diagnostic.
enum ClockSkew {
    static let windowMs = OpeningHistory.clockBound

    /// "400 s ahead of" or "400 s behind" for `skew` = the peer's clock minus the host's, in milliseconds; to the
    /// millisecond when whole seconds would hide that it is past the window.
    static func describe(_ skew: Int64) -> String {
        "\(amount(skew)) \(skew > 0 ? "ahead of" : "behind")"
    }

    static func amount(_ skew: Int64) -> String {
        let seconds = (skew.magnitude + 500) / 1000
        return seconds * 1000 <= windowMs.magnitude ? "\(skew.magnitude) ms" : "\(seconds) s"
    }

    /// The peer's diagnostic for a refusal that carries `data.clock_skew_ms`; nil for one that does not.
    static func diagnosis(of refusal: JSONValue?) -> String? {
        guard let skew = refusal?["data"]?["clock_skew_ms"]?.intValue else { return nil }
        let window = refusal?["data"]?["window_ms"]?.intValue ?? Int(windowMs)
        return "the host's clock and this peer's differ by \(amount(Int64(skew))) (this peer's is \(skew > 0 ? "ahead" : "behind")), "
            + "more than the \(window / 1000) s window for an opening hello: set both clocks right (NTP)"
    }
}
