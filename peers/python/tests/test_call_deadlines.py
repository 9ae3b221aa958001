"""Our calls' deadlines (SPEC 7.3) share one timer per link: each call still fails at its own deadline, in deadline
order whatever the order they were made in, a call that ends first never times out, and the calls that ended leave
a bounded number of entries behind: at most twice the most calls in flight at once, and 256."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import zerobridge
from zerobridge.errors import BridgeTimeout


async def _failure_time(call: Any) -> float:
    with pytest.raises(BridgeTimeout):
        await call
    return time.monotonic()


async def test_each_call_times_out_at_its_own_deadline_in_deadline_order(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="deadlines") as peer:
        started = time.monotonic()
        # Made latest first: the heap, not the order of the calls, decides which expires first.
        late = asyncio.ensure_future(_failure_time(peer.call("sleep", {"ms": 20_000}, timeout=1.2)))
        early = asyncio.ensure_future(_failure_time(peer.call("sleep", {"ms": 20_000}, timeout=0.4)))
        unlimited = asyncio.ensure_future(peer.call("sleep", {"ms": 2_500}, timeout=None))
        answered = await peer.call("echo", "first", timeout=0.2)  # ends before its deadline: no timeout after it
        assert answered == "first"
        early_at, late_at = await early, await late
        assert started + 0.4 <= early_at < late_at
        assert late_at >= started + 1.2
        assert not unlimited.done()  # no deadline: it waits for its answer
        assert await unlimited == {"slept_ms": 2_500}


async def test_ended_calls_leave_a_bounded_number_of_deadline_entries(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="deadline-bound") as peer:
        link = peer._live_link()  # noqa: SLF001  # the bound is the link's own
        pending = asyncio.ensure_future(peer.call("sleep", {"ms": 20_000}, timeout=5))
        most_in_flight = 250 + 1  # each round's calls and the sleep
        for round_ in range(20):  # 5,000 calls in all, each with a deadline
            results = await asyncio.gather(*(peer.call("echo", i, timeout=30) for i in range(250)))
            assert results == list(range(250))
            assert len(link._deadlines) <= 2 * most_in_flight + 257, round_  # noqa: SLF001
        # The call still running keeps its deadline through every compaction.
        with pytest.raises(BridgeTimeout):
            await pending
