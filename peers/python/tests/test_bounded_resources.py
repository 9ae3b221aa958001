"""Protocol revision 1.1 (bounded resources, SPEC 7.3, 7.13, decisions 14-19) in the Python peer, against the scripted
in-test host: deadlines on requests both ways, cancel before a handler starts, what a lost host leaves behind, progress
coalesced with `skipped` while the host reads slowly, events counted toward max_in_flight, events refused into a full
queue. Waits are for conditions, with generous limits; nothing asserts that something is fast."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from zerobridge import BridgeError, BridgeTimeout, PeerLost
from zerobridge import link as link_module
from zerobridge import peer as peer_module

LONG = 30.0  # seconds: an upper bound for what must happen, never an expectation of speed
# The flow-control tests run plain without batches, and with batches (SPEC 3.3) plain and keyed: batches change how
# messages are handed to the transport, not the bounds. A mode is (the key, whether the host's welcome says batch).
KEY = bytes(range(32))
MODES = {"plain": (None, False), "plain batches": (None, True), "keyed batches": (KEY, True)}


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def request(rid: str, action: str, payload: Any = None, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "type": "request", "id": rid, "action": action, "payload": payload, **extra}


async def until(condition: Any, timeout: float = LONG) -> None:
    """Wait until `condition()` holds (checked every few ms), at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        await asyncio.sleep(0.005)


# --- deadlines -------------------------------------------------------------------------------------------------


