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
Calls wait 30 s unless given a ``timeout`` (``timeout=None``: no limit). ``$describe`` answers the host with this
peer's catalogue, derived from its handlers' type hints; ``await peer.describe()`` fetches the host's.
``peer.subscribe(topic)`` receives the host's broadcasts on a topic (``connect(..., topics=[...])`` from the start);
an event handler's optional second argument, an ``EventContext``, says the topic. ``peer.host_info`` is the
``info`` the host's ``welcome`` carries.
Jobs (SPEC 7.16) outlive their caller: ``peer.start_job`` / ``attach_job`` / ``cancel_job`` / ``list_jobs``, and
``idempotency_key=`` on ``call`` and ``stream``; an attach's ``call.last_seq`` says where to attach again after a
disconnect.
A peer launched by a host (SPEC 10.1) connects with no target: ``zerobridge.connect()`` reads the connection file
``ZEROBRIDGE_CONNECTION_FILE`` names and says hello under its ``peer``. It ends with its host: when the host says bye
or is lost it closes instead of reconnecting, and ``await peer.wait_closed()`` (which any peer has) returns why.
"""

from __future__ import annotations

from .errors import (
    ERROR_CLASSES,
    ERROR_CODES,
    BridgeCancelled,
    BridgeError,
    BridgeTimeout,
    HandlerError,
    Interrupted,
    JournalFull,
    Suspended,
    InvalidPayload,
    NameTaken,
    Unauthorized,
    HostUnreachable,
    PeerClosed,
    NotAllowed,
    PeerLost,
    UnknownAction,
    UnknownJob,
    error_from_code,
)
from .canonical import canonical_text, catalogue_hash
from .describe import ActionDescription, Catalogue
from .jobs import JobRecord, JobState
from .link import DEFAULT_TIMEOUT, EventContext, RequestContext
from .peer import ConnectionInfo, Peer, Stream, connect, read_connection_file
from .schema import schema_of
from .sync import SyncPeer, SyncStream, connect_sync
from .values import UnsendableValue

# The repository's VERSION file says the same (examples/adopt/test_versions.py checks); pyproject.toml reads it here.
__version__ = "2.0.0"

__all__ = [
    "__version__",
    "DEFAULT_TIMEOUT",
    "ERROR_CLASSES",
    "ERROR_CODES",
    "ActionDescription",
    "BridgeCancelled",
    "BridgeError",
    "BridgeTimeout",
    "Catalogue",
    "ConnectionInfo",
    "EventContext",
    "HandlerError",
    "Interrupted",
    "JournalFull",
    "Suspended",
    "InvalidPayload",
    "JobRecord",
    "JobState",
    "NameTaken",
    "Unauthorized",
    "HostUnreachable",
    "PeerClosed",
    "NotAllowed",
    "Peer",
    "PeerLost",
    "RequestContext",
    "Stream",
    "SyncPeer",
    "SyncStream",
    "UnknownAction",
    "UnknownJob",
    "UnsendableValue",
    "canonical_text",
    "catalogue_hash",
    "connect",
    "connect_sync",
    "error_from_code",
    "read_connection_file",
    "schema_of",
]
