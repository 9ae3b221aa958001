"""The interim `make demo`: a Swift host answering a Python peer, both ways.

Starts `zerobridge serve --conformance` on an ipc endpoint under .demo/, connects the Python peer, and shows
a request, a progress stream, a host -> peer callback, an event, a timeout and a cancel; then stops the host.
(The import service replaces this demo when it lands.)
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import subprocess
import sys
import time

import zerobridge

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = os.environ.get("ZEROBRIDGE_BIN", str(ROOT / ".build" / "debug" / "zerobridge"))


def start_host(workdir: pathlib.Path) -> tuple[subprocess.Popen[str], str]:
    endpoint = f"ipc://{workdir / 'demo.sock'}"
    host = subprocess.Popen(
        [BINARY, "serve", "--conformance", "--endpoint", endpoint, "--name", "demo-host"],
        stdout=subprocess.PIPE, text=True,
    )
    assert host.stdout is not None
    line = host.stdout.readline().strip()
    if not line.startswith("zerobridge ready "):
        host.kill()
        sys.exit(f"the host did not start: {line!r}")
    return host, line.removeprefix("zerobridge ready ")


async def main(endpoint: str) -> None:
    received: asyncio.Queue[object] = asyncio.Queue()
    async with zerobridge.connect(endpoint, name="demo-frontend") as peer:

        @peer.handler("shout")
        def shout(text: str) -> str:
            return text.upper() + "!"

        @peer.on_event("news")
        def news(payload: object) -> None:
            received.put_nowait(payload)

        print("add 2 + 40          ->", await peer.call("add", {"a": 2, "b": 40}))
        async with peer.stream("count", {"n": 5, "delay_ms": 100}) as call:
            async for step in call.progress:
                print(f"  progress {step['i']}/{step['n']}")
            print("count 5             ->", await call.result)
        result = await peer.call("callback", {"action": "shout", "payload": "hello from swift"})
        print("host calls Python   ->", result)
        await peer.call("emit", {"action": "news", "payload": {"headline": "events need no reply"}})
        print("host posts an event ->", await asyncio.wait_for(received.get(), 5))
        started = time.monotonic()
        try:
            await peer.call("sleep", {"ms": 5000}, timeout=0.3)
        except zerobridge.BridgeTimeout as error:
            print(f"sleep 5 s, 0.3 s timeout -> {error.code} after {time.monotonic() - started:.2f} s")
        task = asyncio.ensure_future(peer.call("sleep", {"ms": 5000}))
        await asyncio.sleep(0.1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            print("sleep 5 s, cancelled -> the host was told with 'cancel'")


if __name__ == "__main__":
    workdir = ROOT / ".demo"
    workdir.mkdir(exist_ok=True)
    host, endpoint = start_host(workdir)
    print(f"host ready at {endpoint}")
    try:
        asyncio.run(main(endpoint))
    finally:
        host.terminate()
        host.wait(timeout=10)
        print("host stopped")
