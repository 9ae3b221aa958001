"""`make soak`: a release conformance host against hostile and unlucky clients, each attack for real.

    .venv/bin/python bench/soak.py [--bin .build/release] [--out .bench/soak.json] [--only NAME ...]

Each scenario starts a fresh `zerobridge serve --conformance` (1 MiB messages, 256 requests in flight per
session, 500 ms heartbeat) over ipc, with a probe: a separate process, connected before the attack, that
asks for an `echo` every 100 ms and reports how long each answer took. The scenario does what a hostile or
unlucky client would while /proc gives the host's resident memory (sampled every 50 ms) and CPU time.

The keyed rows (issue 22) run the host with a connection file, so every connection is keyed (SPEC 3.1), and their
probe is the Python peer, which signs: descriptors-past-limit runs the host under `ulimit -n 1024` while 1,224
connections arrive; forged-openings-16MiB (host: 16 MiB messages) sends openings signed with a wrong key. Their
probe's echoes must each come within 100 ms for the forged openings, 1 s otherwise, with no call failed and the
probe's session kept throughout. pinning-hellos-300 (issue 22): 300 connections each say a hello of 900 KiB of
action names (refused too_large) and one of 60 KiB with 600 s heartbeats (welcomed), then close: peak RSS under
200 MB, and once the host's session grace (5 s here) has passed the sessions are gone and RSS is near its baseline.
opening-lockout (issue 22): a key holder's 65,537 hello/bye cycles stamped 290 s ahead, then a newcomer must be
welcomed within 2 s.

The WebSocket rows (issue 24) run a keyed host with `--ws 127.0.0.1:0` and the keyed probe over ZeroMQ beside the
attack, whose client is tests/websocket/wsclient.py: ws-frame-200MB (one 200 MB binary message: closed 1009 unread),
ws-stalled-readers-64 (64 pages stream 100,000 progress steps each and read nothing for 10 s, then read to the end),
ws-churn-10k (10,000 connections upgraded, welcomed and dropped).

A row passes when the host's peak RSS stays under 200 MB, every probe echo is answered exactly once and
within 1 s, and what the scenario asked for was answered as SPEC.md says (counted, not assumed). The
partition row runs peers/python/tests/test_partition.py (network namespaces: root only): calls given up
at the caller during a partition are never run after it heals.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import zmq

from common import stop_process

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
RSS_LIMIT_MB = 200.0
PROBE_LIMIT_MS = 1000.0
MAX_MESSAGE = 1_048_576  # the conformance host's max_message_bytes
IN_FLIGHT = 256  # the conformance host's max_in_flight
HOST_IN_FLIGHT = 16_384  # what all its sessions run at once (SPEC 7.11)

PROBE = r"""
import json, sys, time, zmq
socket = zmq.Context().socket(zmq.DEALER)
socket.setsockopt(zmq.LINGER, 0)
socket.connect(sys.argv[1])
answers, i = {}, 0
while True:
    request = f"p{i}"
    i += 1
    sent = time.monotonic()
    socket.send_multipart([b"", json.dumps({"v": 1, "type": "request", "id": request, "action": "echo",
                                            "payload": i}).encode()])
    deadline = sent + 10
    while request not in answers and time.monotonic() < deadline:
        if socket.poll(100):
            body = json.loads(socket.recv_multipart()[1])
            answers[body.get("id")] = answers.get(body.get("id"), 0) + 1
    took = (time.monotonic() - sent) * 1000 if request in answers else None
    print(json.dumps({"at": time.time(), "ms": took, "duplicates": sum(n - 1 for n in answers.values())}),
          flush=True)
    time.sleep(max(0.0, 0.1 - (time.monotonic() - sent)))
"""

# The keyed probe: the Python peer through the host's connection file, one echo every 100 ms; a failed call is
# reported as unanswered, with its error, and the session it was made in.
KEYED_PROBE = r"""
import asyncio, json, sys, time, zerobridge
async def main():
    async with zerobridge.connect(sys.argv[1], name="probe", connect_timeout=30) as peer:
        i = 0
        while True:
            sent = time.monotonic()
            try:
                assert await peer.call("echo", i, timeout=10) == i
                took, error = (time.monotonic() - sent) * 1000, None
            except Exception as failure:
                took, error = None, f"{type(failure).__name__}: {failure}"
            print(json.dumps({"at": time.time(), "ms": took, "error": error, "session": peer.session,
                              "duplicates": 0}), flush=True)
            i += 1
            await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - sent)))
