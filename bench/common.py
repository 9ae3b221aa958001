"""What every Python bench driver shares: the payload, percentiles, rate and CPU time, and one JSON line of output."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

# The ~100-byte payload every driver echoes (zerobridge-bench and the Node driver build the same one).
PAYLOAD: dict[str, Any] = {"name": "bench", "seq": 42, "text": "x" * 65}


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
