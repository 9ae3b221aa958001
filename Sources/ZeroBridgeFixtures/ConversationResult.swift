/// How one conversation went: passed, or the first step that failed and a readable account of why.
public struct ConversationResult: Sendable {
    /// The conversation's description.
    public let description: String
    /// The file the conversation came from.
    public let file: String
    /// How long the run took.
    public let duration: Duration
    /// Nil when the conversation passed.
    public let failure: Failure?
    /// Why the conversation was not run at all (it restarts the host, and the runner cannot): neither passed nor
    /// failed.
    public var notRun: String? = nil

    public var passed: Bool { failure == nil && notRun == nil }

    /// Why a conversation failed.
    public struct Failure: Sendable, CustomStringConvertible {
        /// The failing step's position, counted from 1 as people read a file (nil: before any step ran).
        public let step: Int?
        /// One line: the step and what went wrong (`step 4 (expect, client "peer"): $.error.code: expected ...`).
        public let summary: String
        /// More lines: the mismatching field's path, the expected pattern and the received body.
        public let details: [String]

        public var description: String { ([summary] + details.map { "  " + $0 }).joined(separator: "\n") }
    }

    /// The duration in seconds, for reports.
    public var seconds: Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
