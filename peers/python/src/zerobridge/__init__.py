"""ZeroBridge for Python: a peer that talks to a ZeroBridge host over ZeroMQ.

For example::

    import asyncio, zerobridge

    async def main():
        async with zerobridge.connect("tcp://127.0.0.1:5555", name="etl") as peer:
            print(await peer.call("add", {"a": 1, "b": 2}))

    asyncio.run(main())

``connect`` gives the async peer (pyzmq's ``zmq.asyncio``); ``connect_sync`` gives a blocking twin
with the same methods. ``connect(..., evaluate=True)`` lets the host run arbitrary Python code in
this process (``$evaluate``); it is off by default: leave it off unless you trust the host.
A host that requires CURVE is reached through its connection file (``curve_server_key``) or the
``curve_*`` arguments of ``connect``; ``peer.curve_public_key`` goes on the host's allow-list.
A connection file with a ``key`` (``zerobridge serve --connection-file`` writes one by default) makes
every message signed and checked (``peer.refused_messages`` counts what the peer refused).
"""

from __future__ import annotations

from .errors import (
    ERROR_CLASSES,
    ERROR_CODES,
    BridgeCancelled,
    BridgeError,
    BridgeTimeout,
    HandlerError,
    NameTaken,
    NotAllowed,
    PeerLost,
    UnknownAction,
    error_from_code,
)
from .link import RequestContext
from .peer import ConnectionInfo, Peer, Stream, connect, read_connection_file
from .sync import SyncPeer, SyncStream, connect_sync

__all__ = [
    "ERROR_CLASSES",
    "ERROR_CODES",
    "BridgeCancelled",
    "BridgeError",
    "BridgeTimeout",
    "ConnectionInfo",
    "HandlerError",
    "NameTaken",
    "NotAllowed",
    "Peer",
    "PeerLost",
    "RequestContext",
    "Stream",
    "SyncPeer",
    "SyncStream",
    "UnknownAction",
    "connect",
    "connect_sync",
    "error_from_code",
    "read_connection_file",
]
