/// What JSON cannot carry (SPEC 7.14), found before sending: a Swift `Double` may be NaN or infinite, and a
/// `JSONValue` built by hand may nest deeper than a receiver reads. Written out, NaN would become `null`, a value
/// nobody sent; refusing names the path instead.
extension JSONValue {
    /// The deepest nesting a receiver reads (SPEC 4): the body object is level 1.
    static let maxDepth = 64

    /// Why the value cannot be sent, naming the path of the first offending part under `root` (for example
    /// `payload.items[3]: NaN cannot be carried in JSON`); nil when it can. `depth` is the level of the value in
    /// its message body, which is level 1 (SPEC 4).
    func uncarriable(at root: String, depth: Int = 2) -> String? {
        switch self {
        case .double(let number) where !number.isFinite:
            return "\(root): \(number.isNaN ? "NaN" : "an infinity") cannot be carried in JSON"
        case .array(let items):
            guard depth <= Self.maxDepth else { return "\(root): nested deeper than \(Self.maxDepth) levels" }
            for (index, item) in items.enumerated() {
                if let reason = item.uncarriable(at: "\(root)[\(index)]", depth: depth + 1) { return reason }
            }
        case .object(let members):
            guard depth <= Self.maxDepth else { return "\(root): nested deeper than \(Self.maxDepth) levels" }
            for (name, member) in members {
                if let reason = member.uncarriable(at: "\(root).\(name)", depth: depth + 1) { return reason }
            }
        default:
            break
        }
        return nil
    }

    /// Throws `code` with ``uncarriable(at:depth:)``'s reason when the value cannot be sent.
    package func checkCarriable(as root: String, _ code: BridgeError.Code) throws(BridgeError) {
        if let reason = uncarriable(at: root) { throw BridgeError(code, reason) }
    }
}
