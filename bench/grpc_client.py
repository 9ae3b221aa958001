"""The gRPC anchor's Python front-end: grpcio against zerobridge-anchors' grpc-swift-2 server, no TLS.

    python bench/grpc_client.py echo HOST:PORT --api sync|aio --window 1|N [--seconds S] [--max N]
    python bench/grpc_client.py progress HOST:PORT --api sync|aio --events N

No protoc: generic method handles with identity (de)serializers carry bytes, and the driver encodes and decodes the JSON
itself, as the Python peer does. `sync`: grpcio's blocking stub (64 in flight: 64 futures of it); `aio`: grpc.aio,
64 coroutines. bench/run.py runs both and keeps the faster. The result's fields are those of bench/py_peer.py.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from typing import Any

import grpc
import grpc.aio

from common import PAYLOAD, driver_arguments, emit, measure_echo, measure_echo_async, measured

ECHO = "/zerobridge.anchor.Bench/Echo"
COUNT = "/zerobridge.anchor.Bench/Count"
WARMUP_EVENTS = 1000


def checked(answer: bytes) -> None:
    if json.loads(answer) != PAYLOAD:
        raise SystemExit(f"Echo returned something else: {answer[:200]!r}")


def echo_sync(args: argparse.Namespace) -> dict[str, Any]:
    with grpc.insecure_channel(args.endpoint) as channel:
        echo = channel.unary_unary(ECHO)
        # Sequential: the blocking call's answers; in flight: its futures, oldest first.
        answers: collections.deque[Any] = collections.deque()

        def send() -> None:
            request = json.dumps(PAYLOAD).encode()
            answers.append(echo(request) if args.window == 1 else echo.future(request))

        def receive() -> None:
            answer = answers.popleft()
            checked(answer if args.window == 1 else answer.result())

        return measure_echo(args, send, receive)


async def echo_aio(args: argparse.Namespace) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(args.endpoint) as channel:
        echo = channel.unary_unary(ECHO)

        async def call() -> None:
            checked(await echo(json.dumps(PAYLOAD).encode()))

        return await measure_echo_async(args, call)


class Events:
    """Counts a stream's events and those out of order."""

    def __init__(self, n: int) -> None:
        self.n, self.expected, self.out_of_order = n, 1, 0

    def add(self, message: bytes) -> None:
        event = json.loads(message)
        if event.get("i") != self.expected or event.get("n") != self.n:
            self.out_of_order += 1
        self.expected += 1

    def result(self, started: int, started_cpu: float) -> dict[str, Any]:
        received = self.expected - 1
        return {**measured(received, started, started_cpu, WARMUP_EVENTS), "events": self.n, "received": received,
                "out_of_order": self.out_of_order,
                "in_order_and_complete": received == self.n and self.out_of_order == 0}


def progress_sync(args: argparse.Namespace) -> dict[str, Any]:
    with grpc.insecure_channel(args.endpoint) as channel:
        count = channel.unary_stream(COUNT)
        for n in (WARMUP_EVENTS, args.events):
            events = Events(n)
            started_cpu, started = time.process_time(), time.perf_counter_ns()
            for message in count(json.dumps({"n": n}).encode(), timeout=120):
                events.add(message)
        return events.result(started, started_cpu)


async def progress_aio(args: argparse.Namespace) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(args.endpoint) as channel:
        count = channel.unary_stream(COUNT)
        for n in (WARMUP_EVENTS, args.events):
            events = Events(n)
            started_cpu, started = time.process_time(), time.perf_counter_ns()
            async for message in count(json.dumps({"n": n}).encode(), timeout=120):
                events.add(message)
        return events.result(started, started_cpu)


def main() -> None:
    parser = driver_arguments("HOST:PORT of zerobridge-anchors grpc-server")
    parser.add_argument("--api", choices=["sync", "aio"], default="sync")
    args = parser.parse_args()
    if args.window < 1 or args.max < 1 or args.events < 0:
        parser.error("--window and --max take a positive integer, --events a non-negative one")
    if args.api == "sync":
        result = echo_sync(args) if args.what == "echo" else progress_sync(args)
    else:
        result = asyncio.run(echo_aio(args) if args.what == "echo" else progress_aio(args))
    emit({**result, "api": args.api})


if __name__ == "__main__":
    main()
