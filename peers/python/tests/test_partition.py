"""At most once after giving up (SPEC 7.3), across a real network partition.

The host and a Python peer run in two network namespaces joined by a veth pair; the peer keeps calling
`echo` (timeout 1 s, one call every 50 ms) while the test takes the host's side of the link down for 4 s
and brings it back. Calls made during the partition fail at the caller (`timeout`, then `peer_lost`); once the
link is back, TCP delivers whatever was still in flight. Before SPEC 1.1 the host then ran every one of those
calls. Now it must run none: their deadlines have passed, and their connection was given up on both sides.
The host's debug log names every request it starts, by session and id.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conftest import ZEROBRIDGE_BIN

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="creates network namespaces and a veth pair: needs root and iproute2 (CI runs as root)",
)

PEER = r"""
import asyncio, json, sys, time, zerobridge

async def main(endpoint):
    async with zerobridge.connect(endpoint, name="partitioned", heartbeat_ms=300) as peer:
        async def one(i):
            record = {"i": i, "sent": time.monotonic(), "id": None, "session": peer.session}
            try:
                async with peer.stream("echo", i, timeout=1.0) as call:
                    record["id"] = call.id
                    await call.result
                    record["outcome"] = "ok"
            except zerobridge.BridgeError as error:
                record["outcome"] = error.code
            print(json.dumps(record), flush=True)

        stop = asyncio.create_task(asyncio.to_thread(sys.stdin.readline))
        tasks, i = [], 0
        while not stop.done():
            tasks.append(asyncio.create_task(one(i)))
            i += 1
            await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)

asyncio.run(main(sys.argv[1]))
"""


RAW = r"""
import json, sys, threading, time, zmq

socket = zmq.Context().socket(zmq.DEALER)
socket.setsockopt(zmq.LINGER, 0)
socket.connect(sys.argv[1])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
i = 0
while not stop.is_set():
    body = {"v": 1, "type": "request", "id": f"r{i}", "action": "echo", "payload": i,
            "timeout_ms": 1000, "deadline": int(time.time() * 1000) + 1000}
    socket.send_multipart([b"", json.dumps(body).encode()])
    print(json.dumps({"id": f"r{i}", "sent": time.monotonic()}), flush=True)
    i += 1
    time.sleep(0.05)
    while socket.poll(0):
        socket.recv_multipart()
