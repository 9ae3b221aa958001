"""Each row of docs/errors.md provoked from Python: the error class, its code and what its message says, and that a
cause known at once fails at once (well under the connect timeout)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from zerobridge import HostUnreachable, NameTaken, PeerClosed, Unauthorized

AT_ONCE = 1.0  # seconds: a cause the host or the kernel states at once fails within this
LONG = 20.0  # the connect timeout these tests give, so only a failure at once is fast


def closed_tcp_port() -> int:
    """A loopback port nothing listens on (bound, then released, by this process)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def fails_at_once(peer: zerobridge.Peer, error: type[BaseException]) -> Any:
    started = time.monotonic()
    with pytest.raises(error) as caught:
        await peer.start()
    elapsed = time.monotonic() - started
    assert elapsed < AT_ONCE, f"{caught.value!r} after {elapsed:.2f} s"
    return caught.value


async def test_no_host_at_a_tcp_endpoint_is_unreachable_at_once() -> None:
    endpoint = f"tcp://127.0.0.1:{closed_tcp_port()}"
    error = await fails_at_once(zerobridge.connect(endpoint, name="py-nobody", connect_timeout=LONG), HostUnreachable)
    assert error.code == "unreachable" and isinstance(error, ConnectionRefusedError)
    assert endpoint in error.message and "is the host running?" in error.message


async def test_no_socket_file_at_an_ipc_endpoint_is_unreachable_at_once(ipc_dir: Path) -> None:
    endpoint = f"ipc://{ipc_dir}/nobody.sock"
    error = await fails_at_once(zerobridge.connect(endpoint, name="py-nobody", connect_timeout=LONG), HostUnreachable)
    assert "socket file does not exist" in error.message


async def test_a_wrong_key_is_unauthorized_at_once(start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path) -> None:
    host = start_host("--connection-file", str(tmp_path / "host.json"), endpoint="tcp://127.0.0.1:*")
    wrong = zerobridge.connect(host.endpoint, name="py-wrong-key", key=bytes(32), connect_timeout=LONG)
    error = await fails_at_once(wrong, Unauthorized)
    assert error.code == "unauthorized" and "is the key the host's?" in error.message
    unkeyed = zerobridge.connect(host.endpoint, name="py-no-key", connect_timeout=LONG)
    error = await fails_at_once(unkeyed, Unauthorized)
    assert "connect through its connection file, or give key=" in error.message


async def test_a_taken_name_fails_at_once_unless_the_peer_waits_for_it(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-taken", connect_timeout=LONG):
        second = zerobridge.connect(host.endpoint, name="py-taken", connect_timeout=LONG)
        error = await fails_at_once(second, NameTaken)
        assert error.code == "name_taken" and "'py-taken'" in error.message and "wait_for_name=True" in error.message
        waiting = zerobridge.connect(host.endpoint, name="py-taken", connect_timeout=0.5, wait_for_name=True)
        with pytest.raises(NameTaken):  # waits the whole (short) timeout, saying hello again
            await waiting.start()


@pytest.mark.parametrize("target", ["127.0.0.1:5599", "localhost:5599", "[::1]:5599"])
def test_an_endpoint_without_its_scheme_is_told_to_write_tcp(target: str) -> None:
    with pytest.raises(ValueError, match=f"write tcp://{target.replace('[', '.').replace(']', '.')}"):
        zerobridge.connect(target, name="py-schemeless")
    with pytest.raises(ValueError, match="neither an endpoint nor a connection file"):
        zerobridge.connect_sync(target, name="py-schemeless")


def test_a_missing_connection_file_is_still_reported_as_a_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read connection file .*No such file"):
        zerobridge.connect(tmp_path / "host.json", name="py-file")


async def test_a_typed_payload_error_names_the_path_and_what_was_there(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-typed", validate=True, connect_timeout=LONG) as peer:
        with pytest.raises(zerobridge.InvalidPayload) as caught:
            await peer.call("add", {"a": 1, "b": "2"})
        assert caught.value.message.startswith('payload.b: expected a number, got the string "2"')


def test_the_blocking_twin_after_close_says_the_peer_is_closed(host: Any) -> None:
    peer = zerobridge.connect_sync(host.endpoint, name="py-closed-sync", connect_timeout=LONG)
    assert peer.call("echo", 1) == 1
    peer.close()
    for use in (lambda: peer.call("echo", 1), lambda: peer.post("echo", 1)):
        with pytest.raises(PeerClosed, match="the peer is closed") as caught:
            use()
        assert caught.value.code == "cancelled"


def test_the_defaults_are_those_of_docs_errors_md() -> None:
    assert zerobridge.peer.DEFAULT_CONNECT_TIMEOUT == 10.0 and zerobridge.DEFAULT_TIMEOUT == 30.0


async def test_leaving_an_async_for_over_progress_early_cancels_the_call_at_the_host(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="py-break") as peer:
        async with peer.stream("work", None) as call:
            request = await host.next("request", action="work")
            host.send(None, {"v": 1, "type": "progress", "id": request["id"], "seq": 1, "payload": {"done": 1}})
            async for step in call.progress:
                assert step == {"done": 1}
                break
            # Still inside the block: the loop's end alone sent the cancel.
            assert await host.next("cancel", timeout=AT_ONCE) == {"v": 1, "type": "cancel", "id": request["id"]}
            with pytest.raises(zerobridge.BridgeCancelled, match="progress loop ended early") as caught:
                await call.result
            assert caught.value.code == "cancelled"


async def test_a_progress_loop_read_to_its_end_cancels_nothing(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-loop-end", connect_timeout=LONG) as peer:
        async with peer.stream("count", {"n": 3}) as call:
            assert [step["i"] async for step in call.progress] == [1, 2, 3]
            assert await call.result == {"n": 3}


async def test_breaking_out_of_progress_from_a_real_host_ends_the_call_at_once(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-break-host", connect_timeout=LONG) as peer:
        async with peer.stream("count", {"n": 1000, "delay_ms": 20}) as call:
            async for step in call.progress:
                assert step == {"i": 1, "n": 1000}
                break
            started = time.monotonic()
            with pytest.raises(zerobridge.BridgeCancelled, match="progress loop ended early"):
                await call.result
            assert time.monotonic() - started < AT_ONCE
        assert await peer.call("echo", "still fine") == "still fine"


def test_breaking_out_of_the_blocking_twins_progress_cancels_the_call(fake_host: Any) -> None:
    async def scenario() -> None:
        async with fake_host() as host:
            def use() -> None:
                peer = zerobridge.connect_sync(host.endpoint, name="py-break-sync", connect_timeout=LONG)
                try:
                    with peer.stream("work", None) as call:
                        for step in call.progress:
                            assert step == 1
                            break
                        with pytest.raises(zerobridge.BridgeCancelled, match="progress loop ended early"):
                            call.result
                finally:
                    peer.close()

            used = asyncio.get_running_loop().run_in_executor(None, use)
            request = await host.next("request", action="work", timeout=LONG)
            host.send(None, {"v": 1, "type": "progress", "id": request["id"], "seq": 1, "payload": 1})
            assert await host.next("cancel", timeout=LONG) == {"v": 1, "type": "cancel", "id": request["id"]}
            await used

    asyncio.run(scenario())
