"""What every Python bench driver shares: the payload, percentiles, rate and CPU time, the echo rows' loops, and one JSON
line of output."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable

# The ~100-byte payload every driver echoes (zerobridge-bench and the Node driver build the same one).
PAYLOAD: dict[str, Any] = {"name": "bench", "seq": 42, "text": "x" * 65}
# Calls before an echo row's measured phase, the same in every driver (zerobridge-bench, the anchors, Node, the page):
# 300 left Node's keyed path half compiled in 1 s runs (CPU per request 70 against 46 us after 5,000 calls).
WARMUP_CALLS = 2000


def percentiles(latencies_ns: list[int]) -> dict[str, Any]:
    """p50/p99/p99.9/max in microseconds, exact (from the sorted samples)."""
    ordered = sorted(latencies_ns)
    count = len(ordered)

    def at(fraction: float) -> float:
        return round(ordered[min(count - 1, int(fraction * count))] / 1000, 1)

    return {"p50_us": at(0.50), "p99_us": at(0.99), "p999_us": at(0.999),
            "max_us": round(ordered[-1] / 1000, 1), "samples": count}


def measured(completed: int, started_ns: int, started_cpu: float, warmup: int) -> dict[str, Any]:
    """What a measured phase did: its rate, and this process's CPU time (every thread) per request over it.
    `warmup` (requests before the phase) lets bench/run.py divide a server's CPU time over the whole run."""
    elapsed = (time.perf_counter_ns() - started_ns) / 1e9
    return {"requests": completed, "seconds": elapsed, "per_second": completed / elapsed, "warmup": warmup,
            "cpu_us_per_request": (time.process_time() - started_cpu) * 1e6 / max(completed, 1)}


def driver_arguments(endpoint_help: str) -> argparse.ArgumentParser:
    """The command line of an echo-and-progress driver: `echo|progress ENDPOINT` and the limits of a run."""
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["echo", "progress"])
    parser.add_argument("endpoint", help=endpoint_help)
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--max", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=WARMUP_CALLS)
    parser.add_argument("--events", type=int, default=100_000)
    return parser


def emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()


def stop_process(process: subprocess.Popen[Any], grace: float = 20) -> None:
    """SIGTERM, and SIGKILL if it is still there `grace` seconds later; returns once it has exited."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure_echo(args: Any, send: Callable[[], None], receive: Callable[[], None]) -> dict[str, Any]:
    """The echo rows of a blocking client: `args.warmup` round trips, then for `args.seconds` (or `args.max` requests)
    one at a time with latency percentiles (window 1), or `args.window` sent ahead and one more sent for each answer
    received, answers in the order sent. `receive` checks its answer."""
    for _ in range(args.warmup):
        send()
        receive()
    result: dict[str, Any] = {"window": args.window}
    started_cpu = time.process_time()
    started = time.perf_counter_ns()
    end = started + int(args.seconds * 1e9)
    completed = 0
    if args.window == 1:
        latencies: list[int] = []
        while completed < args.max:
            before = time.perf_counter_ns()
            send()
            receive()
            after = time.perf_counter_ns()
            latencies.append(after - before)
            completed += 1
            if after >= end:
                break
        result.update(percentiles(latencies))
    else:
        sent = 0
        while sent < min(args.window, args.max):
            send()
            sent += 1
        sending = True
        while completed < sent:
            receive()
            completed += 1
            if sending and (sent >= args.max or (completed % 64 == 0 and time.perf_counter_ns() >= end)):
                sending = False
            if sending:
                send()
                sent += 1
    result.update(measured(completed, started, started_cpu, args.warmup))
    return result


async def measure_echo_async(args: Any, call: Callable[[], Awaitable[None]]) -> dict[str, Any]:
    """The echo rows of an asyncio client: `args.warmup` calls, then for `args.seconds` (or `args.max` calls) one at
    a time with latency percentiles (window 1), or `args.window` callers each calling again as soon as its last call
    returned. `call` checks its answer."""
    for _ in range(args.warmup):
        await call()
    result: dict[str, Any] = {"window": args.window}
    started_cpu = time.process_time()
    started = time.perf_counter_ns()
    end = started + int(args.seconds * 1e9)
    if args.window == 1:
        latencies: list[int] = []
        while len(latencies) < args.max:
            before = time.perf_counter_ns()
            await call()
            after = time.perf_counter_ns()
            latencies.append(after - before)
            if after >= end:
                break
        completed = len(latencies)
        result.update(percentiles(latencies))
    else:
        issued = 0

        async def caller() -> int:
            nonlocal issued
            mine = 0
            while issued < args.max:
                issued += 1
                await call()
                mine += 1
                if mine % 16 == 0 and time.perf_counter_ns() >= end:
                    break
            return mine

        completed = sum(await asyncio.gather(*(caller() for _ in range(args.window))))
    result.update(measured(completed, started, started_cpu, args.warmup))
    return result
