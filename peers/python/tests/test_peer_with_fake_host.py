"""The peer and its link against a scripted in-test host (a real pyzmq ROUTER), for what the
conformance host cannot show: a host that never answers, sends garbage, goes silent or changes session."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from zerobridge import BridgeError, BridgeTimeout, PeerLost, wire


async def test_connect_sends_hello_with_handlers_and_features(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="etl", handlers={"b": lambda p: p}, evaluate=True, heartbeat_ms=250)

        @peer.handler("a")
        async def a(payload: Any) -> Any:
            return payload

        async with peer:
            hello = await host.next("hello")
            assert hello == {
                "v": 1, "type": "hello", "peer": "etl", "actions": ["a", "b"], "features": ["evaluate", "batch"], "heartbeat_ms": 250,
                "catalogue": peer.catalogue.hash,  # since 1.3 (SPEC 7.8)
                "topics": [],  # since 1.3 (SPEC 7.15): every hello says the whole set
            }
            assert peer.connected and peer.session == "session-1" and peer.host == "fake"
            assert peer.heartbeat_ms == 5000  # the welcome's value is in force


async def test_connect_without_a_host_fails_clearly() -> None:
    started = time.monotonic()
    # Refused by the kernel: said at once (docs/errors.md), not after the connect timeout.
    with pytest.raises(zerobridge.HostUnreachable, match="no host listens at tcp://127.0.0.1:1"):
        async with zerobridge.connect("tcp://127.0.0.1:1", name="p", connect_timeout=10):
            pass
    assert time.monotonic() - started < 5


async def test_call_fails_at_its_deadline_when_the_host_never_answers(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        started = time.monotonic()
        with pytest.raises(BridgeTimeout) as caught:
            await peer.call("echo", 1, timeout=0.3)
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 3
        assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, asyncio.TimeoutError)
        assert caught.value.code == "timeout"
        request = await host.next("request", action="echo")
        assert request["timeout_ms"] == 300
        # The late response is dropped; the link goes on working.
        host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": "late"})
        answering = asyncio.ensure_future(peer.call("echo", 2))
        second = await host.next("request", action="echo")
        assert second["id"] != request["id"]
        host.send(None, {"v": 1, "type": "response", "id": second["id"], "ok": True, "result": 2})
        assert await answering == 2


async def test_cancelling_a_call_sends_cancel_with_its_id(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        task = asyncio.ensure_future(peer.call("sleep", {"ms": 10000}))
        request = await host.next("request", action="sleep")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await host.next("cancel") == {"v": 1, "type": "cancel", "id": request["id"]}


async def test_stream_delivers_progress_in_order_and_drops_stale_progress(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.stream("count", {"n": 3}) as call:
            request = await host.next("request", action="count")
            assert request["progress"] is True
            rid = request["id"]
            for seq in (1, 2, 2, 3):  # the repeated 2 must be dropped
                host.send(None, {"v": 1, "type": "progress", "id": rid, "seq": seq, "payload": {"i": seq}})
            host.send(None, {"v": 1, "type": "progress", "id": "nobody", "seq": 1, "payload": "x"})
            host.send(None, {"v": 1, "type": "response", "id": rid, "ok": True, "result": {"n": 3}})
            seen = [p["i"] async for p in call.progress]
            assert seen == [1, 2, 3]
            assert await call.result == {"n": 3}


async def test_leaving_a_stream_early_cancels_it(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.stream("count", {"n": 100}) as call:
            request = await host.next("request", action="count")
            host.send(None, {"v": 1, "type": "progress", "id": request["id"], "seq": 1, "payload": 1})
            async for _ in call.progress:
                break
        assert await host.next("cancel") == {"v": 1, "type": "cancel", "id": request["id"]}
        with pytest.raises(zerobridge.BridgeCancelled):
            await call.result


async def test_error_responses_raise_bridge_errors_with_code_message_data(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        task = asyncio.ensure_future(peer.call("add", {"a": "x"}))
        request = await host.next("request", action="add")
        host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": False,
                         "error": {"code": "invalid_payload", "message": "a must be a number", "data": {"field": "a"}}})
        with pytest.raises(BridgeError) as caught:
            await task
        assert (caught.value.code, caught.value.message, caught.value.data) == ("invalid_payload", "a must be a number", {"field": "a"})


async def test_unreadable_response_fails_its_call_and_is_answered_bad_message(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        task = asyncio.ensure_future(peer.call("echo", 1))
        request = await host.next("request", action="echo")
        host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": "yes"})
        with pytest.raises(BridgeError) as caught:
            await task
        assert caught.value.code == "bad_message"
        answer = await host.next("response")  # SPEC 15.4: answered with the id, in the host's id space
        assert (answer["id"], answer["error"]["code"]) == (request["id"], "bad_message")


async def send_request(host: Any, rid: str, action: str, payload: Any = None, **extra: Any) -> None:
    host.send(None, {"v": 1, "type": "request", "id": rid, "action": action, "payload": payload, **extra})


async def test_host_calls_sync_and_async_handlers(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("upper")
        def upper(text: str) -> str:  # sync: runs in a worker thread
            return text.upper()

        @peer.handler("add")
        async def add(payload: dict[str, int]) -> int:
            await asyncio.sleep(0)
            return payload["a"] + payload["b"]

        @peer.handler("nothing")
        def nothing() -> None:
            return None

        async with peer:
            await send_request(host, "h1", "upper", "abc")
            await send_request(host, "h2", "add", {"a": 1, "b": 2})
            await send_request(host, "h3", "nothing", {"ignored": True})
            await send_request(host, "h4", "$actions")
            assert (await host.next("response", id="h1"))["result"] == "ABC"
            assert await host.next("response", id="h2") == {"v": 1, "type": "response", "id": "h2", "ok": True, "result": 3}
            assert (await host.next("response", id="h3"))["result"] is None
            assert (await host.next("response", id="h4"))["result"] == ["add", "nothing", "upper"]


async def test_handler_failures_become_error_responses(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("boom")
        def boom(payload: Any) -> Any:
            raise ValueError("no good")

        @peer.handler("picky")
        async def picky(payload: Any) -> Any:
            raise BridgeError("invalid_payload", "want a list", {"got": payload})

        @peer.handler("opaque")
        def opaque(payload: Any) -> Any:
            return object()

        async with peer:
            await send_request(host, "1", "boom")
            await send_request(host, "2", "picky", 5)
            await send_request(host, "3", "opaque")
            await send_request(host, "4", "missing")
            await send_request(host, "5", "$evaluate", {"script": "return 1"})
            boom_error = (await host.next("response", id="1"))["error"]
            assert boom_error["code"] == "handler_error" and "no good" in boom_error["message"]
            assert (await host.next("response", id="2"))["error"] == {"code": "invalid_payload", "message": "want a list", "data": {"got": 5}}
            assert (await host.next("response", id="3"))["error"]["code"] == "handler_error"
            assert (await host.next("response", id="4"))["error"]["code"] == "unknown_action"
            assert (await host.next("response", id="5"))["error"]["code"] == "not_allowed"


async def test_handler_progress_precedes_the_response(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("work")
        async def work(payload: int, request: zerobridge.RequestContext) -> str:
            for i in range(1, payload + 1):
                await request.progress({"done": i})
            return request.id

        @peer.handler("work_sync")
        def work_sync(payload: int, request: zerobridge.RequestContext) -> str:
            for i in range(1, payload + 1):
                request.progress({"done": i})
            return request.id

        async with peer:
            for action in ("work", "work_sync"):
                rid = f"{action}-1"
                await send_request(host, rid, action, 4, progress=True)
                response = await host.next("response", id=rid)
                assert response["result"] == rid
                progress = [(b["seq"], b["payload"]) for b in host.bodies("progress") if b["id"] == rid]
                assert progress == [(i, {"done": i}) for i in range(1, 5)]
            # Without "progress": true nothing but the response is sent.
            await send_request(host, "quiet", "work", 3)
            await host.next("response", id="quiet")
            assert [b for b in host.bodies("progress") if b["id"] == "quiet"] == []


async def test_cancel_answers_cancelled_at_once_and_cancels_the_handler_task(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        started = asyncio.Event()
        handler_cancelled = asyncio.Event()

        @peer.handler("wait")
        async def wait(payload: Any) -> str:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                handler_cancelled.set()
                raise
            return "never"

        async with peer:
            await send_request(host, "w1", "wait")
            await started.wait()
            await send_request(host, "w1", "wait")  # duplicate while in flight
            dup = await host.next("response", id="w1")
            assert dup["error"]["code"] == "duplicate_id"
            host.send(None, {"v": 1, "type": "cancel", "id": "w1"})
            response = await host.next("response", id="w1")
            assert response["error"]["code"] == "cancelled"
            await asyncio.wait_for(handler_cancelled.wait(), 5)
            host.send(None, {"v": 1, "type": "cancel", "id": "w1"})  # already answered: ignored
            host.send(None, {"v": 1, "type": "cancel", "id": "never-sent"})
            await send_request(host, "after", "$actions")
            await host.next("response", id="after")
            assert len([b for b in host.bodies("response") if b["id"] == "w1"]) == 2  # duplicate_id + cancelled


async def test_timeout_ms_answers_timeout_and_cancels_the_handler(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        deadlines: list[float | None] = []
        handler_cancelled = asyncio.Event()

        @peer.handler("slow")
        async def slow(payload: Any, request: zerobridge.RequestContext) -> None:
            deadlines.append(request.deadline)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                handler_cancelled.set()
                raise

        async with peer:
            started = time.monotonic()
            await send_request(host, "t1", "slow", timeout_ms=200)
            response = await host.next("response", id="t1")
            assert response["error"]["code"] == "timeout"
            assert 0.15 <= time.monotonic() - started < 3
            await asyncio.wait_for(handler_cancelled.wait(), 5)
            assert deadlines[0] is not None and deadlines[0] - started < 1


BAD_FRAMES: list[tuple[str, list[bytes], str, str | None]] = [
    ("one frame", [b"{}"], "bad_message", None),
    ("not JSON", [b"", b"{"], "bad_message", None),
    ("not UTF-8", [b"", b"\xc3\x28"], "bad_message", None),
    ("array body", [b"", b"[1]"], "bad_message", None),
    ("version 2", [b"", b'{"v":2,"type":"request","id":"v2","action":"echo"}'], "unsupported_version", "v2"),
    ("unknown type", [b"", b'{"v":1,"type":"yell","id":"y"}'], "bad_message", "y"),
    ("request without action", [b"", b'{"v":1,"type":"request","id":"na"}'], "bad_message", "na"),
    ("event without action", [b"", b'{"v":1,"type":"event"}'], "bad_message", None),
    ("malformed progress", [b"", b'{"v":1,"type":"progress","id":"pg","seq":0}'], "bad_message", "pg"),
    ("hello from a host", [b"", b'{"v":1,"type":"hello","peer":"host"}'], "bad_message", None),
    ("dangling attachment", [b"", b'{"v":1,"type":"request","id":"at","action":"echo","payload":{"$attachment":0}}'], "bad_message", "at"),
]


async def test_bad_input_from_the_host_is_answered_and_never_crashes_the_peer(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", handlers={"echo": lambda p: p})
        async with peer:
            for _, frames, _, _ in BAD_FRAMES:
                host.send_frames(None, frames)
            answers = [await host.next("response") for _ in BAD_FRAMES]
            assert [(a["id"], a["ok"], a["error"]["code"]) for a in answers] == [
                (rid, False, code) for _, _, code, rid in BAD_FRAMES
            ]
            # Things that are merely unexpected are dropped without an answer.
            host.send(None, {"v": 1, "type": "response", "id": "unknown", "ok": True})
            host.send(None, {"v": 1, "type": "progress", "id": "unknown", "seq": 1})
            host.send(None, {"v": 1, "type": "event", "action": "nobody-listens", "payload": 1})
            host.send(None, {"v": 1, "type": "pong"})
            await send_request(host, "still", "echo", "alive")
            assert (await host.next("response", id="still"))["result"] == "alive"
            assert len(host.bodies("response")) == len(BAD_FRAMES) + 1
            assert peer.connected


async def test_events_both_ways(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")
        received: asyncio.Queue[Any] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        @peer.on_event("note")
        async def note(payload: Any) -> None:
            received.put_nowait(payload)

        @peer.on_event("sync_note")
        def sync_note(payload: Any) -> None:  # runs in a worker thread
            loop.call_soon_threadsafe(received.put_nowait, ("sync", payload))

        async with peer:
            await peer.post("log", {"line": 1})
            assert await host.next("event") == {"v": 1, "type": "event", "action": "log", "payload": {"line": 1}}
            for i in range(5):
                host.send(None, {"v": 1, "type": "event", "action": "note", "payload": i})
            assert [await asyncio.wait_for(received.get(), 5) for _ in range(5)] == [0, 1, 2, 3, 4]
            host.send(None, {"v": 1, "type": "event", "action": "sync_note", "payload": "s"})
            assert await asyncio.wait_for(received.get(), 5) == ("sync", "s")


async def test_handlers_changed_after_connect_are_announced_in_a_new_hello(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        assert (await host.next("hello"))["actions"] == []
        peer.add_handler("one", lambda p: 1)
        peer.add_handler("two", lambda p: 2)  # the same loop turn: one hello for both
        again = await host.next("hello")
        assert again["actions"] == ["one", "two"] and again["session"] == "session-1"
        peer.remove_handler("one")
        assert (await host.next("hello"))["actions"] == ["two"]
        assert len(host.bodies("hello")) == 3


async def test_idle_peer_pings_and_silent_host_is_lost_then_peer_reconnects(fake_host: Any) -> None:
    async with fake_host(heartbeat_ms=100) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        first_routing, _ = await host.next_with_routing("hello")
        await host.next("ping", timeout=5)  # nothing sent for 100 ms -> ping
        pending = asyncio.ensure_future(peer.call("echo", "x"))
        await host.next("request", action="echo")
        host.silent = True  # no pong, no answer
        started = time.monotonic()
        with pytest.raises(PeerLost):
            await pending
        assert 0.2 <= time.monotonic() - started < 5
        assert not peer.connected
        with pytest.raises(PeerLost):
            await peer.call("echo", 1)
        host.silent = False
        routing, hello = await host.next_with_routing("hello", timeout=5)
        assert routing != first_routing and "session" not in hello  # a fresh socket and a fresh session
        await peer.wait_connected(5)
        assert peer.session == "session-2"


async def test_bye_from_host_fails_pending_calls_with_peer_lost(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        pending = asyncio.ensure_future(peer.call("echo", "x"))
        await host.next("request", action="echo")
        host.send(None, {"v": 1, "type": "bye"})
        with pytest.raises(PeerLost):
            await pending
        await peer.wait_connected(5)  # the fake host is still there and welcomes the new hello
        assert peer.session == "session-2"


async def test_host_restart_with_a_new_session_fails_calls_of_the_old_one(fake_host: Any, ipc_dir: Path) -> None:
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint) as host:
        peer = await zerobridge.connect(endpoint, name="p")
        try:
            pending = asyncio.ensure_future(peer.call("echo", "x"))
            await host.next("request", action="echo")
        except BaseException:
            await peer.close()
            raise
    try:
        async with fake_host(endpoint=endpoint) as restarted:
            restarted.sessions = 10  # the new host knows nothing of session-1
            hello = await restarted.next("hello", timeout=10)
            assert hello["session"] == "session-1"
            with pytest.raises(PeerLost):
                await pending
            assert peer.session == "session-11"
            assert peer.connected
    finally:
        await peer.close()


# --- SPEC 1.2: resume tokens and names held by one live session ----------------------------------------------


@pytest.mark.parametrize("tokens", [True, False], ids=["1.2 host", "1.1 host"])
async def test_a_reconnected_peer_resumes_with_the_token_of_its_session(fake_host: Any, ipc_dir: Path, tokens: bool) -> None:
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint, tokens=tokens) as host:
        peer = await zerobridge.connect(endpoint, name="p")
        try:
            pending = asyncio.ensure_future(peer.call("echo", "x"))
            await host.next("request", action="echo")
        except BaseException:
            await peer.close()
            raise
        given = dict(host.tokens or {})
    try:
        # The same host as far as the peer can tell: the transport came back, and the host still has session-1.
        async with fake_host(endpoint=endpoint, tokens=tokens) as back:
            back.sessions, back.known_sessions = 1, {"session-1"}
            if tokens:
                back.tokens = given
            routing, hello = await back.next_with_routing("hello", timeout=10)
            assert hello["session"] == "session-1"
            if tokens:
                assert hello["resume_token"] == given["session-1"]
            else:  # a welcome without a token: the peer has none to send
                assert "resume_token" not in hello
            answering = asyncio.ensure_future(peer.call("echo", "after"))  # its answer follows the welcome
            request = await back.next("request", action="echo", timeout=10)
            back.send(routing, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": "after"})
            assert await answering == "after"
            assert peer.session == "session-1" and peer.connected
            assert not pending.done()  # resumed: the call in flight goes on
    finally:
        await peer.close()
    with pytest.raises(PeerLost):
        await pending


# --- SPEC 2.1: without CURVE, $evaluate is for the first host that welcomed the peer ------------------------------


async def test_after_a_loss_evaluate_is_neither_offered_nor_served_without_curve(
    fake_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="zerobridge")
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p", evaluate=True) as peer:
        assert (await host.next("hello"))["features"] == ["evaluate", "batch"]
        await send_request(host, "e1", "$evaluate", {"script": "return 1 + 1"})
        assert (await host.next("response", id="e1"))["result"] == 2
        for _ in range(2):  # lost twice: warned once
            host.send(None, {"v": 1, "type": "bye"})
            hello = await host.next("hello", timeout=10)
            assert hello["features"] == ["batch"] and "session" not in hello
            await peer.wait_connected(10)
        await send_request(host, "e2", "$evaluate", {"script": "return 1 + 1"})
        error = (await host.next("response", id="e2"))["error"]
        assert error["code"] == "not_allowed" and "CURVE" in error["message"]
        assert peer.evaluate_enabled  # the user's choice stands; the peer withdrew it from later hosts
    assert caplog.text.count("$evaluate is refused from now on") == 1


async def test_a_dropped_connection_withdraws_evaluate_even_when_the_session_resumes(fake_host: Any, ipc_dir: Path) -> None:
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint) as host:
        peer = await zerobridge.connect(endpoint, name="p", evaluate=True)
        assert (await host.next("hello"))["features"] == ["evaluate", "batch"]
        known = dict(host.tokens or {})
    try:
        # Whoever binds the endpoint now may be another process, even one that plays along with the resume.
        async with fake_host(endpoint=endpoint) as back:
            back.sessions, back.known_sessions, back.tokens = 1, {"session-1"}, known
            hello = await back.next("hello", timeout=10)
            assert hello["session"] == "session-1" and hello["features"] == ["batch"]
            await send_request(back, "e", "$evaluate", {"script": "return 1"})
            assert (await back.next("response", id="e", timeout=10))["error"]["code"] == "not_allowed"
    finally:
        await peer.close()


async def test_name_taken_while_connecting_is_retried_until_welcomed(fake_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    async with fake_host() as host:
        host.refuse_names = True
        peer = zerobridge.connect(host.endpoint, name="p", connect_timeout=20, wait_for_name=True)
        started = time.monotonic()
        connecting = asyncio.ensure_future(peer.start())
        try:
            await host.next("hello")
            await host.next("hello", timeout=10)  # said again: "not yet", not a failure
            assert time.monotonic() - started >= 0.15  # after its retry interval, not in a loop
            assert not connecting.done()
            host.refuse_names = False
            await asyncio.wait_for(asyncio.shield(connecting), 10)
            assert peer.connected and peer.session == "session-1"
        finally:
            connecting.cancel()
            await peer.close()


async def test_name_taken_until_the_connect_timeout_fails_with_name_taken(fake_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    async with fake_host() as host:
        host.refuse_names = True
        peer = zerobridge.connect(host.endpoint, name="worker", connect_timeout=1.0, wait_for_name=True)
        started = time.monotonic()
        with pytest.raises(zerobridge.NameTaken) as caught:
            await peer.start()
        assert 0.9 <= time.monotonic() - started < 10
        assert caught.value.code == "name_taken" and not isinstance(caught.value, TimeoutError)
        assert "'worker' is held by another live session" in caught.value.message
        assert 2 <= len(host.bodies("hello")) <= 10  # said again at its retry interval (0.2 s here), not in a loop
        assert not peer.connected


async def test_after_a_loss_name_taken_is_retried_in_the_background(fake_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        await host.next("hello")
        host.refuse_names = True  # the host still holds the old session, and with it the name
        host.send(None, {"v": 1, "type": "bye"})
        for _ in range(3):  # refused again and again: no connect timeout after a loss
            hello = await host.next("hello", timeout=10)
            assert "session" not in hello and "resume_token" not in hello
        assert not peer.connected
        host.refuse_names = False
        await peer.wait_connected(10)
        assert peer.session == "session-2"


async def test_a_resume_refused_name_taken_is_a_loss(fake_host: Any, ipc_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint) as host:
        peer = await zerobridge.connect(endpoint, name="p")
        try:
            pending = asyncio.ensure_future(peer.call("echo", "x"))
            await host.next("request", action="echo")
        except BaseException:
            await peer.close()
            raise
    try:
        # A restarted host where another process took the name meanwhile: our session is gone.
        async with fake_host(endpoint=endpoint) as restarted:
            restarted.refuse_names = True
            assert (await restarted.next("hello", timeout=10))["session"] == "session-1"
            with pytest.raises(PeerLost):
                await pending
            fresh = await restarted.next("hello", timeout=10)  # on a new socket, for a new session
            assert "session" not in fresh and "resume_token" not in fresh
            restarted.refuse_names = False
            await peer.wait_connected(10)
            assert peer.session == "session-1" and peer.connected  # the restarted host's first session
    finally:
        await peer.close()


async def test_the_resume_token_is_never_logged(fake_host: Any, ipc_dir: Path, caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    caplog.set_level(logging.DEBUG, logger="zerobridge")
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint) as host:
        peer = await zerobridge.connect(endpoint, name="p")
        token = host.tokens["session-1"]
        known = dict(host.tokens)
    try:
        async with fake_host(endpoint=endpoint) as back:
            back.sessions, back.known_sessions, back.tokens = 1, {"session-1"}, known
            assert (await back.next("hello", timeout=10))["resume_token"] == token  # resumed
            # A welcome whose token is malformed is refused without echoing it.
            wrong = token.upper()
            back.send(None, {**back.welcome("session-1"), "resume_token": wrong})
            assert (await back.next("response"))["error"]["code"] == "bad_message"
            back.refuse_names = True  # then lost, and refused for a while
            back.send(None, {"v": 1, "type": "bye"})
            await back.next("hello", timeout=10)
            await back.next("hello", timeout=10)
            back.refuse_names = False
            await peer.wait_connected(10)
            texts = [repr(peer), str(peer), repr(wire.Welcome("h", "s", (), 1, wire.Limits(1, 1), token)),
                     repr(wire.Hello("p", session="s", resume_token=token))]
    finally:
        await peer.close()
    assert "refuses the name" in caplog.text and "lost the host" in caplog.text  # the log was captured
    for text in (caplog.text, *texts):
        assert token not in text and wrong not in text


async def test_messages_over_the_hosts_limit_are_refused_locally(fake_host: Any) -> None:
    async with fake_host(max_message_bytes=200) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        with pytest.raises(BridgeError) as caught:
            await peer.call("echo", "x" * 500)
        assert caught.value.code == "too_large"
        with pytest.raises(BridgeError) as caught:  # SPEC 7.14: refused before sending, naming the part
            await peer.call("echo", {1, 2})
        assert caught.value.code == "invalid_payload" and caught.value.message.startswith("payload: a set")
        await peer.post("marker")
        await host.next("event", action="marker")
        assert host.bodies("request") == []


async def test_connection_file_in_place_of_an_endpoint(fake_host: Any, tmp_path: Path) -> None:
    async with fake_host() as host:
        path = tmp_path / "connection.json"
        path.write_text(json.dumps({"protocol": 1, "endpoint": host.endpoint, "host": "fake",
                                    "signature_scheme": "hmac-sha256", "key": "", "future_field": 1}))
        async with zerobridge.connect(path, name="p") as peer:
            assert peer.endpoint == host.endpoint and peer.connected
        async with zerobridge.connect(str(path), name="p") as peer:
            assert peer.connected


@pytest.mark.parametrize(
    ("content", "complaint"),
    [("{", "cannot read"), ("[]", "not a JSON object"), ('{"protocol": 2, "endpoint": "tcp://x:1"}', "protocol"),
     ('{"protocol": 1}', "no usable endpoint"),
     ('{"protocol": 1, "endpoint": "tcp://x:1", "host": "h", "signature_scheme": "hmac-sha256", "key": "zz"}', "key must be hex")],
)
def test_bad_connection_files_are_refused_clearly(tmp_path: Path, content: str, complaint: str) -> None:
    path = tmp_path / "connection.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=complaint):
        zerobridge.connect(path, name="p")
    with pytest.raises(ValueError, match="cannot read"):
        zerobridge.connect(tmp_path / "missing.json", name="p")


async def test_ctrl_c_in_the_blocking_twin_cancels_the_call_on_the_host(fake_host: Any) -> None:
    script = (
        "import sys, zerobridge\n"
        "peer = zerobridge.connect_sync(sys.argv[1], name='script')\n"
        "try:\n"
        "    peer.call('sleep', {'ms': 60000})\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    async with fake_host() as host:
        # Python turns SIGINT into KeyboardInterrupt only if SIGINT was not ignored when it started, and a
        # non-interactive shell starts background jobs (make test run with `&`) with SIGINT ignored: the
        # script gets SIGINT's default, as it would from a terminal.
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, host.endpoint, stdout=asyncio.subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            request = await host.next("request", action="sleep", timeout=15)
            process.send_signal(signal.SIGINT)
            assert await host.next("cancel", timeout=10) == {"v": 1, "type": "cancel", "id": request["id"]}
            await host.next("bye", timeout=10)  # the forgotten peer is closed at exit
            stdout, _ = await asyncio.wait_for(process.communicate(), 10)
            assert stdout == b"interrupted\n" and process.returncode == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
