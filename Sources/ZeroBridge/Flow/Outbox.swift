import Synchronization

/// What one conversation (a host session, or a peer's link to its host) has queued for its socket and the socket
/// has not taken yet, with the bound that SPEC 7.13 states.
///
/// The socket thread owns the messages. When libzmq refuses a message (the connection's send high-water mark is
/// reached), the outbox is *blocked*: the thread tries again on a timer that backs off, and meanwhile the link
/// holds back what can wait (progress, new calls) instead of queueing it here. Other conversations are not held up:
/// each has an outbox of its own.
final class Outbox: @unchecked Sendable {
    /// Bytes a conversation may have queued here before it counts as congested (SPEC 7.13: 8 MiB).
    static let maxQueuedBytes = 8 << 20

    /// Readable from any thread (a `post` checks it); written on the socket thread.
    private let queued = Atomic<Int>(0)

    /// How long the other side may take nothing before its progress is coalesced rather than waited for.
    static let stallBeforeCoalescing: Duration = .seconds(1)

    /// Since when libzmq refuses this conversation's messages (nanoseconds on the continuous clock; 0: it does not),
    /// for handlers on other threads.
    private let blockedSince = Atomic<Int64>(0)

    // Confined to the socket thread.
    var messages = OutboundQueue()
    /// Set while libzmq refuses this conversation's messages: when to try again.
    var retryAt: ContinuousClock.Instant? {
        didSet {
            guard (retryAt == nil) != (oldValue == nil) else { return }
            isRefused = retryAt != nil
            blockedSince.store(retryAt == nil ? 0 : Self.nanoseconds(.now), ordering: .relaxed)
        }
    }
    /// `retryAt != nil`, kept as a flag: ``isCongested`` is asked once per call sent, and reading the optional
    /// instant copied it out each time.
    private var isRefused = false
    /// Runs on the thread each time libzmq refuses again: handlers waiting for room look again.
    var onRefused: (() -> Void)?
    var backoff: Duration = .milliseconds(1)
    /// Whether the socket thread has it in its list of outboxes with something to send.
    var isListed = false
    /// Runs on the thread when a blocked outbox has sent everything.
    var onDrained: (() -> Void)?
    /// Runs on the thread when the socket says the other side is not there (EHOSTUNREACH); what was queued for
    /// it has been dropped.
    var onUnreachable: (() -> Void)?
    /// Whether its messages go to many connections (a host's answers to connections without a session): one that
    /// has gone loses only its own message, not the answers queued behind it for others.
    let isShared: Bool

    init(shared: Bool = false) {
        isShared = shared
    }

    /// Makes frame 0 for what is queued awaiting it (SPEC 3.1, 3.3): for `frames` alone, or, when `batch`, for a batch
    /// whose frame 1 is `frames[0]`. `envelope` is the
    /// message's (a host's routing id). nil: the connection's channel is gone, and nothing can be signed for it.
    typealias Signer = (_ envelope: [[UInt8]], _ frames: [[UInt8]], _ batch: Bool) -> [UInt8]?
    /// Set by the owner of the conversation. On the thread.
    var signer: Signer?
    /// Frame 0 without a key: empty, or the byte that marks a batch (SPEC 3.3).
    static func unkeyed(_ envelope: [[UInt8]], _ frames: [[UInt8]], batch: Bool) -> [UInt8]? {
        batch ? [Signature.batchForm] : []
    }
    /// The other side reads batches (SPEC 3.3): messages queued together are signed as one. On the thread.
    var batches = false

    /// The bytes queued and not yet taken by libzmq.
    var queuedBytes: Int { queued.load(ordering: .relaxed) }

    /// The transport refuses more, or too much is queued: progress and new calls wait (SPEC 7.13). On the thread.
    var isCongested: Bool { isRefused || queuedBytes > Self.maxQueuedBytes }

    /// The other side has taken nothing for ``stallBeforeCoalescing``, or too much is queued: progress is coalesced
    /// instead of waited for. Readable from any thread (a handler offering progress).
    var isStalled: Bool {
        if queuedBytes > Self.maxQueuedBytes { return true }
        let since = blockedSince.load(ordering: .relaxed)
        return since != 0 && Self.nanoseconds(.now) - since >= Self.nanoseconds(Self.stallBeforeCoalescing)
    }