asyncio.run(main())
"""


class Host:
    """A release conformance host process, what /proc says about it, and a probe peer served beside it."""

    def __init__(self, binary: Path, *extra: str, keyed: bool = False, open_files: int | None = None,
                 endpoint: str | None = None) -> None:
        self.folder = tempfile.mkdtemp(prefix="zb-soak-")
        connection_file = f"{self.folder}/host.json"
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))) if open_files else None
        self.process = subprocess.Popen(
            [str(binary), "serve", "--conformance", "--endpoint", endpoint or f"ipc://{self.folder}/host.sock",
             "--heartbeat-ms", "500", "--log-level", "error",
             *(["--connection-file", connection_file] if keyed else []), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=limit)
        line = self.process.stdout.readline() if self.process.stdout else ""
        self.websocket: str | None = None
        if line.startswith("zerobridge websocket "):  # printed before the ready line with --ws
            self.websocket = line.split()[-1]
            while line.startswith("zerobridge ") and not line.startswith("zerobridge ready "):
                line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("zerobridge ready "):
            raise SystemExit(f"the host did not start: {line!r}")
        self.endpoint = line.split()[-1]
        self.key = json.loads(Path(connection_file).read_text())["key"] if keyed else None
        self.probe = subprocess.Popen([sys.executable, "-c", KEYED_PROBE if keyed else PROBE,
                                       connection_file if keyed else self.endpoint], stdout=subprocess.PIPE,
                                      text=True)
        self.probes: list[dict[str, Any]] = []
        threading.Thread(target=self._read_probe, daemon=True).start()
        while not self.probes:  # the probe is served before the attack starts
            time.sleep(0.05)
            if self.probe.poll() is not None:
                raise SystemExit("the probe stopped")

    def _read_probe(self) -> None:
        assert self.probe.stdout is not None
        for line in self.probe.stdout:
            self.probes.append(json.loads(line))

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
        for process in (self.probe, self.process):
            stop_process(process, grace=10)
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


class Watch:
    """The host's peak RSS, sampled every 50 ms on a thread, from construction to `stop()`."""

    def __init__(self, host: Host) -> None:
        self.host, self.peak, self.started = host, host.rss_mb(), time.time()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            if self.host.alive():
                self.peak = max(self.peak, self.host.rss_mb())

    def stop(self) -> dict[str, Any]:
        """Peak RSS and what the probe saw since the watch started."""
        self._done.set()
        self._thread.join()
        seen = [p for p in self.host.probes if p["at"] >= self.started]
        unanswered = sum(p["ms"] is None for p in seen)
        slowest = max((p["ms"] for p in seen if p["ms"] is not None), default=float("inf"))
        duplicates = self.host.probes[-1]["duplicates"] if self.host.probes else 0
        errors = sorted({p["error"] for p in seen if p.get("error")})
        sessions = {p["session"] for p in self.host.probes if "session" in p}
        keyed = {"probe_errors": errors[:3], "probe_sessions": len(sessions)} if sessions else {}
        return keyed | {"peak_rss_mb": round(self.peak, 1), "probe_echoes": len(seen),
                "probe_slowest_ms": round(slowest, 1) if unanswered == 0 else None,
                "probe_unanswered": unanswered, "probe_duplicates": duplicates,
                "host_alive": self.host.alive()}


def dealer(context: zmq.Context, endpoint: str, rcvhwm: int = 1000) -> zmq.Socket:
    socket = context.socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVHWM, rcvhwm)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.connect(endpoint)
    return socket


def send(socket: zmq.Socket, body: dict[str, Any]) -> None:
    socket.send_multipart([b"", json.dumps(body).encode()])


def receive(socket: zmq.Socket, timeout_ms: int = 10_000) -> dict[str, Any] | None:
    if not socket.poll(timeout_ms):
        return None
    frames = socket.recv_multipart()
    return json.loads(frames[1]) if len(frames) > 1 else None


def wait_idle(host: Host, seconds: float) -> float:
    """CPU seconds the host used in the next `seconds`."""
    before = host.cpu_seconds()
    time.sleep(seconds)
    return round(host.cpu_seconds() - before, 2)


# --- scenarios: each returns its figures and whether its own outcome held --------------------------

