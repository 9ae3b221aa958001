/// An app's error that says what a caller sees when a handler throws it: a code, a message and optional data.
///
/// A handler that throws any other error (one that is neither a ``BridgeError`` nor this) answers `handler_error`
/// naming only the error's type; its description, which may name internal paths or state, stays in the host's log
/// unless the host sets ``BridgeHost/Configuration/revealsErrorDescriptions``. Modelled on grpc-swift's
/// `RPCErrorConvertible`.
///
/// For example:
///
/// ```swift
/// enum ImportFailure: BridgeErrorConvertible {
///     case notFound(path: String)
///     var bridgeErrorCode: BridgeError.Code { .invalidPayload }
///     var bridgeErrorMessage: String {
///         switch self { case .notFound(let path): "no file at \(path)" }
///     }
/// }
/// ```
public protocol BridgeErrorConvertible: Error {
    /// The `error.code` the caller gets.
    var bridgeErrorCode: BridgeError.Code { get }
    /// The `error.message` the caller gets.
    var bridgeErrorMessage: String { get }
    /// The `error.data` the caller gets; nil (the default) sends none.
    var bridgeErrorData: JSONValue? { get }
}

extension BridgeErrorConvertible {
    public var bridgeErrorData: JSONValue? { nil }
}

extension BridgeError {
    /// What a handler's (or job's) thrown error answers (SPEC 8, `handler_error`): a ``BridgeError`` as it is, a
    /// ``BridgeErrorConvertible`` as it says, anything else `handler_error` with its type in `data.type` and, only
    /// when `revealingDescription`, its description as the message.
    package static func answering(_ error: any Error, revealingDescription: Bool) -> BridgeError {
        switch error {
        case let error as BridgeError:
            return error
        case let error as any BridgeErrorConvertible:
            return BridgeError(error.bridgeErrorCode, error.bridgeErrorMessage, data: error.bridgeErrorData)
        default:
            let type = errorTypeName(error)
            let message = revealingDescription
                ? String(describing: error)
                : "the handler failed with \(type) (the host logged what it said)"
            return BridgeError(.handlerError, message, data: ["type": .string(type)])
        }
    }

    /// The name of an error's type (`FileError`), without its module or enclosing types: what a caller may see.
    package static func errorTypeName(_ error: any Error) -> String {
        String(describing: type(of: error))
    }

    /// Whether ``answering(_:revealingDescription:)`` kept the error's own words (an error the app meant for callers).
    package static func isAppChosen(_ error: any Error) -> Bool {
        error is BridgeError || error is any BridgeErrorConvertible
    }
}
