/// HMAC-SHA256 (RFC 2104 over FIPS 180-4), for signing keyed connections (SPEC 3.1) without a crypto dependency.
/// Checked against RFC 4231's vectors and the protocol's signature fixtures.
struct HMACSHA256 {
    private var inner: SHA256
    private let outerKey: [UInt8]

    init(key: [UInt8]) {
        var block = key.count > SHA256.blockSize ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: SHA256.blockSize - block.count)
        inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        outerKey = block.map { $0 ^ 0x5c }
    }

    mutating func update(_ bytes: some Sequence<UInt8>) { inner.update(bytes) }

    consuming func finalize() -> [UInt8] {
        var outer = SHA256()
        outer.update(outerKey)
        outer.update(inner.finalize())
        return outer.finalize()
    }
}

struct SHA256 {
    static let blockSize = 64
    private var state: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Whole blocks are compressed straight from the input; only a partial block is buffered (every keyed message
    /// goes through here, body and attachments included).
    mutating func update(_ bytes: some Sequence<UInt8>) {
        let input = Array(bytes)
        length &+= UInt64(input.count)
        var start = 0
        if !buffer.isEmpty {
            let take = min(Self.blockSize - buffer.count, input.count)
            buffer.append(contentsOf: input[0..<take])
            start = take
            guard buffer.count == Self.blockSize else { return }
            compress(buffer[...])
            buffer.removeAll(keepingCapacity: true)
        }
        while input.count - start >= Self.blockSize {
            compress(input[start..<start + Self.blockSize])
            start += Self.blockSize
        }
        buffer.append(contentsOf: input[start...])
    }

    consuming func finalize() -> [UInt8] {
        let bits = length &* 8
        let padding = (buffer.count < 56 ? 56 : 120) - buffer.count
        update([0x80] + [UInt8](repeating: 0, count: padding - 1))
        update((0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * $0)) })
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * $0)) } }
    }

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    private mutating func compress(_ block: ArraySlice<UInt8>) {
        let base = block.startIndex
        @inline(__always) func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
        var w = [UInt32](repeating: 0, count: 64)
        for t in 0..<16 {
            let i = base + 4 * t
            w[t] = UInt32(block[i]) << 24 | UInt32(block[i + 1]) << 16 | UInt32(block[i + 2]) << 8 | UInt32(block[i + 3])
        }
        for t in 16..<64 {
            let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
            let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        for t in 0..<64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let choice = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ choice &+ Self.k[t] &+ w[t]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ majority
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
        state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
    }
}
