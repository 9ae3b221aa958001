"""SPEC 7.1 on a busy host: a request on a fresh connection is answered exactly once while named peers leave
mid-stream around it. Connections and file descriptors are reused while a closed connection's last messages are
still being read; such a late message once ended a newer connection's session, leaving its request unanswered."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import zmq

CONNECTIONS = 600


def _dealer(context: zmq.Context, endpoint: str) -> zmq.Socket:
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    return socket


def _receive(socket: zmq.Socket, timeout_ms: int) -> dict[str, Any] | None:
    if not socket.poll(timeout_ms):
        return None
    frames = socket.recv_multipart()
    return json.loads(frames[1]) if len(frames) > 1 else None


def test_fresh_connections_are_answered_once_while_named_peers_leave_mid_stream(
    start_host: Callable[..., Any],
) -> None:
    host = start_host()
    context = zmq.Context()
    stop = threading.Event()
    left = [0]

    def streamer(index: int) -> None:
        round_ = 0
        while not stop.is_set():
            round_ += 1
            socket = _dealer(context, host.endpoint)
            hello = {"v": 1, "type": "hello", "peer": f"streamer-{index}-{round_}", "heartbeat_ms": 60_000}
            socket.send_multipart([b"", json.dumps(hello).encode()])
            _receive(socket, 10_000)  # welcome
            request = {"v": 1, "type": "request", "id": "c", "action": "count", "payload": {"n": 100_000, "delay_ms": 1},
                       "progress": True}
            socket.send_multipart([b"", json.dumps(request).encode()])
            for _ in range(3):
                _receive(socket, 10_000)
            for extra in range(3):  # sent just before leaving: read after the connection is gone
                socket.send_multipart([b"", json.dumps({"v": 1, "type": "event", "action": "echo", "payload": extra}).encode()])
            socket.close()
            left[0] += 1

    outcomes: list[tuple[int, list[dict[str, Any]]]] = []
    lock = threading.Lock()
    numbers = iter(range(CONNECTIONS))

    def caller() -> None:
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                return
            socket = _dealer(context, host.endpoint)
            request = {"v": 1, "type": "request", "id": f"e{number}", "action": "echo", "payload": number}
            socket.send_multipart([b"", json.dumps(request).encode()])
            answers = []
            if (answer := _receive(socket, 15_000)) is not None:  # only a lost request, not a slow machine, reaches this
                answers.append(answer)
                if (again := _receive(socket, 0)) is not None:
                    answers.append(again)
            socket.close()
            with lock:
                outcomes.append((number, answers))

    streamers = [threading.Thread(target=streamer, args=(i,)) for i in range(4)]
    callers = [threading.Thread(target=caller) for _ in range(8)]
    try:
        for thread in streamers + callers:
            thread.start()
        for thread in callers:
            thread.join()
    finally:
        stop.set()
        for thread in streamers:
            thread.join()
        context.destroy(linger=0)
        host.kill()  # the left sessions' streams would hold a graceful stop for its whole drain
    assert len(outcomes) == CONNECTIONS
    wrong = [(n, a) for n, a in outcomes if [(x.get("id"), x.get("result")) for x in a] != [(f"e{n}", n)]]
    assert not wrong, f"{len(wrong)} of {CONNECTIONS} echoes not answered exactly once, e.g. {wrong[:3]}"
    assert left[0] > 0