def frame(size: int) -> Callable[[Host, zmq.Context], tuple[dict[str, Any], bool]]:
    def scenario(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
        """One frame of `size` bytes (a JSON body with one huge string); beside it, one just over the limit
        but within its 64 KiB slack, which is answered `too_large` with its id."""
        watch = Watch(host)
        near = dealer(context, host.endpoint)
        send(near, {"v": 1, "type": "request", "id": "near", "action": "echo", "payload": "x" * (MAX_MESSAGE + 10_000)})
        huge = dealer(context, host.endpoint)
        body = bytearray(size)  # zeros after the head: never parsed, the frame's size alone refuses it
        head = b'{"v":1,"type":"request","id":"huge","action":"echo","payload":"'
        body[:len(head)] = head
        huge.send_multipart([b"", memoryview(body)], copy=False)
        near_answers = [receive(near)]
        huge_answer = receive(huge, 3000)  # none: libzmq drops the connection as the frame's header arrives
        time.sleep(2.0)
        while (extra := receive(near, 200)) is not None:
            near_answers.append(extra)
        del body
        figures = watch.stop()
        codes = [(a or {}).get("error", {}).get("code") for a in near_answers]
        figures |= {"near_limit_answers": codes, "near_limit_id": (near_answers[0] or {}).get("id"),
                    "huge_answered": huge_answer is not None}
        ok = codes == ["too_large"] and figures["near_limit_id"] == "near" and huge_answer is None
        return figures, ok
    return scenario


def stalled_streams(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    """256 `count` streams of 100,000 progress steps whose readers stop reading for 60 s; then every reader
    reads its stream to the end: one response each, gapless `seq`, and sent + coalesced = 100,000."""
    watch = Watch(host)
    readers = [dealer(context, host.endpoint, rcvhwm=100) for _ in range(256)]
    for index, reader in enumerate(readers):
        send(reader, {"v": 1, "type": "request", "id": f"c{index}", "action": "count",
                      "payload": {"n": 100_000}, "progress": True})
    time.sleep(60.0)
    complete, sent_total, coalesced_total = 0, 0, 0
    for index, reader in enumerate(readers):
        seq, skipped, responses, last = 0, 0, 0, None
        while (message := receive(reader, 30_000)) is not None:
            if message["type"] == "progress":
                if message["seq"] != seq + 1:  # seq counts from 1, without gaps
                    break
                seq += 1
                skipped += message.get("skipped", 0)
                last = message["payload"]
            elif message["type"] == "response":
                responses += 1
                if receive(reader, 100) is not None:  # nothing may follow a response
                    responses += 1
                break
        complete += responses == 1 and seq + skipped == 100_000 and last == {"i": 100_000, "n": 100_000}
        sent_total += seq
        coalesced_total += skipped
        reader.close()
    figures = watch.stop() | {"streams_complete": f"{complete}/256", "progress_sent": sent_total,
                              "progress_coalesced": coalesced_total}
    return figures, complete == 256


def count_then_disconnect(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    """`count` n = 1e9 without progress, then the peer disconnects: the work stops with its session."""
    watch = Watch(host)
    socket = dealer(context, host.endpoint)
    send(socket, {"v": 1, "type": "request", "id": "big", "action": "count", "payload": {"n": 1_000_000_000}})
    time.sleep(2.0)
    busy = wait_idle(host, 1.0)
    socket.close()
    time.sleep(1.0)  # the disconnect is noticed
    idle = wait_idle(host, 3.0)
    figures = watch.stop() | {"cpu_s_per_s_while_counting": busy, "cpu_s_in_3s_after_disconnect": idle}
    return figures, busy > 0.5 and idle < 0.3


def orphaned_sleeps(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    """Seven rounds of 60 anonymous peers with 256 one-hour `sleep`s each (107,520 requests in all; a round stays
    under the host-wide bound, so every sleep runs), which then disconnect: every sleep is cancelled with its
    session, so the host goes idle and each round costs what the one before did (memory held by orphans would add
    a round's worth each time)."""
    watch = Watch(host)
    rounds = []
    for _ in range(7):
        sockets = [dealer(context, host.endpoint) for _ in range(60)]
        for index, socket in enumerate(sockets):
            for request in range(IN_FLIGHT):
                send(socket, {"v": 1, "type": "request", "id": f"s{index}-{request}", "action": "sleep",
                              "payload": {"ms": 3_600_000}})
        # All of a connection's sleeps run once one more is refused for the session's own limit.
        send(sockets[-1], {"v": 1, "type": "request", "id": "one-more", "action": "sleep", "payload": {"ms": 1}})
        refusal = receive(sockets[-1], 60_000) or {}
        refused_early = sum(receive(socket, 0) is not None for socket in sockets[:-1])
        rss_loaded = host.rss_mb()
        for socket in sockets:
            socket.close()
        time.sleep(2.0)
        rounds.append({"rss_mb_in_flight": round(rss_loaded, 1), "cpu_s_idle_1s": wait_idle(host, 1.0),
                       "257th": refusal.get("error", {}).get("code"), "others_answered": refused_early,
                       "session_limit": "requests and events in flight" in refusal.get("error", {}).get("message", "")})
    figures = watch.stop() | {"sleeps_orphaned": 7 * 60 * IN_FLIGHT, "rounds": rounds}
    ok = all(r["257th"] == "overloaded" and r["session_limit"] and r["others_answered"] == 0
             and r["cpu_s_idle_1s"] < 0.2 for r in rounds)
    return figures, ok


def sleeps_at_once(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    """400 anonymous peers send 256 one-hour `sleep`s each (102,400) at once: the host runs its host-wide most
    (16,384), answers every other one `overloaded` at once, and its memory is bounded by that, not by the number of
    connections; then the peers disconnect and the host goes idle."""
    watch = Watch(host)
    sockets = [dealer(context, host.endpoint) for _ in range(400)]
    for index, socket in enumerate(sockets):
        for request in range(IN_FLIGHT):
            send(socket, {"v": 1, "type": "request", "id": f"s{index}-{request}", "action": "sleep",
                          "payload": {"ms": 3_600_000}})
    refused, expected, deadline = 0, 400 * IN_FLIGHT - HOST_IN_FLIGHT, time.monotonic() + 60
    while refused < expected and time.monotonic() < deadline:
        for socket in sockets:
            while (message := receive(socket, 0)) is not None:
                refused += message.get("error", {}).get("code") == "overloaded"
        time.sleep(0.05)
    extra = sum(receive(socket, 0) is not None for socket in sockets)  # nothing more: the rest are running
    for socket in sockets:
        socket.close()
    time.sleep(2.0)
    idle = wait_idle(host, 1.0)
    figures = watch.stop() | {"sleeps_sent": 400 * IN_FLIGHT, "refused_overloaded": refused,
                              "cpu_s_idle_1s": idle}
    return figures, refused == expected and extra == 0 and idle < 0.2


def event_flood(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    """100,000 one-hour `sleep` events from one connection: 256 run, every other one is refused `overloaded`. The
    client reads its answers as it sends (one that reads nothing loses those past the host's 8 MiB queue bound: SPEC
    7.13, decision 54, a Swift test of its own)."""
    watch = Watch(host)
    socket = dealer(context, host.endpoint)
    refused = 0

    def take(message: dict[str, Any] | None) -> None:
        nonlocal refused
        refused += message is not None and message.get("error", {}).get("code") == "overloaded"

    for index in range(100_000):
        send(socket, {"v": 1, "type": "event", "action": "sleep", "payload": {"ms": 3_600_000}})
        if index % 64 == 63:
            while socket.poll(0):
                take(receive(socket, 0))
    while refused < 100_000 - IN_FLIGHT and (message := receive(socket, 10_000)) is not None:
        take(message)
    extra = receive(socket, 1000)
    idle_cpu = wait_idle(host, 2.0)
    socket.close()
    figures = watch.stop() | {"events_refused_overloaded": refused, "events_run": 100_000 - refused,
                              "cpu_s_in_2s_with_256_sleeping": idle_cpu}
    return figures, refused == 100_000 - IN_FLIGHT and extra is None and idle_cpu < 0.3


def connection_churn(connections: int = 10_000, named_streamers: int = 4, callers: int = 8):
    def scenario(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
        """Churn: `connections` anonymous connections come and go (each sends one `echo` and waits for its answer)
        beside named peers that each start a `count` stream with progress, read a little of it, send a few
        messages more and leave mid-stream without `bye`, over and over. Every echo is answered exactly once
        (SPEC 7.1): a connection closing must never end a newer connection's session (file descriptors and
        connections are reused while the closed one's last messages are still being read)."""
        watch = Watch(host)
        stop = threading.Event()
        left = [0]

        def streamer(index: int) -> None:
            round_ = 0
            while not stop.is_set():
                round_ += 1
                socket = dealer(context, host.endpoint)
                send(socket, {"v": 1, "type": "hello", "peer": f"streamer-{index}-{round_}", "heartbeat_ms": 500})
                receive(socket, 5000)  # welcome
                send(socket, {"v": 1, "type": "request", "id": "c", "action": "count",
                              "payload": {"n": 100_000, "delay_ms": 1}, "progress": True})
                for _ in range(5):
                    receive(socket, 2000)
                for extra in range(3):  # still being read when the connection is gone
                    send(socket, {"v": 1, "type": "event", "action": "echo", "payload": extra})
                socket.close()
                left[0] += 1

        unanswered, duplicates, served = [0], [0], [0]
        lock = threading.Lock()
        remaining = [connections]

        def caller(index: int) -> None:
            while True:
                with lock:
                    if remaining[0] == 0:
                        return
                    remaining[0] -= 1
                    number = remaining[0]
                socket = dealer(context, host.endpoint)
                send(socket, {"v": 1, "type": "request", "id": f"e{number}", "action": "echo", "payload": number})
                answer = receive(socket, 10_000)
                again = receive(socket, 0) if answer is not None else None
                socket.close()
                with lock:
                    if answer is None or answer.get("id") != f"e{number}" or answer.get("result") != number:
                        unanswered[0] += 1
                    if again is not None:
                        duplicates[0] += 1
                    served[0] += 1

        streamers = [threading.Thread(target=streamer, args=(i,)) for i in range(named_streamers)]
        callers_ = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
        started = time.monotonic()
        for thread in streamers + callers_:
            thread.start()
        for thread in callers_:
            thread.join()
        stop.set()
        for thread in streamers:
            thread.join()
        figures = watch.stop() | {"connections": served[0], "echo_unanswered": unanswered[0],
                                  "echo_duplicates": duplicates[0], "named_left_mid_stream": left[0],
                                  "seconds": round(time.monotonic() - started, 1)}
        return figures, served[0] == connections and unanswered[0] == 0 and duplicates[0] == 0
    return scenario


def pinning_hellos(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """300 connections: a hello of 900 KiB of action names (over the 64 KiB a hello may declare: too_large), then one
    of 60 KiB asking for 600 s heartbeats (welcomed), then the connection closes. The host keeps each session for its
    grace (5 s here), not 3 x 600 s."""
    host, context = Host(binary, "--session-grace-ms", "5000"), zmq.Context()
    try:
        return pinned(host, context)
    finally:
        context.destroy(linger=0)
        host.stop()


def pinned(host: Host, context: zmq.Context) -> tuple[dict[str, Any], bool]:
    baseline = host.rss_mb()
    watch = Watch(host)
    big = [f"a{i:05d}-" + "x" * 120 for i in range(7200)]  # 900 KiB of 128-character names
    small = big[:480]  # 60 KiB
    codes: dict[str, int] = {}
    for index in range(300):
        socket = dealer(context, host.endpoint)
        for actions in (big, small):
            send(socket, {"v": 1, "type": "hello", "peer": f"pin{index}", "actions": actions, "heartbeat_ms": 600_000})
            answer = receive(socket) or {}
            code = answer.get("type") if answer.get("type") == "welcome" else answer.get("error", {}).get("code")
            codes[str(code)] = codes.get(str(code), 0) + 1
        socket.close()
    loaded = host.rss_mb()
    closed_at = time.monotonic()
    time.sleep(5.0 + 3.0)  # the grace, and a tick or two
    after = host.rss_mb()
    # Every name is free again: a new hello with it is welcomed.
    socket = dealer(context, host.endpoint)
    send(socket, {"v": 1, "type": "hello", "peer": "pin0"})
    free_again = (receive(socket) or {}).get("type") == "welcome"
    socket.close()
    figures = watch.stop() | {"answers": codes, "rss_mb_baseline": round(baseline, 1), "rss_mb_loaded": round(loaded, 1),
                              "rss_mb_after_grace": round(after, 1), "s_after_close": round(time.monotonic() - closed_at, 1),
                              "name_free_again": free_again}
    ok = codes == {"too_large": 300, "welcome": 300} and free_again and after < baseline + 20
    return figures, ok


def descriptors_past_limit(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """The host under `ulimit -n 1024`, over tcp; a keyed probe calls every 100 ms while 1,224 DEALERs connect (and
    reconnect when shed) for 12 s: no call fails, and the probe keeps its session. (Over ipc, libzmq 4.3.4 aborts the
    process on an accept that fails with EMFILE, which a burst past the host's reserve can reach: SPEC 7.17.)"""
    host = Host(binary, keyed=True, open_files=1024, endpoint="tcp://127.0.0.1:*")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))  # 2 descriptors per DEALER here
    context = zmq.Context()
    context.set(zmq.MAX_SOCKETS, 4096)
    try:
        watch = Watch(host)
        crowd = [dealer(context, host.endpoint) for _ in range(1224)]
        time.sleep(12.0)
        descriptors = len(os.listdir(f"/proc/{host.process.pid}/fd"))  # under the limit, less the reserve
        for socket in crowd:
            socket.close()
        figures = watch.stop()
        seen = [p for p in host.probes if p["at"] >= watch.started]
        failed = sum(p["ms"] is None for p in seen)
        figures |= {"calls": len(seen), "calls_failed": failed,
                    "host_descriptors_under_attack": descriptors}
        return figures, failed == 0 and figures["probe_sessions"] == 1
    finally:
        context.destroy(linger=0)
        host.stop()


def forged_openings(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """Openings of 16 MiB signed with a wrong key, 10 a second (160 MiB/s) for 10 s, at a keyed host taking 16 MiB
    messages: each is refused by its size before any MAC (SPEC 3.1), so the host's CPU per opening is what reading
    it costs (verifying the MAC first took 129 ms each: more than a core at this rate), and the probe's echoes stay
    within 100 ms."""
    host = Host(binary, "--max-message-bytes", str(16 << 20), keyed=True)
    context = zmq.Context()
    try:
        watch = Watch(host)
        body = bytearray(16 << 20)
        head = b'{"v":1,"type":"hello","peer":"forger","actions":["'
        body[:len(head)] = head
        cpu_before, sent, refused = host.cpu_seconds(), 0, 0
        until = time.monotonic() + 10.0
        socket = dealer(context, host.endpoint)
        while (started := time.monotonic()) < until:
            signature = f"h.{secrets.token_hex(16)}.{int(time.time() * 1000)}.{secrets.token_hex(32)}".encode()
            socket.send_multipart([signature, memoryview(body)], copy=False)
            sent += 1
            answer = receive(socket, 10_000) or {}
            refused += answer.get("error", {}).get("code") == "unauthorized"
            time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
        cpu_ms = (host.cpu_seconds() - cpu_before) * 1000
        socket.close()
        over = sum(p["ms"] is not None and p["ms"] >= 100 for p in host.probes if p["at"] >= watch.started)
        figures = watch.stop() | {"openings": sent, "refused_unauthorized": refused, "probe_echoes_over_100ms": over,
                                  "host_cpu_ms_per_opening": round(cpu_ms / max(sent, 1), 1)}
        ok = (refused == sent and figures["probe_slowest_ms"] is not None and figures["probe_slowest_ms"] < 100
              and figures.get("probe_sessions") == 1)
        return figures, ok
    finally:
        context.destroy(linger=0)
        host.stop()


def opening_lockout(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """A key holder pipelines 65,537 hello/bye cycles (each hello a new channel's opening, stamped 290 s ahead) on
    4 connections, then stops; once the host has answered them all, a newcomer says hello every 0.25 s: how long
    until it is welcomed. With a
    floor in the opening history, the flood filled it and raised the floor ahead of every honest clock (issue 22:
    285 s); with the rates (SPEC 3.1), the flood is slowed and nothing lasts after it. Waits at most
    ZB_SOAK_LOCKOUT_WAIT seconds (30)."""
    from zerobridge import read_connection_file, signing
    host = Host(binary, keyed=True)
    context = zmq.Context()
    try:
        key = read_connection_file(f"{host.folder}/host.json").key
        watch = Watch(host)
        flooders = [dealer(context, host.endpoint, rcvhwm=0) for _ in range(4)]
        bye = json.dumps({"v": 1, "type": "bye"}).encode()
        welcomed = refused = 0
        started = time.monotonic()
        for cycle in range(65_537):
            socket = flooders[cycle % 4]
            nonce = signing.new_nonce()
            hello = json.dumps({"v": 1, "type": "hello", "peer": f"flood{cycle % 4}"}).encode()
            ms = int(time.time() * 1000) + 290_000
            socket.send_multipart([signing.sign_opening(key, nonce, ms, [hello]), hello])
            socket.send_multipart([signing.sign_message(key, signing.P2H, nonce, 1, [bye]), bye])
            for each in flooders if cycle % 256 == 0 else ():
                while each.poll(0):
                    body = json.loads(each.recv_multipart()[-1])
                    welcomed += body.get("type") == "welcome"
                    refused += body.get("error", {}).get("code") == "unauthorized"
        flood_s = time.monotonic() - started
        # The host has answered the whole flood once it is silent for 3 s (at most 2 minutes).
        quiet_since, drain_until = time.monotonic(), time.monotonic() + 120
        while time.monotonic() - quiet_since < 3.0 and time.monotonic() < drain_until:
            for each in flooders:
                while each.poll(50):
                    quiet_since = time.monotonic()
                    body = json.loads(each.recv_multipart()[-1])
                    welcomed += body.get("type") == "welcome"
                    refused += body.get("error", {}).get("code") == "unauthorized"
        # The newcomer: a fresh connection and channel each try, stamped with the present.
        wait = float(os.environ.get("ZB_SOAK_LOCKOUT_WAIT", "30"))
        stopped, locked_out = time.monotonic(), None
        while time.monotonic() - stopped < wait:
            socket = dealer(context, host.endpoint)
            hello = json.dumps({"v": 1, "type": "hello", "peer": "newcomer"}).encode()
            socket.send_multipart([signing.sign_opening(key, signing.new_nonce(), int(time.time() * 1000), [hello]), hello])
            answer = receive(socket, 2000) or {}
            socket.close()
            if answer.get("type") == "welcome":
                locked_out = round(time.monotonic() - stopped, 2)
                break
            time.sleep(0.25)
        figures = watch.stop() | {"flood_s": round(flood_s, 1), "flood_welcomed": welcomed, "flood_refused": refused,
                                  "newcomer_locked_out_s": locked_out if locked_out is not None else f"> {wait:g}"}
        return figures, locked_out is not None and locked_out < 2.0
    finally:
        context.destroy(linger=0)
        host.stop()


def partition(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """The network-partition tests of the Python suite (they start their own hosts, in two namespaces)."""
    if os.geteuid() != 0:
        return {"skipped": "needs root for network namespaces"}, None
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "peers/python/tests/test_partition.py")],
                         env=os.environ | {"ZEROBRIDGE_BIN": str(binary)}, capture_output=True, text=True)
    summary = (run.stdout.strip().splitlines() or ["no output"])[-1]
    return {"pytest": summary, "seconds": round(time.monotonic() - started, 1)}, run.returncode == 0


# --- WebSocket rows (issue 24): a keyed host with --ws, its ZeroMQ probe beside the attack --------------------------

def websocket_host(binary: Path) -> Host:
    return Host(binary, "--ws", "127.0.0.1:0", keyed=True)


def websocket_client(host: Host, **options: Any) -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "websocket"))
    from wsclient import Client
    return Client(host.websocket or "", host.key, **options)


def websocket_frame_200mb(binary: Path) -> tuple[dict[str, Any], bool | None]:
    """One binary WebSocket message of 200 MB: closed 1009 as its header arrives (SPEC 3.2), never buffered."""
    from websockets.exceptions import ConnectionClosed
    host = websocket_host(binary)
    try:
        watch = Watch(host)
        client = websocket_client(host)
        client.hello("huge-sender")
        code, closed_after = None, None
        started = time.monotonic()
        try:
            client.ws.send(bytes(200_000_000))
            while True:
                client.ws.recv(timeout=30)
        except ConnectionClosed as closed:
            # 1009 when the close frame reached the client; none when the host's close reset the connection while
            # the client was still sending (what the client sees then depends on its timing, not the host's).
            code = closed.rcvd.code if closed.rcvd else None
            closed_after = round(time.monotonic() - started, 2)
        figures = watch.stop() | {"close_code": code, "closed_after_s": closed_after}
        return figures, closed_after is not None and code in (1009, None)
    finally:
        host.stop()


def websocket_stalled_readers(binary: Path, readers: int = 64, n: int = 100_000) -> tuple[dict[str, Any], bool | None]:
    """64 WebSocket pages each stream `count` of 100,000 steps and read nothing for 10 s; then each reads to the end:
    one response each, sent + coalesced = 100,000 (SPEC 7.13 over WebSocket). All are welcomed before any stream
    starts, so the hellos do not queue behind the floods. Every other page says it reads batches under one signature
    (SPEC 3.3, on WebSocket since 1.11): its progress waits in the host's outbox and goes as batches, the others'
    one message at a time, both under the same bound.

    The pages read again all at once, each on its own thread, as 64 pages would. Read one after the other, a page
    read late could wait a minute for the kernel: a stalled reader's socket drops a segment now and then (its
    receive buffer, which does not grow while nothing is read, fills with loopback's small segments before the
    window it advertised closes), and the host's kernel doubles the wait before each retransmission that is dropped
    again. In a hung run, ss showed the host's send queue full, `backoff:8` (54 s to the next try), the client's
    socket `d12` and nothing waiting in ZeroBridge; read at once, each page is back within the first doublings."""
    host = websocket_host(binary)
    try:
        watch = Watch(host)
        clients = [websocket_client(host) for _ in range(readers)]
        for index, client in enumerate(clients):
            client.hello(f"stalled-{index}", heartbeat_ms=600_000,  # flow control under test, not heartbeats
                         features=["batch"] if index % 2 == 0 else [])
        for client in clients:
            client.send(type="request", id="flood", action="count", payload={"n": n}, progress=True)
        time.sleep(10)

        def read_to_end(client: Any) -> tuple[int, int, Any]:
            sent = skipped = 0
            while True:
                message = client.next_of("progress", timeout=60)
                if message.get("id") != "flood":
                    continue
                sent += 1
                skipped += message.get("skipped", 0)
                if message["payload"]["i"] == n:
                    break
            response = client.next_of("response", id="flood", timeout=60)
            client.close()
            return sent, skipped, response.get("result")

        with ThreadPoolExecutor(max_workers=readers) as pool:
            outcomes = list(pool.map(read_to_end, clients))
        figures = watch.stop() | {"readers": readers, "sent_min": min(o[0] for o in outcomes),
                                  "coalesced_max": max(o[1] for o in outcomes),
                                  "batches_read": sum(len(client.signed_batches_received) for client in clients)}
        return figures, all(sent + skipped == n and result == {"n": n} for sent, skipped, result in outcomes)
    finally:
        host.stop()


def websocket_churn(binary: Path, connections: int = 10_000, threads: int = 4) -> tuple[dict[str, Any], bool | None]:
    """10,000 WebSocket connections opened (upgrade, keyed hello, welcome) and dropped, 4 at a time: half say bye
    and close, half drop the TCP connection without a close frame (their named sessions wait out the host's grace,
    within its 10,000 sessions)."""
    host = websocket_host(binary)
    try:
        watch = Watch(host)
        welcomed, rate_refused = [0] * threads, [0] * threads
        failures: list[str] = []

        def churn(index: int) -> None:
            for _ in range(connections // threads):
                try:
                    client = websocket_client(host)
                    client.send(type="hello", peer=f"churn-{secrets.token_hex(6)}")
                    answer = client.receive()[1]
                    if answer["type"] != "welcome":
                        # Openings past the key's rate (SPEC 3.1: 1024 at once, then 32 a second) are refused.
                        assert answer["error"]["code"] == "unauthorized", answer
                        rate_refused[index] += 1
                        client.close()
                        continue
                    if index % 2:  # half leave as a peer does, half just drop (their sessions wait out the grace)
                        client.send(type="bye")
                        client.close()
                    else:
                        client.drop()
                    welcomed[index] += 1
                except Exception as failure:  # counted and reported: the row fails on any
                    failures.append(f"{type(failure).__name__}: {failure}")
        workers = [threading.Thread(target=churn, args=(i,)) for i in range(threads)]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        figures = watch.stop() | {"welcomed": sum(welcomed), "refused_for_rate": sum(rate_refused),
                                  "seconds": round(time.monotonic() - started, 1), "failures": failures[:3]}
        return figures, sum(welcomed) + sum(rate_refused) == connections and not failures
    finally:
        host.stop()


SCENARIOS: dict[str, Callable[[Host, zmq.Context], tuple[dict[str, Any], bool]]] = {
    "frame-200MB": frame(200_000_000),
    "frame-1.5GB": frame(1_500_000_000),
    "stalled-streams-60s": stalled_streams,
    "count-1e9-disconnect": count_then_disconnect,
    "orphaned-sleeps-107k": orphaned_sleeps,
    "sleeps-at-once-102k": sleeps_at_once,
    "events-100k": event_flood,
    "churn-10k": connection_churn(),
}
# Rows that start their own host (another open-file limit, keys, flags).
OWN_HOSTS: dict[str, Callable[[Path], tuple[dict[str, Any], bool | None]]] = {
    "pinning-hellos-300": pinning_hellos,
    "descriptors-past-limit": descriptors_past_limit,
    "forged-openings-16MiB": forged_openings,
    "opening-lockout": opening_lockout,
    "partition": partition,
    "ws-frame-200MB": websocket_frame_200mb,
    "ws-stalled-readers-64": websocket_stalled_readers,
    "ws-churn-10k": websocket_churn,
}


def verdict(figures: dict[str, Any], own: bool | None) -> str:
    if own is None:
        return "skipped"
    if "peak_rss_mb" in figures:
        own = (own and figures["host_alive"] and figures["peak_rss_mb"] < RSS_LIMIT_MB
               and figures["probe_slowest_ms"] is not None and figures["probe_slowest_ms"] < PROBE_LIMIT_MS
               and figures["probe_duplicates"] == 0)
    return "pass" if own else "FAIL"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--out", default=str(ROOT / ".bench/soak.json"))
    parser.add_argument("--only", nargs="*", choices=sorted([*SCENARIOS, *OWN_HOSTS]))
    args = parser.parse_args()
    binary = Path(args.bin) / "zerobridge"
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: swift build -c release --product zerobridge")
    started = time.monotonic()
    results: dict[str, Any] = {}
    print(f"{'scenario':22} {'peak RSS':>9} {'probe max':>10}  verdict  figures", flush=True)
    for name in args.only or [*SCENARIOS, *OWN_HOSTS]:
        if name in OWN_HOSTS:
            figures, own = OWN_HOSTS[name](binary)
        else:
            host, context = Host(binary), zmq.Context()
            try:
                figures, own = SCENARIOS[name](host, context)
            finally:
                context.destroy(linger=0)
                host.stop()
        figures["verdict"] = verdict(figures, own)
        results[name] = figures
        rest = {k: v for k, v in figures.items()
                if k not in ("peak_rss_mb", "probe_slowest_ms", "verdict", "host_alive", "probe_duplicates")}
        rss = f"{figures['peak_rss_mb']:.1f} MB" if "peak_rss_mb" in figures else "-"
        probe = figures.get("probe_slowest_ms")
        probe_text = "-" if "peak_rss_mb" not in figures else ("unanswered" if probe is None else f"{probe:.0f} ms")
        print(f"{name:22} {rss:>9} {probe_text:>10}  {figures['verdict']:7}  {json.dumps(rest)}", flush=True)
    print(f"soak: {time.monotonic() - started:.0f} s; limits: peak RSS < {RSS_LIMIT_MB:.0f} MB, "
          f"every probe echo answered once within {PROBE_LIMIT_MS:.0f} ms")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0 if all(r["verdict"] != "FAIL" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
