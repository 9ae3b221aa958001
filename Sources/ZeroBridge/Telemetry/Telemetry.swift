import CoreMetrics

/// What a host or a peer counts (issue 27): the totals its `$stats` snapshot reads (SPEC 7.8), and the same events
/// as swift-metrics objects for whatever backend the app bootstrapped.
///
/// Confined to the owner's socket thread, like the links that call it (one call per event, at the points the link
/// already has). Metric objects are made once, per action on first use, and looked up by the handler table's name:
/// nothing is allocated per request. When no backend is bootstrapped (swift-metrics' NOOP factory) when the owner is
/// made, no metric object exists and only the plain totals are kept.
final class Telemetry: @unchecked Sendable {
    /// Why a message was refused before any handler ran: a bounded set of labels, whatever code a message carries.
    enum Refusal: String, CaseIterable, Sendable {
        case overloaded, tooLarge = "too_large", unauthorized, nameTaken = "name_taken"
        /// Not a message, or not a valid one: bad_message, unsupported_version, duplicate_id.
        case badInput = "bad_input"
        /// No such action, or its handler was released.
        case unknownAction = "unknown_action"
        /// Arrived after its caller's deadline (SPEC 7.3).
        case late

        init(_ code: BridgeError.Code) {
            switch code {
            case .overloaded: self = .overloaded
            case .tooLarge: self = .tooLarge
            case .unauthorized: self = .unauthorized
            case .nameTaken: self = .nameTaken
            case .unknownAction, .handlerGone: self = .unknownAction
            case .timeout: self = .late
            default: self = .badInput
            }
        }
    }

    /// Running totals since the owner started.
    struct Totals: Sendable {
        var requests = 0
        var failed = 0
        var events = 0
        var refusals: [Refusal: Int] = [:]
        var bytesIn = 0
        var bytesOut = 0
        var progressSent = 0
        var progressCoalesced = 0
        var broadcastsDelivered = 0
        var broadcastsSkipped = 0
    }

    // The counters are confined to the owner's thread: the dynamic exclusivity checks of a class's stored properties
    // (a thread-local access set, two runtime calls per access) were half the cost of the hooks per request.
    @exclusivity(unchecked) private(set) var totals = Totals()
    /// Each action's count of requests running and its metric objects, in the order first used; a request holds its
    /// action's index, so starting and ending one counts no references.
    @exclusivity(unchecked) private var shares: [Share] = []
    /// Where each action's share is, by the handler table's names: looked up once when a request starts.
    private var shareIndex: [String: Int] = [:]
    /// The action of the last request: most requests repeat it, and comparing a short name is cheaper than hashing it.
    @exclusivity(unchecked) private var lastName = ""
    @exclusivity(unchecked) private var lastIndex: Int?
    @exclusivity(unchecked) private(set) var eventsInFlight = 0
    private let recorder: Recorder?

    /// One action's share: what is running now, and (with a backend) its metrics.
    private struct Share {
        var inFlight = 0
        let metrics: ActionMetrics?
    }

    /// The action of a request that started, for ``requestEnded(_:failure:startedAt:)``.
    struct Action {
        fileprivate let index: Int
    }

    /// Requests running now, by action (actions with none left out).
    var inFlight: [String: Int] {
        shareIndex.compactMapValues { shares[$0].inFlight > 0 ? shares[$0].inFlight : nil }
    }

    init() {
        recorder = MetricsSystem.factory is NOOPMetricsHandler ? nil : Recorder()
    }

    /// Whether a backend records the metrics (the owner then times its requests).
    var isRecording: Bool { recorder != nil }

    // MARK: Events (on the owner's thread)

    /// A request for `name` (a name the handler table serves) started; hand what it returns to ``requestEnded``.
    func requestStarted(_ name: String) -> Action {
        let index: Int
        if let last = lastIndex, name == lastName {
            index = last
        } else if let known = shareIndex[name] {
            index = known
        } else {
            index = shares.count
            shares.append(Share(metrics: recorder.map { _ in ActionMetrics(name) }))
            shareIndex[name] = index
        }
        if index != lastIndex {
            lastName = name
            lastIndex = index
        }
        shares[index].inFlight += 1
        shares[index].metrics?.inFlight.increment()
        return Action(index: index)
    }

    /// `failure` is nil for a result, else the error's code; `startedAt` is set when ``isRecording``.
    func requestEnded(_ action: Action, failure code: BridgeError.Code?, startedAt: ContinuousClock.Instant?) {
        totals.requests += 1
        if code != nil { totals.failed += 1 }
        shares[action.index].inFlight -= 1
        guard let metrics = shares[action.index].metrics else { return }
        metrics.inFlight.decrement()
        metrics.ended(code).increment()
        if let startedAt {
            let elapsed = ContinuousClock.now - startedAt
            metrics.duration.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        }
    }

    func eventStarted() {
        eventsInFlight += 1
        recorder?.eventsInFlight.increment()
    }

    func eventEnded() {
        totals.events += 1
        eventsInFlight -= 1
        recorder?.eventsInFlight.decrement()
    }

