"""Metrics and the live view of the real host (issue 27): `zerobridge serve --metrics` after a known workload, scraped
and parsed with prometheus-client, every count checked exactly; `$stats` agrees with it and is valid under
protocol/schema/stats.schema.json; `zerobridge top` under tmux against a host with live traffic."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families

from conftest import ZEROBRIDGE_BIN, HostProcess

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "protocol" / "schema" / "stats.schema.json").read_text())
# Generous: a loaded 2-core machine may take seconds for what takes milliseconds here.
WAIT_MS = 20_000


class Wire:
    """A raw DEALER speaking to the host, counting the bytes of every message it sends (the host's bytes_in)."""

    sent_bytes = 0

    def __init__(self, context: zmq.Context, endpoint: str) -> None:
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVTIMEO, WAIT_MS)
        self.socket.connect(endpoint)

    def send_raw(self, body: bytes, counted: bool = True) -> None:
        self.socket.send_multipart([b"", body])
        if counted:
            Wire.sent_bytes += len(body)

    def send(self, body: dict[str, Any]) -> None:
        self.send_raw(json.dumps({"v": 1, **body}).encode())

    def receive(self) -> dict[str, Any]:
        frames = self.socket.recv_multipart()
        return json.loads(frames[1])

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.send(body)
        return self.receive()


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the metrics text, by name and labels."""
    with urllib.request.urlopen(url, timeout=WAIT_MS / 1000) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def metrics_url(host: HostProcess) -> str:
    match = re.search(r"zerobridge metrics (http://\S+/metrics)", host.stderr_text())
    assert match, f"no metrics line on stderr: {host.stderr_text()[-500:]}"
    return match.group(1)


@pytest.fixture
def zmq_context() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def test_scrape_after_a_known_workload_counts_exactly(start_host: Callable[..., HostProcess], zmq_context: zmq.Context):
    host = start_host("--metrics", "0", "--max-in-flight", "2", "--max-message-bytes", "4096",
                      endpoint="tcp://127.0.0.1:*")
    url = metrics_url(host)
    assert url.startswith("http://127.0.0.1:"), "a bare port is loopback"
    Wire.sent_bytes = 0
    a, b, c = (Wire(zmq_context, host.endpoint) for _ in range(3))

    assert a.answer({"type": "hello", "peer": "metrics-a", "actions": []})["type"] == "welcome"
    for i in range(7):
        assert a.answer({"type": "request", "id": f"e{i}", "action": "echo", "payload": i})["ok"] is True
    for i in range(3):
        assert a.answer({"type": "request", "id": f"a{i}", "action": "add", "payload": {"a": i, "b": 1}})["ok"] is True
    for i in range(2):
        assert a.answer({"type": "request", "id": f"x{i}", "action": "add", "payload": "no"})["error"]["code"] == "invalid_payload"
    for i in range(2):
        assert a.answer({"type": "request", "id": f"f{i}", "action": "fail", "payload": {"message": "m"}})["error"]["code"] == "handler_error"
    # Refusals before any handler: 2 unknown actions, 3 bodies that are not messages and a duplicate id (bad input),
    # 2 over the size limit, 2 over max_in_flight, 2 names taken, 1 past its deadline.
    for i in range(2):
        assert a.answer({"type": "request", "id": f"u{i}", "action": "no-such-action"})["error"]["code"] == "unknown_action"
    for junk in (b"not json", b"[1, 2]", b'{"v": 1, "type": "nonsense"}'):
        a.send_raw(junk)
        assert a.receive()["error"]["code"] == "bad_message"
    a.send({"type": "request", "id": "d1", "action": "sleep", "payload": {"ms": 60_000}})
    assert a.answer({"type": "request", "id": "d1", "action": "echo"})["error"]["code"] == "duplicate_id"
    assert a.answer({"type": "cancel", "id": "d1"})["error"]["code"] == "cancelled"
    big = json.dumps({"v": 1, "type": "request", "id": "big", "action": "echo", "payload": "x" * 5000}).encode()
    for _ in range(2):
        a.send_raw(big, counted=False)  # refused by size before it is read
        assert a.receive()["error"]["code"] == "too_large"
    b.send({"type": "request", "id": "s1", "action": "sleep", "payload": {"ms": 60_000}})
    b.send({"type": "request", "id": "s2", "action": "sleep", "payload": {"ms": 60_000}})
    for i in range(2):
        assert b.answer({"type": "request", "id": f"o{i}", "action": "echo"})["error"]["code"] == "overloaded"
    assert {b.answer({"type": "cancel", "id": "s1"})["id"], b.answer({"type": "cancel", "id": "s2"})["id"]} == {"s1", "s2"}
    for _ in range(2):
        assert c.answer({"type": "hello", "peer": "metrics-a", "actions": []})["error"]["code"] == "name_taken"
    late = c.answer({"type": "request", "id": "l1", "action": "echo", "timeout_ms": 1000, "deadline": 1000})
    assert late["error"]["code"] == "timeout"

    samples = scrape(url)
    requests = {(dict(labels)["action"], dict(labels)["outcome"]): count
                for (name, labels), count in samples.items() if name == "zerobridge_requests_total"}
    assert requests == {("echo", "ok"): 7, ("add", "ok"): 3, ("add", "invalid_payload"): 2,
                        ("fail", "handler_error"): 2, ("sleep", "cancelled"): 3}
    refusals = {dict(labels)["reason"]: count for (name, labels), count in samples.items()
                if name == "zerobridge_refusals_total" and count > 0}
    assert refusals == {"unknown_action": 2, "bad_input": 4, "too_large": 2, "overloaded": 2, "name_taken": 2, "late": 1}
    assert value(samples, "zerobridge_request_duration_seconds_count", action="echo") == 7
    assert value(samples, "zerobridge_request_duration_seconds_count", action="sleep") == 3
    assert value(samples, "zerobridge_requests_in_flight", action="sleep") == 0
    assert value(samples, "zerobridge_sessions", transport="zmq") == 3
    assert value(samples, "zerobridge_received_bytes_total", transport="zmq") == Wire.sent_bytes
    assert not any(dict(labels).get("action") == "no-such-action" for _, labels in samples), \
        "a name a peer sent that the host does not serve is never a label"

    # $stats says the same, and is what its schema says.
    snapshot = a.answer({"type": "request", "id": "st", "action": "$stats"})["result"]
    Draft202012Validator(SCHEMA).validate(snapshot)
    assert snapshot["refusals"] == refusals
    assert snapshot["totals"]["requests"] == 17 and snapshot["totals"]["failed"] == 7
    assert snapshot["in_flight"]["requests"] == {"$stats": 1}
    assert {s["name"] for s in snapshot["sessions"]} == {"metrics-a", None} and snapshot["session_count"] == 3


def test_unauthorized_messages_are_counted(start_host: Callable[..., HostProcess], zmq_context: zmq.Context, tmp_path: Path):
    host = start_host("--metrics", "127.0.0.1:0", "--connection-file", str(tmp_path / "host.json"),
                      endpoint="tcp://127.0.0.1:*")
    outsider = Wire(zmq_context, host.endpoint)
    for i in range(3):  # unsigned, on a host that requires its key
        assert outsider.answer({"type": "request", "id": f"r{i}", "action": "echo"})["error"]["code"] == "unauthorized"
    samples = scrape(metrics_url(host))
    assert value(samples, "zerobridge_refusals_total", reason="unauthorized") == 3
    assert value(samples, "zerobridge_sessions", transport="zmq") == 0, "a refused opening opens no session"


def test_metrics_endpoint_answers_only_get_metrics(start_host: Callable[..., HostProcess]):
    host = start_host("--metrics", "0", endpoint="tcp://127.0.0.1:*")
    base = metrics_url(host).removesuffix("/metrics")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + "/other", timeout=WAIT_MS / 1000)
    assert missing.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(urllib.request.Request(base + "/metrics", data=b"x" * 100_000, method="POST"),
                               timeout=WAIT_MS / 1000)
    assert posted.value.code == 405
    assert scrape(base + "/metrics") is not None, "still serving after bad requests"


def test_bad_metrics_address_is_refused_with_a_clear_message():
    run = subprocess.run([ZEROBRIDGE_BIN, "serve", "--conformance", "--metrics", "localhost:notaport"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "--metrics" in run.stderr and "HOST:PORT" in run.stderr


# --- zerobridge top -------------------------------------------------------------------------------------------------


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True, timeout=30).stdout


def wait_for_screen(session: str, condition: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + WAIT_MS / 1000
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if condition(screen):
            return screen
        time.sleep(0.1)
    pytest.fail(f"{what}: the screen was\n{screen}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (make deps-system installs it)")
def test_top_refreshes_in_place_under_tmux(start_host: Callable[..., HostProcess], zmq_context: zmq.Context, tmp_path: Path):
    connection_file = tmp_path / "host.json"
    # A short grace: `call` may exit on SIGTERM before its bye is sent, and its session then waits to be resumed.
    host = start_host("--connection-file", str(connection_file), "--session-grace-ms", "500", endpoint="tcp://127.0.0.1:*")
    traffic = subprocess.Popen([ZEROBRIDGE_BIN, "call", "count", '{"n": 100000, "delay_ms": 50}',
                                "--connection-file", str(connection_file), "--name", "live-traffic"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    session = f"zb-top-{uuid.uuid4().hex[:8]}"
    socket_dir = tmp_path / "tmux"
    socket_dir.mkdir()
    # A private tmux server (its own socket), so no other test's or user's sessions are touched.
    os.environ["TMUX_TMPDIR"] = str(socket_dir)
    try:
        tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "40",
             f"{ZEROBRIDGE_BIN} top --connection-file {connection_file} --interval-ms 200")
        first = wait_for_screen(session, lambda s: "live-traffic" in s and "count 1" in s,
                                "top shows the live call in flight and its session")
        assert "host conformance" in first
        wait_for_screen(session, lambda s: re.search(r"requests \d+ \(\d+/s\)", s) is not None,
                        "top shows a rate once it has two snapshots")
        traffic.terminate()
        traffic.wait(30)
        screen = wait_for_screen(session, lambda s: "live-traffic" not in s and not re.search(r"^in flight .*count", s, re.M),
                                 "top refreshes in place: the ended call and its session are gone")
        assert screen.count("sessions ") == 1, "one view, redrawn in place, not scrolled"
        tmux("send-keys", "-t", session, "C-c")
        deadline = time.monotonic() + WAIT_MS / 1000
        while subprocess.run(["tmux", "has-session", "-t", session], capture_output=True, timeout=30).returncode == 0:
            assert time.monotonic() < deadline, "Ctrl-C ends top (and with it the tmux session)"
            time.sleep(0.1)
    finally:
        if traffic.poll() is None:
            traffic.kill()
            traffic.wait()
        subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=30)
        os.environ.pop("TMUX_TMPDIR", None)


def test_top_once_json_prints_one_valid_snapshot(start_host: Callable[..., HostProcess]):
    host = start_host(endpoint="tcp://127.0.0.1:*")
    run = subprocess.run([ZEROBRIDGE_BIN, "top", "--endpoint", host.endpoint, "--once", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    snapshot = json.loads(run.stdout)
    Draft202012Validator(SCHEMA).validate(snapshot)
    assert snapshot["host"] == "conformance"


def test_top_on_a_curve_host_with_its_own_key(start_host: Callable[..., HostProcess], tmp_path: Path):
    public, secret = zmq.curve_keypair()
    key_file, allow_list = tmp_path / "operator.key", tmp_path / "allowed.txt"
    key_file.write_bytes(secret + b"\n")
    key_file.chmod(0o600)
    allow_list.write_bytes(public + b"\n")
    connection_file = tmp_path / "host.json"
    host = start_host("--connection-file", str(connection_file), "--allow-peer-keys", str(allow_list),
                      endpoint="tcp://127.0.0.1:*")
    run = subprocess.run([ZEROBRIDGE_BIN, "top", "--connection-file", str(connection_file), "--once", "--json",
                          "--curve-secret-key-file", str(key_file)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["session_count"] == 1
    # Without the listed key, the host's CURVE handshake refuses top before any $stats.
    refused = subprocess.run([ZEROBRIDGE_BIN, "top", "--connection-file", str(connection_file), "--once"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "unauthorized" in refused.stderr
    assert host.process.poll() is None
