"""SPEC 7.17: connections past what the host's open-file limit allows never cost it its connected peers: it keeps its
endpoint bound and sheds the new ones. The real host runs under a lowered open-file limit (RLIMIT_NOFILE, soft and
hard, so it cannot raise it), and a keyed peer keeps calling while hundreds of connections arrive that it cannot
all keep. (Before: out of descriptors, the host unbound its endpoint, which closed every connection, the peer's too.)"""

from __future__ import annotations

import errno
import resource
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import zerobridge
from conftest import ZEROBRIDGE_BIN, HostProcess

OPEN_FILE_LIMIT = 256  # the host keeps at most 256 - 64 connections
CONNECTIONS = 600  # well past that
WAIT = 20.0


class LimitedHost(HostProcess):
    """A conformance host whose open-file limit is `limit` (soft and hard)."""

    def __init__(self, limit: int, endpoint: str, *extra: str) -> None:
        self.args = [ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", endpoint, *extra]
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=self._stderr,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        self.endpoint = self._read_ready_line()


def open_connections(endpoint: str, count: int) -> list[socket.socket]:
    """`count` TCP connections that never speak: libzmq accepts each and waits for its greeting."""
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    sockets = []
    for _ in range(count):
        connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        connection.setblocking(False)  # past the listen backlog a blocking connect would wait for SYN retries
        assert connection.connect_ex((host, int(port))) in (0, errno.EINPROGRESS)
        sockets.append(connection)
    return sockets


@pytest.mark.async_timeout(90)
async def test_past_its_open_file_limit_the_host_sheds_new_connections_and_keeps_its_peers(tmp_path: Path) -> None:
    path = tmp_path / "host.json"
    host = LimitedHost(OPEN_FILE_LIMIT, "tcp://127.0.0.1:*", "--connection-file", str(path), "--log-level", "info")
    crowd: list[socket.socket] = []
    try:
        async with zerobridge.connect(path, name="keeper", connect_timeout=WAIT) as peer:
            session = peer.session
            crowd = open_connections(host.endpoint, CONNECTIONS)
            failures = []
            deadline = time.monotonic() + WAIT
            calls = 0
            # Calls go on while the crowd is accepted and shed, until the host said it shed (or the wait ran out).
            while calls < 30 or ("connection shed" not in host.stderr_text() and time.monotonic() < deadline):
                try:
                    assert await peer.call("echo", calls, timeout=10) == calls
                except zerobridge.BridgeError as error:
                    failures.append(f"{error.code}: {error}")
                calls += 1
            log = host.stderr_text()
            assert failures == [], (failures[:3], log[-2000:])
            assert peer.session == session, "the peer kept its session: its connection was never closed"
            assert "connection shed" in log, log[-2000:]
            assert host.process.poll() is None
    finally:
        for connection in crowd:
            connection.close()
        host.stop()
