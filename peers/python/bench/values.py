"""What the checks of SPEC 7.14 cost on the way of a value that is fine: encoding a request with
`zerobridge.wire.encode` (no checks) and with `zerobridge.values.encode` (the checks), per payload shape.

    .venv/bin/python peers/python/bench/values.py [--seconds 1]

No host needed. The checks add one regular-expression scan of the encoded body and a count of its brackets; a value
is walked only when the encoder fails or the scan finds something suspect (the last rows: a numeric-string key, an
emoji, a body with more than 64 brackets, which is then measured for its depth).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from zerobridge import values, wire

PAYLOADS: dict[str, Any] = {
    "small object": {"a": 1, "b": 2},
    "typical request": {
        "path": "/data/import/2026-11-23.csv",
        "options": {"recursive": True, "depth": 3, "pattern": "*.csv", "limit": 1000},
        "tags": ["import", "daily", "finance"],
        "owner": {"id": 4711, "name": "etl-worker", "score": 0.875},
    },
    "1 KiB string": "x" * 1024,
    "100 ints": list(range(100)),
    "20 records": [{"id": i, "name": f"row {i}", "value": i * 1.5, "ok": i % 2 == 0} for i in range(20)],
    "numeric-string keys": {str(i): i for i in range(10)},
    "emoji text": {"text": "done 😀 " * 10},
    "100 records (> 64 brackets)": [{"id": i, "v": [i]} for i in range(100)],
}


def per_call(function: Callable[[], Any], seconds: float) -> float:
    """Microseconds per call of ``function``, the best of a few rounds."""
    best = float("inf")
    rounds = 5
    for _ in range(rounds):
        count = 0
        started = time.perf_counter()
        deadline = started + seconds / rounds
        while time.perf_counter() < deadline:
            for _ in range(200):
                function()
            count += 200
        best = min(best, (time.perf_counter() - started) / count * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    arguments = parser.parse_args()
    print(f"{'payload':30} {'bytes':>6} {'unchecked µs':>13} {'checked µs':>11} {'added µs':>9} {'added':>7}")
    for name, payload in PAYLOADS.items():
        request = wire.Request("42", "importFile", payload, 30000, False, 1795430400000)
        size = len(wire.encode(request)[1])
        plain = per_call(lambda: wire.encode(request), arguments.seconds)
        checked = per_call(lambda: values.encode(request), arguments.seconds)
        print(f"{name:30} {size:6} {plain:13.2f} {checked:11.2f} {checked - plain:9.2f} {(checked / plain - 1) * 100:6.1f}%")


if __name__ == "__main__":
    main()
