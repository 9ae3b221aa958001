/// A side that can be called: a ``RemotePeer`` (the host calling a peer, the `evaluateJavaScript` role) or a
/// ``BridgePeer`` (a peer calling its host, the `postMessage` role).
///
/// For example:
/// ```swift
/// let sum = try await peer.call("add", ["a": 1, "b": 2], timeout: .seconds(2))
/// let call = peer.stream(ImportFile.self, .init(path: "/data"))
/// for try await step in call.progress { print(step.done, "of", step.total) }
/// print(try await call.result.records)
/// ```
public protocol BridgeCaller: Sendable {
    /// Sends a `request` and waits for its `response`. `timeout` nil means the side's default. Progress events
    /// are passed to `onProgress` in order (nil: progress is not asked for). Cancelling the calling task sends
    /// `cancel` and fails the call with `cancelled`.
    func call(_ action: String, _ payload: JSONValue, timeout: Duration?,
              onProgress: (@Sendable (JSONValue) -> Void)?) async throws -> JSONValue

    /// Sends an `event`: fire and forget, never answered.
    func post(_ action: String, _ payload: JSONValue) throws
}

extension BridgeCaller {
    /// Calls an untyped action.
    public func call(_ action: String, _ payload: JSONValue = nil, timeout: Duration? = nil) async throws -> JSONValue {
        try await call(action, payload, timeout: timeout, onProgress: nil)
    }

    /// Calls a typed action.
    public func call<A: BridgeAction>(_ action: A.Type, _ payload: A.Payload, timeout: Duration? = nil) async throws -> A.Result {
        let result = try await call(A.name, try JSONValueEncoder().encode(payload), timeout: timeout, onProgress: nil)
        return try A.decodeResult(result)
    }

    /// Calls a typed action and streams its progress; the call starts at once.
    public func stream<A: BridgeAction>(_ action: A.Type, _ payload: A.Payload, timeout: Duration? = nil) -> BridgeCall<A.Progress, A.Result> {
        BridgeCall { onProgress in
            let result = try await call(A.name, try JSONValueEncoder().encode(payload), timeout: timeout) { value in
                onProgress(Swift.Result { try A.decodeProgress(value) })
            }
            return try A.decodeResult(result)
        }
    }

    /// Calls an untyped action and streams its progress; the call starts at once.
    public func stream(_ action: String, _ payload: JSONValue = nil, timeout: Duration? = nil) -> BridgeCall<JSONValue, JSONValue> {
        BridgeCall { onProgress in
            try await call(action, payload, timeout: timeout) { onProgress(.success($0)) }
        }
    }

    /// Sends a typed event.
    public func post<A: BridgeAction>(_ action: A.Type, _ payload: A.Payload) throws {
        try post(A.name, try JSONValueEncoder().encode(payload))
    }

    /// Runs a script on the other side (`$evaluate`, the `callAsyncJavaScript` role): `arguments` are bound as
    /// local names and the script's returned value is the result. The other side answers `not_allowed` unless
    /// its user turned evaluation on.
    public func evaluate(_ script: String, arguments: [String: JSONValue] = [:], timeout: Duration? = nil) async throws -> JSONValue {
        try await call("$evaluate", ["script": .string(script), "arguments": .object(arguments)], timeout: timeout, onProgress: nil)
    }

    /// The other side's catalogue (`$describe`, SPEC 7.8): `{"catalogue": hash, "actions": [...]}`, each action
    /// with its doc and the JSON Schemas of its payload, result and progress.
    public func describe(timeout: Duration? = nil) async throws -> JSONValue {
        try await call("$describe", nil, timeout: timeout, onProgress: nil)
    }

    /// The actions the other side serves (`$actions`).
    public func actions(timeout: Duration? = nil) async throws -> [String] {
        let list = try await call("$actions", nil, timeout: timeout, onProgress: nil)
        guard case .array(let items) = list else { throw BridgeError(.invalidPayload, "$actions did not return a list") }
        return items.compactMap(\.stringValue)
    }
}

/// A call in progress: its progress events as an async sequence, then its result.
///
/// The progress sequence ends when the response arrives. Cancelling the task that awaits ``result``, or
/// calling ``cancel()``, cancels the call.
public struct BridgeCall<Progress: Sendable, Result: Sendable>: Sendable {
    /// The call's progress events, in order; ends when the call ends (throwing if a progress event did not decode).
    public let progress: BridgeProgress<Progress>
    private let task: Task<Result, Error>

    package init(_ run: @escaping @Sendable (_ onProgress: @escaping @Sendable (Swift.Result<Progress, Error>) -> Void) async throws -> Result) {
        let channel = ProgressChannel<Progress>()
        progress = BridgeProgress(channel: channel)
        task = Task {
            defer { channel.finish() }
            return try await run { event in
                switch event {
                case .success(let value): channel.yield(value)
                case .failure(let error): channel.finish(throwing: error)
                }
            }
        }
    }

    /// The call's result, once the response has come.
    public var result: Result {
        get async throws {
            try await withTaskCancellationHandler { try await task.value } onCancel: { [task] in task.cancel() }
        }
    }

    /// Cancels the call: `cancel` goes to the other side and ``result`` throws `cancelled`.
    public func cancel() { task.cancel() }
}
