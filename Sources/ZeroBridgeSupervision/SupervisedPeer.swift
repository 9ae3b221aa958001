import ZeroBridge

/// A peer program a host launches and keeps running (SPEC 10.1): what to run, and how patiently to supervise it.
///
/// The program finds its host through the environment, never its command line: `ZEROBRIDGE_CONNECTION_FILE` names a
/// connection file written for it alone (mode 0600, in a folder only this user can enter), and `ZEROBRIDGE_PEER_NAME`
/// is the name it must say `hello` with.
///
/// For example:
/// ```swift
/// var etl = SupervisedPeer(name: "etl", executable: "python3", arguments: ["-m", "etl.peer"])
/// etl.environment = ["ETL_DATA": "/srv/data"]
/// etl.readyTimeout = .seconds(20)
/// let handle = try host.supervise(etl)
/// ```
public struct SupervisedPeer: Sendable {
    /// The name the program must say `hello` with.
    public var name: String
    /// A path, or a name looked up in `PATH`.
    public var executable: String
    /// The program's arguments (never the endpoint or keys: those reach it through its environment).
    public var arguments: [String]
    /// Added to the host's own environment.
    public var environment: [String: String] = [:]
    /// Where the program runs; nil: the host's working directory.
    public var workingDirectory: String?
    /// A program not welcomed this long after its start is hung: it is killed and started again.
    public var readyTimeout: Duration = .seconds(10)
    /// How long to wait before the first restart; it doubles with each restart, up to ``maxBackoff``, and starts over
    /// once the peer has been up for a minute.
    public var backoff: Duration = .milliseconds(250)
    /// The longest wait between restarts.
    public var maxBackoff: Duration = .seconds(8)
    /// More restarts than this within ``restartWindow``: the host gives up on the peer.
    public var restartLimit = 5
    /// The window ``restartLimit`` counts restarts in.
    public var restartWindow: Duration = .seconds(60)
    /// When stopping: how long to wait for the program to exit after `bye`, and again after SIGTERM, before SIGKILL.
    public var stopGrace: Duration = .seconds(5)

    /// A program started as `executable` with `arguments` that must say `hello` as `name`.
    public init(name: String, executable: String, arguments: [String] = []) {
        self.name = name
        self.executable = executable
        self.arguments = arguments
    }

    /// A peer whose command is a line of shell, run as `/bin/sh -c 'exec COMMAND'`: `exec`, so that the signals the
    /// host sends reach the program itself, not a shell waiting for it.
    ///
    /// For example:
    /// ```swift
    /// try host.supervise(.shell(name: "etl", command: "node etl-peer.mjs --allow-evaluate"))
    /// ```
    public static func shell(name: String, command: String) -> SupervisedPeer {
        SupervisedPeer(name: name, executable: "/bin/sh", arguments: ["-c", "exec " + command])
    }
}
