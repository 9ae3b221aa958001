"""CURVE (SPEC 2.1): the peer against the real host with a server key and an allow-list of peer keys, the
peer's key options, and `$evaluate` kept across reconnects only with CURVE.

The host is `zerobridge serve --curve-secret-key-file F [--allow-peer-keys FILE] --connection-file C`; it fails
(not skips) when the binary is missing: see conftest.HostProcess."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

import zerobridge
from zerobridge import BridgeTimeout, NotAllowed, curve, read_connection_file

# Generous: a loaded 2-core machine may take seconds for what takes milliseconds here.
WAIT = 20.0
# How long a peer that must not be welcomed tries: its failure is the expected outcome, so this only costs time.
REFUSED_CONNECT_TIMEOUT = 3.0


def key_pair() -> tuple[str, str]:
    """A pair whose public key can go on serve's allow-list, whose parser takes "#" (a Z85 character) for the
    start of a comment: a key containing it cannot be listed."""
    while True:
        public, secret = zmq.curve_keypair()
        if b"#" not in public:
            return public.decode(), secret.decode()


class CurveHost:
    """Starts `serve` with a CURVE secret key file (kept across restarts) and a connection file."""

    def __init__(self, start_host: Callable[..., Any], directory: Path) -> None:
        self._start_host = start_host
        self.secret_key_file = directory / "host.key"
        self.connection_file = directory / "connection.json"
        self.allow_list = directory / "allowed-peers"

    def start(self, allowed: list[str] | None = None, endpoint: str = "tcp://127.0.0.1:*") -> Any:
        args = ["--curve-secret-key-file", str(self.secret_key_file), "--connection-file", str(self.connection_file),
                "--log-level", "warning"]
        if allowed is not None:
            self.allow_list.write_text("# peers allowed in\n" + "".join(f"{key}\n" for key in allowed))
            args += ["--allow-peer-keys", str(self.allow_list)]
        return self._start_host(*args, endpoint=endpoint)

    @property
    def server_key(self) -> str:
        key = read_connection_file(self.connection_file).curve_server_key
        assert key is not None
        return key


@pytest.fixture
def curve_host(start_host: Callable[..., Any], tmp_path: Path) -> CurveHost:
    return CurveHost(start_host, tmp_path)


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


# --- the real host --------------------------------------------------------------------------------------------


async def test_a_listed_peer_connects_through_the_connection_file(curve_host: CurveHost, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="zerobridge")
    public, secret = key_pair()
    host = curve_host.start(allowed=[public])
    assert json.loads(curve_host.connection_file.read_text())["curve_server_key"] == curve_host.server_key
    assert f"CURVE server key {curve_host.server_key}" in host.stderr_text()
    # The connection file alone turns CURVE on; the key pair is what the allow-list names.
    async with zerobridge.connect(curve_host.connection_file, name="py-curve", curve_key_pair=(public, secret),
                                  connect_timeout=WAIT) as peer:
        assert peer.curve_public_key == public and peer.curve_server_key == curve_host.server_key
        assert await peer.call("echo", {"over": "curve"}) == {"over": "curve"}
        assert secret not in repr(vars(peer)) and secret not in repr(peer._curve)
    assert secret not in caplog.text


async def test_an_unlisted_peer_is_never_welcomed_and_the_host_logs_its_key(curve_host: CurveHost) -> None:
    listed, _ = key_pair()
    host = curve_host.start(allowed=[listed])
    peer = zerobridge.connect(curve_host.connection_file, name="py-unlisted", connect_timeout=REFUSED_CONNECT_TIMEOUT)
    refused = peer.curve_public_key
    assert refused is not None and refused != listed  # a fresh pair of its own
    with pytest.raises(zerobridge.Unauthorized) as caught:
        await peer.start()
    assert "allow-list" in caught.value.message and refused in caught.value.message
    await wait_for(lambda: f"peer_key={refused}" in host.stderr_text(), "the host logs the refused key")
    assert "refused" in host.stderr_text()


async def test_a_peer_pinning_another_server_key_is_never_welcomed(curve_host: CurveHost) -> None:
    curve_host.start()  # no allow-list: any peer key would do
    impostor_key, _ = key_pair()
    with pytest.raises(zerobridge.Unauthorized) as caught:
        # The explicit key wins over the connection file's: the host cannot prove it.
        await zerobridge.connect(curve_host.connection_file, name="py-pinned", curve_server_key=impostor_key,
                                 connect_timeout=REFUSED_CONNECT_TIMEOUT)
    assert "CURVE handshake failed" in caught.value.message
    async with zerobridge.connect(curve_host.connection_file, name="py-pinned", connect_timeout=WAIT) as peer:
        assert await peer.call("echo", 1) == 1


async def test_a_plaintext_peer_is_never_welcomed_by_a_curve_host(curve_host: CurveHost) -> None:
    host = curve_host.start()
    with pytest.raises(zerobridge.Unauthorized) as caught:
        await zerobridge.connect(host.endpoint, name="py-plain", connect_timeout=REFUSED_CONNECT_TIMEOUT)
    assert "curve_server_key" in caught.value.message


async def test_each_peer_has_a_fresh_pair_unless_given_one(curve_host: CurveHost) -> None:
    curve_host.start()
    async with (
        zerobridge.connect(curve_host.connection_file, name="py-a", connect_timeout=WAIT) as a,
        zerobridge.connect(curve_host.connection_file, name="py-b", connect_timeout=WAIT) as b,
    ):
        assert a.curve_public_key and b.curve_public_key and a.curve_public_key != b.curve_public_key
        assert await a.call("echo", "a") == "a" and await b.call("echo", "b") == "b"


async def test_a_secret_key_file_is_created_once_and_its_key_allowed(curve_host: CurveHost, tmp_path: Path) -> None:
    key_file = tmp_path / "peer.key"
    public, secret = curve.load_secret_key_file(key_file)  # created: missing
    while "#" in public:  # not listable (see key_pair)
        key_file.unlink()
        public, secret = curve.load_secret_key_file(key_file)
    assert key_file.stat().st_mode & 0o777 == 0o600 and key_file.read_text() == secret + "\n"
    assert curve.load_secret_key_file(key_file) == (public, secret)  # then read back
    curve_host.start(allowed=[public])
    async with zerobridge.connect(curve_host.connection_file, name="py-file-key", curve_secret_key_file=key_file,
                                  connect_timeout=WAIT) as peer:
        assert peer.curve_public_key == public
        assert await peer.call("echo", "keyed") == "keyed"


def test_the_blocking_twin_takes_the_same_curve_options(curve_host: CurveHost) -> None:
    public, secret = key_pair()
    curve_host.start(allowed=[public])
    with zerobridge.connect_sync(curve_host.connection_file, name="py-sync-curve", curve_key_pair=(public, secret),
                                 connect_timeout=WAIT) as peer:
        assert peer.curve_public_key == public
        assert peer.call("echo", "sync") == "sync"


# --- $evaluate across a host restart (SPEC 2.1) -----------------------------------------------------------------


@pytest.mark.parametrize("with_curve", [True, False], ids=["curve", "plaintext"])
async def test_evaluate_survives_a_host_restart_only_with_curve(
    curve_host: CurveHost, start_host: Callable[..., Any], ipc_dir: Path, with_curve: bool
) -> None:
    endpoint = f"ipc://{ipc_dir}/host.sock"

    def start() -> Any:
        return curve_host.start(endpoint=endpoint) if with_curve else start_host(endpoint=endpoint)

    first = start()
    target = curve_host.connection_file if with_curve else endpoint
    async with zerobridge.connect(target, name="py-eval-restart", evaluate=True, connect_timeout=WAIT) as peer:
        script = {"script": "return a * b", "arguments": {"a": 6, "b": 7}}
        assert await peer.call("evaluate", script) == 42  # host -> peer $evaluate (SPEC 11)
        first.stop()  # graceful: the host says bye, the peer starts over
        await wait_for(lambda: not peer.connected, "the peer lost the host")
        start()  # the same endpoint and, with CURVE, the same key
        await peer.wait_connected(WAIT)
        if with_curve:
            assert await peer.call("evaluate", script) == 42
        else:
            with pytest.raises(NotAllowed, match="CURVE"):
                await peer.call("evaluate", script)


# --- options --------------------------------------------------------------------------------------------------


def test_curve_options_are_checked(tmp_path: Path) -> None:
    server, _ = key_pair()
    public, secret = key_pair()
    endpoint = "tcp://127.0.0.1:1"
    assert zerobridge.connect(endpoint, name="p").curve_public_key is None  # no server key: no CURVE
    with pytest.raises(ValueError, match="needs the host's public key"):
        zerobridge.connect(endpoint, name="p", curve_key_pair=(public, secret))
    with pytest.raises(ValueError, match="curve_server_key"):
        zerobridge.connect(endpoint, name="p", curve_server_key=server[:39])
    with pytest.raises(ValueError, match="curve_server_key"):
        zerobridge.connect(endpoint, name="p", curve_server_key="#" * 40)  # Z85 characters, but not 32 bytes
    with pytest.raises(ValueError, match="secret key"):
        zerobridge.connect(endpoint, name="p", curve_server_key=server, curve_key_pair=(secret, public))  # swapped
    with pytest.raises(ValueError, match="not both"):
        zerobridge.connect(endpoint, name="p", curve_server_key=server, curve_key_pair=(public, secret),
                           curve_secret_key_file=tmp_path / "k")
    bytes_pair = zmq.curve_keypair()  # as pyzmq gives them
    assert zerobridge.connect(endpoint, name="p", curve_server_key=server.encode(),
                              curve_key_pair=bytes_pair).curve_public_key == bytes_pair[0].decode()
    junk = tmp_path / "junk.key"
    junk.write_text("not-a-secret-key-but-perhaps-something-private")
    junk.chmod(0o600)  # owner-only, so it is refused for what it holds, not for who may read it
    with pytest.raises(ValueError) as caught:
        zerobridge.connect(endpoint, name="p", curve_server_key=server, curve_secret_key_file=junk)
    assert "does not hold a CURVE secret key" in str(caught.value) and "private" not in str(caught.value)


async def test_curve_keeps_evaluate_after_a_loss(fake_host: Any) -> None:
    public, secret = zmq.curve_keypair()
    async with fake_host(curve_secret_key=secret) as host:
        async with zerobridge.connect(host.endpoint, name="p", evaluate=True, curve_server_key=public,
                                      connect_timeout=WAIT) as peer:
            assert (await host.next("hello"))["features"] == ["evaluate", "batch"]
            host.send(None, {"v": 1, "type": "bye"})
            assert (await host.next("hello", timeout=WAIT))["features"] == ["evaluate", "batch"]
            await peer.wait_connected(WAIT)
            host.send(None, {"v": 1, "type": "request", "id": "e", "action": "$evaluate", "payload": {"script": "return 2"}})
            assert (await host.next("response", timeout=WAIT, id="e"))["result"] == 2
