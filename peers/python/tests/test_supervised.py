"""Peers launched by a host (SPEC 10.1): ``connect()`` without a target reads the connection file that
ZEROBRIDGE_CONNECTION_FILE names and says hello with its ``peer`` (else ZEROBRIDGE_PEER_NAME), against the real
conformance host writing a keyed connection file; without the variable it fails at once, saying what to set. Such a
peer ends with its host: its host's bye or loss closes it (``wait_closed()`` says why) instead of reconnecting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from conftest import HostProcess
from zerobridge import BridgeTimeout, NameTaken, PeerLost

# Generous: a loaded 2-core machine may take seconds for what takes milliseconds here.
WAIT = 20.0
# How long a peer whose name the host must refuse keeps trying: its failure is the expected outcome.
REFUSED_CONNECT_TIMEOUT = 2.0
README = Path(__file__).resolve().parents[1] / "README.md"
UNKEYED = {"protocol": 1, "endpoint": "tcp://127.0.0.1:1", "host": "h", "signature_scheme": "hmac-sha256", "key": ""}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The test's own environment: neither variable set unless the test sets it."""
    monkeypatch.delenv("ZEROBRIDGE_CONNECTION_FILE", raising=False)
    monkeypatch.delenv("ZEROBRIDGE_PEER_NAME", raising=False)
    return monkeypatch


def launch(
    start_host: Callable[..., Any], tmp_path: Path, peer: str, *flags: str, endpoint: str = "tcp://127.0.0.1:*"
) -> tuple[HostProcess, Path, dict[str, Any]]:
    """A keyed conformance host, and what a supervising host hands a peer: a copy of its connection file with
    ``peer`` (written again, with the new key, for a host started again in the same folder)."""
    written = tmp_path / "host.json"
    host = start_host("--connection-file", str(written), *flags, endpoint=endpoint)
    data = json.loads(written.read_text())
    assert len(data["key"]) == 64  # keyed: the host refuses a peer that does not sign with it
    copy = tmp_path / "peer.json"
    copy.write_text(json.dumps({**data, "peer": peer}))
    copy.chmod(0o600)
    return host, copy, data


def launched_file(start_host: Callable[..., Any], tmp_path: Path, peer: str) -> tuple[Path, dict[str, Any]]:
    _, copy, data = launch(start_host, tmp_path, peer)
    return copy, data


def terminate(host: HostProcess) -> None:
    """Ask the host to shut down (SIGTERM: it says bye to its peers) without waiting for it to exit."""
    host.process.send_signal(signal.SIGTERM)


def write(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "connection.json"
    path.write_text(json.dumps({**UNKEYED, **fields}))
    return path


async def test_without_a_target_the_peer_connects_through_the_variable_s_file_under_its_peer_name(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    path, host_file = launched_file(start_host, tmp_path, "py-launched")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(path))
    async with zerobridge.connect(connect_timeout=WAIT, handlers={"twice": lambda p: p * 2}) as peer:
        assert peer.name == "py-launched" and peer.info.peer == "py-launched"
        assert peer.info.key.hex() == host_file["key"]  # welcomed by a keyed host: it signed with the file's key
        assert peer.host == "conformance"
        assert await peer.call("add", {"a": 1, "b": 2}) == 3
        assert await peer.call("callback", {"action": "twice", "payload": 21}) == 42
        # The host holds the session under the file's name: another peer asking for it is refused.
        other = zerobridge.connect(path, connect_timeout=REFUSED_CONNECT_TIMEOUT)
        with pytest.raises(NameTaken, match="py-launched"):
            await other.start()
        assert peer.refused_messages == 0


def test_the_blocking_twin_connects_through_the_variable_s_file_too(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    path, _ = launched_file(start_host, tmp_path, "py-launched-sync")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(path))
    with zerobridge.connect_sync(connect_timeout=WAIT) as peer:
        assert peer.peer.name == "py-launched-sync"  # the async peer it wraps
        assert peer.call("echo", {"launched": True}) == {"launched": True}
        with pytest.raises(NameTaken, match="py-launched-sync"):
            zerobridge.connect_sync(path, connect_timeout=REFUSED_CONNECT_TIMEOUT)


def test_without_a_target_or_the_variable_connecting_fails_at_once_saying_what_to_set(
    environment: pytest.MonkeyPatch,
) -> None:
    for connect in (zerobridge.connect, zerobridge.connect_sync):
        with pytest.raises(ValueError, match="ZEROBRIDGE_CONNECTION_FILE is not set"):
            connect(name="py-nowhere")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", "")  # set but empty says nowhere too
    with pytest.raises(ValueError, match="ZEROBRIDGE_CONNECTION_FILE is not set"):
        zerobridge.connect()


@pytest.mark.parametrize("peer", ["", "p" * 129, 7, None], ids=["empty", "129 characters", "a number", "null"])
def test_an_invalid_peer_in_the_variable_s_file_is_an_error_naming_the_field(
    tmp_path: Path, environment: pytest.MonkeyPatch, peer: Any
) -> None:
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(write(tmp_path, peer=peer)))
    for connect in (zerobridge.connect, zerobridge.connect_sync):
        with pytest.raises(ValueError, match=r"connection file .*: peer must be a name of 1\.\.128 characters"):
            connect()


