"""What asyncio alone costs a Python client: the pyzmq client, the least an asyncio client can do, and the Python peer.

    .venv/bin/python bench/profile/python_asyncio_floor.py [--bin .build/release] [--transport ipc|tcp] [--window 1]
        [--turns 5] [--seconds 1]

One plain `zerobridge serve --conformance`; in turns, three clients call `echo` against it: the blocking pyzmq client
of `make bench`'s Python rows (`bench/py_raw_client.py`), the floor below, and the Python peer (`bench/py_peer.py`).
Prints every run, then each client's median p50 (window 1) or rate (a larger window) and its ratio to the pyzmq
client's: the floor's ratio is what asyncio costs whatever the client does, the peer's beyond it is the peer's own
per-call work.

The floor is an asyncio client that does nothing a protocol client could leave out: a DEALER read through
`loop.add_reader` on its ZMQ_FD (drained while ZMQ_EVENTS says a message waits, looked at again after each send, which
may take the descriptor's signal), a future per call found by id, the request written with `json.dumps` and the
answer read with `json.loads`; no hello, no checks, no deadline, no flow control.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, cast

import zmq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from common import PAYLOAD, WARMUP_CALLS, emit, measure_echo_async  # noqa: E402
from run import Server  # noqa: E402

async def floor_client(args: argparse.Namespace) -> None:
    """The floor (see above) against the endpoint `args.client`; one JSON line like the other drivers'."""
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(args.client)
    option = cast("Callable[[int], int]", socket.getsockopt)  # ZMQ_EVENTS and ZMQ_FD are integers
    fd = option(zmq.FD)
    loop = asyncio.get_running_loop()
    waiting: dict[str, asyncio.Future[Any]] = {}

    def ready() -> None:
        while option(zmq.EVENTS) & zmq.POLLIN:
            answer = json.loads(socket.recv_multipart(zmq.NOBLOCK)[1])
            future = waiting.pop(answer.get("id"), None)
            if future is None or future.done():
                # Answers no call of ours ("id": null: its call waits, and compare's time limit ends the run).
                continue
            if answer.get("ok") is True:
                future.set_result(answer.get("result"))
            else:  # an error answer ends the run with it, rather than leaving the call waiting
                future.set_exception(SystemExit(f"the host answered with an error: {answer}"))

    loop.add_reader(fd, ready)
    counter = 0

    async def call() -> None:
        nonlocal counter
        counter += 1
        request_id = str(counter)
        future = waiting[request_id] = loop.create_future()
        request = {"v": 1, "type": "request", "id": request_id, "action": "echo", "payload": PAYLOAD}
        socket.send_multipart([b"", json.dumps(request).encode()], zmq.NOBLOCK)
        if option(zmq.EVENTS) & zmq.POLLIN:
            loop.call_soon(ready)
        if await future != PAYLOAD:
            raise SystemExit("echo returned something else")

    try:
        emit(await measure_echo_async(args, call))
    finally:
        loop.remove_reader(fd)
        socket.close()


def compare(args: argparse.Namespace) -> None:
    python = sys.executable
    timed = ["--window", str(args.window), "--seconds", str(args.seconds)]
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="zerobridge-floor-") as folder:
        endpoint = f"ipc://{folder}/host.sock" if args.transport == "ipc" else "tcp://127.0.0.1:*"
        host = Server("zerobridge host", [f"{args.bin}/zerobridge", "serve", "--conformance", "--endpoint", endpoint,
                                          "--max-in-flight", "20000"])
        try:
            commands = {
                "pyzmq client": [python, str(ROOT / "bench/py_raw_client.py"), host.endpoint, *timed],
                "asyncio floor": [python, __file__, "--client", host.endpoint, *timed],
                "Python peer": [python, str(ROOT / "bench/py_peer.py"), "echo", host.endpoint, *timed],
            }
            for _ in range(args.turns):
                for client, command in commands.items():
                    try:  # a run takes --seconds after its warm-up; one still going long after is stuck
                        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT / "bench",
                                              timeout=args.seconds + 60)
                    except subprocess.TimeoutExpired:
                        raise SystemExit(f"{client} did not finish within {args.seconds + 60:.0f} s") from None
                    if done.returncode != 0:
                        raise SystemExit(f"{client} failed: {done.stderr.strip()[-300:]}")
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    runs.setdefault(client, []).append(result)
                    print(f"{client:<13} {result['per_second']:8,.0f}/s  p50 {result.get('p50_us', 0):6.1f} us  "
                          f"client CPU {result['cpu_us_per_request']:5.1f} us a call", flush=True)
        finally:
            host.stop()
    figure = "p50_us" if args.window == 1 else "per_second"
    medians = {client: statistics.median(r[figure] for r in results) for client, results in runs.items()}
    base = medians["pyzmq client"]
    for client, median in medians.items():
        # A p50 ratio above 1 and a rate ratio below 1 both mean slower than the pyzmq client.
        print(f"{client}: median {'p50' if args.window == 1 else 'rate'} {median:,.1f}, / the pyzmq client's "
              f"{median / base:.3f}, median client CPU "
              f"{statistics.median(r['cpu_us_per_request'] for r in runs[client]):.1f} us a call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--client", metavar="ENDPOINT", help=argparse.SUPPRESS)  # one run of the floor (by compare)
    parser.add_argument("--max", type=int, default=1_000_000, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=WARMUP_CALLS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.window < 1 or args.turns < 1:
        parser.error("--window and --turns are at least 1")
    if not args.seconds > 0:
        parser.error("--seconds is a positive number")
    if args.client:
        asyncio.run(floor_client(args))
    else:
        compare(args)


if __name__ == "__main__":
    main()
