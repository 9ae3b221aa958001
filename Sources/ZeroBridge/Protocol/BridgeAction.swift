/// A typed action: a name plus the Codable types of its payload, result and progress.
///
/// Both sides must agree on the name and on the JSON shapes; the types only give them Swift names.
/// For example:
///
/// ```swift
/// struct ImportFile: BridgeAction {
///     static let name = "importFile"
///     struct Payload: Codable, Sendable { var path: String }
///     struct Result: Codable, Sendable { var records: Int }
///     struct Progress: Codable, Sendable { var done: Int; var total: Int }
/// }
/// ```
public protocol BridgeAction: Sendable {
    /// What a caller sends (`request.payload`), decoded and checked before the handler runs.
    associatedtype Payload: Codable & Sendable
    /// What the handler answers (`response.result`).
    associatedtype Result: Codable & Sendable
    /// The type of the action's progress events; untyped JSON unless the action says otherwise.
    associatedtype Progress: Codable & Sendable = JSONValue
    /// The action's name on the wire (1 to 128 characters; names starting with `$` are reserved).
    static var name: String { get }
    /// One line for people, given with the action's schemas by `$describe` (SPEC 7.8). Empty unless said.
    static var summary: String { get }
}

extension BridgeAction {
    public static var summary: String { "" }
}