def test_the_variable_naming_a_missing_file_is_an_error_naming_the_file(
    tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "gone.json"
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(missing))
    with pytest.raises(ValueError, match=f"cannot read connection file '{missing}'"):
        zerobridge.connect()


def test_the_name_is_the_one_given_else_the_file_s_peer_else_zerobridge_peer_name(
    tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    named = write(tmp_path, peer="from-file")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(named))
    environment.setenv("ZEROBRIDGE_PEER_NAME", "from-variable")
    assert zerobridge.connect().name == "from-file"
    assert zerobridge.connect(name="chosen").name == "chosen"  # allowed; a supervising host waits for "from-file"
    (tmp_path / "connection.json").write_text(json.dumps(UNKEYED))
    assert zerobridge.connect().name == "from-variable"
    environment.delenv("ZEROBRIDGE_PEER_NAME")
    with pytest.raises(ValueError, match="name= is required.*ZEROBRIDGE_PEER_NAME"):
        zerobridge.connect()
    environment.setenv("ZEROBRIDGE_PEER_NAME", "p" * 129)
    with pytest.raises(ValueError, match=r"ZEROBRIDGE_PEER_NAME must be a name of 1\.\.128 characters"):
        zerobridge.connect()


def test_a_target_given_is_used_whatever_the_environment_says(tmp_path: Path, environment: pytest.MonkeyPatch) -> None:
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(tmp_path / "not-read.json"))
    environment.setenv("ZEROBRIDGE_PEER_NAME", "from-variable")
    # A connection file given by path names the peer with its peer field too.
    assert zerobridge.connect(write(tmp_path, peer="from-file")).name == "from-file"
    # The variables are for a peer not told where: an endpoint still needs a name.
    with pytest.raises(ValueError, match="name= is required"):
        zerobridge.connect("tcp://127.0.0.1:1")
    assert zerobridge.connect("tcp://127.0.0.1:1", name="given").info.endpoint == "tcp://127.0.0.1:1"


def test_a_launched_peer_takes_its_key_from_the_file_only(tmp_path: Path, environment: pytest.MonkeyPatch) -> None:
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(write(tmp_path, peer="p", key="ab" * 32)))
    assert zerobridge.connect().info.key == bytes.fromhex("ab" * 32)
    with pytest.raises(ValueError, match="a connection file brings its own key"):
        zerobridge.connect(key="cd" * 32)


