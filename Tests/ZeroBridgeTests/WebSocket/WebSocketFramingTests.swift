import Foundation
import NIOCore
import Testing
@testable import ZeroBridge

/// One case of `protocol/fixtures/websocket-frames.json` (SPEC 14.1c): a payload, and its frames or its refusal.
struct WebSocketFramesCase: Sendable, CustomTestStringConvertible {
    var name: String
    var payload: [UInt8]
    /// nil: refused (bad_message).
    var frames: [[UInt8]]?
    /// A batch (`"subprotocol": "zerobridge.1.batch"`, since 1.9): its messages, nil for one refused alone; the
    /// whole case nil when the batch is refused.
    var batch: [[[UInt8]]?]?
    var isBatch: Bool
    var why: String

    var testDescription: String { name }

    /// Found from this file's place in the repository (Tests/ZeroBridgeTests/WebSocket/ -> the root).
    static let file = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/fixtures/websocket-frames.json")

    static let all: [WebSocketFramesCase] = {
        guard let data = try? Data(contentsOf: file), let document = try? JSONValue.parse([UInt8](data)),
              let items = document.arrayValue else { return [] }
        return items.compactMap { item in
            guard let name = item["name"]?.stringValue, let hex = item["hex"]?.stringValue,
                  let why = item["why"]?.stringValue, let payload = bytes(hex) else { return nil }
            let frames = item["frames"]?.arrayValue?.compactMap { $0.stringValue.flatMap(bytes) }
            let messages = item["messages"]?.arrayValue?.map { entry in entry.arrayValue?.compactMap { $0.stringValue.flatMap(bytes) } }
            return WebSocketFramesCase(name: name, payload: payload, frames: frames, batch: messages,
                                       isBatch: item["subprotocol"]?.stringValue == WebSocketListener.batchSubprotocol, why: why)
        }
    }()

    static func bytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        return stride(from: 0, to: digits.count, by: 2).compactMap { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16) }
    }
}

@Suite struct WebSocketFramingTests {
    @Test func theFixtureFileLoads() {
        #expect(WebSocketFramesCase.all.count >= 10, "\(WebSocketFramesCase.file.path)")
        #expect(WebSocketFramesCase.all.filter(\.isBatch).count >= 8)
        #expect(WebSocketFramesCase.all.contains { $0.frames == nil } && WebSocketFramesCase.all.contains { $0.frames != nil })
    }

    @Test(arguments: WebSocketFramesCase.all.filter(\.isBatch))
    func batchFixtureCase(_ testCase: WebSocketFramesCase) {
        let decoded = WebSocketFraming.decodeBatch(ByteBuffer(bytes: testCase.payload))
        guard let expected = testCase.batch else {
            if case .success = decoded { Issue.record("decoded, but: \(testCase.why)") }
            return
        }
        guard case .success(let messages) = decoded else {
            Issue.record("refused whole, but: \(testCase.why)")
            return
        }
        #expect(messages.count == expected.count, "\(testCase.why)")
        for (message, want) in zip(messages, expected) {
            switch (message, want) {
            case (.success(let got), let want?): #expect(got.map(\.bytes) == want, "\(testCase.why)")
            case (.failure, nil): break
            default: Issue.record("entry \(message) where \(String(describing: want)) was meant: \(testCase.why)")
            }
        }
        guard expected.allSatisfy({ $0 != nil }) else { return }
        var encoded = ByteBuffer()
        for case let frames? in expected {
            var entry = WebSocketFraming.encode(signature: frames[0], frames: Array(frames.dropFirst()), asBatchEntry: true,
                                                allocator: ByteBufferAllocator())
            encoded.writeBuffer(&entry)
        }
        #expect(Array(encoded.readableBytesView) == testCase.payload, "\(testCase.why)")
    }

