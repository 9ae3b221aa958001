// libFuzzer target for the JSON parser (Sources/ZeroBridge/Protocol/JSONParser.swift). `make fuzz` compiles it with
// swiftc together with the Protocol sources (one module, so the internal parser is reachable without changing the
// package), under -sanitize=fuzzer,address: an out-of-bounds read of the borrowed bytes is a crash too.
//
// Besides "never crashes", what the parser accepts must survive a round trip: written back, it parses to an equal
// value, and writing that gives the same bytes.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    // The runtime's depth (64) and the deepest the parser supports (512) take different paths on deep input.
    _ = try? JSONValue.parse(bytes)
    guard let value = try? JSONValue.parse(bytes, maxDepth: JSONValue.maxSupportedDepth) else { return 0 }
    let written = value.serialized()
    let reparsed: JSONValue
    do {
        reparsed = try JSONValue.parse(written, maxDepth: JSONValue.maxSupportedDepth)
    } catch {
        fatalError("an accepted value, written back, does not parse: \(error)")
    }
    precondition(reparsed == value, "an accepted value does not survive writing and parsing again")
    precondition(reparsed.serialized() == written, "writing a reparsed value gives other bytes")
    return 0
}
