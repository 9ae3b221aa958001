"""Sequential `call("echo")` round trips per second against a running host.

    .venv/bin/python peers/python/bench/roundtrip.py ipc:///tmp/zb.sock [--seconds 3] [--payload-bytes 16]

Start a host first, e.g. `zerobridge serve --conformance --endpoint ipc:///tmp/zb.sock`.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import zerobridge


async def measure(endpoint: str, seconds: float, payload_bytes: int) -> tuple[int, float]:
    payload = "x" * payload_bytes
    async with zerobridge.connect(endpoint, name="bench-roundtrip") as peer:
        for _ in range(200):  # warm up
            await peer.call("echo", payload)
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                if await peer.call("echo", payload) != payload:
                    raise SystemExit("echo returned something else")
            count += 100
        return count, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("endpoint", help="host endpoint or connection file")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--payload-bytes", type=int, default=16)
    args = parser.parse_args()
    count, elapsed = asyncio.run(measure(args.endpoint, args.seconds, args.payload_bytes))
    print(f"{count / elapsed:.0f} round trips/s ({count} sequential echo calls in {elapsed:.2f} s, "
          f"{elapsed / count * 1e6:.0f} us each) to {args.endpoint}")


if __name__ == "__main__":
    main()
