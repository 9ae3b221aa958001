"""W3C trace context (SPEC 7.18): the parser against OpenTelemetry's (the reference: it is what an application's
tracer reads), and the context reaching handlers and the calls they make, through the real Swift host."""

from __future__ import annotations

import random
from typing import Any

import pytest
from opentelemetry.trace import TraceState, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import zerobridge
from zerobridge import tracecontext
from zerobridge.tracecontext import TraceContext, is_valid_tracestate, read_traceparent

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"
# Characters a mutation picks from. No whitespace: OpenTelemetry strips it around an HTTP header's value, and a JSON
# field is no header, so SPEC 7.18 takes the value exactly (" 00-...-01 " is ignored; the fixtures check that).
ALPHABET = "0123456789abcdefABCDEFxyz-_=,@*/~.é"


def mutations(seed_texts: list[str], count: int, rng: random.Random) -> list[str]:
    texts = []
    for _ in range(count):
        text = list(rng.choice(seed_texts))
        for _ in range(rng.randint(1, 3)):
            where = rng.randrange(len(text) + 1)
            match rng.randrange(3):
                case 0 if where < len(text):
                    text[where] = rng.choice(ALPHABET)
                case 1:
                    text.insert(where, rng.choice(ALPHABET))
                case _ if where < len(text):
                    del text[where]
        texts.append("".join(text))
    return texts


def otel_traceparent(text: str) -> str | None:
    """What OpenTelemetry's W3C propagator makes of a traceparent: its version-00 form, or None when it ignores it."""
    context = get_current_span(TraceContextTextMapPropagator().extract({"traceparent": text})).get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_traceparent_agrees_with_opentelemetry() -> None:
    rng = random.Random(27)
    seeds = [TRACEPARENT, f"cc-{TRACE_ID}-{SPAN_ID}-01-future", f"01-{TRACE_ID}-{SPAN_ID}-00", f"ff-{TRACE_ID}-{SPAN_ID}-01",
             f"00-{'0' * 32}-{SPAN_ID}-01", f"00-{TRACE_ID}-{'0' * 16}-01"]
    texts = seeds + mutations(seeds, 5000, rng)
    disagreements = [(text, read_traceparent(text), otel_traceparent(text)) for text in texts
                     if read_traceparent(text) != otel_traceparent(text)]
    assert not disagreements, disagreements[:10]
    assert sum(read_traceparent(text) is not None for text in texts) > 100, "the mutations must keep some valid"


def test_tracestate_agrees_with_opentelemetry() -> None:
    rng = random.Random(7)
    seeds = ["rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "a=1 ,\tb=2,,c@sys=x y", "tenant@system=v",
             ",".join(f"k{i}=v" for i in range(32)), ",".join(f"k{i}=v" for i in range(33)), "a=1,a=2",
             "k" * 256 + "=v", "k=" + "v" * 256, "a=" + "v" * 257]
    texts = [text for text in seeds + mutations(seeds, 5000, rng) if any(m.strip(" \t") for m in text.split(","))]
    # OpenTelemetry keeps nothing of a tracestate it refuses, and never refuses one with a member it keeps.
    disagreements = [text for text in texts if is_valid_tracestate(text) != (len(TraceState.from_header([text])) > 0)]
    assert not disagreements, disagreements[:10]
    assert sum(is_valid_tracestate(text) for text in texts) > 100


@pytest.mark.parametrize("with_opentelemetry", [True, False], ids=["opentelemetry-api", "carried-through"])
async def test_a_handler_sees_the_trace_and_the_calls_it_makes_carry_it(host: Any, with_opentelemetry: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The host calls back `outer`, whose handler calls back `inner`: the trace goes Python -> Swift host -> Python
    handler -> Swift host -> Python handler. With opentelemetry-api and no SDK, spans record nothing but carry the
    context; without it, the peer carries the context itself."""
    if not with_opentelemetry:
        monkeypatch.setattr(tracecontext, "_otel_propagate", None)
        monkeypatch.setattr(tracecontext, "_otel_trace", None)
    seen: dict[str, list[TraceContext | None]] = {"outer": [], "inner": []}
    async with zerobridge.connect(host.endpoint, name=f"py-traced-{with_opentelemetry}") as peer:
        @peer.handler("outer")
        async def outer(payload: Any, context: zerobridge.RequestContext) -> Any:
            seen["outer"].append(context.trace)
            return await peer.call("callback", {"action": "inner"})

        @peer.handler("inner")
        def inner(payload: Any, context: zerobridge.RequestContext) -> str:  # sync: run in a thread
            seen["inner"].append(context.trace)
            return "done"

        sent = TraceContext(TRACEPARENT, "rojo=1")
        with tracecontext.handling(sent, "front-end"):
            assert tracecontext.current() == sent
            assert await peer.call("callback", {"action": "outer"}) == "done"
        assert tracecontext.current() is None
        # Outside any trace, nothing is sent.
        assert await peer.call("callback", {"action": "inner"}) == "done"
    assert seen == {"outer": [sent], "inner": [sent, None]}


async def test_a_trace_is_not_sent_outside_the_handler_that_had_it(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-traced-order") as peer:
        seen: list[TraceContext | None] = []

        @peer.handler("inner")
        async def inner(payload: Any, context: zerobridge.RequestContext) -> None:
            seen.append(context.trace)

        with tracecontext.handling(TraceContext(TRACEPARENT), "first"):
            await peer.call("callback", {"action": "inner"})
        with tracecontext.handling(TraceContext(f"00-{TRACE_ID}-{'1' * 16}-00"), "second"):
            await peer.call("callback", {"action": "inner"})
    assert seen == [TraceContext(TRACEPARENT), TraceContext(f"00-{TRACE_ID}-{'1' * 16}-00")]
