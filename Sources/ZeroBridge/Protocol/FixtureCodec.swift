/// The protocol layer's parser and body validation, for the fixture runner (`@_spi(Fixtures) import ZeroBridge`).
///
/// Fixture files and the bodies a host sends are judged by the same code the runtime uses, so a fixture run
/// and the runtime cannot disagree about what JSON or a valid message is.
@_spi(Fixtures)
public enum FixtureCodec {
    /// Parses one JSON text strictly (see `JSONValue.parse`); the error says what is wrong and at which byte.
    ///
    /// For example:
    /// ```swift
    /// let value = try FixtureCodec.parse(Array(#"{"a": [1, 2.5]}"#.utf8), maxDepth: 512)
    /// ```
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws(BridgeError) -> JSONValue {
        do throws(JSONParseError) {
            return try JSONValue.parse(bytes, maxDepth: min(maxDepth, JSONValue.maxSupportedDepth))
        } catch {
            throw BridgeError(.badMessage, error.description)
        }
    }

    /// Why a receiver refuses `body` (`bad_message` or `unsupported_version`, with the reason as the message),
    /// or nil when it is a valid protocol v1 body.
    public static func refusal(of body: [UInt8]) -> BridgeError? {
        switch Message.decode(body) {
        case .success: nil
        case .failure(let failure): failure.error
        }
    }
}
