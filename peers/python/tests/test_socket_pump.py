"""The socket pump (``zerobridge.peer._SocketPump``) leaves no message unread.

libzmq's descriptor is edge-triggered, and a send may take the signal of an arrival: libzmq handles the commands
pending for the socket (an arrival's among them) inside the send. The pump reads ZMQ_EVENTS after each send and looks
again when something waits; without that look an arrival taken this way would wait for the next one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import zmq
import zmq.asyncio

from zerobridge.peer import _SocketPump

ROUNDS = 300
SENDS_PER_ROUND = 100


def test_arrivals_during_sends_are_read() -> None:
    asyncio.run(_race())


async def _race() -> None:
    context = zmq.asyncio.Context()
    router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    dealer = context.socket(zmq.DEALER)
    for socket in (router, dealer):
        socket.setsockopt(zmq.SNDHWM, 0)
        socket.setsockopt(zmq.RCVHWM, 0)
        socket.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer.connect(f"tcp://127.0.0.1:{port}")

    received: list[bytes] = []
    arrived = asyncio.Event()

    def receive(frames: list[bytes]) -> int:
        received.append(frames[0])
        arrived.set()
        return 1

    pump = _SocketPump(dealer, receive=receive, writable=lambda: None)
    go = threading.Event()
    stop = threading.Event()
    # The router learns the dealer's routing id from its first message, then sends one message a round when told,
    # while the loop below sends to it: the arrival lands in the middle of the dealer's sends.
    assert pump.send([b"hello"])
    identity = router.recv_multipart()[0]

    def serve() -> None:
        for index in range(ROUNDS):
            while not go.wait(0.1):
                if stop.is_set():
                    return
            go.clear()
            router.send_multipart([identity, b"%d" % index])
            while router.poll(0):
                router.recv_multipart()  # the dealer's sends: read and dropped

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        for index in range(ROUNDS):
            arrived.clear()
            go.set()
            # Sends back to back, without yielding to the loop, while the arrival comes in; then the loop waits.
            for _ in range(SENDS_PER_ROUND):
                assert pump.send([b"x"])
                spin_until = time.perf_counter() + 20e-6
                while time.perf_counter() < spin_until:
                    pass
            try:
                await asyncio.wait_for(_until(arrived, lambda: len(received) > index), timeout=10)
            except TimeoutError:
                raise AssertionError(f"round {index}: the message that came during the sends was not read") from None
            assert received[index] == b"%d" % index
    finally:
        stop.set()
        server.join(timeout=10)
        pump.close()
        dealer.close()
        router.close()
        context.term()


async def _until(event: asyncio.Event, done: Callable[[], bool]) -> None:
    while not done():
        await event.wait()
        event.clear()