    private static let origin = ContinuousClock.now
    private static func nanoseconds(_ instant: ContinuousClock.Instant) -> Int64 { nanoseconds(instant - origin) }
    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }

    func append(_ message: OutboundMessage) {
        messages.append(message)
        queued.add(message.size, ordering: .relaxed)
    }

    func removeFirst() {
        if let first = messages.first { queued.subtract(first.size, ordering: .relaxed) }
        messages.removeFirst()
    }

    /// Signs what awaits its signature at the head of the queue, as it goes to libzmq: when the other side reads
    /// batches (SPEC 3.3), messages queued together go as one batch under one signature, at most
    /// ``WebSocketFraming/batchBytes`` and ``WebSocketFraming/maxBatchMessages`` of them; one alone, or larger than a
    /// batch, is signed as itself. When no signature can be made (the channel is gone), they are dropped: the other
    /// side would refuse them.
    func signHead() { _ = signRun(at: 0) }

    /// Signs everything that still awaits its signature, now: its channel is about to close (a session that ends
    /// after its last words, a host stopping after its `bye`s).
    func signAwaiting() {
        var offset = 0
        while offset < messages.count {
            if !messages[offset].awaitsSignature || signRun(at: offset) { offset += 1 }
        }
    }

    /// Signs the messages awaiting their signature from `offset` on, as one batch or the first alone; false when
    /// they were dropped instead.
    private func signRun(at offset: Int) -> Bool {
        // By index, not through a slice of the queue: a slice alive while the queue changes would copy all of it.
        var count = 0, bytes = 0, size = 0
        while offset + count < messages.count {
            let message = messages[offset + count]
            guard message.awaitsSignature, count < (batches ? WebSocketFraming.maxBatchMessages : 1) else { break }
            let entry = WebSocketFraming.batchEntryBytes(message.frames)
            guard count == 0 || bytes + entry <= WebSocketFraming.batchBytes else { break }
            count += 1
            bytes += entry
            size += message.size
        }
        guard count > 0 else { return false }
        let first = messages[offset]
        let signed: OutboundMessage?
        if count == 1 {
            signed = signedAlone(first)
        } else {
            var batch: [UInt8] = []
            batch.reserveCapacity(bytes)
            for index in offset..<offset + count { WebSocketFraming.appendBatchEntry(messages[index].frames, to: &batch) }
            signed = signer?(first.envelope, [batch], true).map {
                OutboundMessage(envelope: first.envelope + [$0], frames: [batch])
            }
        }
        messages.replace(count, at: offset, with: signed)
        queued.add((signed?.size ?? 0) - size, ordering: .relaxed)
        return signed != nil
    }

    /// `message` with its signature, for it alone; nil when none can be made.
    func signedAlone(_ message: OutboundMessage) -> OutboundMessage? {
        signer?(message.envelope, message.frames, false).map {
            OutboundMessage(envelope: message.envelope + [$0], frames: message.frames)
        }
    }

    /// Forgets everything queued (the other side is gone: SPEC 7.3, nothing queued for a lost side arrives later).
    func discard() {
        messages = OutboundQueue()
        queued.store(0, ordering: .relaxed)
        retryAt = nil
    }
}

/// One multipart message waiting for the socket: the parts in front (routing id, signature), then the rest.
struct OutboundMessage {
    var envelope: [[UInt8]]
    var frames: [[UInt8]]
    /// Its envelope lacks frame 0: the outbox's ``Outbox/signer`` signs it as it goes, alone or in a batch with
    /// what is queued after it (SPEC 3.3).
    var awaitsSignature = false

    var size: Int { frames.reduce(0) { $0 + $1.count } }
}

/// A FIFO of outbound messages that does not shift elements on removal.
struct OutboundQueue {
    private var items: [OutboundMessage] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: OutboundMessage? { isEmpty ? nil : items[head] }

    mutating func append(_ message: OutboundMessage) { items.append(message) }

    /// The message `offset` places after the first.
    subscript(offset: Int) -> OutboundMessage { items[head + offset] }

    /// The `count` messages from `offset` on become `message`, or are removed when it is nil.
    mutating func replace(_ count: Int, at offset: Int, with message: OutboundMessage?) {
        let start = head + offset
        if offset == 0 {  // the usual case, going out: without moving what follows
            head += count
            if let message {
                head -= 1
                items[head] = message
            } else if isEmpty {
                items.removeAll(keepingCapacity: true)
                head = 0
            }
        } else {
            items.replaceSubrange(start..<start + count, with: message.map { [$0] } ?? [])
        }
    }

    mutating func removeFirst() {
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
    }
}
