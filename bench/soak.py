"""`make bench-hostile`: a conformance host against hostile and unlucky clients, with its memory and CPU watched.

    .venv/bin/python bench/hostile.py [--bin .build/release] [--out .bench/hostile.json] [--only NAME ...]

Each scenario starts a fresh `zerobridge serve --conformance` (1 MiB messages, 256 requests in flight per
session, 500 ms heartbeat) over ipc, does something a hostile or unlucky client would, and reads the host's
resident memory (VmRSS) and CPU time from /proc while it happens. These are the reports that issue 13 (bounded
resources) answered; the table says what the host does now. Figures vary with the machine; the outcomes do not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import zmq

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


class Host:
    """A conformance host process, and what /proc says about it."""

    def __init__(self, binary: Path) -> None:
        self.folder = tempfile.mkdtemp(prefix="zb-hostile-")
        self.process = subprocess.Popen(
            [str(binary), "serve", "--conformance", "--endpoint", f"ipc://{self.folder}/host.sock",
             "--heartbeat-ms", "500", "--log-level", "error"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("zerobridge ready "):
            raise SystemExit(f"the host did not start: {line!r}")
        self.endpoint = line.split()[-1]

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


def dealer(context: zmq.Context, endpoint: str, rcvhwm: int = 1000) -> zmq.Socket:
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVHWM, rcvhwm)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.connect(endpoint)
    return socket


def send(socket: zmq.Socket, body: dict[str, Any], *attachments: bytes) -> None:
    socket.send_multipart([b"", json.dumps(body).encode(), *attachments])


def receive(socket: zmq.Socket, timeout_ms: int = 10_000) -> dict[str, Any] | None:
    if not socket.poll(timeout_ms):
        return None
    frames = socket.recv_multipart()
    return json.loads(frames[1]) if len(frames) > 1 else None


def watch(host: Host, seconds: float, during: Callable[[], None] | None = None) -> tuple[float, float]:
    """Samples the host's RSS every 50 ms for `seconds`; returns (peak MB, CPU seconds used meanwhile)."""
    peak, cpu = host.rss_mb(), host.cpu_seconds()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if during:
            during()
        peak = max(peak, host.rss_mb())
        time.sleep(0.05)
    return peak, host.cpu_seconds() - cpu


def echo_round_trip(context: zmq.Context, endpoint: str) -> float:
    """Milliseconds for one echo from a fresh anonymous peer."""
    socket = dealer(context, endpoint)
    started = time.monotonic()
    send(socket, {"v": 1, "type": "request", "id": "e", "action": "echo", "payload": 1})
    answer = receive(socket, 30_000)
    socket.close()
    return (time.monotonic() - started) * 1000 if answer and answer.get("ok") else float("inf")


# --- scenarios ---------------------------------------------------------------------------------

def oversized(host: Host, context: zmq.Context) -> dict[str, Any]:
    """A 200 MB JSON body from one peer; another peer's echo meanwhile. One just over the limit (within its 64 KiB slack) is answered too_large, with its id."""
    baseline = host.rss_mb()
    near = dealer(context, host.endpoint)
    send(near, {"v": 1, "type": "request", "id": "near", "action": "echo", "payload": "x" * (1_048_576 + 10_000)})
    near_answer = receive(near)
    huge = dealer(context, host.endpoint)
    body = b'{"v":1,"type":"request","id":"huge","action":"echo","payload":[' + b"1," * 100_000_000 + b"1]}"
    huge.send_multipart([b"", body], copy=False)
    del body
    latencies: list[float] = []
    peak, cpu = watch(host, 3.0, lambda: latencies.append(echo_round_trip(context, host.endpoint)))
    huge_answer = receive(huge, 1000)
    return {"baseline_rss_mb": round(baseline, 1), "peak_rss_mb": round(peak, 1),
            "near_limit_answer": (near_answer or {}).get("error", {}).get("code"),
            "near_limit_id_echoed": (near_answer or {}).get("id") == "near",
            "huge_answered": huge_answer is not None,
            "other_peer_echo_max_ms": round(max(latencies), 1), "host_alive": host.alive()}


