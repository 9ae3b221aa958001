import CZeroMQ

/// A CURVE key pair in Z85 text (40 characters each), for encrypted, authenticated connections.
///
/// For example:
/// ```swift
/// let server = try CurveKeyPair.generate()
/// try router.set(.curveServer(true), .curveSecretKey(server.secretKey))
/// try dealer.set(.curveServerKey(server.publicKey), .curvePublicKey(client.publicKey), .curveSecretKey(client.secretKey))
/// ```
public struct CurveKeyPair: Sendable, Hashable {
    public var publicKey: String
    public var secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A new random key pair. Throws `ENOTSUP` when libzmq was built without CURVE.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        try check(zmq_curve_keypair(&publicKey, &secretKey), "zmq_curve_keypair")
        return CurveKeyPair(publicKey: String(nulTerminated: publicKey), secretKey: String(nulTerminated: secretKey))
    }

    /// The public key that belongs to a secret key.
    public static func publicKey(forSecretKey secretKey: String) throws(ZMQError) -> String {
        var publicKey = [CChar](repeating: 0, count: 41)
        try check(zmq_curve_public(&publicKey, secretKey), "zmq_curve_public")
        return String(nulTerminated: publicKey)
    }
}

/// Z85, ZeroMQ's printable encoding of binary keys (RFC 32): 4 bytes become 5 characters.
public enum Z85 {
    /// Encodes bytes whose count is a multiple of 4; throws `EINVAL` otherwise.
    public static func encode(_ bytes: [UInt8]) throws(ZMQError) -> String {
        guard bytes.count % 4 == 0 else { throw ZMQError(code: EINVAL, operation: "Z85.encode: length not a multiple of 4") }
        var text = [CChar](repeating: 0, count: bytes.count * 5 / 4 + 1)
        guard zmq_z85_encode(&text, bytes, bytes.count) != nil else { throw ZMQError.last("zmq_z85_encode") }
        return String(nulTerminated: text)
    }

    /// Decodes text whose length is a multiple of 5; throws `EINVAL` for a bad length or character.
    public static func decode(_ text: String) throws(ZMQError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count % 5 == 0 else { throw ZMQError(code: EINVAL, operation: "Z85.decode: length not a multiple of 5") }
        // zmq_z85_decode does not reject characters outside the alphabet; check them here.
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
        guard utf8.allSatisfy(alphabet.contains) else { throw ZMQError(code: EINVAL, operation: "Z85.decode: invalid character") }
        var bytes = [UInt8](repeating: 0, count: utf8.count * 4 / 5)
        guard zmq_z85_decode(&bytes, text) != nil else { throw ZMQError.last("zmq_z85_decode") }
        return bytes
    }
}
