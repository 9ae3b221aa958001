"""Puts a load on a ZeroBridge host and holds it while bench/run.py reads the host's RSS.

    python bench/memory_load.py inflight ENDPOINT [--requests 10000] [--sleep-ms 3000]
    python bench/memory_load.py peers ENDPOINT [--peers 1000]

`inflight`: one DEALER sends N `sleep` requests at once. `peers`: N DEALERs each say hello and wait for
their welcome (N named sessions). When the load is in place the driver prints `loaded` and waits for a
line on stdin; then it lets go (collects every response / says bye) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import zmq

from common import emit


def wait_for_go() -> None:
    print("loaded", flush=True)
    sys.stdin.readline()


def inflight(endpoint: str, requests: int, sleep_ms: int) -> None:
    context = zmq.Context()
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.RCVHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    started = time.monotonic()
    for index in range(requests):
        body = {"v": 1, "type": "request", "id": f"m{index}", "action": "sleep", "payload": {"ms": sleep_ms}}
        socket.send_multipart([b"", json.dumps(body).encode()])
    # Long enough for the host to take them all in, well short of the sleep: a response now would mean a
    # request was refused (overloaded) rather than held.
    time.sleep(min(1.0, sleep_ms / 3000))
    held = socket.poll(0) == 0
    sent_seconds = time.monotonic() - started
    wait_for_go()
    ok = 0
    for _ in range(requests):
        response = json.loads(socket.recv_multipart()[1])
        ok += response.get("ok") is True
    emit({"requests": requests, "ok": ok, "all_in_flight_when_sampled": held and ok == requests,
          "load_seconds": round(sent_seconds, 3)})


def peers(endpoint: str, count: int) -> None:
    context = zmq.Context()
    context.set(zmq.MAX_SOCKETS, count + 64)
    sockets = []
    poller = zmq.Poller()
    started = time.monotonic()
    for index in range(count):
        socket = context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(endpoint)
        hello = {"v": 1, "type": "hello", "peer": f"bench-peer-{index}", "actions": [], "features": []}
        socket.send_multipart([b"", json.dumps(hello).encode()])
        poller.register(socket, zmq.POLLIN)
        sockets.append(socket)
    welcomed: set[int] = set()
    by_socket = {id(s): i for i, s in enumerate(sockets)}
    deadline = time.monotonic() + 30
    while len(welcomed) < count and time.monotonic() < deadline:
        for socket, _ in poller.poll(1000):
            body = json.loads(socket.recv_multipart()[1])
            if body.get("type") == "welcome":
                welcomed.add(by_socket[id(socket)])
    connect_seconds = time.monotonic() - started
    wait_for_go()
    for socket in sockets:
        socket.send_multipart([b"", json.dumps({"v": 1, "type": "bye"}).encode()])
    time.sleep(0.2)
    for socket in sockets:
        socket.close(linger=0)
    emit({"peers": count, "welcomed": len(welcomed), "connect_seconds": round(connect_seconds, 3)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["inflight", "peers"])
    parser.add_argument("endpoint")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--sleep-ms", type=int, default=3000)
    parser.add_argument("--peers", type=int, default=1000)
    args = parser.parse_args()
    if args.what == "inflight":
        inflight(args.endpoint, args.requests, args.sleep_ms)
    else:
        peers(args.endpoint, args.peers)


if __name__ == "__main__":
    main()
