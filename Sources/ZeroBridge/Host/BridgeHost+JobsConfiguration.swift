extension BridgeHost {
    /// How a host keeps its jobs (SPEC 7.16), once it serves one: `host.job(...)` comes with the ZeroBridgeJobs
    /// product, which journals them in SQLite (GRDB). A plain value, so that ``Configuration`` carries it in the core.
    public struct JobsConfiguration: Sendable {
        /// Where the job journal lives.
        public enum Journal: Sendable, Equatable {
            /// A private in-memory database: jobs outlive sessions, not the process (tests, and hosts that need no more).
            case inMemory
            /// A SQLite file (created when missing), in WAL mode: jobs survive the process being killed.
            case file(String)
        }

        /// How far a committed journal write survives (SPEC 7.16).
        public enum Durability: Sendable, Equatable {
            /// `synchronous=NORMAL`: every commit survives the process being killed; an OS crash or power loss may
            /// lose the latest ones (the database stays intact).
            case normal
            /// `synchronous=FULL`: an fsync per commit, so commits survive power loss too.
            case full
        }

        /// Where jobs are journaled; in memory unless given a file.
        public var journal: Journal = .inMemory
        /// How far a committed write survives: the process being killed (the default) or power loss too.
        public var durability: Durability = .normal
        /// How long a finished job's progress and outcome stay available to attach to.
        public var retention: Duration = .seconds(3600)
        /// Jobs running at once; a start over it is answered `overloaded`.
        public var maxRunning = 64
        /// Progress messages the journal keeps per job (the oldest are pruned past it, in batches).
        public var maxProgressPerJob = 100_000

        /// The defaults: an in-memory journal, jobs kept an hour, 64 running at once.
        public init() {}
    }
}
