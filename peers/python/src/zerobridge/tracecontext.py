"""W3C trace context on requests and events (SPEC 7.18).

A request or event may carry ``traceparent`` and ``tracestate``. A malformed value is ignored, never refused: the
message is handled as without it. A handler runs with the context it received current (:func:`current`), so the
calls and events it sends carry the same trace.

With ``opentelemetry-api`` installed (the ``zerobridge[otel]`` extra), a handler runs in an OpenTelemetry span named
after its action whose parent is the received context, and a call made outside any handler carries the caller's
current span: an application that configures an SDK sees one trace across languages. Without it the received
context is carried through unchanged.

The rules are written out here rather than taken from opentelemetry-api because that is optional; the tests check
them against OpenTelemetry's own parser (``tests/test_tracecontext.py``) and the shared message fixtures.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

try:  # the optional dependency (zerobridge[otel])
    from opentelemetry import propagate as _otel_propagate
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - exercised where opentelemetry-api is not installed
    _otel_propagate = None  # type: ignore[assignment]
    _otel_trace = None  # type: ignore[assignment]

__all__ = ["TraceContext", "current", "read", "read_traceparent", "is_valid_tracestate"]


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A valid ``traceparent`` (version 00) and, when one came with it, a valid ``tracestate``."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        """The 32 hex digits that name the trace."""
        return self.traceparent[3:35]

    def to_wire(self) -> dict[str, str]:
        fields = {"traceparent": self.traceparent}
        if self.tracestate is not None:
            fields["tracestate"] = self.tracestate
        return fields


_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_KEY = re.compile(r"[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13}")
_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_MAX_MEMBERS = 32


def read_traceparent(text: Any) -> str | None:
    """The version-00 form of a valid ``traceparent``, or None (SPEC 7.18)."""
    if not isinstance(text, str) or len(text) < 55:
        return None
    match = _TRACEPARENT.fullmatch(text, 0, 55)
    if match is None:
        return None
    version, trace_id, parent_id, flags = match.groups()
    if trace_id == "0" * 32 or parent_id == "0" * 16 or version == "ff":
        return None
    if version == "00":
        return text if len(text) == 55 else None
    if len(text) > 55 and text[55] != "-":
        return None
    return f"00-{trace_id}-{parent_id}-{flags}"


def is_valid_tracestate(text: Any) -> bool:
    """Whether ``text`` is a W3C ``tracestate``: at most 32 ``key=value`` members, each key once (SPEC 7.18)."""
    if not isinstance(text, str):
        return False
    keys: set[str] = set()
    for raw in text.split(","):
        member = raw.strip(" \t")
        if not member:
            continue
        key, equals, value = member.partition("=")
        if not equals or _KEY.fullmatch(key) is None or _VALUE.fullmatch(value) is None or key in keys:
            return False
        keys.add(key)
        if len(keys) > _MAX_MEMBERS:
            return False
    return True


def read(body: dict[str, Any]) -> TraceContext | None:
    """The trace context of a received body: None without a usable ``traceparent``; a bad ``tracestate`` dropped."""
    if "traceparent" not in body:
        return None
    traceparent = read_traceparent(body["traceparent"])
    if traceparent is None:
        return None
    tracestate = body.get("tracestate")
    return TraceContext(traceparent, tracestate if tracestate and is_valid_tracestate(tracestate) else None)


# The context a handler received, current while it runs (and in the tasks and threads it starts).
_received: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("zerobridge_trace", default=None)


def current() -> TraceContext | None:
    """What a request or event sent now carries: the current OpenTelemetry span when one is valid, else the context
    the handler running now received, else None."""
    # Asking for the span first is cheaper than injecting: most calls are made outside any.
    if _otel_propagate is not None and _otel_trace is not None and _otel_trace.get_current_span().get_span_context().is_valid:
        fields: dict[str, str] = {}
        _otel_propagate.inject(fields)
        traceparent = read_traceparent(fields.get("traceparent"))
        if traceparent is not None:
            tracestate = fields.get("tracestate")
            return TraceContext(traceparent, tracestate if tracestate and is_valid_tracestate(tracestate) else None)
    return _received.get()


@contextlib.contextmanager
def handling(received: TraceContext | None, action: str, *, event: bool = False) -> Iterator[None]:
    """Runs the body as the handler of a request (or event) that arrived with ``received``: current for the calls
    it makes, and with opentelemetry-api in a span continuing it (kind SERVER, or CONSUMER for an event)."""
    token = _received.set(received)
    try:
        if _otel_trace is None or _otel_propagate is None:
            yield
            return
        parent = _otel_propagate.extract(received.to_wire() if received is not None else {})
        kind = _otel_trace.SpanKind.CONSUMER if event else _otel_trace.SpanKind.SERVER
        tracer = _otel_trace.get_tracer("zerobridge")
        with tracer.start_as_current_span(action, context=parent, kind=kind,
                                          attributes={"rpc.system": "zerobridge", "rpc.method": action}):
            yield
    finally:
        _received.reset(token)