def read_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    """The next line the process writes to stdout, waited for up to ``timeout`` s ("" if none)."""
    assert process.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n") and (remaining := deadline - time.monotonic()) > 0 and selector.select(remaining):
            chunk = os.read(process.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
    return line.decode(errors="replace").strip()


@contextlib.contextmanager
def readme_example(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The README's launched-by-a-host example, run as a host launches it: its connection file in the environment."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(block for block in blocks if "signal.SIGTERM" in block and "zerobridge.connect(" in block)
    process = subprocess.Popen(
        [sys.executable, "-c", example],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ZEROBRIDGE_CONNECTION_FILE": str(path)},
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def exit_code(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The process's exit code, waited for up to WAIT s, and what it wrote to stderr (for the assertion's message)."""
    code = process.wait(WAIT)
    return code, process.stderr.read().decode(errors="replace") if process.stderr else ""


async def test_the_readme_example_serves_under_the_file_s_name_and_on_sigterm_says_bye_and_exits(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    path, _ = launched_file(start_host, tmp_path, "py-launched-readme")
    with readme_example(path) as process:
        assert read_line(process, WAIT) == "serving as py-launched-readme"
        process.send_signal(signal.SIGTERM)
        code, stderr = exit_code(process)
        assert code == 0, stderr
    # It said bye: the host let the name go at once (a peer gone without bye holds it for 3 heartbeats, 15 s).
    async with zerobridge.connect(path, connect_timeout=5.0) as peer:
        assert peer.name == "py-launched-readme"


def test_the_readme_example_exits_0_by_itself_when_its_host_shuts_down(
    start_host: Callable[..., Any], tmp_path: Path
) -> None:
    host, path, _ = launch(start_host, tmp_path, "py-launched-readme-bye")
    with readme_example(path) as process:
        assert read_line(process, WAIT) == "serving as py-launched-readme-bye"
        host.stop()  # SIGTERM to the host: it says bye to its peers; nothing is sent to the example
        assert read_line(process, WAIT) == "closed: lost the host: the host said bye"
        code, stderr = exit_code(process)
        assert code == 0, stderr


# --- a launched peer ends with its host (SPEC 10.1) -----------------------------------------


async def test_a_launched_peer_closes_when_its_host_says_bye_and_wait_closed_says_why(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    host, path, _ = launch(start_host, tmp_path, "py-launched-bye")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(path))
    peer = await zerobridge.connect(connect_timeout=WAIT)
    try:
        assert await peer.call("echo", 1) == 1
        terminate(host)
        reason = await peer.wait_closed(WAIT)
        assert reason == "lost the host: the host said bye"
        assert not peer.connected
        assert await peer.wait_closed() == reason  # at once, as often as asked
        with pytest.raises(PeerLost, match="closed .*the host said bye"):
            await peer.call("echo", 2)
    finally:
        await peer.close()  # closed already: changes nothing
    assert await peer.wait_closed() == reason


@pytest.mark.parametrize(
    ("stop", "why"),
    [(signal.SIGKILL, "the connection broke|heard nothing for 900 ms"), (signal.SIGSTOP, "heard nothing for 900 ms")],
    ids=["killed", "frozen"],
)
async def test_a_launched_peer_that_loses_its_host_closes_and_never_reconnects_to_its_next_start(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch, stop: signal.Signals, why: str
) -> None:
    host, path, data = launch(start_host, tmp_path, "py-launched-lost", "--heartbeat-ms", "300")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(path))
    peer = await zerobridge.connect(connect_timeout=WAIT)
    try:
        assert peer.heartbeat_ms == 300
        in_flight = asyncio.ensure_future(peer.call("sleep", {"ms": 60_000}, timeout=None))
        host.process.send_signal(stop)  # killed: the connection breaks; frozen: it stays, silent
        reason = await peer.wait_closed(WAIT)
        assert re.fullmatch(f"lost the host: ({why}).*", reason), reason
        with pytest.raises(PeerLost, match="lost the host"):
            await in_flight
        # The host starts again on the same endpoint, and the peer's file is written anew with its new key (which a
        # peer would read again if the host refused its old one): the launched peer does not come back. Its name is
        # free: another peer takes it at once, where one that reconnected would hold it for as long as it lives.
        host.kill()
        launch(start_host, tmp_path, "py-launched-lost", "--heartbeat-ms", "300", endpoint=data["endpoint"])
        async with zerobridge.connect(path, connect_timeout=WAIT) as successor:
            assert successor.name == "py-launched-lost" and successor.refused_messages == 0
        assert not peer.connected
    finally:
        await peer.close()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (up to WAIT s) until ``condition()`` holds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_a_peer_given_a_connection_file_s_path_is_not_launched_and_reconnects_to_the_host_s_next_start(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    host, path, data = launch(start_host, tmp_path, "py-given-path")
    async with zerobridge.connect(path, connect_timeout=WAIT) as peer:
        first = peer.session
        host.stop()  # it says bye
        await until(lambda: not peer.connected, "the peer to take the host's bye")
        launch(start_host, tmp_path, "py-given-path", endpoint=data["endpoint"])
        await peer.wait_connected(WAIT)  # with the new key: the file is read again while the host refuses the old one
        assert peer.session != first
        assert await peer.call("add", {"a": 1, "b": 1}) == 2
        with pytest.raises(BridgeTimeout, match="not closed within"):
            await peer.wait_closed(timeout=0.01)


async def test_wait_closed_returns_for_any_peer_once_the_program_closes_it(host: HostProcess) -> None:
    peer = await zerobridge.connect(host.endpoint, name="py-closed-by-program", connect_timeout=WAIT)
    closed = asyncio.ensure_future(peer.wait_closed())
    assert await peer.call("echo", None) is None
    assert not closed.done()
    await peer.close()
    assert await closed == "the program closed the peer"
    with pytest.raises(PeerLost, match="closed .the program closed the peer"):
        await peer.call("echo", None)


def test_the_blocking_twin_waits_for_its_launched_peer_to_end_with_its_host(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    host, path, _ = launch(start_host, tmp_path, "py-launched-sync-bye")
    environment.setenv("ZEROBRIDGE_CONNECTION_FILE", str(path))
    with zerobridge.connect_sync(connect_timeout=WAIT) as peer:
        with pytest.raises(BridgeTimeout, match="not closed within"):
            peer.wait_closed(timeout=0.01)
        terminate(host)
        assert peer.wait_closed(WAIT) == "lost the host: the host said bye"
        assert not peer.connected
    assert peer.wait_closed() == "lost the host: the host said bye"  # after close(): its private loop is gone
