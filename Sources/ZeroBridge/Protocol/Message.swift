/// One protocol message body (frame 1 as a peer's DEALER sees it), as defined by protocol v1.
///
/// ``decode(_:maxDepth:)-(UnsafeRawBufferPointer,_)`` validates everything the protocol requires and says
/// precisely what is wrong; ``encoded()`` writes compact JSON with `"v":1` and `"type"` first. Encoding does not
/// validate: the sender is trusted to fill the fields within the protocol's limits.
enum Message: Sendable, Equatable {
    case hello(Hello)
    case welcome(Welcome)
    case request(Request)
    case response(Response)
    case progress(Progress)
    case event(Event)
    case cancel(id: String)
    case ping
    case pong
    case bye

    /// Peer -> host, first message of a named session.
    struct Hello: Sendable, Equatable {
        /// The peer's name (1 to 128 characters).
        var peer: String
        /// The actions the peer serves to the host.
        var actions: [String] = []
        /// Optional features the peer offers, such as `"evaluate"`.
        var features: [String] = []
        /// A session to resume.
        var session: String? = nil
        /// That session's secret, without which it is not resumed (64 lowercase hex digits).
        var resumeToken: String? = nil
        /// The heartbeat period the peer would like.
        var heartbeatMs: Int? = nil
        /// The hash of the peer's own catalogue (SPEC 7.8).
        var catalogue: String? = nil
        /// The broadcast topics the peer subscribes to (SPEC 7.15).
        var topics: [String] = []
    }

    /// Host -> peer, the answer to `hello`.
    struct Welcome: Sendable, Equatable {
        var host: String
        /// The session id in force.
        var session: String
        /// The session's secret, to resume it (absent from a 1.0/1.1 host).
        var resumeToken: String? = nil
        /// The actions the host serves.
        var actions: [String]
        /// The heartbeat period in force.
        var heartbeatMs: Int
        var maxMessageBytes: Int
        var maxInFlight: Int
        /// The hash of the host's catalogue (SPEC 7.8; absent from a host before 1.3).
        var catalogue: String? = nil
        /// Context the host gives every peer (an object).
        var info: JSONValue? = nil
        /// The version of the ZeroBridge library the host runs (SPEC 5, decision 44; absent from earlier hosts).
        var libraryVersion: String? = nil
        /// The host reads batches on this connection (SPEC 3.3, since 1.10; on WebSocket connections since 1.11).
        var batch = false
    }

    struct Request: Sendable, Equatable {
        /// Unique among the sender's requests in flight (1 to 128 characters).
        var id: String
        var action: String
        var payload: JSONValue = .null
        /// The caller's deadline, when it has one, in milliseconds from the callee's receipt.
        var timeoutMs: Int? = nil
        /// The same deadline as an instant: Unix time in milliseconds on the caller's clock (SPEC 7.3).
        var deadline: Int? = nil
        /// The caller wants progress events (written as `"progress":true`, omitted when false).
        var wantsProgress: Bool = false
        /// Names the job a request for a job action starts or attaches to (SPEC 7.16).
        var idempotencyKey: String? = nil
        /// The caller's W3C trace context, when valid (SPEC 7.18).
        var trace: TraceHeaders? = nil
    }

    struct Response: Sendable, Equatable {
        /// The request's id; nil only when answering a message whose id could not be read.
        var id: String?
        var outcome: Result<JSONValue, BridgeError>
    }

    /// Host -> caller, before the response (`ProgressMessage`, package-visible for the jobs module).
    typealias Progress = ProgressMessage

    /// Fire-and-forget: never answered.
    struct Event: Sendable, Equatable {
        var action: String
        var payload: JSONValue = .null
        /// The topic a host broadcast it on (SPEC 7.15).
        var topic: String? = nil
        /// The sender's W3C trace context, when valid (SPEC 7.18).
        var trace: TraceHeaders? = nil
    }

    /// The value of the body's `type` field.
    enum Kind: String, Sendable, CaseIterable {
        case hello, welcome, request, response, progress, event, cancel, ping, pong, bye
    }

    var kind: Kind {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .request: .request
        case .response: .response
        case .progress: .progress
        case .event: .event
        case .cancel: .cancel
        case .ping: .ping
        case .pong: .pong
        case .bye: .bye
        }
    }

    /// The request id the message carries (request, response, progress, cancel), if any.
    var id: String? {
        switch self {
        case .request(let request): request.id
        case .response(let response): response.id
        case .progress(let progress): progress.id
        case .cancel(let id): id
        default: nil
        }
    }
}

/// Why a body was rejected: the error to answer with (`bad_message` or `unsupported_version`) and the
/// offending message's id when it could be read (a string of 1 to 128 characters), to echo in the response.
struct DecodeFailure: Error, Sendable, Equatable, CustomStringConvertible {
    var id: String?
    var error: BridgeError

    /// The response that answers the rejected message.
    var response: Message { .response(.init(id: id, outcome: .failure(error))) }

    var description: String { id.map { "\(error) (id '\($0)')" } ?? error.description }
}

extension Message {
    static let maxNameLength = BridgeName.maxLength

    static func isValidName(_ name: String) -> Bool { BridgeName.isValid(name) }
}

/// The rule for ids, action names, peer names and codes, for every module of the package.
package enum BridgeName {
    /// The most characters (Unicode scalars) an id, action or peer name may have.
    package static let maxLength = 128

    /// Whether `name` has 1 to 128 characters, counted as Unicode scalars (what JSON strings are made of, and
    /// what every language can count the same way).
    package static func isValid(_ name: String) -> Bool {
        let bytes = name.utf8.count
        if bytes == 0 { return false }
        if bytes <= maxLength { return true }  // never more scalars than bytes
        return name.unicodeScalars.count <= maxLength
    }
}

/// One progress message (SPEC 7.4): `Message.Progress` inside the protocol layer.
package struct ProgressMessage: Sendable, Equatable {
    package var id: String
    /// 1 for a request's first progress event, then increasing by 1.
    package var seq: Int
    package var payload: JSONValue = .null
    /// How many payloads the sender coalesced away since its previous progress message (SPEC 7.13).
    package var skipped: Int? = nil

    package init(id: String, seq: Int, payload: JSONValue = .null, skipped: Int? = nil) {
        self.id = id
        self.seq = seq
        self.payload = payload
        self.skipped = skipped
    }
}

