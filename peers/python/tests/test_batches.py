"""Batches on ZeroMQ connections (SPEC 3.3): every `batches` case and batch signature of
protocol/fixtures/signatures.json, the peer's batch reader and writer against the protocol's reference ones
(conftest.REFERENCE) on random and damaged batches, and the peer reading and sending batches against a stand-in host
(conftest.FakeHost) on real ZeroMQ sockets, keyed and without a key; and batches both ways with the real host, keyed
and without a key."""

from __future__ import annotations

import asyncio
import json
import random
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from conftest import REFERENCE, FakeHost
from zerobridge import signing, wire

FIXTURE = json.loads((Path(__file__).resolve().parents[3] / "protocol" / "fixtures" / "signatures.json").read_text())[0]
KEY = bytes.fromhex(FIXTURE["key"])
WAIT = 20.0


def frames_of(entry: list[Any]) -> list[bytes]:
    return [bytes.fromhex(f["hex"]) if isinstance(f, dict) else f.encode() for f in entry]


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.02)


# --- the fixtures ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURE["batches"], ids=[c["description"] for c in FIXTURE["batches"]])
def test_batch_case(case: dict[str, Any]) -> None:
    batch = bytes.fromhex(case["hex"])
    if "error" in case:
        with pytest.raises(wire.WireError) as refused:
            wire.split_batch(batch)
        assert refused.value.code == case["error"] and refused.value.id is None
        return
    read = wire.split_batch(batch)
    assert len(read) == len(case["messages"])
    for got, want in zip(read, case["messages"]):
        if isinstance(want, dict):
            assert isinstance(got, wire.WireError) and got.code == want["error"] and got.id is None
        else:
            assert got == [b"", *frames_of(want)]
    if not any(isinstance(want, dict) for want in case["messages"]):
        assert wire.join_batch([[b"", *frames_of(want)] for want in case["messages"]]) == batch


BATCH_SIGNS = [c for c in FIXTURE["sign"] if c["kind"] in (signing.P2H_BATCH, signing.H2P_BATCH)]


@pytest.mark.parametrize("case", BATCH_SIGNS, ids=[c["description"] for c in BATCH_SIGNS])
def test_batch_sign_case(case: dict[str, Any]) -> None:
    (batch,) = frames_of(case["frames"])
    assert signing.sign_message(KEY, case["kind"], case["channel"], case["counter"], [batch]).decode() == case["frame0"]
    channel = signing.PeerChannel(KEY, case["channel"])
    if case["kind"] == signing.P2H_BATCH:  # the peer's channel signs it at that counter, after its opening
        channel.sign([b'{"v":1,"type":"hello","peer":"p"}'], 1)
        for _ in range(case["counter"] - 1):
            channel.sign([b"{}"], 0)
        assert channel.sign_batch(batch).decode() == case["frame0"]
    else:  # and reads the host's, whose messages split as the fixture's reference reader does
        assert channel.refusal(case["frame0"].encode(), [batch]) is None
        assert wire.split_batch(batch) == [[b"", *m] for m in REFERENCE.read_batch(batch)]


def test_a_batch_is_never_signed_before_the_opening() -> None:
    with pytest.raises(RuntimeError, match="opening"):
        signing.PeerChannel(KEY).sign_batch(b"")


# --- against the reference reader and writer --------------------------------------------------------------------------


def reference_verdict(batch: bytes) -> Any:
    try:
        return [m if isinstance(m, list) else "refused" for m in REFERENCE.read_batch(batch)]
    except REFERENCE.Refused:
        return "refused whole"


def peer_verdict(batch: bytes) -> Any:
    try:
        read = wire.split_batch(batch)
    except wire.WireError as error:
        assert error.code == "bad_message" and error.id is None
        return "refused whole"
    return [m[1:] if isinstance(m, list) else "refused" for m in read]


def random_batch(rng: random.Random) -> tuple[list[list[bytes]], bytes]:
    messages = [[rng.randbytes(rng.choice([0, 1, 5, 40, 300])) for _ in range(rng.choice([1, 1, 2, 3]))]
                for _ in range(rng.randrange(1, 12))]
    return messages, REFERENCE.write_batch(messages)


