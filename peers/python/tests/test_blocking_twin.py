"""The blocking twin (`zerobridge.connect_sync`) against the real conformance host."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import zerobridge
import zerobridge.sync
from zerobridge import BridgeError, BridgeTimeout


def test_call_stream_post_and_errors(host: Any) -> None:
    with zerobridge.connect_sync(host.endpoint, name="py-sync") as peer:
        assert peer.connected and peer.session
        assert peer.call("add", {"a": 2, "b": 3}) == 5
        with peer.stream("count", {"n": 4}) as call:
            assert list(call.progress) == [{"i": k, "n": 4} for k in range(1, 5)]
            assert call.result == {"n": 4}
        peer.post("echo", "fire and forget")
        with pytest.raises(BridgeTimeout):
            peer.call("sleep", {"ms": 5000}, timeout=0.2)
        with pytest.raises(BridgeError) as caught:
            peer.call("fail", {"message": "sync"})
        assert caught.value.code == "handler_error"
    assert not peer.connected


def test_the_host_calls_sync_handlers_and_sends_events(host: Any) -> None:
    emitted = threading.Event()
    payloads: list[Any] = []
    with zerobridge.sync.connect(host.endpoint, name="py-sync-handlers", handlers={"triple": lambda p: p * 3}) as peer:

        @peer.on_event("ping-me")
        def on_ping(payload: Any) -> None:
            payloads.append(payload)
            emitted.set()

        @peer.handler("blocking")
        def blocking(payload: float) -> str:
            time.sleep(payload)  # a worker thread: the private loop keeps serving meanwhile
            return "done"

        assert peer.call("callback", {"action": "triple", "payload": 5}) == 15
        assert peer.call("callback", {"action": "blocking", "payload": 0.05}) == "done"
        assert peer.call("emit", {"action": "ping-me", "payload": "hi"}) is None
        assert emitted.wait(5) and payloads == ["hi"]


def test_connect_sync_without_a_host_fails_clearly() -> None:
    with pytest.raises(zerobridge.HostUnreachable, match="no host listens at tcp://127.0.0.1:1"):  # at once
        zerobridge.connect_sync("tcp://127.0.0.1:1", name="p")


def test_evaluate_through_the_twin(host: Any) -> None:
    with zerobridge.connect_sync(host.endpoint, name="py-sync-eval", evaluate=True) as peer:
        script = "import asyncio\nawait asyncio.sleep(0)\nreturn greeting.upper()"
        assert peer.call("evaluate", {"script": script, "arguments": {"greeting": "hi"}}) == "HI"
