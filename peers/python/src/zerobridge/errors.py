"""Errors of the ZeroBridge protocol, one class per code the caller is likely to catch.

Every error carries the protocol's string ``code`` (``"timeout"``, ``"handler_error"``, ...), a
human ``message`` and optional JSON ``data``. Match on ``code`` or on the subclasses::

    try:
        await peer.call("sleep", {"ms": 5000}, timeout=0.5)
    except zerobridge.BridgeTimeout:
        ...
"""

from __future__ import annotations

from typing import Any

# The protocol's error codes (PROTOCOL-OUTLINE "Error codes").
BAD_MESSAGE = "bad_message"
UNSUPPORTED_VERSION = "unsupported_version"
UNKNOWN_ACTION = "unknown_action"
INVALID_PAYLOAD = "invalid_payload"
HANDLER_GONE = "handler_gone"
HANDLER_ERROR = "handler_error"
TIMEOUT = "timeout"
CANCELLED = "cancelled"
PEER_LOST = "peer_lost"
DUPLICATE_ID = "duplicate_id"
TOO_LARGE = "too_large"
OVERLOADED = "overloaded"
NOT_ALLOWED = "not_allowed"
UNAUTHORIZED = "unauthorized"
NAME_TAKEN = "name_taken"
UNKNOWN_JOB = "unknown_job"  # since 1.4 (SPEC 7.16)
INTERRUPTED = "interrupted"  # since 1.4 (SPEC 7.16)
SUSPENDED = "suspended"  # since 1.6 (SPEC 7.16)
JOURNAL_FULL = "journal_full"  # since 1.6 (SPEC 7.16)
UNREACHABLE = "unreachable"  # local only: nothing listens at the endpoint (SPEC 8)

ERROR_CODES = frozenset(
    {
        BAD_MESSAGE,
        UNSUPPORTED_VERSION,
        UNKNOWN_ACTION,
        INVALID_PAYLOAD,
        HANDLER_GONE,
        HANDLER_ERROR,
        TIMEOUT,
        CANCELLED,
        PEER_LOST,
        DUPLICATE_ID,
        TOO_LARGE,
        OVERLOADED,
        NOT_ALLOWED,
        UNAUTHORIZED,
        NAME_TAKEN,
        UNKNOWN_JOB,
        INTERRUPTED,
        SUSPENDED,
        JOURNAL_FULL,
        UNREACHABLE,
    }
)
"""Every error code a BridgeError can carry: the protocol's (SPEC 8) and ``unreachable`` (found locally)."""

class BridgeError(Exception):
    """A protocol error: a failed call, or an error a handler raises to answer with a chosen code.

    Raise it from a handler to answer with that code instead of ``handler_error``::

        raise zerobridge.BridgeError("invalid_payload", "need a path")
    """

    code: str
    message: str
    data: Any

    def __init__(self, code: str, message: str = "", data: Any = None) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        """The ``error`` object of a response body."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class _FixedCodeError(BridgeError):
    """A BridgeError whose code is given by the class."""

    fixed_code: str = ""

    def __init__(self, message: str = "", data: Any = None) -> None:
        super().__init__(self.fixed_code, message, data)


class BridgeTimeout(_FixedCodeError, TimeoutError):
    """``timeout``: the call's deadline passed. Also a ``TimeoutError`` (= ``asyncio.TimeoutError``)."""

    fixed_code = TIMEOUT


class BridgeCancelled(_FixedCodeError):
    """``cancelled``: the call was cancelled before it finished."""

    fixed_code = CANCELLED


class PeerLost(_FixedCodeError):
    """``peer_lost``: the other side went away (heartbeat silence, ``bye``, or a new session)."""

    fixed_code = PEER_LOST


class UnknownAction(_FixedCodeError):
    """``unknown_action``: the other side serves no such action."""

    fixed_code = UNKNOWN_ACTION


class InvalidPayload(_FixedCodeError):
    """``invalid_payload``: the payload is not what the action takes; or (raised locally, before anything was sent) a
    value JSON cannot carry, or with ``validate=True`` a payload that does not match the action's schema (SPEC 7.14)."""

    fixed_code = INVALID_PAYLOAD


class HandlerError(_FixedCodeError):
    """``handler_error``: the handler raised; ``message`` says what."""

    fixed_code = HANDLER_ERROR


class NotAllowed(_FixedCodeError):
    """``not_allowed``: for example ``$evaluate`` on a peer that did not turn evaluation on."""

    fixed_code = NOT_ALLOWED


class NameTaken(_FixedCodeError):
    """``name_taken``: another live session holds the peer's name; connecting failed (SPEC 6, Names)."""

    fixed_code = NAME_TAKEN


class Unauthorized(_FixedCodeError):
    """``unauthorized``: the host refused this peer's key (a connection key or a CURVE key); connecting failed at once."""

    fixed_code = UNAUTHORIZED


class HostUnreachable(_FixedCodeError, ConnectionRefusedError):
    """``unreachable`` (local): nothing listens at the endpoint (no socket file, or the connection was refused);
    connecting failed at once. Also a ``ConnectionRefusedError``."""

    fixed_code = UNREACHABLE


class PeerClosed(_FixedCodeError, RuntimeError):
    """``cancelled``: the peer was closed, so nothing can be sent through it any more (the blocking twin says so
    instead of ``RuntimeError: Event loop is closed``)."""

    fixed_code = CANCELLED


class UnknownJob(_FixedCodeError):
    """``unknown_job``: the host has no such job: never started, or finished longer ago than it keeps jobs (SPEC 7.16)."""

    fixed_code = UNKNOWN_JOB


class Interrupted(_FixedCodeError):
    """``interrupted``: the job's host stopped while it ran, and it had no checkpoint to resume from: it will not run
    again (SPEC 7.16)."""

    fixed_code = INTERRUPTED


class Suspended(_FixedCodeError):
    """``suspended``: the job's host stopped gracefully while it ran; it resumes from its checkpoint when the host starts
    again on its journal: attach again then (SPEC 7.16, since 1.6)."""

    fixed_code = SUSPENDED


class JournalFull(_FixedCodeError):
    """``journal_full``: the job failed because its host's journal could not be written: the disk is full (SPEC 7.16,
    since 1.6)."""

    fixed_code = JOURNAL_FULL


ERROR_CLASSES: dict[str, type[_FixedCodeError]] = {
    cls.fixed_code: cls
    for cls in (
        BridgeTimeout,
        BridgeCancelled,
        PeerLost,
        UnknownAction,
        InvalidPayload,
        HandlerError,
        NotAllowed,
        NameTaken,
        Unauthorized,
        HostUnreachable,
        UnknownJob,
        Interrupted,
        Suspended,
        JournalFull,
    )
}
"""The BridgeError subclass for each code that has one (``except HandlerError``); :func:`error_from_code` uses it."""


def error_from_code(code: str, message: str = "", data: Any = None) -> BridgeError:
    """The most specific BridgeError for ``code`` (a plain BridgeError for the other codes)."""
    cls = ERROR_CLASSES.get(code)
    if cls is not None:
        return cls(message, data)
    return BridgeError(code, message, data)