    func refused(_ code: BridgeError.Code) {
        let reason = Refusal(code)
        totals.refusals[reason, default: 0] += 1
        recorder?.refusals[reason]?.increment()
    }

    func received(bytes: Int, over transport: Transport) {
        totals.bytesIn += bytes
        recorder?.bytesIn[transport].increment(by: bytes)
    }

    func sent(bytes: Int, over transport: Transport) {
        totals.bytesOut += bytes
        recorder?.bytesOut[transport].increment(by: bytes)
    }

    func progressSent(coalesced: Int) {
        totals.progressSent += 1
        totals.progressCoalesced += coalesced
        recorder?.progressSent.increment()
        if coalesced > 0 { recorder?.progressCoalesced.increment(by: coalesced) }
    }

    func broadcast(delivered: Int, skipped: Int) {
        totals.broadcastsDelivered += delivered
        totals.broadcastsSkipped += skipped
        recorder?.broadcastsDelivered.increment(by: delivered)
        recorder?.broadcastsSkipped.increment(by: skipped)
    }

    func sessionOpened(transport: Transport) { recorder?.sessions[transport]?.increment() }
    func sessionEnded(transport: Transport) { recorder?.sessions[transport]?.decrement() }

    /// How a session reached the host: the `transport` label of sessions and bytes.
    enum Transport: String, CaseIterable, Sendable {
        case zmq
        case websocket
    }
}

extension Telemetry {
    /// The swift-metrics objects that are not per action, made once. Names follow Prometheus' conventions (`_total`, `_bytes`, `_seconds`).
    private final class Recorder: @unchecked Sendable {
        let eventsInFlight = Meter(label: "zerobridge_events_in_flight")
        let bytesIn = ByTransport(label: "zerobridge_received_bytes_total")
        let bytesOut = ByTransport(label: "zerobridge_sent_bytes_total")
        let progressSent = Counter(label: "zerobridge_progress_sent_total")
        let progressCoalesced = Counter(label: "zerobridge_progress_coalesced_total")
        let broadcastsDelivered = Counter(label: "zerobridge_broadcasts_delivered_total")
        let broadcastsSkipped = Counter(label: "zerobridge_broadcasts_skipped_total")
        let refusals = Dictionary(uniqueKeysWithValues: Refusal.allCases.map {
            ($0, Counter(label: "zerobridge_refusals_total", dimensions: [("reason", $0.rawValue)]))
        })
        let sessions = Dictionary(uniqueKeysWithValues: Transport.allCases.map {
            ($0, Meter(label: "zerobridge_sessions", dimensions: [("transport", $0.rawValue)]))
        })
        /// An outcome label from a bounded set: `ok`, a protocol code, or `other` for a code of the app's own.
        static func outcome(_ code: BridgeError.Code?) -> String {
            guard let code else { return "ok" }
            return BridgeError.Code.protocolCodes.contains(code) ? code.rawValue : "other"
        }
    }

    /// One counter per transport, reached without hashing (twice a request).
    private struct ByTransport {
        let zmq: Counter
        let websocket: Counter

        init(label: String) {
            zmq = Counter(label: label, dimensions: [("transport", Transport.zmq.rawValue)])
            websocket = Counter(label: label, dimensions: [("transport", Transport.websocket.rawValue)])
        }

        subscript(transport: Transport) -> Counter {
            switch transport {
            case .zmq: zmq
            case .websocket: websocket
            }
        }
    }

    /// By the handler table's action names, never a name a peer sent that the table lacks.
    final class ActionMetrics {
        let name: String
        let inFlight: Meter
        let duration: Timer
        private var outcomes: [String: Counter] = [:]
        /// The `ok` counter, most requests' outcome, kept beside the table (no hashing for it).
        private var succeeded: Counter?

        init(_ name: String) {
            self.name = name
            inFlight = Meter(label: "zerobridge_requests_in_flight", dimensions: [("action", name)])
            duration = Timer(label: "zerobridge_request_duration_seconds", dimensions: [("action", name)])
        }

        /// The counter of requests that ended with `code` (nil: a result).
        func ended(_ code: BridgeError.Code?) -> Counter {
            if code == nil, let succeeded { return succeeded }
            let outcome = Recorder.outcome(code)
            if let counter = outcomes[outcome] { return counter }
            let counter = Counter(label: "zerobridge_requests_total", dimensions: [("action", name), ("outcome", outcome)])
            outcomes[outcome] = counter
            if code == nil { succeeded = counter }
            return counter
        }
    }
}

extension BridgeError.Code {
    /// The codes SPEC section 8 defines.
    static let protocolCodes: Set<BridgeError.Code> = [
        .badMessage, .unsupportedVersion, .unknownAction, .invalidPayload, .handlerGone, .handlerError, .timeout,
        .cancelled, .peerLost, .duplicateID, .tooLarge, .overloaded, .notAllowed, .unauthorized, .unknownJob,
        .interrupted, .suspended, .journalFull, .nameTaken, .unreachable,
    ]
}
