/// The telemetry hooks one request goes through, for `make bench`: not part of the API
/// (`@_spi(Benchmarks) import ZeroBridge` to reach it).
@_spi(Benchmarks)
public enum TelemetryBenchmark {
    /// Runs the hooks a host's link calls for `requests` echo requests (bytes in, started, ended with its latency,
    /// bytes out), against whatever metrics backend the process bootstrapped, and returns how long they took.
    public static func hooks(requests: Int) -> Duration {
        let telemetry = Telemetry()
        return ContinuousClock().measure {
            for _ in 0 ..< requests {
                telemetry.received(bytes: 130, over: .zmq)
                let startedAt = telemetry.isRecording ? ContinuousClock.now : nil
                let action = telemetry.requestStarted("echo")
                telemetry.requestEnded(action, failure: nil, startedAt: startedAt)
                telemetry.sent(bytes: 120, over: .zmq)
            }
        }
    }
}
