"""The client a user would hand-write with pyzmq: a DEALER sending JSON requests and reading responses.

    python bench/py_raw_client.py ENDPOINT --window 1|N [--seconds S] [--max N]

It drives the pyzmq baseline server and the ZeroBridge host alike (an anonymous ZeroBridge session:
no hello, as the protocol allows), so the two servers are compared with the same client.
Window 1 measures sequential round trips; a larger window keeps that many requests in flight.
"""

from __future__ import annotations

import argparse
import json

import zmq

from common import PAYLOAD, WARMUP_CALLS, emit, measure_echo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--max", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=WARMUP_CALLS)
    args = parser.parse_args()

    socket = zmq.Context().socket(zmq.DEALER)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.RCVHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(args.endpoint)
    counter = 0

    def send() -> None:
        nonlocal counter
        counter += 1
        request = {"v": 1, "type": "request", "id": str(counter), "action": "echo", "payload": PAYLOAD}
        socket.send_multipart([b"", json.dumps(request).encode()])

    def receive() -> None:
        response = json.loads(socket.recv_multipart()[1])
        if response.get("ok") is not True or response.get("result") != PAYLOAD:
            raise SystemExit(f"unexpected response: {response}")

    result = measure_echo(args, send, receive)
    emit(result)


if __name__ == "__main__":
    main()
