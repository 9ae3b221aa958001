"""Values checked where they are made (SPEC 7.14): what JSON cannot carry is refused before anything is sent, naming
the path of its first offending part; a call's, stream's or event's payload raises InvalidPayload at once, a handler's
result, progress payload, error data or an $evaluate script's result is answered handler_error."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import threading
from collections import OrderedDict, namedtuple
from typing import Any

import pytest

import zerobridge
from zerobridge import BridgeError, RequestContext, values, wire
from zerobridge.errors import InvalidPayload
from zerobridge.values import UnsendableValue

LONG = 10.0


def _cycle_list() -> Any:
    items: list[Any] = [1]
    items.append({"back": items})
    return {"items": items}


def _cycle_dict() -> Any:
    inner: dict[str, Any] = {}
    inner["me"] = inner
    return {"a": inner}


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Colour(enum.Enum):
    RED = "red"


class Custom:
    pass


# (value, path of the first offending part, words of the reason); the value stands where a payload or result does.
REFUSED = {
    "nan": ({"items": [1, 2, 3, float("nan")]}, "items[3]", "NaN cannot be carried in JSON"),
    "inf": ({"price": float("inf")}, "price", "Infinity cannot be carried in JSON"),
    "-inf": ([0.5, -float("inf")], "[1]", "-Infinity cannot be carried in JSON"),
    "big int": ({"n": 2**63}, "n", "the integer 9223372036854775808 is outside the signed 64-bit range"),
    "small int": ({"n": -(2**63) - 1}, "n", "outside the signed 64-bit range"),
    "huge int": ({"n": 10**5000}, "n", "outside the signed 64-bit range"),
    "cycle in a list": (_cycle_list(), "items[1].back", "a cycle: this list contains itself"),
    "cycle in a dict": (_cycle_dict(), "a.me", "a cycle: this object contains itself"),
    "depth": ({"deep": _nested(63)}, "deep" + "[0]" * 62, "nested deeper than 64 levels"),
    "set": ({"tags": {"a", "b"}}, "tags", "a set cannot be carried in JSON (send a list)"),
    "frozenset": ([frozenset()], "[0]", "a frozenset cannot be carried in JSON"),
    "int key": ({"counts": {1: "one"}}, "counts", "the key 1 (int) is not a string"),
    "None key": ({None: 1}, "", "the key None (NoneType) is not a string"),
    "bool key": ({"ok": {True: 1}}, "ok", "the key True (bool) is not a string"),
    "float key": ({1.5: 1}, "", "the key 1.5 (float) is not a string"),
    "negative int key": ({"n": {-1: "x"}}, "n", "the key -1 (int) is not a string"),
    "False key among others": ({"a": 1, False: 2}, "", "the key False (bool) is not a string"),
    "object": ({"thing": Custom()}, "thing", "test_values.Custom object cannot be carried in JSON"),
    "dataclass": ({"point": Point(1, 2)}, "point", "a dataclass instance (test_values.Point) cannot be carried in JSON: convert it first"),
    "datetime": ({"when": datetime.datetime(2026, 1, 1)}, "when", "datetime.datetime cannot be carried in JSON: send an ISO-8601 string"),
    "decimal": ([decimal.Decimal("1.5")], "[0]", "decimal.Decimal cannot be carried in JSON"),
    "enum member": ({"colour": Colour.RED}, "colour", "an Enum member (Colour.RED) cannot be carried in JSON"),
    "lone surrogate": ({"name": "a\ud800b"}, "name", "the string holds a lone surrogate (U+D800)"),
    "lone low surrogate": (["\udc00"], "[0]", "lone surrogate (U+DC00)"),
    "surrogate in a key": ({"\ud83d": 1}, "", "the key '\\ud83d' holds a lone surrogate"),
}


def _at(root: str, path: str) -> str:
    return root + path if not path or path.startswith("[") else f"{root}.{path}"


@pytest.mark.parametrize("kind", REFUSED)
def test_check_refuses_each_kind_naming_the_path(kind: str) -> None:
    value, path, reason = REFUSED[kind]
    with pytest.raises(UnsendableValue) as caught:
        values.check(value, "payload")
    assert caught.value.code == "invalid_payload"
    assert caught.value.path == _at("payload", path)
    assert caught.value.message.startswith(f"{_at('payload', path)}: ")
    assert reason in caught.value.message


def test_the_message_reads_as_in_the_spec() -> None:
    with pytest.raises(UnsendableValue) as caught:
        values.check({"items": [0, 1, 2, float("nan")]})
    assert str(caught.value.message) == "payload.items[3]: NaN cannot be carried in JSON"


class Size(enum.IntEnum):
    SMALL = 1


class Mode(str, enum.Enum):
    FAST = "fast"


Pair = namedtuple("Pair", "a b")

CARRIED = {
    "plain": {"a": [1, 2.5, "x", True, None], "b": {"c": {}}},
    "int64 bounds": [2**63 - 1, -(2**63), 10**18],
    "long digit strings": {"id": "12345678901234567890123"},
    "numeric string keys": {"1": "one", "-2": 2, "true": 3, "null": 4, "1.5e3": 5},
    "emoji": {"face": "😀 and 👍🏽", "😀": "key"},
    "escaped backslash then ud800": {"text": "\\ud800 is six characters"},
    "bytes": {"blob": b"\x00\xff", "more": [bytearray(b"x"), memoryview(b"y")]},
    "tuples and named tuples": {"t": (1, 2), "p": Pair(1, 2)},
    "int and str enums": {"size": Size.SMALL, "mode": Mode.FAST},
    "dict subclass": OrderedDict(a=1),
    "depth 64 exactly": {"deep": _nested(62)},
    "many containers": [{"row": [i, {"i": i}]} for i in range(200)],
    "floats": [0.1, 1e300, -5e-324, 1.7976931348623157e308],
}


@pytest.mark.parametrize("kind", CARRIED)
def test_what_json_carries_passes(kind: str) -> None:
    value = CARRIED[kind]
    values.check(value)
    assert values.find_problem(value) is None
    frames = values.encode(wire.Request("1", "echo", value))
    assert frames == wire.encode(wire.Request("1", "echo", value))


def test_the_quick_verdict_agrees_with_the_walk() -> None:
    """The encoder and the text scan decide most values without a walk; for each case here, they decide as the walk."""
    for value in [*CARRIED.values(), *(case[0] for case in REFUSED.values())]:
        try:
            values.check(value)
            refused = False
        except UnsendableValue:
            refused = True
        assert refused == (values.find_problem(value) is not None), value


def test_error_data_and_the_action_name_are_checked_too() -> None:
    with pytest.raises(UnsendableValue) as caught:
        values.encode(wire.Response.failure("1", BridgeError("mine", "m", {"x": [float("nan")]})))
    assert caught.value.path == "error.data.x[0]"
    with pytest.raises(UnsendableValue) as caught:
        values.encode(wire.Event("ping\udfff", None))
    assert caught.value.path == "action"


# --- through the peer --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", REFUSED)
async def test_calls_streams_and_events_refuse_at_once_and_send_nothing(fake_host: Any, kind: str) -> None:
    value, path, reason = REFUSED[kind]
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        with pytest.raises(InvalidPayload) as caught:
            await peer.call("echo", value)
        assert caught.value.code == "invalid_payload" and caught.value.message.startswith(_at("payload", path) + ":")
        assert reason in caught.value.message
        with pytest.raises(BridgeError) as caught:
            async with peer.stream("count", value):
                pass
        assert caught.value.code == "invalid_payload"
        with pytest.raises(BridgeError) as caught:
            await peer.post("log", value)
        assert caught.value.code == "invalid_payload"
        await peer.post("marker")
        await host.next("event", action="marker", timeout=LONG)
        assert host.bodies("request") == [] and [b["action"] for b in host.bodies("event")] == ["marker"]


async def test_a_cyclic_payload_no_longer_escapes_as_recursion_error(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(InvalidPayload, match=r"payload\[0\]: a cycle"):
            await peer.call("echo", loop)


def _request(request_id: str, action: str, payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "type": "request", "id": request_id, "action": action, "payload": payload, **extra}


@pytest.mark.parametrize("kind", REFUSED)
async def test_a_handler_result_json_cannot_carry_is_answered_handler_error(fake_host: Any, kind: str) -> None:
    value, path, reason = REFUSED[kind]
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("make")
        async def make(payload: Any) -> Any:
            return value

        @peer.handler("make_sync")
        def make_sync(payload: Any) -> Any:
            return value

        async with peer:
            await host.next("hello")
            for request_id, action in (("1", "make"), ("2", "make_sync")):
                host.send(None, _request(request_id, action))
                error = (await host.next("response", id=request_id, timeout=LONG))["error"]
                assert error["code"] == "handler_error"
                assert f"{_at('result', path)}: " in error["message"] and reason in error["message"]


@pytest.mark.parametrize("kind", ["nan", "cycle in a dict", "set", "int key", "lone surrogate", "depth"])
async def test_a_progress_payload_json_cannot_carry_ends_the_request_handler_error(fake_host: Any, kind: str) -> None:
    value, path, reason = REFUSED[kind]
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        cancelled = asyncio.Event()
        stopped = threading.Event()

        @peer.handler("work")
        async def work(payload: Any, request: RequestContext) -> Any:
            request.progress({"step": 1})
            request.progress(value)
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        @peer.handler("work_sync")
        def work_sync(payload: Any, request: RequestContext) -> Any:
            request.progress({"step": 1})
            request.progress(value)
            while not request.cancelled:  # the request was ended: a sync handler sees it as a cancellation
                stopped.wait(0.01)
            stopped.set()
            return "never"

        async with peer:
            await host.next("hello")
            for request_id, action in (("1", "work"), ("2", "work_sync")):
                host.send(None, _request(request_id, action, progress=True))
                progress = await host.next("progress", id=request_id, timeout=LONG)
                assert progress["payload"] == {"step": 1} and progress["seq"] == 1
                error = (await host.next("response", id=request_id, timeout=LONG))["error"]
                assert error["code"] == "handler_error"
                assert error["message"].startswith("a progress payload was refused: ")
                assert f"{_at('payload', path)}: " in error["message"] and reason in error["message"]
            await asyncio.wait_for(cancelled.wait(), LONG)
            assert await asyncio.to_thread(stopped.wait, LONG)
            assert len(host.bodies("progress")) == 2 and len(host.bodies("response")) == 2


async def test_error_data_json_cannot_carry_is_answered_handler_error(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("refuse")
        async def refuse(payload: Any) -> Any:
            raise BridgeError("quota_exceeded", "too many", {"left": float("nan")})

        async with peer:
            await host.next("hello")
            host.send(None, _request("1", "refuse"))
            error = (await host.next("response", id="1", timeout=LONG))["error"]
            assert error["code"] == "handler_error" and "error.data.left: NaN cannot be carried in JSON" in error["message"]


@pytest.mark.parametrize(
    ("script", "path", "reason"),
    [
        ("return float('nan')", "result", "NaN cannot be carried in JSON"),
        ("return {'tags': {1, 2}}", "result.tags", "a set cannot be carried"),
        ("d = {}\nd['d'] = d\nreturn d", "result.d", "a cycle"),
        ("return 2 ** 64", "result", "outside the signed 64-bit range"),
    ],
)
async def test_an_evaluate_result_json_cannot_carry_is_answered_handler_error(
    fake_host: Any, script: str, path: str, reason: str
) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p", evaluate=True):
        await host.next("hello")
        host.send(None, _request("1", "$evaluate", {"script": script, "arguments": {}}))
        error = (await host.next("response", id="1", timeout=LONG))["error"]
        assert error["code"] == "handler_error" and f"{path}: " in error["message"] and reason in error["message"]


async def test_good_results_and_progress_still_go_through(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("fine")
        async def fine(payload: Any, request: RequestContext) -> Any:
            request.progress({"bytes": b"\x01", "n": 2**63 - 1})
            return {"emoji": "😀", "tuple": (1, 2), "blob": b"\x00"}

        async with peer:
            await host.next("hello")
            host.send(None, _request("1", "fine", progress=True))
            progress = await host.next("progress", id="1", timeout=LONG)
            assert progress["payload"] == {"bytes": {"$attachment": 0}, "n": 2**63 - 1}
            response = await host.next("response", id="1", timeout=LONG)
            assert response["ok"] and response["result"] == {"emoji": "😀", "tuple": [1, 2], "blob": {"$attachment": 0}}


@pytest.mark.parametrize("kind", [kind for kind in CARRIED if kind != "bytes"])
def test_messages_are_written_as_json_dumps_writes_them(kind: str) -> None:
    """wire.compact_json, which builds the standard library's C encoder once instead of once per message, writes what
    json.dumps writes."""
    value = CARRIED[kind]
    assert wire.compact_json(value) == json.dumps(value, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize("kind", ["cycle in a list", "cycle in a dict", "nan", "set", "object"])
def test_what_json_dumps_refuses_the_shared_encoder_refuses_alike(kind: str) -> None:
    value = REFUSED[kind][0]
    with pytest.raises((TypeError, ValueError)) as by_json:
        json.dumps(value, separators=(",", ":"), allow_nan=False)
    with pytest.raises(by_json.type):
        wire.compact_json(value)


def test_values_json_texts_are_unchanged_by_the_check() -> None:
    """The check returns json.dumps's own text: it converts nothing."""
    value = {"a": [1, 2.5], "b": "é"}
    assert values.check(value) == json.dumps(value, separators=(",", ":")).encode()
