import Foundation

extension JSONValue {
    /// Appends the value as compact JSON: no whitespace, object keys sorted (so output is reproducible),
    /// strings escaped per RFC 8259 (non-ASCII written as UTF-8), integers as integers, doubles in their shortest
    /// round-trip form with a fraction or exponent (`3.0`, `0.1`, `1e-07`). A non-finite double, which no parse
    /// produces and JSON cannot express, is written as `null`.
    func write(to buffer: inout [UInt8]) {
        write(to: &buffer, attachments: nil)
    }

    /// Appends the value; bytes go to `attachments` as frames, referred to as `{"$attachment": i}`, or, with no
    /// collector, are written as a base64 string.
    func write(to buffer: inout [UInt8], attachments: AttachmentCollector?) {
        switch self {
        case .null: JSONWriter.append("null", to: &buffer)
        case .bool(let b): JSONWriter.append(b ? "true" : "false", to: &buffer)
        case .int(let i): JSONWriter.append(i, to: &buffer)
        case .double(let d):
            if !d.isFinite { attachments?.uncarriable = true }
            JSONWriter.append(d, to: &buffer)
        case .string(let s): JSONWriter.append(string: s, to: &buffer)
        case .bytes(let bytes):
            if let attachments {
                JSONWriter.append(#"{"$attachment":"#, to: &buffer)
                JSONWriter.append(attachments.frames.count, to: &buffer)
                buffer.append(JSONByte.closeBrace)
                attachments.frames.append(bytes)
            } else {
                JSONWriter.append(string: Data(bytes).base64EncodedString(), to: &buffer)
            }
        case .array(let elements):
            attachments?.enter()
            defer { attachments?.leave() }
            buffer.append(JSONByte.openBracket)
            var first = true
            for element in elements {
                if !first { buffer.append(JSONByte.comma) }
                first = false
                element.write(to: &buffer, attachments: attachments)
            }
            buffer.append(JSONByte.closeBracket)
        case .object(let members):
            attachments?.enter()
            defer { attachments?.leave() }
            buffer.append(JSONByte.openBrace)
            if members.count == 1, let (key, value) = members.first {
                JSONWriter.append(string: key, to: &buffer)
                buffer.append(JSONByte.colon)
                value.write(to: &buffer, attachments: attachments)
            } else if !members.isEmpty {
                var first = true
                for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                    if !first { buffer.append(JSONByte.comma) }
                    first = false
                    JSONWriter.append(string: key, to: &buffer)
                    buffer.append(JSONByte.colon)
                    value.write(to: &buffer, attachments: attachments)
                }
            }
            buffer.append(JSONByte.closeBrace)
        }
    }

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
        let start = buffer.count
        repeat {
            buffer.append(JSONByte.zero + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        buffer[start...].reverse()
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
final class AttachmentCollector {
    var frames: [[UInt8]] = []
    /// A non-finite double was written (as `null`), or a container nested past the body's depth limit.
    var uncarriable = false
    /// Containers open inside the value, which itself sits at level 2 of the body (SPEC 4).
    private var depth = 0

    func enter() {
        depth += 1
        if depth + 1 > JSONValue.maxDepth { uncarriable = true }
    }

    func leave() { depth -= 1 }
}