    @Test func aBatchHoldsAtMostAThousandMessages() {
        let ping = WebSocketFraming.encode(signature: [], frames: [Array(#"{"v":1,"type":"ping"}"#.utf8)], asBatchEntry: true,
                                           allocator: ByteBufferAllocator())
        var most = ByteBuffer()
        for _ in 0..<WebSocketFraming.maxBatchMessages { most.writeImmutableBuffer(ping) }
        guard case .success(let messages) = WebSocketFraming.decodeBatch(most) else {
            Issue.record("1,000 messages were refused")
            return
        }
        #expect(messages.count == WebSocketFraming.maxBatchMessages)
        most.writeImmutableBuffer(ping)
        guard case .failure(let refusal) = WebSocketFraming.decodeBatch(most) else {
            Issue.record("1,001 messages were decoded")
            return
        }
        #expect(refusal.reason.contains("at most 1000"))
    }

    /// Seeded random batches, whole and then cut, bit-flipped or given a stray length, against a reference written
    /// from SPEC 3.2 in a few lines: the same verdict for the batch, and for each of its messages, every time.
    @Test func randomBatchesGetTheReferenceVerdicts() {
        var generator = SplitMix64(seed: 51)
        for _ in 0..<5_000 {
            var payload: [UInt8] = []
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                let frames = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                    (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                }
                let entry = Self.lengthPrefixed(frames)
                payload += Self.lengthPrefixed([entry])
            }
            switch Int.random(in: 0...3, using: &generator) {
            case 1 where !payload.isEmpty: payload.removeLast(Int.random(in: 1...payload.count, using: &generator))
            case 2 where !payload.isEmpty: payload[Int.random(in: 0..<payload.count, using: &generator)] ^= 1 << UInt8.random(in: 0...7, using: &generator)
            case 3: payload += (0..<Int.random(in: 1...6, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            default: break
            }
            let expected = Self.referenceBatch(payload)
            switch WebSocketFraming.decodeBatch(ByteBuffer(bytes: payload)) {
            case .failure:
                #expect(expected == nil, "refused whole, but the reference reads it: \(payload)")
            case .success(let messages):
                guard let expected else {
                    Issue.record("read, but the reference refuses it whole: \(payload)")
                    continue
                }
                #expect(messages.map { try? $0.get().map(\.bytes) } == expected, "\(payload)")
            }
        }
    }

    private static func lengthPrefixed(_ parts: [[UInt8]]) -> [UInt8] {
        parts.flatMap { part in withUnsafeBytes(of: UInt32(part.count).bigEndian, Array.init) + part }
    }

    /// SPEC 3.2 read plainly: a payload's length-prefixed parts, or nil when a length is cut short or runs past the end.
    private static func referenceParts(_ payload: [UInt8]) -> [[UInt8]]? {
        var parts: [[UInt8]] = []
        var at = 0
        while at < payload.count {
            guard payload.count - at >= 4 else { return nil }
            let length = payload[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            at += 4
            guard length <= payload.count - at else { return nil }
            parts.append(Array(payload[at..<at + length]))
            at += length
        }
        return parts
    }

    /// A batch's messages (nil for one refused alone), or nil when the batch is refused whole.
    private static func referenceBatch(_ payload: [UInt8]) -> [[[UInt8]]?]? {
        guard let entries = referenceParts(payload), !entries.isEmpty, entries.count <= 1000 else { return nil }
        return entries.map { entry in referenceParts(entry).flatMap { $0.count >= 2 ? $0 : nil } }
    }

    @Test(arguments: WebSocketFramesCase.all.filter { !$0.isBatch })
    func fixtureCase(_ testCase: WebSocketFramesCase) {
        let decoded = WebSocketFraming.decode(ByteBuffer(bytes: testCase.payload))
        guard let frames = testCase.frames else {
            if case .success = decoded { Issue.record("decoded, but: \(testCase.why)") }
            return
        }
        switch decoded {
        case .success(let got): #expect(got.map(\.bytes) == frames, "\(testCase.why)")
        case .failure(let refusal): Issue.record("refused (\(refusal.reason)), but: \(testCase.why)")
        }
        let encoded = WebSocketFraming.encode(signature: frames[0], frames: Array(frames.dropFirst()), allocator: ByteBufferAllocator())
        #expect(Array(encoded.readableBytesView) == testCase.payload, "\(testCase.why)")
    }

    @Test func theFrameCountIsBounded() {
        let empty: [UInt8] = [0, 0, 0, 0]
        let most = Array([[UInt8]](repeating: empty, count: WebSocketFraming.maxFrames).joined())
        if case .failure(let refusal) = WebSocketFraming.decode(ByteBuffer(bytes: most)) { Issue.record("\(refusal.reason)") }
        guard case .failure(let refusal) = WebSocketFraming.decode(ByteBuffer(bytes: most + empty)) else {
            Issue.record("one frame past the bound was decoded")
            return
        }
        #expect(refusal.reason.contains("at most"))
    }
}

@Suite struct WebRootTests {
    /// A folder with a page, a link out of it and a file over the size bound; removed after the test.
    private func withRoot(_ body: (WebRoot, String) throws -> Void) throws {
        let base = URL(fileURLWithPath: scratchDirectory).appendingPathComponent("webroot-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let root = base + "/dist"
        try FileManager.default.createDirectory(atPath: root + "/assets", withIntermediateDirectories: true)
        try Data("<html><head></head></html>".utf8).write(to: URL(fileURLWithPath: root + "/index.html"))
        try Data("outside".utf8).write(to: URL(fileURLWithPath: base + "/secret"))
        try Data(repeating: 1, count: 2048).write(to: URL(fileURLWithPath: root + "/assets/big.bin"))
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: base + "/secret")
        try FileManager.default.createSymbolicLink(atPath: root + "/up", withDestinationPath: base)
        try body(WebRoot(directory: root, maxFileBytes: 1024), base)
    }

    @Test func theIndexIsServedForTheRootAndForFolders() throws {
        try withRoot { root, _ in
            guard case .success(let file) = root.open(urlPath: "/?x=1") else {
                Issue.record("no index")
                return
            }
            defer { close(file.descriptor) }
            #expect(file.isHTML && file.size == 26)
        }
    }

    @Test(arguments: ["/../secret", "/%2e%2e/secret", "/assets/..%2f..%2fsecret", "/link", "/up/secret", "/.hidden", "/a%00b"])
    func nothingOutsideIsOpened(_ path: String) throws {
        try withRoot { root, _ in
            if case .success(let file) = root.open(urlPath: path) {
                close(file.descriptor)
                Issue.record("\(path) was opened")
            }
        }
    }

    @Test func filesOverTheBoundAreRefused() throws {
        try withRoot { root, _ in
            #expect(root.open(urlPath: "/assets/big.bin").failure == .tooLarge)
            #expect(root.open(urlPath: "/missing.js").failure == .notFound)
        }
    }

    @Test(arguments: [(Duration.zero, 256), (.seconds(10), 0)])
    func optionsThatWouldCloseEveryConnectionAreRefused(_ idleTimeout: Duration, _ maxPending: Int) throws {
        var options = WebSocketOptions()
        options.idleTimeout = idleTimeout
        options.maxPendingConnections = maxPending
        var configuration = BridgeHost.Configuration(endpoint: "inproc://ws-options-\(UUID().uuidString.prefix(8))", name: "ws")
        configuration.webSocket = options
        configuration.signing = .key(.generate())
        let host = BridgeHost(configuration: configuration)
        let error = #expect(throws: BridgeError.self) { try host.start() }
        #expect(error?.message.contains("maxPendingConnections at least 1") == true)
    }

    @Test func theInjectionCannotEndItsScript() {
        let scripts = PageInjection.scripts(endpoint: "ws://127.0.0.1:1/zerobridge", key: "ab",
                                            info: ["name": "</script><script>alert(1)</script>\u{2028}"])
        #expect(scripts.components(separatedBy: "</script>").count == 3)  // only the two elements' own end tags
        #expect(!scripts.contains("\u{2028}"))
        let page = PageInjection.inject("<X>", into: Array("<!doctype html><HTML><Header></Header><HEAD lang=x><title>".utf8))
        #expect(String(decoding: page, as: UTF8.self) == "<!doctype html><HTML><Header></Header><HEAD lang=x><X><title>")
        #expect(String(decoding: PageInjection.inject("<X>", into: Array("<p>no head</p>".utf8)), as: UTF8.self) == "<X><p>no head</p>")
    }
}

private extension Result {
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
