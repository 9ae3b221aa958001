"""The Python peer (`zerobridge`, asyncio) against a ZeroBridge host.

    python bench/py_peer.py echo ENDPOINT --window 1|N [--seconds S] [--max N]
    python bench/py_peer.py progress ENDPOINT --events N

ENDPOINT may be a host's connection file (keyed, and CURVE when it says so).
`echo`: window 1 measures sequential round trips, a larger window keeps that many calls in flight.
`progress`: one `count` call streaming N progress events; checks they arrive complete and in order.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import zerobridge

from common import PAYLOAD, driver_arguments, emit, measure_echo_async, measured


async def echo(args: argparse.Namespace) -> None:
    async with zerobridge.connect(args.endpoint, name="bench-python") as peer:
        async def call() -> None:
            if await peer.call("echo", PAYLOAD) != PAYLOAD:
                raise SystemExit("echo returned something else")

        result = await measure_echo_async(args, call)
    emit(result)


async def progress(args: argparse.Namespace) -> None:
    async with zerobridge.connect(args.endpoint, name="bench-python-progress") as peer:
        warmup = 1000
        async with peer.stream("count", {"n": warmup}) as warming:
            async for _ in warming.progress:
                pass
        n = args.events
        expected, out_of_order = 1, 0
        started_cpu = time.process_time()
        started = time.perf_counter_ns()
        async with peer.stream("count", {"n": n}, timeout=120) as call:
            async for event in call.progress:
                if event.get("i") != expected:
                    out_of_order += 1
                expected += 1
            answer = await call.result
        received = expected - 1
        result = measured(received, started, started_cpu, warmup)
    emit({**result, "events": n, "received": received, "out_of_order": out_of_order, "result_ok": answer == {"n": n},
          "in_order_and_complete": received == n and out_of_order == 0})


def main() -> None:
    args = driver_arguments("a host's endpoint or connection file").parse_args()
    asyncio.run(echo(args) if args.what == "echo" else progress(args))


if __name__ == "__main__":
    main()
