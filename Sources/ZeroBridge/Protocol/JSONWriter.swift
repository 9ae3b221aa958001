import Foundation

extension JSONValue {
    /// Appends the value as compact JSON: no whitespace, object keys sorted (so output is reproducible),
    /// strings escaped per RFC 8259 (non-ASCII written as UTF-8), integers as integers, doubles in their shortest
    /// round-trip form with a fraction or exponent (`3.0`, `0.1`, `1e-07`). A non-finite double, which no parse
    /// produces and JSON cannot express, is written as `null`. Bytes are written as a base64 string.
    func write(to buffer: inout [UInt8]) {
        var asText = AttachmentCollector(collects: false)
        write(to: &buffer, attachments: &asText)
    }

    /// Appends the value; bytes go to `attachments` as frames, referred to as `{"$attachment": i}`, or, when it
    /// does not collect them, are written as a base64 string.
    func write(to buffer: inout [UInt8], attachments: inout AttachmentCollector) {
        switch self {
        case .null: JSONWriter.append("null", to: &buffer)
        case .bool(let b): JSONWriter.append(b ? "true" : "false", to: &buffer)
        case .int(let i): JSONWriter.append(i, to: &buffer)
        case .double(let d):
            if !d.isFinite { attachments.uncarriable = true }
            JSONWriter.append(d, to: &buffer)
        case .string(let s): JSONWriter.append(string: s, to: &buffer)
        case .bytes(let bytes):
            if attachments.collects {
                JSONWriter.append(#"{"$attachment":"#, to: &buffer)
                JSONWriter.append(attachments.frames.count, to: &buffer)
                buffer.append(JSONByte.closeBrace)
                attachments.frames.append(bytes)
            } else {
                JSONWriter.append(string: Data(bytes).base64EncodedString(), to: &buffer)
            }
        case .array(let elements):
            attachments.enter()
            defer { attachments.leave() }
            buffer.append(JSONByte.openBracket)
            var first = true
            for element in elements {
                if !first { buffer.append(JSONByte.comma) }
                first = false
                element.write(to: &buffer, attachments: &attachments)
            }
            buffer.append(JSONByte.closeBracket)
        case .object(let members):
            attachments.enter()
            defer { attachments.leave() }
            buffer.append(JSONByte.openBrace)
            if members.count == 1, let (key, value) = members.first {
                JSONWriter.append(string: key, to: &buffer)
                buffer.append(JSONByte.colon)
                value.write(to: &buffer, attachments: &attachments)
            } else if members.count <= Self.membersSortedInPlace {
                // Most objects are small: their members' positions are sorted on the stack, not copied out.
                withUnsafeTemporaryAllocation(of: [String: JSONValue].Index.self, capacity: members.count) { order in
                    var count = 0
                    for index in members.indices {
                        // Insertion sort by key, as `sorted` below orders them.
                        let key = members.keys[index]
                        var at = count
                        while at > 0 && key < members.keys[order[at - 1]] { at -= 1 }
                        if at < count { (order.baseAddress! + at + 1).moveInitialize(from: order.baseAddress! + at, count: count - at) }
                        order.initializeElement(at: at, to: index)
                        count += 1
                    }
                    for position in 0..<count {
                        if position > 0 { buffer.append(JSONByte.comma) }
                        let (key, value) = members[order[position]]
                        JSONWriter.append(string: key, to: &buffer)
                        buffer.append(JSONByte.colon)
                        value.write(to: &buffer, attachments: &attachments)
                    }
                    _ = order.deinitialize()
                }
            } else {
                var first = true
                for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                    if !first { buffer.append(JSONByte.comma) }
                    first = false
                    JSONWriter.append(string: key, to: &buffer)
                    buffer.append(JSONByte.colon)
                    value.write(to: &buffer, attachments: &attachments)
                }
            }
            buffer.append(JSONByte.closeBrace)
        }
    }

    /// Objects up to this many members are written without a sorted copy of their members (an insertion sort).
    private static let membersSortedInPlace = 16

    /// The value as compact JSON bytes; see ``write(to:)``.
    func serialized() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64)
        write(to: &buffer)
        return buffer
    }
}

/// The pieces of JSON text, written straight into a byte buffer.
enum JSONWriter {
    @inline(__always)
    static func append(_ literal: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func append(_ value: Int, to buffer: inout [UInt8]) {
        if value >= 0 && value < 10 {
            buffer.append(JSONByte.zero + UInt8(value))
            return
        }
        if value < 0 { buffer.append(JSONByte.minus) }
        var magnitude = value.magnitude
        // The digits come last first: made on the stack (UInt.max has 20), then appended in order. (Reversing them
        // in `buffer` through a slice copied the whole buffer, for every number of two digits or more.)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var at = digits.count
            repeat {
                at -= 1
                digits[at] = JSONByte.zero + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: digits[at...]))
        }
    }

    static func append(_ value: Double, to buffer: inout [UInt8]) {
        guard value.isFinite else {
            append("null", to: &buffer)
            return
        }
        // Swift's description is the shortest text that reads back as the same double, and always has a
        // fraction or an exponent ("3.0", "1e-07", "1e+16"), all of which are valid JSON numbers.
        var text = value.description
        text.withUTF8 { buffer.append(contentsOf: $0) }
    }

    /// Appends `string` quoted, escaping `"`, `\` and control characters; everything else is copied as UTF-8.
    static func append(string: String, to buffer: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            buffer.append(JSONByte.quote)
            var runStart = 0
            for index in 0 ..< bytes.count {
                let b = bytes[index]
                guard b < 0x20 || b == JSONByte.quote || b == JSONByte.backslash else { continue }
                if runStart < index { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart ..< index])) }
                runStart = index + 1
                buffer.append(JSONByte.backslash)
                switch b {
                case JSONByte.quote: buffer.append(JSONByte.quote)
                case JSONByte.backslash: buffer.append(JSONByte.backslash)
                case JSONByte.lineFeed: buffer.append(JSONByte.letterN)
                case JSONByte.carriageReturn: buffer.append(JSONByte.letterR)
                case JSONByte.tab: buffer.append(JSONByte.letterT)
                case 0x08: buffer.append(JSONByte.letterB)
                case 0x0C: buffer.append(JSONByte.letterF)
                default:
                    append("u00", to: &buffer)
                    buffer.append(hexDigits[Int(b >> 4)])
                    buffer.append(hexDigits[Int(b & 0xF)])
                }
            }
            if runStart < bytes.count { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
            buffer.append(JSONByte.quote)
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

/// The attachment frames a message's bytes values become, in the order the body refers to them; and whether the
/// value written holds what JSON cannot carry (SPEC 7.14), noted while writing so that checking costs no extra walk.
/// A value on the stack, passed `inout`: a message written costs no allocation for it.
struct AttachmentCollector {
    /// Whether bytes values become frames (in a message) or base64 text (anywhere else).
    let collects: Bool
    var frames: [[UInt8]] = []
    /// A non-finite double was written (as `null`), or a container nested past the body's depth limit.
    var uncarriable = false
    /// Containers open inside the value, which itself sits at level 2 of the body (SPEC 4).
    private var depth = 0

    init(collects: Bool) { self.collects = collects }

    mutating func enter() {
        depth += 1
        if depth + 1 > JSONValue.maxDepth { uncarriable = true }
    }

    mutating func leave() { depth -= 1 }
}
