"""Peers launched by a host (SPEC 10.1): ``connect()`` without a target reads the connection file that
ZEROBRIDGE_CONNECTION_FILE names and says hello with its ``peer`` (else ZEROBRIDGE_PEER_NAME), against the real
conformance host writing a keyed connection file; without the variable it fails at once, saying what to set."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import zerobridge
from zerobridge import NameTaken

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


def launched_file(start_host: Callable[..., Any], tmp_path: Path, peer: str) -> tuple[Path, dict[str, Any]]:
    """What a supervising host hands a peer: a copy of the keyed conformance host's connection file with ``peer``."""
    written = tmp_path / "host.json"
    start_host("--connection-file", str(written), endpoint="tcp://127.0.0.1:*")
    data = json.loads(written.read_text())
    assert len(data["key"]) == 64  # keyed: the host refuses a peer that does not sign with it
    copy = tmp_path / "peer.json"
    copy.write_text(json.dumps({**data, "peer": peer}))
    copy.chmod(0o600)
    return copy, data


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
    """The first line the process writes to stdout, waited for up to ``timeout`` s ("" if none)."""
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


async def test_the_readme_example_serves_under_the_file_s_name_and_on_sigterm_says_bye_and_exits(
    start_host: Callable[..., Any], tmp_path: Path, environment: pytest.MonkeyPatch
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    example = next(block for block in blocks if "signal.SIGTERM" in block and "zerobridge.connect(" in block)
    path, _ = launched_file(start_host, tmp_path, "py-launched-readme")
    process = subprocess.Popen(
        [sys.executable, "-c", example],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ZEROBRIDGE_CONNECTION_FILE": str(path)},
    )
    try:
        assert read_line(process, WAIT) == "serving as py-launched-readme"
        process.send_signal(signal.SIGTERM)
        assert process.wait(WAIT) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    # It said bye: the host let the name go at once (a peer gone without bye holds it for 3 heartbeats, 15 s).
    async with zerobridge.connect(path, connect_timeout=5.0) as peer:
        assert peer.name == "py-launched-readme"