def damaged(rng: random.Random, batch: bytes) -> bytes:
    at = rng.randrange(len(batch) + 1)
    match rng.randrange(6):
        case 0:
            return batch[:at]  # cut short
        case 1:
            return batch + rng.randbytes(rng.randrange(1, 9))  # trailing bytes
        case 2 if batch:
            at = min(at, len(batch) - 1)
            return batch[:at] + bytes([batch[at] ^ (1 << rng.randrange(8))]) + batch[at + 1 :]  # one bit flipped
        case 3:
            return batch[:at] + struct.pack(">I", rng.choice([0, 1, 4, 8, 2**32 - 1])) + batch[at:]  # a stray length
        case 4:  # a message whose frame 0 is not empty
            frames = [rng.randbytes(rng.randrange(1, 4)), b"{}"]
            entry = b"".join(struct.pack(">I", len(f)) + f for f in frames)
            return batch + struct.pack(">I", len(entry)) + entry
        case _:
            return batch


def test_the_reader_agrees_with_the_reference_on_random_and_damaged_batches() -> None:
    rng = random.Random(53)
    refused = partly = 0
    for _ in range(3000):
        messages, batch = random_batch(rng)
        assert wire.join_batch([[b"", *m] for m in messages]) == batch
        assert peer_verdict(batch) == messages
        for _ in range(rng.randrange(1, 3)):
            batch = damaged(rng, batch)
        verdict = reference_verdict(batch)
        assert peer_verdict(batch) == verdict, batch.hex()
        refused += verdict == "refused whole"
        partly += isinstance(verdict, list) and "refused" in verdict
    assert refused > 300 and partly > 300  # both kinds of refusal were exercised


def test_the_reader_s_bounds_on_messages_and_frames() -> None:
    ping = [b"", b'{"v":1,"type":"ping"}']
    assert len(wire.split_batch(wire.join_batch([ping] * 1000))) == 1000
    with pytest.raises(wire.WireError, match="at most 1,000"):
        wire.split_batch(wire.join_batch([ping] * 1001))
    # SPEC 3.2: a message of more than 16,386 frames is refused (alone, in a batch); the reference reader has no bound.
    widest = [b"", b"{}", *[b""] * 16_384]
    read = wire.split_batch(wire.join_batch([widest, ping, [*widest, b""]]))
    assert read[0] == widest and read[1] == ping
    assert isinstance(read[2], wire.WireError) and "16,386 frames" in read[2].message


# --- the peer against a stand-in host, keyed and without a key -----------------------------------------------------


def body(message: dict[str, Any]) -> list[bytes]:
    return [json.dumps(message).encode()]


@pytest.fixture(params=[KEY, None], ids=["keyed", "without a key"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    """Every test below runs on a keyed connection and on one without a key: the same code reads and sends batches,
    only frame 0 differs (SPEC 3.3)."""
    return request.param


def peer_forms(host: FakeHost, routing: bytes) -> list[bytes]:
    """The form of each message the peer sent on `routing` after its opening hello: b"b" for a batch, b"m" for a
    message alone. On a keyed connection it checks that messages and batches share one counter sequence 1, 2, 3, ...
    with the kinds of SPEC 3.3; without a key, that a message alone has an empty frame 0."""
    messages = [frames for r, frames in host.raw if r == routing]
    forms = []
    if host.keyed is None:
        for frames in messages[1:]:
            assert frames[0] in (b"", b"b")
            forms.append(b"b" if host.is_batch(frames[0]) else b"m")
        return forms
    nonce = re.fullmatch(rb"h\.([0-9a-f]{32})\..*", messages[0][0])[1].decode()  # type: ignore[index]
    for counter, frames in enumerate(messages[1:], start=1):
        form = frames[0][:1]
        kind = signing.P2H_BATCH if form == b"b" else signing.P2H
        assert frames[0] == signing.sign_message(KEY, kind, nonce, counter, frames[1:])
        forms.append(form)
    return forms


def batch_sizes(host: FakeHost, routing: bytes) -> list[int]:
    """How many messages each batch the peer sent on `routing` held, in the order sent."""
    return [len(wire.split_batch(frames[1])) for r, frames in host.raw if r == routing and host.is_batch(frames[0])]


async def test_the_hello_offers_batches_on_every_connection(fake_host: Any) -> None:
    async with fake_host(key=KEY) as host:
        async with zerobridge.connect(host.endpoint, name="keyed", key=KEY, evaluate=True, connect_timeout=WAIT):
            assert (await host.next("hello"))["features"] == ["evaluate", "batch"]
    async with fake_host() as host:
        async with zerobridge.connect(host.endpoint, name="plain", connect_timeout=WAIT):
            assert (await host.next("hello"))["features"] == ["batch"]


async def test_a_batch_from_the_host_is_read_message_by_message(fake_host: Any, key: bytes | None) -> None:
    """Whatever the peer said about batches (the host here did not say it reads them), it reads them (SPEC 3.3)."""
    async with fake_host(key=key) as host:
        events: list[Any] = []
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"twice": lambda p: p * 2},
                                      connect_timeout=WAIT) as peer:
            peer.on_event("note")(events.append)
            routing, _ = await host.next_with_routing("hello")
            async with peer.stream("count", {"n": 2}) as call:
                request = await host.next("request", action="count")
                host.send_batch(routing,
                                body({"v": 1, "type": "progress", "id": request["id"], "seq": 1, "payload": "a"}),
                                body({"v": 1, "type": "progress", "id": request["id"], "seq": 2, "payload": "b"}),
                                [b'{"v":1,"type":"response","id":"%s","ok":true,"result":{"$attachment":0}}'
                                 % request["id"].encode(), b"\x00\xff"],
                                body({"v": 1, "type": "request", "id": "h1", "action": "twice", "payload": 21}),
                                body({"v": 1, "type": "event", "action": "note", "payload": 7}),
                                body({"v": 1, "type": "ping"}))
                assert [p async for p in call.progress] == ["a", "b"]
                assert await call.result == b"\x00\xff"
            assert (await host.next("response", id="h1"))["result"] == 42
            await host.next("pong")
            await wait_for(lambda: events == [7], "the event handled")
            assert peer.batches_read == 1 and peer.refused_messages == 0 and host.refused == []


