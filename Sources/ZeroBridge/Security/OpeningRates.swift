/// How fast keyed connections may be opened (SPEC 3.1): per key (all of a host's keyed connections share its key)
/// and per connection, each a token bucket. Ten minutes of the most the key's bucket lets through (1,024 + 32 x 600
/// = 20,224) stay under the opening history's 65,536, so a key holder cycling `hello`/`bye` is slowed, not able to
/// fill the history and lock others out. Confined to the host's socket thread.
struct OpeningRates {
    static let perKey = TokenBucket(burst: 1024, perSecond: 32)
    static let perConnection = TokenBucket(burst: 8, perSecond: 1)
    /// Connections whose bucket is not full are kept; the rest are dropped once this many are held (a full bucket
    /// is what a connection not seen before gets anyway).
    static let connectionsHeld = 4096

    private var key = Self.perKey
    private var connections: [[UInt8]: TokenBucket] = [:]

    /// Why another opening on `connection` is refused now; nil: it may go on (and is counted).
    mutating func refusal(on connection: [UInt8], now: Int64) -> String? {
        var bucket = connections[connection] ?? Self.perConnection
        guard bucket.take(now: now) else {
            return "more than \(Self.perConnection.burst) openings on this connection, then 1 a second: try again shortly"
        }
        guard key.take(now: now) else {
            return "more than \(Self.perKey.burst) openings on this host's key, then \(Int(Self.perKey.perSecond)) a second: try again shortly"
        }
        connections[connection] = bucket
        if connections.count > Self.connectionsHeld {
            connections = connections.filter { !$0.value.isFull(now: now) }
        }
        return nil
    }
}

/// At most `burst` at once, then `perSecond`; the clock is the host's wall clock in milliseconds.
struct TokenBucket {
    let burst: Int
    let perSecond: Double
    private var tokens: Double
    private var last: Int64?

    init(burst: Int, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
        tokens = Double(burst)
    }

    mutating func take(now: Int64) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    func isFull(now: Int64) -> Bool {
        var copy = self
        copy.refill(now: now)
        return copy.tokens >= Double(burst)
    }

    private mutating func refill(now: Int64) {
        if let last, now > last { tokens = min(Double(burst), tokens + Double(now - last) * perSecond / 1000) }
        last = max(last ?? now, now)
    }
}
