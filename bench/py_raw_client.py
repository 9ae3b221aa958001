"""The client a user would hand-write with pyzmq: a DEALER sending JSON requests and reading responses.

    python bench/py_raw_client.py ENDPOINT|CONNECTION_FILE --window 1|N [--seconds S] [--max N]

It drives the pyzmq baseline server and the ZeroBridge host alike (an anonymous ZeroBridge session:
no hello, as the protocol allows), so the two servers are compared with the same client.
Window 1 measures sequential round trips; a larger window keeps that many requests in flight.

Given a host's connection file with a key, it says hello and signs and checks every message (SPEC 3.1) with the
Python peer's `signing` module, and nothing more: the floor of what keyed costs a Python client
(`bench/profile/python_keyed_floor.py` sets it beside the peer's).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import zmq
from zerobridge import signing
from zerobridge.peer import read_connection_file

from common import PAYLOAD, WARMUP_CALLS, emit, measure_echo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--max", type=int, default=1_000_000)
    parser.add_argument("--warmup", type=int, default=WARMUP_CALLS)
    args = parser.parse_args()

    info = read_connection_file(args.endpoint) if Path(args.endpoint).is_file() else None
    socket = zmq.Context().socket(zmq.DEALER)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.RCVHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(info.endpoint if info else args.endpoint)
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

    if info is not None and info.key:
        send, receive = keyed(socket, signing.PeerChannel(info.key))

    result = measure_echo(args, send, receive)
    emit(result)


def keyed(socket: zmq.Socket, channel: signing.PeerChannel) -> tuple[Callable[[], None], Callable[[], None]]:
    """The same send and receive on a keyed connection, opened with a signed hello (compact JSON: how a hello's body
    starts). The plain ones above stay as they were: the pyzmq pair's rows compare against them."""
    def put(body: bytes) -> None:
        if (signature := channel.sign([body], int(time.time() * 1000))) is None:
            raise SystemExit("a keyed connection opens with hello")  # not reached: the hello below goes first
        socket.send_multipart([signature, body])

    def take() -> dict:
        frames = socket.recv_multipart()
        why = channel.refusal(frames[0], frames[1:]) if len(frames) >= 2 else "fewer than 2 frames"
        if why is not None:
            raise SystemExit(f"a message from the host refused: {why}")
        return json.loads(frames[1])

    put(json.dumps({"v": 1, "type": "hello", "peer": f"raw-{os.getpid()}"}, separators=(",", ":")).encode())
    if (welcome := take()).get("type") != "welcome":
        raise SystemExit(f"no welcome: {welcome}")
    counter = 0

    def send() -> None:
        nonlocal counter
        counter += 1
        put(json.dumps({"v": 1, "type": "request", "id": str(counter), "action": "echo", "payload": PAYLOAD}).encode())

    def receive() -> None:
        response = take()
        if response.get("ok") is not True or response.get("result") != PAYLOAD:
            raise SystemExit(f"unexpected response: {response}")

    return send, receive


if __name__ == "__main__":
    main()
