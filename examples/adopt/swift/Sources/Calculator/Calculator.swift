import ZeroBridge

/// Adds two integers.
public struct Add: BridgeAction {
    public static let name = "add"
    public struct Payload: Codable, Sendable {
        public var a: Int
        public var b: Int
        public init(a: Int, b: Int) { self.a = a; self.b = b }
    }
    public typealias Result = Int
}

/// Counts from 1 to `n`, one progress event per number.
public struct CountTo: BridgeAction {
    public static let name = "countTo"
    public struct Payload: Codable, Sendable {
        public var n: Int
        public init(n: Int) { self.n = n }
    }
    public struct Progress: Codable, Sendable { public var i: Int }
    public typealias Result = Int
}

/// A host serving ``Add`` and ``CountTo`` on `endpoint` (not started yet).
public func makeCalculatorHost(endpoint: String) throws -> BridgeHost {
    let host = BridgeHost(configuration: .init(endpoint: endpoint, name: "calculator"))
    try host.handle(Add.self) { payload, _ in payload.a + payload.b }
    try host.handle(CountTo.self) { payload, request in
        for i in stride(from: 1, through: payload.n, by: 1) { try await request.progress(CountTo.Progress(i: i)) }
        return payload.n
    }
    return host
}
