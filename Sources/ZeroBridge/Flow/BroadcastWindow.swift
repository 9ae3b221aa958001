/// The bytes of broadcasts a session was handed and its peer has not shown it read (SPEC 7.15): what a subscriber that
/// does not read costs the host, which libzmq's queue (counted in messages) would let grow to a thousand events.
///
/// A peer answers pings in order, so its `pong` shows it has read everything sent before the `ping` it answers. The
/// link notes, at each ping it sends, how many broadcast bytes preceded it; each pong confirms the oldest such mark.
/// Confined to the socket thread.
struct BroadcastWindow {
    /// Unconfirmed broadcast bytes past which a session is skipped (SPEC 7.15: 8 MiB, so at most one event more).
    static let maxUnconfirmedBytes = 8 << 20
    /// Pings whose marks are kept: a peer that answers none still costs only this many integers (later pings are
    /// not marked, which only makes confirmations later, never early).
    static let maxMarkedPings = 64

    private var sentBytes = 0
    private var confirmedBytes = 0
    /// `sentBytes` at each unanswered ping, oldest first.
    private var pings: [Int] = []

    var unconfirmedBytes: Int { sentBytes - confirmedBytes }
    /// Whether another broadcast may go to the session.
    var hasRoom: Bool { unconfirmedBytes <= Self.maxUnconfirmedBytes }
    /// Whether a ping sent to the session is still unanswered.
    var awaitsPong: Bool { !pings.isEmpty }

    mutating func sent(_ bytes: Int) { sentBytes += bytes }

    mutating func pinged() {
        if pings.count < Self.maxMarkedPings { pings.append(sentBytes) }
    }

    mutating func ponged() {
        guard !pings.isEmpty else { return }  // a pong nobody asked for confirms nothing
        confirmedBytes = max(confirmedBytes, pings.removeFirst())
    }
}
