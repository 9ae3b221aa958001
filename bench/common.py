"""What every Python bench driver shares: the payload, percentiles, and one JSON line of output."""

from __future__ import annotations

import json
import sys
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


def emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
