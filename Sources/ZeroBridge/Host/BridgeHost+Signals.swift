import Foundation

extension BridgeHost {
    /// Serves until the process gets SIGINT or SIGTERM, then shuts down gracefully: says `bye` to the peers and
    /// removes the connection file (with its key). For a host started without a swift-service-lifecycle
    /// `ServiceGroup` (which traps the signals itself, then ends ``run()``).
    ///
    /// The signals are trapped before the host starts, so a stop that comes right after it is listening is not lost;
    /// they stay trapped afterwards (one ``ShutdownSignal`` per process). For example:
    ///
    /// ```swift
    /// let host = BridgeHost(configuration: .init(endpoint: "tcp://127.0.0.1:5555", name: "etl"))
    /// try host.register(importer)
    /// try await host.runUntilSignalled()   // Ctrl-C or `kill` ends it cleanly
    /// ```
    public func runUntilSignalled(_ signals: [Int32] = [SIGINT, SIGTERM]) async throws {
        let stop = ShutdownSignal(trapping: signals)
        try start()
        await stop.wait()
        await shutdown()
    }
}
