/// A connection to a peer that does not go through the host's ZeroMQ socket (a WebSocket, SPEC 2.2): the other half
/// of the seam that ``SocketThread`` is for the host.
///
/// Both kinds of connection meet the host's sessions at the same two points, on the socket thread: what a peer sends
/// arrives as `[routing id, frame 0, body, attachments...]` (``SocketThread/deliver(_:)`` for an attached connection,
/// the ROUTER for ZeroMQ), and what a session sends leaves through ``SocketThread/send(_:after:via:)`` with the
/// routing id in front, which the thread routes to the attached connection of that id, or else to the socket. So the
/// session logic (hello, names, resume, heartbeats, limits, flow control) never knows which way a peer came.
protocol AttachedConnection: AnyObject, Sendable {
    /// Takes one message for the peer (frame 0, then frames 1..n), unless its own queue is over its bound
    /// (`refused`: the session's outbox keeps it and tries again, SPEC 7.13) or the connection is gone.
    /// Called on the socket thread only, in send order.
    func transmit(signature: [UInt8], frames: [[UInt8]]) -> SocketThread.Transmission
}
