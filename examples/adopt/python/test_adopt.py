"""A project outside the repository that installed the zerobridge wheel, as the README's Install section says.

`make test-install` runs this in a fresh virtual environment with ZEROBRIDGE_BIN naming the built CLI.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import pathlib
import subprocess

import pytest
import zerobridge


@pytest.fixture
def endpoint():
    host = subprocess.Popen(
        [os.environ["ZEROBRIDGE_BIN"], "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        ready = host.stdout.readline().split()  # `zerobridge ready <endpoint>`, or nothing if it exited
        assert ready[:2] == ["zerobridge", "ready"], f"the host did not start: {ready}"
        yield ready[2]
    finally:
        host.terminate()
        host.wait(timeout=30)


def test_the_installed_package_is_the_wheel_not_the_checkout():
    assert "site-packages" in pathlib.Path(zerobridge.__file__).parts
    assert importlib.metadata.version("zerobridge") == zerobridge.__version__
    assert importlib.metadata.metadata("zerobridge")["License-Expression"] == "MIT"
    assert (pathlib.Path(zerobridge.__file__).parent / "py.typed").exists()


def test_the_blocking_peer_calls_the_host(endpoint):
    with zerobridge.connect_sync(endpoint, name="adopter-sync", connect_timeout=30) as peer:
        assert peer.call("add", {"a": 2, "b": 3}) == 5
        assert peer.host_library_version == zerobridge.__version__  # one version for host and peer


def test_the_async_peer_streams_progress(endpoint):
    async def main():
        async with zerobridge.connect(endpoint, name="adopter", connect_timeout=30) as peer:
            async with peer.stream("count", {"n": 3}) as call:
                seen = [progress["i"] async for progress in call.progress]
                assert await call.result == {"n": 3}
        return seen

    assert asyncio.run(main()) == [1, 2, 3]