async def test_a_bad_message_in_a_batch_is_answered_alone_and_the_others_are_read(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"twice": lambda p: p * 2},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            batch = REFERENCE.write_batch([body({"v": 1, "type": "request", "id": "a", "action": "twice", "payload": 1})])
            not_empty = struct.pack(">I", 1) + b"x" + struct.pack(">I", 2) + b"{}"  # frame 0 not empty
            batch += struct.pack(">I", len(not_empty)) + not_empty
            batch += REFERENCE.write_batch([[b"not json"],
                                            body({"v": 1, "type": "request", "id": "b", "action": "twice", "payload": 2})])
            host.send_batch_frames(routing, [batch])
            assert (await host.next("response", id="a"))["result"] == 2
            assert (await host.next("response", id="b"))["result"] == 4
            refusals = [await host.next("response", id=None) for _ in range(2)]
            assert [r["error"]["code"] for r in refusals] == ["bad_message", "bad_message"]
            assert "frame 0" in refusals[0]["error"]["message"]
            assert peer.batches_read == 1 and host.refused == []  # the answers were signed
            assert len(host.bodies("response")) == 4


@pytest.mark.parametrize("what", ["a length running past the end", "an empty batch", "frames after frame 1",
                                  "1,001 messages"])
async def test_a_batch_whose_structure_is_bad_is_answered_once_and_none_of_it_is_read(fake_host: Any, key: bytes | None, what: str) -> None:
    async with fake_host(key=key) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"twice": lambda p: p * 2},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            request = REFERENCE.write_batch([body({"v": 1, "type": "request", "id": "x", "action": "twice", "payload": 1})])
            frames = {"a length running past the end": [request + struct.pack(">I", 9) + b"{}"],
                      "an empty batch": [b""],
                      "frames after frame 1": [request, b"attachment?"],
                      "1,001 messages": [request * 1001]}[what]
            host.send_batch_frames(routing, frames)
            refusal = await host.next("response", id=None)
            assert refusal["error"]["code"] == "bad_message"
            host.send(routing, {"v": 1, "type": "request", "id": "y", "action": "twice", "payload": 2})  # it goes on
            assert (await host.next("response", id="y"))["result"] == 4
            assert [r.get("id") for r in host.bodies("response")] == [None, "y"]  # "x" was never run
            assert peer.batches_read == 1 and host.refused == []