"""


class Partition:
    """The host in one namespace, a client script in the other, and the link between them to cut and heal."""

    def __init__(self, namespaces: tuple[str, str, str], client: str) -> None:
        host_ns, self.peer_ns, subnet = namespaces
        self.host_ns, self.device = host_ns, "zbh" + host_ns.split("-")[1]
        self.log = tempfile.TemporaryFile()
        self.host = subprocess.Popen(
            ["ip", "netns", "exec", host_ns, ZEROBRIDGE_BIN, "serve", "--conformance",
             "--endpoint", f"tcp://{subnet}.1:5555", "--heartbeat-ms", "300", "--log-level", "debug"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.client: subprocess.Popen[str] | None = None
        assert self.host.stdout is not None
        ready = self.host.stdout.readline()
        assert ready.startswith("zerobridge ready "), ready
        self.client = subprocess.Popen(
            ["ip", "netns", "exec", self.peer_ns, sys.executable, "-c", client, ready.split()[-1]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.records: list[dict[str, Any]] = []

    def read_until(self, condition: Callable[[], bool], limit: float = 60.0) -> None:
        """Collects the client's JSON lines until `condition` holds (failing after `limit` seconds)."""
        assert self.client is not None and self.client.stdout is not None
        deadline = time.monotonic() + limit
        while not condition() and time.monotonic() < deadline:
            line = self.client.stdout.readline()
            if not line:
                break
            self.records.append(json.loads(line))
        assert condition(), f"gave up waiting; the client said last: {self.records[-5:]}"

    def cut(self) -> float:
        ip("-n", self.host_ns, "link", "set", self.device, "down")
        return time.monotonic()

    def heal(self) -> float:
        ip("-n", self.host_ns, "link", "set", self.device, "up")
        return time.monotonic()

    def finish(self) -> None:
        """Tells the client to stop, collects what it still says, and stops both processes."""
        if self.client is not None and self.client.poll() is None:
            assert self.client.stdin is not None and self.client.stdout is not None
            self.client.stdin.write("stop\n")
            self.client.stdin.flush()
            self.records.extend(json.loads(line) for line in self.client.stdout)
        for process in (self.client, self.host):
            if process is None:
                continue
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()

    def started(self) -> set[tuple[str | None, str | None]]:
        """(session, id) of every `echo` the host's debug log says it started."""
        self.log.seek(0)
        found = set()
        for line in self.log.read().decode(errors="replace").splitlines():
            if "request started" in line and "action=echo" in line:
                fields = dict(re.findall(r"(\w+)=(\S+)", line))
                found.add((fields.get("session"), fields.get("id")))
        return found


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str, str]]:
    """Two namespaces, `host` (10.231.N.1) and `peer` (10.231.N.2), joined by a veth pair."""
    tag = secrets.token_hex(3)
    host, peer = f"zbh-{tag}", f"zbp-{tag}"
    subnet = f"10.231.{secrets.randbelow(250) + 1}"
    ip("netns", "add", host)
    try:
        ip("netns", "add", peer)
        ip("link", "add", f"zbh{tag}", "type", "veth", "peer", "name", f"zbp{tag}")
        ip("link", "set", f"zbh{tag}", "netns", host)
        ip("link", "set", f"zbp{tag}", "netns", peer)
        ip("-n", host, "addr", "add", f"{subnet}.1/24", "dev", f"zbh{tag}")
        ip("-n", peer, "addr", "add", f"{subnet}.2/24", "dev", f"zbp{tag}")
        for namespace, device in ((host, f"zbh{tag}"), (peer, f"zbp{tag}")):
            ip("-n", namespace, "link", "set", "lo", "up")
            ip("-n", namespace, "link", "set", device, "up")
        yield host, peer, subnet
    finally:
        for namespace in (host, peer):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def test_calls_given_up_during_a_partition_never_run(namespaces: tuple[str, str, str]) -> None:
    partition = Partition(namespaces, PEER)
    records = partition.records
    try:
        partition.read_until(lambda: sum(r["outcome"] == "ok" for r in records) >= 20)  # calls flow
        down = partition.cut()
        partition.read_until(lambda: sum(r["sent"] > down + 0.1 and r["id"] is not None for r in records) >= 10
                             and any(r["outcome"] == "peer_lost" for r in records))  # given up; the host lost
        time.sleep(max(0.0, down + 4.0 - time.monotonic()))
        up = partition.heal()
        partition.read_until(lambda: any(r["outcome"] == "ok" and r["sent"] > up for r in records))  # served again
    finally:
        partition.finish()
    started = partition.started()

    def ran(record: dict[str, Any]) -> bool:
        return (record["session"], record["id"]) in started

    # Sent while the link was down and failed before it came back: the caller gave up on each of them.
    given_up = [r for r in records if r["id"] is not None and r["outcome"] != "ok" and down < r["sent"] and r["sent"] + 1.0 < up]
    assert len(given_up) >= 10, records
    assert [r for r in given_up if ran(r)] == [], "the host ran calls its caller had given up on"
    # While the peer knew its host was lost, calls failed at once and were never sent.
    assert any(r["id"] is None and r["outcome"] == "peer_lost" for r in records)
    # The host did run what was answered: the log is a faithful witness.
    answered = [r for r in records if r["outcome"] == "ok"]
    assert answered and all(ran(r) for r in answered)


def test_requests_held_up_past_their_deadline_never_run(namespaces: tuple[str, str, str]) -> None:
    """A raw client that keeps its connection through the partition: TCP delivers its requests late, in order,
    and the host refuses each one whose deadline has passed (answers `timeout`) instead of running it."""
    partition = Partition(namespaces, RAW)
    sent = lambda: {r["id"]: r["sent"] for r in partition.records}  # noqa: E731
    started = lambda: {request for _, request in partition.started()}  # noqa: E731
    try:
        partition.read_until(lambda: len(started()) >= 20)
        down = partition.cut()
        time.sleep(4.0)  # the partition; everything sent meanwhile expires after 1 s
        up = partition.heal()
        # TCP delivers in order: once a request sent after the partition has started, every earlier one has
        # arrived and been decided.
        partition.read_until(lambda: any(sent().get(request or "", 0.0) > up for request in started()))
    finally:
        partition.finish()
    expired = [request for request, at in sent().items() if down < at and at + 1.0 < up]
    assert len(expired) >= 20
    assert [request for request in expired if request in started()] == [], "requests past their deadline were run"
