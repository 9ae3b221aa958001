"""The tutorial's Python front-end: adds two numbers on the calculator host, then counts to 3 with progress.

    python frontend.py tcp://127.0.0.1:5555
"""

import asyncio
import sys

import zerobridge


async def main(endpoint: str) -> None:
    async with zerobridge.connect(endpoint, name="python-frontend") as peer:
        print("2 + 3 =", await peer.call("add", {"a": 2, "b": 3}))
        async with peer.stream("countTo", {"n": 3}) as call:
            async for progress in call.progress:
                print("counted", progress["i"])
            print("done:", await call.result)


asyncio.run(main(sys.argv[1]))