async def test_a_batch_past_the_limit_is_answered_too_large_unread(fake_host: Any, key: bytes | None) -> None:
    """SPEC 3.3: more than 64 MiB + 128 KiB (the peer's limit and the slack) is refused before any MAC is computed,
    none of it read; each frame alone is within what libzmq takes from the host."""
    async with fake_host(key=key) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"twice": lambda p: p * 2},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            request = REFERENCE.write_batch([body({"v": 1, "type": "request", "id": "x", "action": "twice", "payload": 1})])
            host.send_batch_frames(routing, [request, bytes(40 << 20), bytes(25 << 20)])
            refusal = await host.next("response", id=None, timeout=WAIT)
            assert refusal["error"]["code"] == "too_large" and "batch" in refusal["error"]["message"]
            host.send(routing, {"v": 1, "type": "request", "id": "y", "action": "twice", "payload": 2})  # it goes on
            assert (await host.next("response", id="y"))["result"] == 4
            assert [r.get("id") for r in host.bodies("response")] == [None, "y"] and peer.batches_read == 0


async def test_without_a_key_only_the_byte_b_marks_a_batch(fake_host: Any) -> None:
    """Any other frame 0 is ignored (SPEC 3): its message is read as it comes, a batch's bytes in it are not JSON."""
    async with fake_host() as host:
        async with zerobridge.connect(host.endpoint, name="p", handlers={"twice": lambda p: p * 2},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            frames0 = (b"B", b"bb", b"b.1." + b"0" * 64, b"\x00")
            for n, frame0 in enumerate(frames0):
                request = body({"v": 1, "type": "request", "id": f"r{n}", "action": "twice", "payload": n})
                host.send_frames(routing, [frame0, *request])
                host.send_frames(routing, [frame0, REFERENCE.write_batch([request])])
            answers = [await host.next("response", timeout=WAIT) for _ in range(8)]
            assert [(a["id"], a["result"]) for a in answers if a["ok"]] == [(f"r{n}", 2 * n) for n in range(len(frames0))]
            refused = [a for a in answers if not a["ok"]]
            assert len(refused) == 4 and {(a["id"], a["error"]["code"]) for a in refused} == {(None, "bad_message")}
            assert peer.batches_read == 0


async def test_refused_batches_are_counted_and_never_answered(fake_host: Any) -> None:
    async with fake_host(key=KEY) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=KEY, handlers={"run": lambda p: "ran"},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            nonce = host.keyed.channels[routing][0]
            batch = REFERENCE.write_batch([body({"v": 1, "type": "request", "id": "r", "action": "run", "payload": None})])
            next_counter = host.keyed.channels[routing][2] + 1
            attempts = [
                [b"b.%d.%s" % (next_counter, b"0" * 64), batch],  # a wrong MAC
                [signing.sign_message(KEY, signing.H2P, nonce, next_counter, [batch]).replace(b"m.", b"b.", 1), batch],
                [signing.sign_message(KEY, signing.H2P_BATCH, nonce, next_counter, [batch]).replace(b"b.", b"m.", 1), batch],
                [signing.sign_message(KEY, signing.P2H_BATCH, nonce, next_counter, [batch]), batch],  # the peer's kind
                [signing.sign_message(KEY, signing.H2P_BATCH, signing.new_nonce(), next_counter, [batch]), batch],
            ]
            for frames in attempts:
                host.send_frames(routing, frames, sign=False)
            accepted = [host.keyed.sign(routing, [batch], signing.H2P_BATCH), batch]
            host.send_frames(routing, accepted, sign=False)
            await host.next("response", id="r")
            host.send_frames(routing, accepted, sign=False)  # replayed
            await wait_for(lambda: peer.refused_messages == len(attempts) + 1, "every attempt refused")
            assert peer.batches_read == 1 and len(host.bodies("response")) == 1 and peer.connected


async def test_calls_made_at_once_go_in_batches_once_the_welcome_says_so(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key, batch=True) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            calls = [asyncio.ensure_future(peer.call("echo", i, timeout=WAIT)) for i in range(40)]
            requests = [await host.next("request", action="echo") for _ in range(40)]
            assert [r["payload"] for r in requests] == list(range(40))  # in order
            host.send_batch(routing, *(body({"v": 1, "type": "response", "id": r["id"], "ok": True, "result": r["payload"]})
                                       for r in requests))
            assert await asyncio.gather(*calls) == list(range(40))
            assert peer.batches_sent >= 1 and host.batches_received == peer.batches_sent
            assert peer.batches_read == 1
            forms = peer_forms(host, routing)
            assert forms[0] == b"m" and b"b" in forms  # the first of a turn goes at once, alone; the rest together


async def test_the_next_calls_of_callers_answered_together_go_out_together(fake_host: Any, key: bytes | None) -> None:
    """A batch of responses wakes its callers in the next turn of the loop; the calls they make there go out as
    batches of 16 as the turn makes them (the host starts on the first while the rest are made), the last at the
    turn's end, not the first of them alone before them."""
    async with fake_host(key=key, batch=True, heartbeat_ms=600_000) as host:  # no ping among the forms counted
        async with zerobridge.connect(host.endpoint, name="p", key=key, connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")

            async def twice(i: int) -> list[Any]:
                return [await peer.call("echo", i, timeout=WAIT), await peer.call("echo", 100 + i, timeout=WAIT)]

            calls = [asyncio.ensure_future(twice(i)) for i in range(40)]
            first = [await host.next("request", action="echo") for _ in range(40)]
            sent_before = len(peer_forms(host, routing))
            host.send_batch(routing, *(body({"v": 1, "type": "response", "id": r["id"], "ok": True, "result": r["payload"]})
                                       for r in first))
            second = [await host.next("request", action="echo") for _ in range(40)]
            assert [r["payload"] for r in second] == [100 + i for i in range(40)]
            assert peer_forms(host, routing)[sent_before:] == [b"b"] * 3
            assert batch_sizes(host, routing)[-3:] == [16, 16, 8]
            host.send_batch(routing, *(body({"v": 1, "type": "response", "id": r["id"], "ok": True, "result": r["payload"]})
                                       for r in second))
            assert await asyncio.gather(*calls) == [[i, 100 + i] for i in range(40)]


async def test_without_the_welcome_s_word_nothing_is_batched(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            for i in range(20):
                await peer.post("note", i)
            for i in range(20):
                assert (await host.next("event", action="note"))["payload"] == i
            assert peer.batches_sent == 0 and set(peer_forms(host, routing)) == {b"m"}


async def test_batches_keep_to_65536_bytes_and_1000_messages_and_a_large_message_goes_alone(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key, batch=True, max_message_bytes=1 << 20) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            await peer.post("note", "first")
            for i in range(2500):  # one turn
                await peer.post("note", i)
            await peer.post("note", "x" * 70_000)  # larger than a batch may be
            await peer.post("note", "last")
            assert (await host.next("event", action="note"))["payload"] == "first"
            assert [(await host.next("event", action="note"))["payload"] for _ in range(2500)] == list(range(2500))
            assert (await host.next("event", action="note"))["payload"] == "x" * 70_000
            assert (await host.next("event", action="note"))["payload"] == "last"
            batches = [frames for r, frames in host.raw if r == routing and host.is_batch(frames[0])]
            sizes = [len(REFERENCE.read_batch(frames[1])) for frames in batches]
            assert sum(sizes) >= 2000 and max(sizes) <= 1000 and all(len(frames[1]) <= 65_536 for frames in batches)
            large = [frames for r, frames in host.raw if r == routing and b"x" * 70_000 in frames[1]]
            assert len(large) == 1 and not host.is_batch(large[0][0])
            peer_forms(host, routing)


async def count_up(payload: int, context: zerobridge.RequestContext) -> str:
    """Reports progress 1..payload in one turn, then answers."""
    for i in range(1, payload + 1):
        context.progress(i)
    return "done"


async def test_progress_reported_in_one_turn_goes_in_batches_in_order(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key, batch=True) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"steps": count_up},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            host.send_batch(routing, *(body({"v": 1, "type": "request", "id": f"s{n}", "action": "steps", "payload": 30,
                                             "progress": True}) for n in range(3)))
            for n in range(3):
                assert (await host.next("response", id=f"s{n}"))["result"] == "done"
            for n in range(3):
                progress = [p for p in host.bodies("progress") if p["id"] == f"s{n}"]
                assert [p["payload"] for p in progress] == list(range(1, 31))
                assert [p["seq"] for p in progress] == list(range(1, 31)) and not any("skipped" in p for p in progress)
            # Each response after its request's progress.
            received = [(b["type"], b["id"]) for _, b in host._received if isinstance(b, dict) and b.get("id", "").startswith("s")]
            for n in range(3):
                assert received.index(("response", f"s{n}")) > max(i for i, r in enumerate(received) if r == ("progress", f"s{n}"))
            peer_forms(host, routing)
            batched = [json.loads(m[0]) for r, frames in host.raw if r == routing and host.is_batch(frames[0])
                       for m in REFERENCE.read_batch(frames[1])]
            alone = [json.loads(frames[1]) for r, frames in host.raw if r == routing and not host.is_batch(frames[0])]
            # The first message of the turn goes at once, alone; the rest of what the handlers reported, together.
            assert len([b for b in batched if b["type"] == "progress"]) >= 87
            assert len([b for b in alone if b["type"] == "progress"]) <= 3


async def test_a_new_connection_forgets_batches_until_its_welcome_says_so_again(fake_host: Any, key: bytes | None) -> None:
    async with fake_host(key=key, batch=True) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, connect_timeout=WAIT) as peer:
            first, _ = await host.next_with_routing("hello")
            host.batch = False  # the next welcome does not say it
            host.send(first, {"v": 1, "type": "bye"})  # a loss: a new socket, a new channel
            second, _ = await host.next_with_routing("hello", timeout=WAIT)
            await peer.wait_connected(WAIT)
            for i in range(20):
                await peer.post("note", i)
            for i in range(20):
                assert (await host.next("event", action="note"))["payload"] == i
            assert set(peer_forms(host, second)) == {b"m"} and peer.batches_sent == 0


async def test_a_turn_that_reports_much_progress_hands_it_over_in_batches_without_coalescing(fake_host: Any, key: bytes | None) -> None:
    """With batches, progress after a turn's first message waits for the turn's end; a turn that reports more than
    a request may hold unsent (64) hands it over at once instead: a host that reads gets every payload."""
    async with fake_host(key=key, batch=True) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=key, handlers={"flood": count_up},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            host.send(routing, {"v": 1, "type": "request", "id": "f", "action": "flood", "payload": 2000, "progress": True})
            assert (await host.next("response", id="f"))["result"] == "done"
            progress = host.bodies("progress")
            assert [p["payload"] for p in progress] == list(range(1, 2001)) and not any("skipped" in p for p in progress)
            assert [p["seq"] for p in progress] == list(range(1, 2001))
            assert peer.batches_sent >= 2000 // 1000
            peer_forms(host, routing)


# --- the real host ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "without a key"])
async def test_batches_flow_both_ways_with_the_real_host(start_host: Callable[..., Any], tmp_path: Path,
                                                         keyed: bool) -> None:
    """SPEC 3.3: the host's welcome says it reads batches, so calls made together go as batches; its answers to them,
    its progress and its own calls into this peer come as batches. Every call answered right, nothing refused."""
    path = tmp_path / "host.json"
    host = start_host("--connection-file", str(path), *(() if keyed else ("--no-key",)), endpoint="tcp://127.0.0.1:*")
    async with zerobridge.connect(path, name="py-batches", handlers={"twice": lambda p: p * 2}, connect_timeout=WAIT) as peer:
        assert bool(peer.info.key) == keyed

        async def caller(worker: int) -> list[Any]:
            return [await peer.call("echo", {"w": worker, "i": i}, timeout=WAIT) for i in range(20)]

        answers = await asyncio.gather(*(caller(w) for w in range(64)))  # 64 in flight
        assert answers == [[{"w": w, "i": i} for i in range(20)] for w in range(64)]
        assert peer.batches_sent > 0 and peer.batches_read > 0
        read_before = peer.batches_read
        async with peer.stream("count", {"n": 3000}, timeout=WAIT) as call:
            assert [p async for p in call.progress] == [{"i": i, "n": 3000} for i in range(1, 3001)]
            assert await call.result == {"n": 3000} and call.skipped == 0
        assert peer.batches_read > read_before  # the progress came in batches
        sent_before = peer.batches_sent
        callbacks = [peer.call("callback", {"action": "twice", "payload": i}, timeout=WAIT) for i in range(32)]
        assert await asyncio.gather(*callbacks) == [2 * i for i in range(32)]  # host -> peer calls, answered in batches
        assert peer.batches_sent > sent_before and peer.refused_messages == 0
    assert "refused" not in host.stderr_text() and "bad_message" not in host.stderr_text()