def stalled_progress(host: Host, context: zmq.Context) -> dict[str, Any]:
    """256 progress streams of 100,000 steps whose readers never read; then one reader comes back."""
    baseline = host.rss_mb()
    readers = [dealer(context, host.endpoint, rcvhwm=100) for _ in range(256)]
    for index, reader in enumerate(readers):
        send(reader, {"v": 1, "type": "request", "id": f"c{index}", "action": "count",
                      "payload": {"n": 100_000}, "progress": True})
    peak, cpu = watch(host, 8.0)
    # Read one stream to its end: gapless seq, the last value, and what was coalesced.
    seqs, skipped, last, response = 0, 0, None, None
    while response is None:
        message = receive(readers[0], 120_000)
        if message is None:
            break
        if message["type"] == "progress":
            seqs += 1
            skipped += message.get("skipped", 0)
            last = message["payload"]
        elif message["type"] == "response":
            response = message
    for reader in readers:
        reader.close()
    return {"baseline_rss_mb": round(baseline, 1), "peak_rss_mb_while_stalled": round(peak, 1),
            "progress_messages_sent": seqs, "payloads_coalesced": skipped,
            "sent_plus_coalesced": seqs + skipped, "last_progress": last,
            "answered": (response or {}).get("ok"), "host_alive": host.alive()}


def disconnect_mid_count(host: Host, context: zmq.Context) -> dict[str, Any]:
    """count n=1e9 without progress, then the peer disconnects: the work must stop with its session."""
    socket = dealer(context, host.endpoint)
    send(socket, {"v": 1, "type": "request", "id": "big", "action": "count", "payload": {"n": 1_000_000_000}})
    time.sleep(1.0)
    socket.close()
    time.sleep(1.0)  # the disconnect is noticed
    peak, cpu = watch(host, 3.0)
    return {"host_cpu_seconds_in_3s_after_disconnect": round(cpu, 2), "rss_mb": round(peak, 1),
            "host_alive": host.alive()}


def orphaned_sleeps(host: Host, context: zmq.Context) -> dict[str, Any]:
    """Three rounds of 100 anonymous peers with 256 one-hour sleeps each (25,600 requests), which then all
    disconnect. Freed memory stays with the allocator, so RSS does not fall after a round; held memory would
    grow by a round's worth each time."""
    baseline = host.rss_mb()
    rounds = []
    for _ in range(3):
        sockets = [dealer(context, host.endpoint) for _ in range(100)]
        for index, socket in enumerate(sockets):
            for request in range(256):
                send(socket, {"v": 1, "type": "request", "id": f"s{index}-{request}", "action": "sleep",
                              "payload": {"ms": 3_600_000}})
        loaded, _ = watch(host, 3.0)
        for socket in sockets:
            socket.close()
        time.sleep(2.0)
        after, cpu = watch(host, 1.0)
        rounds.append({"rss_mb_loaded": round(loaded, 1), "rss_mb_after_disconnect": round(after, 1),
                       "cpu_seconds_idle_1s": round(cpu, 2)})
    return {"baseline_rss_mb": round(baseline, 1), "rounds": rounds,
            "echo_ms_after": round(echo_round_trip(context, host.endpoint), 1), "host_alive": host.alive()}


def event_flood(host: Host, context: zmq.Context) -> dict[str, Any]:
    """100,000 one-hour `sleep` events from one connection."""
    baseline = host.rss_mb()
    socket = dealer(context, host.endpoint)
    for _ in range(100_000):
        send(socket, {"v": 1, "type": "event", "action": "sleep", "payload": {"ms": 3_600_000}})
    refused = 0
    deadline = time.monotonic() + 60
    while refused < 100_000 - 256 and time.monotonic() < deadline:
        message = receive(socket, 5000)
        if message is None:
            break
        refused += message.get("error", {}).get("code") == "overloaded"
    peak, cpu = watch(host, 2.0)
    socket.close()
    return {"baseline_rss_mb": round(baseline, 1), "peak_rss_mb": round(peak, 1), "events_run": 100_000 - refused,
            "events_refused_overloaded": refused, "host_cpu_seconds_in_2s": round(cpu, 2),
            "host_alive": host.alive()}


SCENARIOS: dict[str, Callable[[Host, zmq.Context], dict[str, Any]]] = {
    "oversized": oversized,
    "stalled-progress": stalled_progress,
    "disconnect-mid-count": disconnect_mid_count,
    "orphaned-sleeps": orphaned_sleeps,
    "event-flood": event_flood,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--out", default=str(ROOT / ".bench/hostile.json"))
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    args = parser.parse_args()
    binary = Path(args.bin) / "zerobridge"
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: swift build -c release --product zerobridge")
    results: dict[str, Any] = {}
    for name in args.only or SCENARIOS:
        host = Host(binary)
        context = zmq.Context()
        try:
            results[name] = SCENARIOS[name](host, context)
        finally:
            context.destroy(linger=0)
            host.stop()
        print(f"{name:22} {json.dumps(results[name])}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
