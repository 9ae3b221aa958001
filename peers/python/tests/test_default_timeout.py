"""One default (SPEC 7.3): calls and streams without a timeout wait 30 s, and say so on the wire; timeout=None asks for
no limit, and the request carries neither timeout_ms nor deadline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import zerobridge

LONG = 10.0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def answer(host: Any, request: dict[str, Any], result: Any) -> None:
    host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": result})


def test_the_default_is_thirty_seconds() -> None:
    assert zerobridge.DEFAULT_TIMEOUT == 30.0


async def test_a_call_without_a_timeout_carries_30000_ms(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        before = wall_ms()
        call = asyncio.ensure_future(peer.call("echo", 1))
        sent = await host.next("request", action="echo", timeout=LONG)
        after = wall_ms()
        assert sent["timeout_ms"] == 30000
        assert before + 30000 <= sent["deadline"] <= after + 30000
        answer(host, sent, 1)
        assert await call == 1


async def test_a_stream_without_a_timeout_carries_30000_ms(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        async with peer.stream("count", {"n": 1}) as call:
            sent = await host.next("request", action="count", timeout=LONG)
            assert sent["timeout_ms"] == 30000 and sent["progress"] is True and "deadline" in sent
            answer(host, sent, {"n": 1})
            assert await call.result == {"n": 1}


async def test_timeout_none_sends_no_limit(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        call = asyncio.ensure_future(peer.call("echo", 2, timeout=None))
        sent = await host.next("request", action="echo", timeout=LONG)
        assert "timeout_ms" not in sent and "deadline" not in sent
        answer(host, sent, 2)
        assert await call == 2
        async with peer.stream("count", {"n": 0}, timeout=None) as stream:
            sent = await host.next("request", action="count", timeout=LONG)
            assert "timeout_ms" not in sent and "deadline" not in sent
            answer(host, sent, {"n": 0})
            assert await stream.result == {"n": 0}


async def test_an_explicit_timeout_still_wins(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        call = asyncio.ensure_future(peer.call("echo", 3, timeout=1.5))
        sent = await host.next("request", action="echo", timeout=LONG)
        assert sent["timeout_ms"] == 1500
        answer(host, sent, 3)
        assert await call == 3


def test_the_blocking_twin_has_the_same_default(fake_host: Any) -> None:
    async def scenario() -> None:
        async with fake_host() as host:
            def blocking() -> tuple[Any, Any]:
                with zerobridge.connect_sync(host.endpoint, name="twin") as peer:
                    return peer.call("echo", "default"), peer.call("echo", "none", timeout=None)

            calling = asyncio.ensure_future(asyncio.to_thread(blocking))
            first = await host.next("request", action="echo", timeout=LONG)
            assert first["timeout_ms"] == 30000 and "deadline" in first
            answer(host, first, "default")
            second = await host.next("request", action="echo", timeout=LONG)
            assert "timeout_ms" not in second and "deadline" not in second
            answer(host, second, "none")
            assert await calling == ("default", "none")

    asyncio.run(asyncio.wait_for(scenario(), 30))
