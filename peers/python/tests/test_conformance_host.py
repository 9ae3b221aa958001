"""The Python peer against the real conformance host (`zerobridge serve --conformance`), over tcp and ipc.

These fail (not skip) when the host binary is missing or does not start: see conftest.HostProcess."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import zerobridge
from zerobridge import BridgeCancelled, BridgeError, BridgeTimeout, PeerLost


async def test_echo_returns_the_payload(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-echo") as peer:
        assert peer.host == "conformance" and peer.session
        for payload in [None, 0, -7, 1.5, "héllo ☃", [1, [2, [3]]], {"a": {"b": None}, "t": True}]:
            assert await peer.call("echo", payload) == payload


async def test_add_keeps_integers_and_refuses_bad_payloads(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-add") as peer:
        result = await peer.call("add", {"a": 1, "b": 2})
        assert result == 3 and type(result) is int
        assert await peer.call("add", {"a": 0.5, "b": 2}) == 2.5
        for bad in [{"a": 1}, {"a": "1", "b": 2}, [1, 2], None]:
            with pytest.raises(BridgeError) as caught:
                await peer.call("add", bad)
            assert caught.value.code == "invalid_payload"


async def test_sleep_answers_after_the_wait(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-sleep") as peer:
        started = time.monotonic()
        assert await peer.call("sleep", {"ms": 50}) == {"slept_ms": 50}
        assert time.monotonic() - started >= 0.045


async def test_sleep_past_the_timeout_fails_with_timeout(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-timeout") as peer:
        started = time.monotonic()
        with pytest.raises(BridgeTimeout) as caught:
            await peer.call("sleep", {"ms": 10000}, timeout=0.2)
        assert caught.value.code == "timeout" and isinstance(caught.value, TimeoutError)
        assert 0.15 <= time.monotonic() - started < 3
        assert await peer.call("echo", "after") == "after"


async def test_count_streams_progress_in_order_then_the_result(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-count") as peer:
        async with peer.stream("count", {"n": 20}) as call:
            seen = [p async for p in call.progress]
            assert seen == [{"i": k, "n": 20} for k in range(1, 21)]
            assert await call.result == {"n": 20}
        # Without a stream no progress is asked for; only the result comes back.
        assert await peer.call("count", {"n": 3}) == {"n": 3}


async def test_cancelling_a_stream_ends_it_with_cancelled(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-cancel") as peer:
        async with peer.stream("count", {"n": 1000, "delay_ms": 20}) as call:
            with pytest.raises(BridgeCancelled):  # the progress loop ends with the call's error
                async for progress in call.progress:
                    if progress["i"] == 2:
                        call.cancel()
            with pytest.raises(BridgeCancelled):
                await call.result
        assert await peer.call("echo", "still fine") == "still fine"


async def test_asyncio_cancellation_of_a_call_sends_cancel(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-acancel") as peer:
        task = asyncio.ensure_future(peer.call("sleep", {"ms": 10000}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The host frees the request: a burst up to max_in_flight still fits, and the session works.
        assert await peer.call("echo", 1) == 1


async def test_fail_is_a_handler_error_with_the_message(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-fail") as peer:
        with pytest.raises(zerobridge.HandlerError) as caught:
            await peer.call("fail", {"message": "on purpose"})
        assert caught.value.code == "handler_error" and "on purpose" in caught.value.message


async def test_unknown_action_is_unknown_action(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-unknown") as peer:
        with pytest.raises(zerobridge.UnknownAction):
            await peer.call("no-such-action", {})


async def test_host_calls_python_handlers_through_callback(host: Any) -> None:
    peer = zerobridge.connect(host.endpoint, name="py-callback")

    @peer.handler("double")
    def double(payload: int) -> int:
        return payload * 2

    @peer.handler("greet")
    async def greet(payload: dict[str, str], request: zerobridge.RequestContext) -> str:
        await asyncio.sleep(0)
        return f"hello {payload['name']} ({request.action})"

    @peer.handler("explode")
    def explode(payload: Any) -> None:
        raise RuntimeError("kaboom")

    @peer.handler("dawdle")
    async def dawdle(payload: Any) -> None:
        await asyncio.sleep(30)

    async with peer:
        assert await peer.call("callback", {"action": "double", "payload": 21}) == 42
        assert await peer.call("callback", {"action": "greet", "payload": {"name": "swift"}}) == "hello swift (greet)"
        with pytest.raises(BridgeError) as caught:
            await peer.call("callback", {"action": "explode", "payload": None})
        assert caught.value.code == "handler_error" and "kaboom" in caught.value.message
        with pytest.raises(BridgeError) as caught:
            await peer.call("callback", {"action": "not-served", "payload": None})
        assert caught.value.code == "unknown_action"
        with pytest.raises(BridgeError) as caught:
            await peer.call("callback", {"action": "dawdle", "payload": None, "timeout_ms": 200})
        assert caught.value.code == "timeout"

        # A handler added after connect is announced with a new hello, then served.
        peer.add_handler("late", lambda payload: {"late": payload})
        assert await peer.call("callback", {"action": "late", "payload": 1}) == {"late": 1}
        assert await peer.call("callback", {"action": "$actions", "payload": None}) == [
            "dawdle", "double", "explode", "greet", "late",
        ]


async def test_evaluate_is_refused_by_default(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-noeval") as peer:
        with pytest.raises(BridgeError) as caught:
            await peer.call("evaluate", {"script": "return 1 + 1"})
        assert caught.value.code == "not_allowed"


async def test_evaluate_runs_scripts_when_turned_on(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-eval", evaluate=True) as peer:
        assert await peer.call("evaluate", {"script": "return a + b", "arguments": {"a": 1, "b": 2}}) == 3
        script = "import asyncio\nawait asyncio.sleep(0.01)\nreturn [n * factor for n in numbers]"
        assert await peer.call("evaluate", {"script": script, "arguments": {"numbers": [1, 2], "factor": 3}}) == [3, 6]
        assert await peer.call("evaluate", {"script": "x = 1"}) is None
        with pytest.raises(BridgeError) as caught:
            await peer.call("evaluate", {"script": "raise KeyError('k')"})
        assert caught.value.code == "handler_error" and "KeyError" in caught.value.message


async def test_emit_reaches_the_event_handler(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-emit") as peer:
        received: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        @peer.on_event("tick")
        async def tick(payload: Any) -> None:
            if not received.done():
                received.set_result(payload)

        assert await peer.call("emit", {"action": "tick", "payload": {"n": 7}}) is None
        assert await asyncio.wait_for(received, 5) == {"n": 7}


async def test_post_is_never_answered(host: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="zerobridge")
    async with zerobridge.connect(host.endpoint, name="py-post") as peer:
        await peer.post("echo", {"fire": "and forget"})
        await peer.post("no-such-handler", 1)
        # The calls after the posts come back on the same connection, after any answer to the posts.
        assert await peer.call("echo", "after posts") == "after posts"
    complaints = [r.getMessage() for r in caplog.records if r.name == "zerobridge" and r.levelno >= logging.DEBUG
                  and ("dropped" in r.getMessage() or "could not read" in r.getMessage())]
    assert complaints == []


async def test_once_is_released_after_its_first_call(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-once") as peer:
        try:
            await peer.call("once", "first")
        except BridgeError as error:
            assert error.code == "handler_gone"
        with pytest.raises(BridgeError) as caught:
            await peer.call("once", "second")
        assert caught.value.code == "handler_gone"


async def test_two_hundred_concurrent_calls_from_one_peer(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-many") as peer:
        results = await asyncio.gather(*(peer.call("echo", {"i": i}) for i in range(200)))
        assert results == [{"i": i} for i in range(200)]
        sums = await asyncio.gather(*(peer.call("add", {"a": i, "b": 1}) for i in range(200)))
        assert sums == list(range(1, 201))


async def test_bytes_payloads_travel_as_attachments(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-bytes") as peer:
        blob = bytes(range(256)) * 4
        assert await peer.call("echo", {"name": "blob", "data": blob}) == {"name": "blob", "data": blob}


async def test_connection_file_written_by_the_host(start_host: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    started = start_host("--connection-file", str(path))
    info = json.loads(path.read_text())
    assert info["protocol"] == 1 and info["endpoint"] == started.endpoint
    assert path.stat().st_mode & 0o777 == 0o600
    async with zerobridge.connect(path, name="py-file") as peer:
        assert await peer.call("echo", "via file") == "via file"


async def test_host_killed_mid_call_is_peer_lost_and_the_peer_reconnects(start_host: Callable[..., Any]) -> None:
    first = start_host()
    async with zerobridge.connect(first.endpoint, name="py-lost", heartbeat_ms=100) as peer:
        assert peer.heartbeat_ms == 100
        old_session = peer.session
        pending = asyncio.ensure_future(peer.call("sleep", {"ms": 20000}))
        await asyncio.sleep(0.1)
        first.kill()
        started = time.monotonic()
        with pytest.raises(PeerLost):
            await pending
        assert time.monotonic() - started < 5  # 3 x 100 ms of silence, with room for a slow machine
        with pytest.raises(PeerLost):
            await peer.call("echo", 1)
        second = start_host(endpoint=first.endpoint)
        await peer.wait_connected(10)
        assert peer.session != old_session
        assert await peer.call("echo", "back") == "back"
        second.stop()


async def test_graceful_host_shutdown_answers_what_is_in_flight_then_says_bye(start_host: Callable[..., Any]) -> None:
    process = start_host()
    async with zerobridge.connect(process.endpoint, name="py-bye") as peer:
        async with peer.stream("count", {"n": 3, "delay_ms": 100}) as call:
            # Stopped once the request is running (a fixed pause could end before it arrives, on a loaded machine:
            # a request that arrives during the drain is refused, not drained).
            steps = call.progress  # held: an iterator dropped before the call ends cancels it
            async for progress in steps:
                process.process.send_signal(signal.SIGTERM)
                break
            assert await call.result == {"n": 3}  # drained, not cut off
        deadline = time.monotonic() + 10
        while peer.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not peer.connected  # bye ended the session
        with pytest.raises(PeerLost):
            await peer.call("echo", 1)