async def test_a_request_past_its_deadline_is_answered_timeout_and_never_started(
    fake_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        started: list[str] = []

        @peer.handler("work")
        async def work(payload: Any, context: zerobridge.RequestContext) -> str:
            started.append(context.id)
            return "ran"

        @peer.handler("work_sync")
        def work_sync(payload: Any, context: zerobridge.RequestContext) -> str:
            started.append(context.id)
            return "ran"

        async with peer:
            caplog.set_level(logging.WARNING, logger="zerobridge")
            host.send(None, request("epoch", "work", timeout_ms=30000, deadline=1))
            host.send(None, request("sync", "work_sync", deadline=0))
            host.send(None, request("now", "work", deadline=wall_ms()))  # not later than now: expired too
            for rid in ("epoch", "sync", "now"):
                answer = await host.next("response", id=rid, timeout=LONG)
                assert answer["ok"] is False and answer["error"]["code"] == "timeout", answer
            # A request that is still in time runs, and nothing of the expired ones ever did.
            host.send(None, request("fine", "work", timeout_ms=30000, deadline=wall_ms() + 60000))
            assert (await host.next("response", id="fine", timeout=LONG))["result"] == "ran"
            assert started == ["fine"]
            # Expired by more than its own timeout: the clocks likely disagree, and the log says so.
            skew = [r for r in caplog.records if "clock skew" in r.getMessage()]
            assert len(skew) == 1 and "epoch" in skew[0].getMessage()


async def test_the_earlier_of_timeout_ms_and_deadline_limits_a_handler(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        limits: dict[str, float | None] = {}
        cancelled = asyncio.Event()

        @peer.handler("slow")
        async def slow(payload: Any, context: zerobridge.RequestContext) -> None:
            limits[context.id] = None if context.deadline is None else context.deadline - time.monotonic()
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async with peer:
            # The deadline (0.3 s away) comes long before timeout_ms (60 s): the handler ends at the deadline.
            host.send(None, request("d", "slow", timeout_ms=60000, deadline=wall_ms() + 300))
            answer = await host.next("response", id="d", timeout=LONG)
            assert answer["error"]["code"] == "timeout"
            await asyncio.wait_for(cancelled.wait(), LONG)
            limit = limits["d"]
            assert limit is not None and limit < 1  # not 60 s
            # timeout_ms (0.3 s) before the deadline (an hour away): timeout_ms rules.
            host.send(None, request("t", "slow", timeout_ms=300, deadline=wall_ms() + 3_600_000))
            assert (await host.next("response", id="t", timeout=LONG))["error"]["code"] == "timeout"
            limit = limits["t"]
            assert limit is not None and limit < 1


async def test_the_peers_requests_carry_a_deadline_beside_timeout_ms(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        before = wall_ms()
        call = asyncio.ensure_future(peer.call("echo", 1, timeout=20))
        sent = await host.next("request", action="echo", timeout=LONG)
        after = wall_ms()
        assert sent["timeout_ms"] == 20000
        assert type(sent["deadline"]) is int and before + 20000 <= sent["deadline"] <= after + 20000
        host.send(None, {"v": 1, "type": "response", "id": sent["id"], "ok": True, "result": 1})
        assert await call == 1
        # With timeout=None the call has no deadline, on the wire either (SPEC 7.3: no limit is asked for explicitly).
        untimed = asyncio.ensure_future(peer.call("echo", 2, timeout=None))
        sent = await host.next("request", action="echo", timeout=LONG)
        assert "timeout_ms" not in sent and "deadline" not in sent
        host.send(None, {"v": 1, "type": "response", "id": sent["id"], "ok": True, "result": 2})
        assert await untimed == 2


# --- cancel before the handler begins -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_cancel_read_before_the_handler_began_means_it_never_begins(fake_host: Any, kind: str) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        began: list[str] = []

        @peer.handler("block_loop")
        async def block_loop(payload: Any) -> str:
            # The host sends a request and its cancel while the peer's event loop is held (this test and the
            # peer share the loop), so the peer reads both before the handler could begin.
            host.send(None, request("v", "victim"))
            host.send(None, {"v": 1, "type": "cancel", "id": "v"})
            time.sleep(1.0)
            return "unblocked"

        if kind == "async":
            @peer.handler("victim")
            async def victim(payload: Any) -> str:
                began.append("victim")
                return "ran"
        else:
            @peer.handler("victim")
            def victim_sync(payload: Any) -> str:
                began.append("victim")
                return "ran"

        async with peer:
            host.send(None, request("b", "block_loop"))
            answer = await host.next("response", id="v", timeout=LONG)
            assert answer["ok"] is False and answer["error"]["code"] == "cancelled"
            assert (await host.next("response", id="b", timeout=LONG))["result"] == "unblocked"
            host.send(None, request("after", "$actions"))
            await host.next("response", id="after", timeout=LONG)
            await asyncio.sleep(0.2)  # a handler that had been started would have run by now
            assert began == []
            assert len([b for b in host.bodies("response") if b["id"] == "v"]) == 1


# --- losing the host ------------------------------------------------------------------------------------------------


async def test_after_the_host_is_lost_new_calls_fail_at_once_and_a_new_connection_says_hello(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        event_started = asyncio.Event()
        event_cancelled = asyncio.Event()

        @peer.on_event("long")
        async def long_event(payload: Any) -> None:
            event_started.set()
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                event_cancelled.set()
                raise

        async with peer:
            first_routing, _ = await host.next_with_routing("hello", timeout=LONG)
            pending = asyncio.ensure_future(peer.call("echo", "x", timeout=60))
            await host.next("request", action="echo", timeout=LONG)
            host.send(None, {"v": 1, "type": "event", "action": "long"})
            await asyncio.wait_for(event_started.wait(), LONG)

            host.silent = True  # no welcome for the peer's next hello: it stays without a session
            host.send(None, {"v": 1, "type": "bye"})
            with pytest.raises(PeerLost):
                await pending
            await asyncio.wait_for(event_cancelled.wait(), LONG)  # the event handler ended with the session
            routing, hello = await host.next_with_routing("hello", timeout=LONG)
            assert routing != first_routing  # a new connection: nothing queued on the old one can follow
            assert not peer.connected

            # Not welcomed: calls, streams and posts fail at once rather than wait for a host that may come back.
            started = time.monotonic()
            with pytest.raises(PeerLost):
                await peer.call("echo", 1, timeout=60)
            with pytest.raises(PeerLost):
                async with peer.stream("count", {"n": 1}, timeout=60):
                    pass
            with pytest.raises(PeerLost):
                await peer.post("note", 1)
            assert time.monotonic() - started < LONG
            assert [b["payload"] for b in host.bodies("request")] == ["x"]  # none of them was sent

            host.silent = False
            host.send(routing, host.welcome("session-9"))
            await peer.wait_connected(LONG)
            assert peer.session == "session-9"
            answering = asyncio.ensure_future(peer.call("echo", "again", timeout=60))
            again, sent = await host.next_with_routing("request", action="echo", timeout=LONG)
            assert again == routing
            host.send(routing, {"v": 1, "type": "response", "id": sent["id"], "ok": True, "result": "again"})
            assert await answering == "again"


# --- flow control: progress -------------------------------------------------------------------------------------------


PAYLOADS = 200_000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_progress_to_a_host_that_stops_reading_is_coalesced_never_waited_for(
    fake_host: Any, ipc_dir: Path, kind: str, mode: str
) -> None:
    endpoint = f"ipc://{ipc_dir}/slow.sock"
    key, batch = MODES[mode]
    async with fake_host(endpoint=endpoint, rcvhwm=10, heartbeat_ms=600000, batch=batch, key=key) as host:
        peer = zerobridge.connect(endpoint, name="p", key=key)
        finished = threading.Event()
        observed = {"pending": 0, "pending_bytes": 0}

        def look(link: Any) -> None:
            observed["pending"] = max(observed["pending"], link.pending_progress)
            observed["pending_bytes"] = max(observed["pending_bytes"], link.pending_progress_bytes)

        if kind == "async":
            @peer.handler("flood")
            async def flood(payload: Any, context: zerobridge.RequestContext) -> str:
                for i in range(1, PAYLOADS + 1):
                    context.progress({"i": i})
                    if i % 1000 == 0:
                        look(peer._link)
                finished.set()
                return "done"
        else:
            @peer.handler("flood")
            def flood_sync(payload: Any, context: zerobridge.RequestContext) -> str:
                for i in range(1, PAYLOADS + 1):
                    context.progress({"i": i})
                finished.set()
                return "done"

        async with peer:
            await host.next("hello", timeout=LONG)
            host.stop_reading()
            # Memory: the link's counts are looked at along the way; tracemalloc (slow) watches the threads' path,
            # where progress crosses from worker threads to the loop.
            traced = kind == "sync"
            if traced:
                tracemalloc.start()
            peak = 0
            try:
                host.send(None, request("f", "flood", progress=True))
                # The handler finishes although nobody reads: progress never waits.
                await asyncio.to_thread(finished.wait, 60)
                assert finished.is_set(), "the handler was held up by progress"
                await until(lambda: "f" not in peer._link._served)  # answered (queued behind its progress)
                look(peer._link)
                if traced:
                    _, peak = tracemalloc.get_traced_memory()
            finally:
                if traced:
                    tracemalloc.stop()
            assert observed["pending"] <= link_module.PROGRESS_PER_REQUEST
            assert observed["pending_bytes"] <= link_module.PROGRESS_LIMIT_BYTES
            assert peak < 32 << 20, f"peak {peak} bytes: memory grew with the payloads"

            host.resume_reading()
            response = await host.next("response", id="f", timeout=60)
            assert response["result"] == "done"
            progress = [b for b in host.bodies("progress") if b["id"] == "f"]
            assert [b["seq"] for b in progress] == list(range(1, len(progress) + 1))  # gapless
            skipped = sum(b.get("skipped", 0) for b in progress)
            assert skipped > 0 and all(b.get("skipped", 1) >= 1 for b in progress)
            assert len(progress) + skipped == PAYLOADS  # every payload was either sent or counted
            assert progress[-1]["payload"] == {"i": PAYLOADS}  # the newest always gets through
            payloads = [b["payload"]["i"] for b in progress]
            assert payloads == sorted(payloads)
            assert (host.batches_received > 0) == batch
            print(f"{kind}: {len(progress)} progress messages sent, {skipped} payloads coalesced, peak {peak} bytes")


async def test_a_caller_reads_skipped_progress_and_its_count(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.stream("count", {"n": 10}, timeout=60) as call:
            sent = await host.next("request", action="count", timeout=LONG)
            rid = sent["id"]
            host.send(None, {"v": 1, "type": "progress", "id": rid, "seq": 1, "payload": 1})
            host.send(None, {"v": 1, "type": "progress", "id": rid, "seq": 2, "payload": 9, "skipped": 7})
            host.send(None, {"v": 1, "type": "progress", "id": rid, "seq": 3, "payload": 10})
            host.send(None, {"v": 1, "type": "response", "id": rid, "ok": True, "result": {"n": 10}})
            assert [p async for p in call.progress] == [1, 9, 10]
            assert call.skipped == 7
            assert await call.result == {"n": 10}


# --- flow control: events both ways --------------------------------------------------------------------------------


async def test_events_count_toward_max_in_flight_and_one_over_is_answered_overloaded(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", max_in_flight=3)
        release = asyncio.Event()
        ran: list[Any] = []

        @peer.handler("hold")
        async def hold(payload: Any) -> str:
            await release.wait()
            return "held"

        @peer.on_event("note")
        async def note(payload: Any) -> None:
            ran.append(payload)
            await release.wait()

        async with peer:
            host.send(None, request("h1", "hold"))
            host.send(None, {"v": 1, "type": "event", "action": "note", "payload": 1})  # runs, holds
            host.send(None, {"v": 1, "type": "event", "action": "note", "payload": 2})  # waits its turn
            host.send(None, {"v": 1, "type": "event", "action": "surplus", "payload": 3})  # a fourth: refused
            host.send(None, request("h2", "hold"))  # so is a request
            refused = await host.next("response", id=None, timeout=LONG)
            assert refused["ok"] is False and refused["error"]["code"] == "overloaded"
            assert "surplus" in refused["error"]["message"]
            assert (await host.next("response", id="h2", timeout=LONG))["error"]["code"] == "overloaded"
            release.set()
            assert (await host.next("response", id="h1", timeout=LONG))["result"] == "held"
            await until(lambda: ran == [1, 2])
            # With room again, events run as before.
            host.send(None, {"v": 1, "type": "event", "action": "note", "payload": 4})
            await until(lambda: ran == [1, 2, 4])
            assert len([b for b in host.bodies("response") if b["id"] is None]) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_posting_into_a_full_queue_fails_overloaded_and_calls_wait_up_to_their_deadline(
    fake_host: Any, ipc_dir: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr(peer_module, "SEND_HWM", 4)  # libzmq holds few messages: the peer's own queue fills sooner
    endpoint = f"ipc://{ipc_dir}/full.sock"
    big = "x" * (256 << 10)
    huge = 4 << 20
    key, batch = MODES[mode]
    async with fake_host(endpoint=endpoint, rcvhwm=2, heartbeat_ms=600000, max_message_bytes=16 << 20, batch=batch,
                         key=key) as host:
        peer = zerobridge.connect(endpoint, name="p", handlers={"huge": lambda payload: "y" * huge}, key=key)
        async with peer:
            await host.next("hello", timeout=LONG)
            host.stop_reading()
            posted = 0
            with pytest.raises(BridgeError) as caught:
                while posted < 1000:  # 250 MB: far past any bound; the refusal comes long before
                    await peer.post("bulk", {"n": posted, "data": big})
                    posted += 1
            assert caught.value.code == "overloaded"
            assert peer._link.queued_bytes <= link_module.QUEUE_LIMIT_BYTES + (1 << 20)
            # Responses are always queued, over the bound too. (This one also keeps the queue well over its bound
            # below, whatever the transport still takes in the meantime: a few messages at most.)
            host.send(None, request("r", "huge"))
            await until(lambda: peer._link.queued_bytes > link_module.QUEUE_LIMIT_BYTES + huge - (1 << 20))
            # A call made now waits for room, and fails at its own deadline without ever being sent.
            started = time.monotonic()
            with pytest.raises(BridgeTimeout):
                await peer.call("echo", "waiting", timeout=0.5)
            assert time.monotonic() - started >= 0.45

            host.resume_reading()
            assert len((await host.next("response", id="r", timeout=60))["result"]) == huge
            bulk = [b for b in host.bodies("event") if b["action"] == "bulk"]
            assert [b["payload"]["n"] for b in bulk] == list(range(posted))  # all of them, in order
            assert [b for b in host.bodies("request") if b["action"] == "echo"] == []  # the timed-out call never went out
            await until(lambda: not peer._link.over_limit)
            await peer.post("bulk", {"n": "after"})
            await host.next("event", action="bulk", timeout=LONG, payload={"n": "after"})


# --- what the host sends is bounded too ---------------------------------------------------------------------------


async def test_a_frame_from_the_host_past_the_receive_limit_drops_the_connection(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zerobridge.peer, "RECEIVE_LIMIT", 1 << 20)  # 1 MiB here, so the test sends 2 MiB, not 65
    ran: list[Any] = []
    # A short heartbeat: the peer learns soon that the host it knew went quiet, and says hello again.
    async with fake_host(heartbeat_ms=200) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        peer.handler("echo")(lambda payload: ran.append(payload) or payload)
        first, _ = await host.next_with_routing("hello", timeout=LONG)
        body = {"v": 1, "type": "request", "id": "big", "action": "echo", "payload": "x" * (2 << 20)}
        host.send(first, body)
        # libzmq refuses the frame as its header arrives and drops the connection; the peer connects again and
        # says hello from a new connection. The request was never read, so its handler never ran.
        again, _ = await host.next_with_routing("hello", timeout=LONG, peer="p")
        while again == first:
            again, _ = await host.next_with_routing("hello", timeout=LONG, peer="p")
        assert ran == []


# --- answers with "id": null past the queue bound (SPEC 7.13, decision 54) ---------------------------------------------


async def test_answers_with_id_null_are_dropped_not_queued_while_the_queue_is_over_its_bound() -> None:
    from zerobridge import wire

    async def serve(request: Any, context: Any) -> None:
        raise AssertionError("no request is sent in this test")

    async def serve_event(event: Any) -> None:
        raise AssertionError("every event is over max_in_flight 0")

    # A transport that takes nothing: what the link sends stays in its queue.
    link = link_module.Link(send=lambda frames: False, serve=serve, on_message=lambda message: None,
                            serve_event=serve_event, max_in_flight=0)
    link._on_event(wire.Event(action="note", payload=1))
    assert len(link._queue) == 1, "answered while the queue has room"
    link.send(wire.Event(action="big", payload="x" * link_module.QUEUE_LIMIT_BYTES))
    queued = len(link._queue)
    link._on_event(wire.Event(action="note", payload=2))
    link.refuse_unreadable(wire.WireError("bad_message", "not JSON"))
    assert len(link._queue) == queued, "nothing more queued while the queue is over its bound"
    # An answer with an id is still queued: max_in_flight bounds those.
    link._on_request(wire.Request(id="r1", action="echo", payload=None))
    assert len(link._queue) == queued + 1


# --- the peer's own size bound on what it receives (SPEC 7.10) -------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"v":1,"type":"request","id":"big1","action":"echo","payload":"' + b"a" * 100_000 + b'"}', "big1"),
        (b"x" * 5000, None),  # not JSON: no id to read
        (b'{"v":1,"type":"request","action":"echo","payload":"' + b"a" * 5000 + b'","id":"late"}', None),  # past 4096
        (b' { "a" : [1, {"b": "}"}], "\\u0069d" : "escaped" }', "escaped"),  # names count as decoded
        (b'{"id": 5}', None),
        (b'{"id": ""}', None),
        (b'{"id": "' + b"i" * 129 + b'"}', None),
        (b'{"a": tru', None),
        (b"[1]", None),
        (b'{"a":' + b"[" * 3000, None),  # nested past the prefix: given up, not recursed into
        (b'{"x":"' + "é".encode() * 2047 + b'","id":"cut"}', None),  # a character cut at byte 4096
        (b'{"id":"\xff"}', None),  # not UTF-8
    ],
)
def test_the_id_of_a_body_not_processed_is_read_from_its_first_4096_bytes_only(body: bytes, expected: str | None) -> None:
    from zerobridge import wire

    assert wire.readable_id(body) == expected


async def test_a_message_over_the_peers_limit_is_answered_too_large_unread_and_the_peer_goes_on(fake_host: Any) -> None:
    limit = peer_module.MAX_MESSAGE_BYTES
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        body = json.dumps({"v": 1, "type": "request", "id": "big", "action": "echo", "payload": "x"}).encode()
        # Body and attachment one byte over the limit, each frame under libzmq's per-frame bound.
        host.send(None, body, bytes(limit + 1 - len(body)))
        refused = await host.next("response", id="big", timeout=LONG)
        assert refused["ok"] is False and refused["error"]["code"] == "too_large"
        assert str(limit) in refused["error"]["message"]
        host.send(None, body, bytes(limit - len(body)))  # exactly at the limit: processed (this peer serves no echo)
        assert (await host.next("response", id="big", timeout=LONG))["error"]["code"] == "unknown_action"
        assert peer.connected


async def test_a_flood_of_events_over_max_in_flight_is_warned_about_once_a_second(caplog: Any) -> None:
    from zerobridge import wire

    async def serve(request: Any, context: Any) -> None:
        raise AssertionError("no request is sent in this test")

    link = link_module.Link(send=lambda frames: True, serve=serve, on_message=lambda message: None, max_in_flight=0)
    with caplog.at_level(logging.DEBUG, logger=link_module.log.name):
        for index in range(100):
            link._on_event(wire.Event(action="note", payload=index))
    not_run = [r for r in caplog.records if "not run" in r.getMessage()]
    assert len(not_run) == 100
    assert [r.levelno for r in not_run].count(logging.WARNING) == 1
