"""The progress consumer a user would hand-write with pyzmq: a DEALER that says hello and reads one `count` call.

    python bench/py_raw_progress.py ENDPOINT --events N

The floor for `bench/py_peer.py progress` on the same host: the same named session (hello first, as SPEC section 6
asks of a named peer; pings answered with pong), one warm-up `count` of 1,000 events, then one `count` of N events.
Every message is json-decoded and each progress event's `i` checked for order, as the Python peer's driver does.
A plain (unkeyed) connection only.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import zmq

from common import emit, measured

PONG = json.dumps({"v": 1, "type": "pong"}).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for any one message")
    args = parser.parse_args()

    socket = zmq.Context().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVTIMEO, int(args.timeout * 1000))
    socket.connect(args.endpoint)
    socket.send_multipart([b"", json.dumps({"v": 1, "type": "hello", "peer": "bench-raw-progress"}).encode()])

    def receive() -> dict[str, Any]:
        try:
            frames = socket.recv_multipart()
        except zmq.Again:
            raise SystemExit(f"nothing from the host for {args.timeout} s") from None
        message: dict[str, Any] = json.loads(frames[1])
        if message.get("type") == "ping":
            socket.send_multipart([b"", PONG])
        return message

    while (welcome := receive()).get("type") != "welcome":
        if welcome.get("type") == "response":
            raise SystemExit(f"hello refused: {welcome}")

    counter = 0

    def count(n: int) -> tuple[int, int, object]:
        """One `count` call with progress: (events received, events out of order, the response's result)."""
        nonlocal counter
        counter += 1
        request_id = str(counter)
        request = {"v": 1, "type": "request", "id": request_id, "action": "count", "payload": {"n": n},
                   "progress": True, "timeout_ms": int(args.timeout * 1000)}
        socket.send_multipart([b"", json.dumps(request).encode()])
        expected, out_of_order = 1, 0
        while True:
            message = receive()
            if message.get("id") != request_id:
                continue  # a ping, or anything else of the session's
            kind = message.get("type")
            if kind == "progress":
                payload = message.get("payload")
                if not isinstance(payload, dict) or payload.get("i") != expected:
                    out_of_order += 1
                expected += 1
            elif kind == "response":
                if message.get("ok") is not True:
                    raise SystemExit(f"count failed: {message}")
                return expected - 1, out_of_order, message.get("result")

    warmup = 1000
    count(warmup)
    started_cpu = time.process_time()
    started = time.perf_counter_ns()
    received, out_of_order, answer = count(args.events)
    result = measured(received, started, started_cpu, warmup)
    socket.send_multipart([b"", json.dumps({"v": 1, "type": "bye"}).encode()])
    n = args.events
    emit({**result, "events": n, "received": received, "out_of_order": out_of_order, "result_ok": answer == {"n": n},
          "in_order_and_complete": received == n and out_of_order == 0})


if __name__ == "__main__":
    main()
