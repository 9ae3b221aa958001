"""CURVE across machines (SPEC 2.1): the host in one network namespace, peers in another, joined by a veth pair,
over tcp (a host listening there without CURVE warns in its log). A capture of the link (tcpdump) shows the ZMTP greeting naming CURVE and nothing of the payloads; the
same capture method run against a plaintext host does show them, so the check can fail. A peer whose key is not on
the host's allow-list is refused, and the host logs its key."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from conftest import ZEROBRIDGE_BIN
from test_partition import namespaces  # noqa: F401  (the fixture: two namespaces joined by a veth pair)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tcpdump") is None,
    reason="creates network namespaces and captures on them: needs root, iproute2 and tcpdump (CI runs as root; make installs both)",
)

PEER = r"""
import asyncio, sys, zerobridge

async def main(target, canary, public, secret):
    options = {"curve_key_pair": (public, secret)} if public else {}
    try:
        async with zerobridge.connect(target, name="far-" + canary[-6:], connect_timeout=float(sys.argv[5]), **options) as peer:
            for i in range(5):
                assert await peer.call("echo", f"{canary}-{i}") == f"{canary}-{i}"
    except zerobridge.Unauthorized as error:  # the failed CURVE handshake is known at once (SPEC decision 45)
        print("refused", error, flush=True)
        return
    print("ok", flush=True)

asyncio.run(main(*sys.argv[1:5]))
"""


class Capture:
    """tcpdump on one side of the veth pair, writing every byte of tcp traffic on a port to a file."""

    def __init__(self, namespace: str, device: str, port: int, path: Path) -> None:
        self.path = path
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, "tcpdump", "-Z", "root", "--immediate-mode", "-i", device, "-U", "-s", "0", "-w", str(path),
             "tcp", "port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.process.stderr is not None
        line = self.process.stderr.readline()  # "listening on ...": capturing from here on
        assert "listening on" in line, line

    def stop(self, until: Callable[[bytes], bool]) -> bytes:
        """Stops once what was written satisfies `until` (tcpdump writes each packet as it reads it, a little
        after the kernel saw it), or after 30 s; returns everything captured."""
        deadline = time.monotonic() + 30
        while not until(self.path.read_bytes()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.process.send_signal(signal.SIGINT)
        self.process.communicate(timeout=30)
        return self.path.read_bytes()


def serve(folder: Path, namespace: str, endpoint: str, *options: str) -> tuple[subprocess.Popen[str], Path]:
    # The log goes into the test's own folder, which pytest removes, so runs leave nothing in /tmp.
    log = folder / f"host-{secrets.token_hex(4)}.log"
    host = subprocess.Popen(["ip", "netns", "exec", namespace, ZEROBRIDGE_BIN, "serve", "--conformance",
                             "--endpoint", endpoint, "--log-level", "warning", *options],
                            stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    assert host.stdout is not None
    ready = host.stdout.readline()
    assert ready.startswith("zerobridge ready "), f"{ready!r}; log: {log.read_text()}"
    return host, log


def run_peer(namespace: str, target: str, canary: str, key_pair: tuple[str, str] | None, timeout: float) -> str:
    public, secret = key_pair or ("", "")
    completed = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", PEER, target, canary,
                                public, secret, str(timeout)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_curve_between_namespaces_hides_payloads_and_refuses_unlisted_keys(
        namespaces: tuple[str, str, str], folder: Path) -> None:  # noqa: F811
    host_ns, peer_ns, subnet = namespaces
    device = "zbp" + host_ns.split("-")[1]
    listed = tuple(key.decode() for key in zmq.curve_keypair())
    unlisted = tuple(key.decode() for key in zmq.curve_keypair())
    (folder / "peers.txt").write_text(f"# the far peer\n{listed[0]}\n")
    canary = "PLAINTEXT-CANARY-" + secrets.token_hex(6)

    # Control: the same capture of a plaintext host shows the payloads, so a capture without them means something.
    plain, plain_log = serve(folder, host_ns, f"tcp://{subnet}.1:5556")
    try:
        capture = Capture(peer_ns, device, 5556, folder / "plain.pcap")
        assert run_peer(peer_ns, f"tcp://{subnet}.1:5556", canary, None, 20).startswith("ok")
        assert canary.encode() in capture.stop(until=lambda data: canary.encode() in data)
    finally:
        stop(plain)
    assert "listening off loopback without CURVE" in plain_log.read_text(), "a plaintext host off loopback warns"

    host, log = serve(folder, host_ns, f"tcp://{subnet}.1:5555", "--curve-secret-key-file", str(folder / "host.key"),
                      "--allow-peer-keys", str(folder / "peers.txt"), "--connection-file", str(folder / "host.json"),
                      "--no-key")
    try:
        capture = Capture(peer_ns, device, 5555, folder / "curve.pcap")
        assert run_peer(peer_ns, str(folder / "host.json"), canary, listed, 20).startswith("ok")
        assert run_peer(peer_ns, str(folder / "host.json"), canary + "-unlisted", unlisted, 3).startswith("refused")
        traffic = capture.stop(until=lambda data: b"CURVE" in data and len(data) > 2000)
        deadline = time.monotonic() + 20
        while unlisted[0] not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop(host)
    assert b"CURVE" in traffic, "the capture holds the ZMTP greetings"
    assert len(traffic) > 2000, "and the encrypted exchanges"
    assert canary.encode() not in traffic and b"echo" not in traffic and b"hello" not in traffic
    text = log.read_text()
    assert "peer key refused" in text and unlisted[0] in text, text
    assert listed[0] not in text, "the listed peer was not refused"
    assert "without CURVE" not in text
