/// A session's resume token (SPEC 6): 256 random bits as 64 lowercase hex digits, the secret without which a session
/// cannot be resumed. Never logged.
enum ResumeToken {
    static let hexDigits = 64

    /// A new token. `SystemRandomNumberGenerator` draws from the kernel's CSPRNG (getrandom on Linux).
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(hexDigits)
        for _ in 0..<(hexDigits / 16) {
            var word = generator.next() as UInt64
            for _ in 0..<16 {
                text.append(digits[Int(word & 0xf)])
                word >>= 4
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == hexDigits && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Whether `offered` is `expected`, in time that depends only on their lengths (not on where they differ), so
    /// that timing does not tell a guesser how much of a token it has right.
    static func matches(_ offered: String?, _ expected: String) -> Bool {
        guard let offered else { return false }
        let a = Array(offered.utf8), b = Array(expected.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
