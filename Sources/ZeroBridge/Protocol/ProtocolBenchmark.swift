/// The protocol layer's hot path, for `zerobridge bench` and the tests: not part of the API
/// (`@_spi(Benchmarks) import ZeroBridge` to reach it).
@_spi(Benchmarks)
public enum ProtocolBenchmark {
    /// Runs `iterations` request/response exchanges through the codec as both sides see them: the caller
    /// encodes a ~100-byte request, the callee decodes it, encodes its response, and the caller decodes that.
    /// Returns how many exchanges came out right (so `iterations` when all is well).
    public static func requestResponseExchanges(_ iterations: Int) -> Int {
        var correct = 0
        var requestBuffer: [UInt8] = []
        var responseBuffer: [UInt8] = []
        for index in 0 ..< iterations {
            let id = "req-\(index)"
            let request = Message.request(.init(id: id, action: "add", payload: ["a": .int(index), "b": 2],
                                                timeoutMs: 5000, wantsProgress: false))
            requestBuffer.removeAll(keepingCapacity: true)
            request.write(to: &requestBuffer)
            guard case .success(.request(let received)) = Message.decode(requestBuffer),
                  let a = received.payload["a"]?.intValue, let b = received.payload["b"]?.intValue
            else { continue }
            let response = Message.response(.init(id: received.id, outcome: .success(.int(a + b))))
            responseBuffer.removeAll(keepingCapacity: true)
            response.write(to: &responseBuffer)
            guard case .success(.response(let answer)) = Message.decode(responseBuffer),
                  answer.id == id, case .success(.int(index + 2)) = answer.outcome
            else { continue }
            correct += 1
        }
        return correct
    }

    /// The host's share of an exchange, `iterations` times: decode a received ~100-byte request, encode the
    /// response. Returns the bytes of responses written (so the work cannot be optimized away).
    public static func hostSideExchanges(_ iterations: Int) -> Int {
        let request = Array(#"{"v":1,"type":"request","id":"c0ffee-1234","action":"add","payload":{"a":40,"b":2},"timeout_ms":5000}"#.utf8)
        var written = 0
        var responseBuffer: [UInt8] = []
        for _ in 0 ..< iterations {
            guard case .success(.request(let received)) = Message.decode(request),
                  let a = received.payload["a"]?.intValue, let b = received.payload["b"]?.intValue
            else { return -1 }
            responseBuffer.removeAll(keepingCapacity: true)
            Message.response(.init(id: received.id, outcome: .success(.int(a + b)))).write(to: &responseBuffer)
            written += responseBuffer.count
        }
        return written
    }
}
