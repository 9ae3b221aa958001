import Foundation
import Testing
import TestSupport
@testable import ZeroMQ

/// The repository's root, found from this file so the tests run from any directory.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite("Interop with pyzmq", .startsProcesses, .timeLimit(.minutes(3)))
struct PyzmqInteropTests {
    @Test("a pyzmq DEALER in a Python child process talks to our ROUTER", arguments: [Transport.ipc, .tcp])
    func pyzmqDealer(transport: Transport) async throws {
        let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "run `make deps` to create .venv with pyzmq")

        let context = try Context()
        let (router, endpoint) = try bound(.router, context, transport)
        // Python starts in seconds on a loaded machine; the wait happens on a thread of its own.
        try router.set(.receiveTimeout(milliseconds: patienceMilliseconds))
        let script = """
        import sys, zmq
        ctx = zmq.Context()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.ROUTING_ID, b"python")
        s.setsockopt(zmq.RCVTIMEO, \(patienceMilliseconds))  # a bound for a loaded machine, not a window
        s.setsockopt(zmq.LINGER, 1000)
        s.connect(sys.argv[1])
        s.send_multipart([b"", b"hello from python", bytes(range(256)) * 1000])
        reply = s.recv_multipart()
        assert reply == [b"", b"HELLO FROM PYTHON", b"\\x00" * 70000], reply[:2]
        print("ok", len(reply))
        """
        let process = try SpawnedProcess.capturingOutput(python, ["-c", script, endpoint])

        let message = try #require(try await onOwnThread { try router.receiveBytes() })
        #expect(message[0] == bytes("python"))
        #expect(message[1] == [])
        #expect(message[2] == bytes("hello from python"))
        let sent: [UInt8] = (0..<1000).flatMap { _ in (0..<256).map { UInt8($0) } }
        #expect(message[3] == sent)
        try router.send([message[0], [], bytes("HELLO FROM PYTHON"), [UInt8](repeating: 0, count: 70000)])

        #expect(await waitForExit(process))
        let text = String(decoding: process.output(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "python said: \(text)")
        #expect(text.contains("ok 3"))
    }
}
