"""`make bench`: ZeroBridge against raw libzmq (the limit) and a hand-written pyzmq service, in one run.

    .venv/bin/python bench/run.py [--bin .build/release] [--seconds 1.0] [--out .bench/results.json]
                                  [--sections transports,security,anchors,memory,codec,import,telemetry] [--transports ipc,tcp]
                                  [--security-peers swift,python,node] [--security-modes plain,keyed,curve+keyed]

Every server is a separate process started here and every client another, so all figures come from the
same process tree on the same (noisy) machine, and the ratios between them hold. Prints a table and
writes every figure, the ratios and the targets to a JSON file.

CPU per request: the server's (host's) from /proc/PID/stat (utime + stime, every thread) over a client's whole
run, divided by the requests it counted (warm-up included); the client's own over its measured phase, as the
driver reports it. The security section runs the host plain, keyed (the default with a connection file) and
CURVE + keyed, each with the Swift, Python and Node peers, and gives keyed/plain and CURVE/plain.
The anchors section (issue 26) runs what a user would otherwise pick to connect each front-end to a Swift service, in
the security section's three scenarios (sequential, 64 in flight, a stream of progress-shaped events), tcp on loopback,
no TLS, ~100 B JSON both ways (bench/anchors: a package of its own, built by `make bench` alone):
  Swift front-end:  a grpc-swift-2 client -> a grpc-swift-2 server (GRPCCore with its posix HTTP/2 transport, plaintext;
                    JSON messages through GRPCCore's MessageSerializer/MessageDeserializer, no protoc); the stream is a
                    server-streaming RPC.
  Python front-end: grpcio (bench/grpc_client.py: generic method handles, identity (de)serializers, the JSON encoded
                    and decoded by the driver) -> the same server; its sync stub (64 in flight: 64 futures) and
                    grpc.aio are both run, the faster kept per scenario.
  Node front-end:   node:http (a keep-alive Agent; HTTP/1.1 has no pipelining, so 64 in flight = 64 connections) ->
                    Hummingbird 2 (its default router, Codable JSON); the stream is one chunked response of
                    newline-delimited JSON events.
It prints them beside the keyed and plain ZeroBridge rows of the same run (the security section's, or measured by the
anchors section itself when that section did not run them) with keyed/anchor and plain/anchor, and one target per
front-end and scenario: keyed ZeroBridge / anchor >= 1.0.
The metrics section runs the host without a metrics backend and with Prometheus bootstrapped (`serve --metrics`), and times the metrics
hooks of one request alone (no backend: swift-metrics' NOOP; Prometheus).
The telemetry section gives what tracing costs the host (SPEC 7.18): off, a trace carried through without a
tracer, and on: swift-otel's tracer bootstrapped, exporting over OTLP/HTTP to a local receiver (bench/otlp_sink.py),
recording every request, then sampling 1 in 100 (bench/otel: a package of its own, built by `make bench` alone): the
hosts side by side, clients in turns. Its targets come from the span wrapper alone with swift-otel working beside it
(the process's CPU per request, no sockets), against the host's CPU per request: recording none, 1 in 100 and every
one, and 1 request in 100 sampled by its caller to a host that follows its callers' sampling. The node-curve section times the Node peer's CURVE cryptography
(pure JavaScript) against Debian's node-tweetnacl on the same boxes (bench/node_curve.mjs, a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import browser_peer
import import_service

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PY = sys.executable
SECTIONS = ("transports", "security", "anchors", "node-curve", "memory", "codec", "metrics", "telemetry", "import", "browser")
# The trace the Swift peer's calls belong to in the telemetry section (SPEC 7.18).
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# Tracing's modes: the echo host (zerobridge-bench's, or bench/otel's with swift-otel's tracer), its flags, and the
# Swift peer's. "on": every call in a sampled trace, recorded and exported; "sampled": calls in no trace, each
# starting one that the host's parent-based ratio sampler records 1 time in 100 (a common production setting).
TRACING_MODES = {"off": ("bench", [], []), "carried": ("bench", [], ["--traceparent", TRACEPARENT]),
                 "on": ("otel", ["--sampler", "always"], ["--traceparent", TRACEPARENT]),
                 "sampled": ("otel", ["--sampler", "ratio:0.01"], [])}
# The swift-otel settings whose span cost is measured without sockets: the tracer recording none, 1 trace in 100,
# every one; and 1 request in 100 arriving in a trace its caller sampled, to a wrapper that follows its callers'
# sampling (TracedRequests.sampledByCaller), the others in none.
OTEL_WRAPPER_MODES = {"dropped": ["--sampler", "ratio:0"], "sampled": ["--sampler", "ratio:0.01"],
                      "on": ["--sampler", "always"], "callers": ["--sampler", "always", "--callers-sample", "100"]}
# Where `make bench` builds bench/otel's host.
OTEL_BIN = ROOT / "bench" / "otel" / ".build" / "release" / "zerobridge-otel-host"
# How `zerobridge serve` is started for each mode of the security section (it writes a connection file in each).
SECURITY_MODES = {"plain": ["--no-key"], "keyed": [], "curve+keyed": ["--curve"]}
SECURITY_SCENARIOS = ("w1", "w64", "progress")
# Events of one progress call in the security and anchors sections, per front-end (their CPU figures are per event).
PROGRESS_EVENTS = {"swift": 500_000, "python": 200_000, "node": 500_000}
# Where `make bench` builds bench/anchors' servers and Swift client (grpc-swift-2, Hummingbird 2).
ANCHORS_BIN = ROOT / "bench" / "anchors" / ".build" / "release" / "zerobridge-anchors"
# What a user would otherwise pick to connect each front-end to a Swift service (issue 26's anchors).
ANCHOR_NAMES = {"swift": "gRPC: grpc-swift-2 client -> grpc-swift-2 server", "python": "gRPC: grpcio -> grpc-swift-2 server",
                "node": "HTTP/JSON: node:http -> Hummingbird 2"}


# --- processes ---------------------------------------------------------------------------------

class Server:
    """A server process that prints one line ending in its endpoint once it listens."""

    def __init__(self, name: str, command: list[str]) -> None:
        self.name = name
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=ROOT)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.strip():
            self.process.kill()
            raise RuntimeError(f"{name} did not start: {self.process.stderr.read() if self.process.stderr else ''}")
        self.endpoint = line.split()[-1]

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, every thread, from /proc/PID/stat (fields 14 and 15, after the command's ')')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_client(command: list[str], timeout: float = 60, server: Server | None = None) -> dict[str, Any]:
    """Runs a driver; its last stdout line is its JSON result. A failure is recorded, not raised. With a server:
    its CPU time over the run per request the driver counted (warm-up and measured phase)."""
    before = server.cpu_seconds() if server else 0.0
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    if server and "requests" in result:
        counted = result["requests"] + result.get("warmup", 0)
        result["server_cpu_us_per_request"] = (server.cpu_seconds() - before) * 1e6 / max(counted, 1)
    return result


def keep_best(out: dict[str, Any], key: str, runs: list[dict[str, Any]], quiet: bool = False) -> None:
    """Keeps the fastest of `runs` (other work on a shared machine only ever slows a run down) under `key`, with
    every run's rate, and prints it after the label already printed (unless `quiet`)."""
    good = [r for r in runs if "error" not in r]
    out[key] = max(good, key=lambda r: r["per_second"]) if good else runs[-1]
    out[key]["runs_per_second"] = [round(r["per_second"]) for r in good]
    if not quiet:
        print_figure(out[key])


def print_figure(result: dict[str, Any]) -> None:
    """A run's rate (or its error) after the label already printed."""
    figure = result.get("per_second")
    print(f" {figure:,.0f}/s" if figure else f" {result.get('error', '')}", file=sys.stderr)


# --- the run -----------------------------------------------------------------------------------

@dataclass
class Bench:
    bin: Path
    seconds: float
    progress_events: dict[str, int]
    repeat: int
    security_peers: tuple[str, ...] = ("swift", "python", "node")
    security_modes: tuple[str, ...] = tuple(SECURITY_MODES)
    results: dict[str, Any] = field(default_factory=dict)
    socket_files: list[Path] = field(default_factory=list)

    def bench_tool(self, *args: str) -> list[str]:
        return [str(self.bin / "zerobridge-bench"), *args]

    def host(self, endpoint: str, max_in_flight: int = 20_000, options: list[str] | None = None) -> Server:
        return Server("zerobridge host", [str(self.bin / "zerobridge"), "serve", "--conformance", "--endpoint",
                                          endpoint, "--max-in-flight", str(max_in_flight), *(options or [])])

    def endpoint(self, transport: str, name: str) -> str:
        if transport == "ipc":
            path = Path(f"/tmp/zerobridge-bench-{os.getpid()}-{name}.sock")
            path.unlink(missing_ok=True)
            self.socket_files.append(path)
            return f"ipc://{path}"
        return "tcp://127.0.0.1:*"

    def timed(self, *args: str) -> list[str]:
        return [*args, "--seconds", str(self.seconds)]

    def step(self, out: dict[str, Any], key: str, label: str, command: list[str], server: Server) -> None:
        # The best of a few runs: other work on a shared machine only ever slows a run down.
        print(f"  {label} ...", end="", flush=True, file=sys.stderr)
        keep_best(out, key, [run_client(command, server=server) for _ in range(self.repeat)])

    def transport(self, transport: str) -> dict[str, Any]:
        """Every figure of one transport once per pass, with fresh servers each pass, in at least three passes; the
        best of each figure kept. So the two sides of a ratio (raw libzmq and the Swift peer, the pyzmq server and the
        ZeroBridge host) are measured in every pass, under half a minute apart, not once each at either end of the
        section: a machine shared with other work has slow spells of tens of seconds (the Swift peer at 1,024 in
        flight over tcp: 194,122 to 331,403 calls/s from one run to the next, with twice the CPU a call in the slow
        runs), and one server process can stay slower than another of the same build for its whole life."""
        out: dict[str, Any] = {}
        runs: dict[str, list[dict[str, Any]]] = {}
        passes = max(3, self.repeat)
        for turn in range(1, passes + 1):
            self.transport_pass(transport, f"{turn}/{passes}", runs, out)
        for key, figure_runs in runs.items():
            keep_best(out, key, figure_runs, quiet=True)
        return out

    def transport_pass(self, transport: str, turn: str, runs: dict[str, list[dict[str, Any]]],
                       out: dict[str, Any]) -> None:
        """One run of every figure of `transport`, appended to `runs`; the hosts' RSS after their clients into `out`."""

        def step(key: str, label: str, command: list[str], server: Server) -> None:
            print(f"  {transport:3} {label} (pass {turn}) ...", end="", flush=True, file=sys.stderr)
            result = run_client(command, server=server)
            runs.setdefault(key, []).append(result)
            print_figure(result)

        # 1. The limit: raw libzmq echo through the ZeroMQ layer, no JSON.
        server = Server("raw echo", self.bench_tool("raw-server", "--endpoint", self.endpoint(transport, "raw")))
        try:
            for window in (1, 64, 1024):
                step(f"raw_w{window}", f"raw libzmq echo, window {window}",
                     self.timed(*self.bench_tool("raw-client", "--endpoint", server.endpoint, "--window",
                                                 str(window), "--max", "5000000")), server)
            # The floor of a Swift peer's call (Sources/zerobridge-bench/AwaitFloor.swift): the same echo as calls
            # awaited by 1,024 tasks, each inside a cancellation handler, with no protocol work at all.
            step("await_floor_w1024", "raw echo as awaited Swift calls, window 1024",
                 self.timed(*self.bench_tool("await-floor", "--endpoint", server.endpoint, "--window", "1024",
                                             "--max", "5000000", "--cancellation", "yes")), server)
        finally:
            server.stop()

        # 3. The alternative: a hand-written pyzmq JSON echo server, driven by a hand-written pyzmq client.
        server = Server("pyzmq echo", [PY, str(BENCH / "pyzmq_echo_server.py"), self.endpoint(transport, "pyzmq")])
        try:
            for window in (1, 64):
                step(f"pyzmq_server_w{window}", f"pyzmq server <- pyzmq client, window {window}",
                     self.timed(PY, str(BENCH / "py_raw_client.py"), server.endpoint, "--window", str(window)), server)
        finally:
            server.stop()

        # 2, 4, 5. The ZeroBridge host (`zerobridge serve --conformance`), a fresh one per client.
        clients: list[tuple[str, str, list[int], Any]] = [
            ("swift", "Swift BridgePeer", [1, 64, 1024],
             lambda ep, w: self.timed(*self.bench_tool("peer", "--endpoint", ep, "--window", str(w)))),
            ("zb_pyzmq_client", "the same pyzmq client", [1, 64],
             lambda ep, w: self.timed(PY, str(BENCH / "py_raw_client.py"), ep, "--window", str(w))),
            ("python", "Python peer", [1, 64],
             lambda ep, w: self.timed(PY, str(BENCH / "py_peer.py"), "echo", ep, "--window", str(w))),
            ("node", "Node peer", [1, 64],
             lambda ep, w: self.timed("node", str(BENCH / "node_peer.mjs"), "echo", ep, "--window", str(w))),
        ]
        for key, label, windows, command in clients:
            if key == "node" and shutil.which("node") is None:
                out.update({f"node_w{w}": {"error": "node is not installed"} for w in windows})
                continue
            host = self.host(self.endpoint(transport, f"host-{key}"))
            try:
                for window in windows:
                    step(f"{key}_w{window}", f"ZeroBridge host <- {label}, window {window}", command(host.endpoint, window),
                         host)
                rss = round(host.rss_mb(), 1)  # the largest of the passes
                out[f"{key}_host_rss_after_mb"] = max(rss, out.get(f"{key}_host_rss_after_mb", rss))
            finally:
                host.stop()

        # 6. Progress streaming host -> peer: the conformance `count` action with progress.
        host = self.host(self.endpoint(transport, "host-progress"))
        try:
            n = self.progress_events
            step("progress_swift", f"progress -> Swift peer ({n['swift']:,} events)",
                 self.bench_tool("progress", "--endpoint", host.endpoint, "--events", str(n["swift"])), host)
            step("progress_python", f"progress -> Python peer ({n['python']:,} events)",
                 [PY, str(BENCH / "py_peer.py"), "progress", host.endpoint, "--events", str(n["python"])], host)
            # Its floor: the progress consumer a user would hand-write with pyzmq, the same events on the same host.
            step("progress_pyzmq", f"progress -> hand-written pyzmq consumer ({n['python']:,} events)",
                 [PY, str(BENCH / "py_raw_progress.py"), host.endpoint, "--events", str(n["python"])], host)
            if shutil.which("node"):
                step("progress_node", f"progress -> Node peer ({n['node']:,} events)",
                     ["node", str(BENCH / "node_peer.mjs"), "progress", host.endpoint, "--events", str(n["node"])], host)
            else:
                out["progress_node"] = {"error": "node is not installed"}
        finally:
            host.stop()

    def security(self, folder: Path, modes: tuple[str, ...] | None = None,
                 peers: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The host plain, keyed and CURVE + keyed (tcp), each peer through the host's connection file: the runs of a
        scenario take turns among the modes, each run on a fresh host, rates with the host's and the peer's CPU time
        per request. `modes` and `peers`: those of the command line unless given."""
        out: dict[str, Any] = {}
        n = PROGRESS_EVENTS
        clients: list[tuple[str, str, Any]] = [
            ("swift", "Swift peer", lambda file, what, w: self.bench_tool(what, "--endpoint", file, "--window", str(w),
                                                                         "--events", str(n["swift"]))),
            ("python", "Python peer", lambda file, what, w: [PY, str(BENCH / "py_peer.py"), what, file, "--window",
                                                             str(w), "--events", str(n["python"])]),
            ("node", "Node peer", lambda file, what, w: ["node", str(BENCH / "node_peer.mjs"), what, file, "--window",
                                                         str(w), "--events", str(n["node"])]),
        ]
        modes = modes or self.security_modes
        for mode in modes:
            out[mode] = {}
        for key, label, command in (p for p in clients if p[0] in (peers or self.security_peers)):
            if key == "node" and shutil.which("node") is None:
                for mode in modes:
                    out[mode].update({f"node_{s}": {"error": "node is not installed"} for s in SECURITY_SCENARIOS})
                continue
            what = "peer" if key == "swift" else "echo"
            scenarios = [(f"{key}_w{window}", f"{label}, window {window}",
                          lambda file, window=window: self.timed(*command(file, what, window)))
                         for window in (1, 64)]
            scenarios.append((f"{key}_progress", f"progress -> {label} ({n[key]:,} events)",
                              lambda file: command(file, "progress", 1)))
            for figure, text, make in scenarios:
                runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
                # The modes take turns, so a ratio of two modes compares runs made seconds apart, not minutes (the
                # machine's other work drifts meanwhile). At least three turns: one run's rate moves by up to a
                # quarter with where the scheduler puts the two processes' threads. And a fresh host for every run:
                # one host process stays faster or slower than another of the same build and mode for its whole
                # life (four keyed hosts side by side, Swift progress, 4 turns: 731,624 to 862,870 events/s best of
                # each), so runs on one host per mode left that to a ratio.
                for _ in range(max(3, self.repeat)):
                    for mode in modes:
                        runs[mode].append(self.on_fresh_host(mode, folder / f"{mode}-{key}.json", make))
                for mode in modes:
                    print(f"  {mode:<11} {text} ...", end="", flush=True, file=sys.stderr)
                    keep_best(out[mode], figure, runs[mode])
        return out

    def on_fresh_host(self, mode: str, file: Path, make: Any) -> dict[str, Any]:
        """One client run (`make(connection file)`) against a host started for it in security mode `mode`."""
        try:
            host = self.host("tcp://127.0.0.1:*", options=["--connection-file", str(file), *SECURITY_MODES[mode]])
        except RuntimeError as error:
            return {"error": str(error)[:300]}
        try:
            return run_client(make(str(file)), server=host)
        finally:
            host.stop()

    def anchors(self) -> dict[str, Any]:
        """The anchors (tcp on loopback, no TLS): a grpc-swift-2 server driven by a grpc-swift-2 client and by grpcio
        (its sync stub and grpc.aio, the faster kept per scenario), and a Hummingbird 2 server driven by node:http.
        The security section's scenarios, payload, seconds and events; a fresh server per front-end."""
        out: dict[str, Any] = {}
        n = PROGRESS_EVENTS

        def anchors(*args: str) -> list[str]:
            return [str(ANCHORS_BIN), *args]

        python = [PY, str(BENCH / "grpc_client.py")]
        fronts: list[tuple[str, str, list[str], Any]] = [
            ("swift", "grpc-swift-2 client", ["grpc-server"], lambda ep, what, w, api: (
                anchors("grpc-client", "--endpoint", ep, "--window", str(w)) if what == "echo" else
                anchors("grpc-progress", "--endpoint", ep, "--events", str(n["swift"])))),
            ("python", "grpcio", ["grpc-server"], lambda ep, what, w, api: [
                *python, what, ep, "--api", api, "--window", str(w), "--events", str(n["python"])]),
            ("node", "node:http", ["http-server"], lambda ep, what, w, api: [
                "node", str(BENCH / "http_client.mjs"), what, ep, "--window", str(w), "--events", str(n["node"])]),
        ]
        for key, label, server_command, command in fronts:
            if key == "node" and shutil.which("node") is None:
                out.update({f"node_{s}": {"error": "node is not installed"} for s in SECURITY_SCENARIOS})
                continue
            # grpcio has two APIs and its docs recommend neither for speed: both are measured, the faster kept.
            apis = ("sync", "aio") if key == "python" else ("",)
            try:
                server = Server(f"anchor for {label}", anchors(*server_command))
            except RuntimeError as error:
                out.update({f"{key}_{s}": {"error": str(error)[:200]} for s in SECURITY_SCENARIOS})
                continue
            try:
                for scenario, what, window in (("w1", "echo", 1), ("w64", "echo", 64), ("progress", "progress", 1)):
                    tried: dict[str, Any] = {}
                    for api in apis:
                        run = command(server.endpoint, what, window, api)
                        self.step(tried, api, f"anchor {label}{' ' + api if api else ''}, "
                                              f"{'progress' if what == 'progress' else f'window {window}'}",
                                  self.timed(*run) if what == "echo" else run, server)
                    good = [r for r in tried.values() if "error" not in r]
                    best = max(good, key=lambda r: r["per_second"]) if good else tried[apis[-1]]
                    if len(apis) > 1:
                        best["apis_per_second"] = {api: round(r["per_second"]) for api, r in tried.items()
                                                   if "error" not in r}
                    out[f"{key}_{scenario}"] = best
            finally:
                server.stop()
        return out

    def node_curve(self) -> dict[str, Any]:
        """The Node peer's XSalsa20-Poly1305 (what each CURVE MESSAGE costs it) against node-tweetnacl's, no sockets."""
        if shutil.which("node") is None:
            return {"error": "node is not installed"}
        print("  node CURVE crypto against node-tweetnacl ...", end="", flush=True, file=sys.stderr)
        result = run_client(["node", str(BENCH / "node_curve.mjs"), "--repeat", str(max(3, self.repeat))])
        print(f" {result.get('error', 'done')}", file=sys.stderr)
        return result

    def metrics(self) -> dict[str, Any]:
        """The cost of metrics: a fresh host per run without a backend and with Prometheus bootstrapped, the Swift
        peer against each (ipc), taken in turns so that drift on a shared machine hits both; and the hooks alone."""
        out: dict[str, Any] = {"off": {}, "prometheus": {}}
        modes = (("off", []), ("prometheus", ["--metrics", "127.0.0.1:0"]))
        for window in (1, 64):
            for mode, options in modes:
                host = self.host(self.endpoint("ipc", f"metrics-{mode}"), options=options)
                try:
                    self.step(out[mode], f"swift_w{window}", f"metrics {mode:<10} Swift peer, window {window}",
                              self.timed(*self.bench_tool("peer", "--endpoint", host.endpoint, "--window", str(window))), host)
                finally:
                    host.stop()
        out["hooks"] = {backend: run_client(self.bench_tool("telemetry", "--backend", backend))
                        for backend in ("none", "prometheus")}
        return out

    def memory(self) -> dict[str, Any]:
        """7. Host RSS, from /proc, of a fresh host process under each load."""
        out: dict[str, Any] = {}
        for key, args in (("inflight_10000", ["inflight", "--requests", "10000", "--sleep-ms", "3000"]),
                          ("peers_1000", ["peers", "--peers", "1000"])):
            print(f"  memory: {key} ...", end="", flush=True, file=sys.stderr)
            host = self.host("tcp://127.0.0.1:*")
            try:
                time.sleep(0.2)
                idle = host.rss_mb()
                load = subprocess.Popen([PY, str(BENCH / "memory_load.py"), *args[:1], host.endpoint, *args[1:]],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, cwd=ROOT)
                assert load.stdin and load.stdout and load.stderr
                line = load.stdout.readline().strip()
                if line != "loaded":
                    load.kill()
                    out[key] = {"error": (load.stderr.read().strip().splitlines() or ["no load"])[-1]}
                    print(" failed", file=sys.stderr)
                    continue
                loaded = max(host.rss_mb() for _ in range(5) if time.sleep(0.05) is None)
                load.stdin.write("go\n")
                load.stdin.flush()
                driver = json.loads(load.stdout.readline())
                load.wait(30)
                time.sleep(0.3)
                out[key] = {"idle_rss_mb": round(idle, 1), "loaded_rss_mb": round(loaded, 1),
                            "after_rss_mb": round(host.rss_mb(), 1), **driver}
                print(f" {loaded:.1f} MB", file=sys.stderr)
            finally:
                host.stop()
        return out

    def codec(self) -> dict[str, Any]:
        return run_client(self.bench_tool("codec", "--seconds", str(self.seconds)))

    def telemetry(self) -> dict[str, Any]:
        """Tracing (issue 27) over ipc: the Swift peer against an echo host, with tracing off (no tracer, no trace),
        carried (no tracer; every call in a trace, which the host carries on), on (swift-otel's tracer: each request
        in a span started, ended, batched and exported over OTLP/HTTP) and sampled (swift-otel sampling 1 trace in
        100); and the span wrapper alone, no sockets.

        The four hosts run side by side and the clients take turns among them, 2 x --repeat rounds, so that each
        mode sees the same moments of this machine; each mode keeps its run with the least host CPU per request. A
        host at 64 in flight settles into one of two paces (many messages a wake-up, or few), whose CPU per request
        differs by up to 2x whatever the mode: one run per mode compared two such draws more than two modes."""
        tracing: dict[str, Any] = {}
        hosts: dict[str, tuple[Server, list[str], Any]] = {}
        try:
            for mode, (kind, host_flags, peer_flags) in TRACING_MODES.items():
                endpoint = self.endpoint("ipc", f"traced-{mode}")
                try:
                    sink = start_otlp_sink() if kind == "otel" else None
                except RuntimeError as missing:
                    tracing[f"{mode}_w1"] = tracing[f"{mode}_w64"] = {"error": str(missing)}
                    continue
                try:
                    command = ([str(OTEL_BIN), "--endpoint", endpoint, "--otlp", sink.url, *host_flags] if sink else
                               self.bench_tool("traced-host", "--endpoint", endpoint, *host_flags))
                    hosts[mode] = (Server(f"echo host, tracing {mode}", command), peer_flags, sink)
                except BaseException:
                    if sink:
                        sink.close()
                    raise
            counted = dict.fromkeys(hosts, 0)
            for window in (1, 64):
                runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in hosts}
                print(f"  ipc tracing, window {window}: {', '.join(hosts)} in turns ...", end="", flush=True,
                      file=sys.stderr)
                for _ in range(2 * self.repeat):
                    for mode, (host, peer_flags, _sink) in hosts.items():
                        result = run_client(self.timed(*self.bench_tool(
                            "peer", "--endpoint", host.endpoint, "--window", str(window), *peer_flags)), server=host)
                        runs[mode].append(result)
                        counted[mode] += result.get("requests", 0) + result.get("warmup", 0)
                for mode, results in runs.items():
                    good = [r for r in results if "server_cpu_us_per_request" in r]
                    best = min(good, key=lambda r: r["server_cpu_us_per_request"]) if good else results[-1]
                    best["runs_server_cpu_us"] = [round(r["server_cpu_us_per_request"], 1) for r in good]
                    tracing[f"{mode}_w{window}"] = best
                print(" done", file=sys.stderr)
        finally:
            for mode, (host, _flags, sink) in hosts.items():
                host.stop()  # the tracer's services export what is left on SIGTERM
                if sink:
                    # Every request the host served is a span it ended; the receiver counts what reached it.
                    tracing[f"{mode}_export"] = {"spans": sink.spans, "exports": sink.exports,
                                                 "refused": sink.refused, "requests": counted.get(mode, 0)}
                    sink.close()
        for key, command, flags in (("span_wrapper", "span-wrapper", []),
                                    ("span_wrapper_traced", "span-wrapper", ["--traceparent", TRACEPARENT]),
                                    ("span_wrapper_tracer", "span-wrapper", ["--traceparent", TRACEPARENT, "--tracer", "memory"]),
                                    ("span_alone_tracer", "span-alone", [])):
            tracing[key] = run_client(self.bench_tool(command, "--seconds", str(self.seconds), *flags))
        for mode, flags in OTEL_WRAPPER_MODES.items():
            tracing[f"otel_wrapper_{mode}"] = self.otel_wrapper(flags)
        return {"tracing": tracing}

    def otel_wrapper(self, flags: list[str]) -> dict[str, Any]:
        """The span wrapper around an empty handler with swift-otel bootstrapped (its exporter working beside it, to
        the OTLP receiver): the whole process's CPU per request, without sockets, whose wake-ups make a host's CPU per
        request vary by up to 2x between runs."""
        print(f"  swift-otel span wrapper, {' '.join(flags)} ...", end="", flush=True, file=sys.stderr)
        try:
            sink = start_otlp_sink()
        except RuntimeError as missing:
            print(" missing", file=sys.stderr)
            return {"error": str(missing)}
        try:
            result = run_client([str(OTEL_BIN), "--span-wrapper", str(self.seconds), "--otlp", sink.url, *flags])
            result.update(spans_exported=sink.spans)  # the process has exited: its last export is in
        finally:
            sink.close()
        print(f" {result['cpu_ns_per_request']:,.0f} ns" if "cpu_ns_per_request" in result else f" {result.get('error')}",
              file=sys.stderr)
        return result


def start_otlp_sink() -> Any:
    """The OTLP receiver of the swift-otel rows (bench/otlp_sink.py), listening; RuntimeError saying what is missing
    when `make bench` has not built bench/otel or installed opentelemetry-proto."""
    if not OTEL_BIN.exists():
        raise RuntimeError(f"{OTEL_BIN} is missing: make bench builds it")
    try:
        import otlp_sink
    except ImportError as error:
        raise RuntimeError(f"{error}: make bench installs opentelemetry-proto") from None
    return otlp_sink.OtlpSink()


# --- figures, ratios, targets -----------------------------------------------------------------------

def rate(result: dict[str, Any] | None) -> float | None:
    return result.get("per_second") if result and "error" not in result else None


def p50(result: dict[str, Any] | None) -> float | None:
    return result.get("p50_us") if result and "error" not in result else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios(t: dict[str, Any]) -> dict[str, Any]:
    best_raw = max(filter(None, [rate(t.get("raw_w64")), rate(t.get("raw_w1024"))]), default=None)
    best_swift = max(filter(None, [rate(t.get("swift_w64")), rate(t.get("swift_w1024"))]), default=None)
    return {
        "zerobridge_over_limit": {
            "swift_pipelined_best": ratio(best_swift, best_raw),
            "swift_pipelined_64": ratio(rate(t.get("swift_w64")), rate(t.get("raw_w64"))),
            "swift_pipelined_1024": ratio(rate(t.get("swift_w1024")), rate(t.get("raw_w1024"))),
            # What Swift's awaited calls alone leave of raw libzmq, and how much of that floor the peer reaches.
            "await_floor_1024": ratio(rate(t.get("await_floor_w1024")), rate(t.get("raw_w1024"))),
            "swift_over_await_floor_1024": ratio(rate(t.get("swift_w1024")), rate(t.get("await_floor_w1024"))),
            "swift_sequential_rate": ratio(rate(t.get("swift_w1")), rate(t.get("raw_w1"))),
            "swift_sequential_p50": ratio(p50(t.get("swift_w1")), p50(t.get("raw_w1"))),
        },
        "zerobridge_over_pyzmq_baseline": {
            # The same hand-written pyzmq client against the ZeroBridge host and against the pyzmq server.
            "same_client_sequential_p50": ratio(p50(t.get("zb_pyzmq_client_w1")), p50(t.get("pyzmq_server_w1"))),
            "same_client_pipelined_rate": ratio(rate(t.get("zb_pyzmq_client_w64")), rate(t.get("pyzmq_server_w64"))),
            # What a user gets from each stack end to end: the Python peer vs the hand-written pair.
            "python_peer_sequential_p50": ratio(p50(t.get("python_w1")), p50(t.get("pyzmq_server_w1"))),
            "python_peer_pipelined_rate": ratio(rate(t.get("python_w64")), rate(t.get("pyzmq_server_w64"))),
            "node_peer_sequential_p50": ratio(p50(t.get("node_w1")), p50(t.get("pyzmq_server_w1"))),
            "node_peer_pipelined_rate": ratio(rate(t.get("node_w64")), rate(t.get("pyzmq_server_w64"))),
            "swift_peer_sequential_p50": ratio(p50(t.get("swift_w1")), p50(t.get("pyzmq_server_w1"))),
            "swift_peer_pipelined_rate": ratio(rate(t.get("swift_w64")), rate(t.get("pyzmq_server_w64"))),
        },
        "python_peer_over_pyzmq_client": {
            # The Python peer against what a user would hand-write with pyzmq, both on the same ZeroBridge host.
            "sequential_p50": ratio(p50(t.get("python_w1")), p50(t.get("zb_pyzmq_client_w1"))),
            "progress_rate": ratio(rate(t.get("progress_python")), rate(t.get("progress_pyzmq"))),
        },
    }


def telemetry_ratios(telemetry: dict[str, Any]) -> dict[str, Any]:
    """Tracing's cost: the host's extra CPU per request (64 in flight) against tracing off, and the span wrapper's
    share of the host's CPU per request without a tracer."""
    tracing = telemetry.get("tracing", {})

    def host_cpu(mode: str) -> float | None:
        result = tracing.get(f"{mode}_w64") or {}
        return None if "error" in result else result.get("server_cpu_us_per_request")

    off = host_cpu("off")
    extra = {mode: (round(cpu / off - 1, 3) if cpu is not None and off else None)
             for mode in ("carried", "on", "sampled") for cpu in [host_cpu(mode)]}
    wrapper = (tracing.get("span_wrapper") or {}).get("ns_per_request")
    # With the tracer: the wrapper's time less the tracer's own span is what ZeroBridge adds around it.
    with_tracer = (tracing.get("span_wrapper_tracer") or {}).get("ns_per_request")
    tracer_alone = (tracing.get("span_alone_tracer") or {}).get("ns_per_request")
    ours = with_tracer - tracer_alone if with_tracer and tracer_alone else None
    # swift-otel's span per request, as a share of the host's CPU per request without a tracer.
    otel_share = {mode: (round((cpu - (wrapper or 0)) / (off * 1000), 3) if cpu and off else None)
                  for mode in OTEL_WRAPPER_MODES
                  for cpu in [(tracing.get(f"otel_wrapper_{mode}") or {}).get("cpu_ns_per_request")]}
    return {**{f"otel_span_share_{mode}": share for mode, share in otel_share.items()},"host_cpu_extra_carried": extra["carried"], "host_cpu_extra_on": extra["on"],
            "host_cpu_extra_sampled": extra["sampled"],
            "span_wrapper_share_no_tracer": round(wrapper / (off * 1000), 4) if wrapper and off else None,
            "span_wrapper_share_tracer_own": round(ours / (off * 1000), 4) if ours is not None and off else None,
            "tracer_span_share": round(tracer_alone / (off * 1000), 4) if tracer_alone and off else None}


def security_ratios(security: dict[str, Any]) -> dict[str, Any]:
    """keyed/plain and CURVE+keyed/plain of each peer's rate in each scenario."""
    out: dict[str, Any] = {}
    plain = security.get("plain", {})
    for key in plain:
        out[key] = {f"{mode}_over_plain": ratio(rate(security.get(mode, {}).get(key)), rate(plain.get(key)))
                    for mode in SECURITY_MODES if mode != "plain"}
    return out


def anchors_ratios(zerobridge: dict[str, Any], anchors: dict[str, Any]) -> dict[str, Any]:
    """keyed ZeroBridge / anchor and plain ZeroBridge / anchor of each front-end's rate in each scenario."""
    return {key: {f"{mode}_over_anchor": ratio(rate(zerobridge.get(mode, {}).get(key)), rate(anchors.get(key)))
                  for mode in ("keyed", "plain")}
            for key in SECURITY_LABELS}


def zerobridge_rows_for_anchors(bench: Bench, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The keyed and plain ZeroBridge rows the anchors are compared with: the security section's of this run, or
    (when it did not run them all) measured here the same way, into results["anchors_zerobridge"]."""
    security = results.get("security", {})
    if all(key in security.get(mode, {}) for mode in ("keyed", "plain") for key in SECURITY_LABELS):
        return security
    results["anchors_zerobridge"] = bench.security(folder, modes=("plain", "keyed"), peers=("swift", "python", "node"))
    return results["anchors_zerobridge"]


# The node-curve section's figures: (operation, size key, label); small boxes in us per message, large ones in MB/s.
NODE_CURVE_ROWS = [(operation, size, f"{operation} {label}") for size, label in (("small", "200 B"), ("64k", "64 KiB"),
                                                                                 ("1m", "1 MiB"))
                   for operation in ("seal", "open")]


def node_curve_ratios(result: dict[str, Any]) -> dict[str, float | None]:
    """Ours / tweetnacl's speed for each figure (above 1: ours is faster)."""
    out: dict[str, float | None] = {}
    for operation, size, _ in NODE_CURVE_ROWS:
        ours, theirs = result.get(f"ours_{operation}_{size}"), result.get(f"tweetnacl_{operation}_{size}")
        if not ours or not theirs:
            out[f"{operation}_{size}"] = None
        elif "us_per_message" in ours:
            out[f"{operation}_{size}"] = ratio(theirs["us_per_message"], ours["us_per_message"])
        else:
            out[f"{operation}_{size}"] = ratio(ours["mb_per_second"], theirs["mb_per_second"])
    return out


def node_curve_table(result: dict[str, Any]) -> list[str]:
    lines = ["", "--- Node peer's CURVE crypto (XSalsa20-Poly1305 box, precomputed key) against node-tweetnacl " + "-" * 22]
    if "error" in result:
        return lines + [f"error: {result['error']}"]

    def figure(entry: dict[str, Any] | None) -> str:
        if not entry:
            return "-"
        if "us_per_message" in entry:
            return f"{entry['us_per_message']:.2f} us/message"
        return f"{entry['mb_per_second']:.0f} MB/s"

    ratios_ = node_curve_ratios(result)
    for operation, size, label in NODE_CURVE_ROWS:
        speedup = ratios_[f"{operation}_{size}"]
        lines.append(f"{label:<14} ours {figure(result.get(f'ours_{operation}_{size}')):>17}   "
                     f"tweetnacl {figure(result.get(f'tweetnacl_{operation}_{size}')):>17}   "
                     f"ours/tweetnacl speed {'-' if speedup is None else format(speedup, '.2f')}")
    return lines


def metrics_costs(metrics: dict[str, Any]) -> dict[str, Any]:
    """What bootstrapping Prometheus costs the host (rate lost, host CPU added), and the hooks' share of a request's
    host CPU time without a backend."""
    out: dict[str, Any] = {}
    for window in (1, 64):
        off, on = metrics["off"].get(f"swift_w{window}"), metrics["prometheus"].get(f"swift_w{window}")
        kept = ratio(rate(on), rate(off))
        out[f"w{window}_rate_lost"] = None if kept is None else round(1 - kept, 3)
        cpu_off, cpu_on = ((r or {}).get("server_cpu_us_per_request") for r in (off, on))
        out[f"w{window}_host_cpu_added"] = ratio(cpu_on, cpu_off) and round(ratio(cpu_on, cpu_off) - 1, 3)
    hooks = metrics.get("hooks", {})
    none_ns = (hooks.get("none") or {}).get("ns_per_request")
    host_cpu = (metrics["off"].get("swift_w64") or {}).get("server_cpu_us_per_request")
    out["hooks_none_ns"] = none_ns and round(none_ns, 1)
    out["hooks_prometheus_ns"] = (hooks.get("prometheus") or {}).get("ns_per_request") and round(hooks["prometheus"]["ns_per_request"], 1)
    out["hooks_none_share_of_host_cpu"] = round(none_ns / (host_cpu * 1000), 5) if none_ns and host_cpu else None
    return out


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []

    def check(name: str, value: Any, goal: str, met: bool | None) -> None:
        checks.append({"target": name, "value": value, "goal": goal, "met": met})

    for transport, t in results.get("transports", {}).items():
        r = results["ratios"][transport]
        best_swift = max(filter(None, [rate(t.get("swift_w64")), rate(t.get("swift_w1024"))]), default=None)
        check(f"{transport}: Swift peer pipelined req/s", best_swift and round(best_swift), ">= 100,000",
              best_swift is not None and best_swift >= 100_000)
        share = r["zerobridge_over_limit"]["swift_pipelined_best"]
        check(f"{transport}: Swift peer pipelined / raw libzmq pipelined", share, ">= 0.25",
              share is not None and share >= 0.25)
        same = r["zerobridge_over_pyzmq_baseline"]
        check(f"{transport}: seq p50, same pyzmq client: ZeroBridge host / pyzmq server", same["same_client_sequential_p50"],
              "<= 1.0", same["same_client_sequential_p50"] is not None and same["same_client_sequential_p50"] <= 1.0)
        check(f"{transport}: pipelined, same pyzmq client: ZeroBridge host / pyzmq server", same["same_client_pipelined_rate"],
              ">= 1.0", same["same_client_pipelined_rate"] is not None and same["same_client_pipelined_rate"] >= 1.0)
        check(f"{transport}: seq p50, Python peer / hand-written pyzmq pair", same["python_peer_sequential_p50"],
              "<= 1.0", same["python_peer_sequential_p50"] is not None and same["python_peer_sequential_p50"] <= 1.0)
        check(f"{transport}: pipelined, Python peer / hand-written pyzmq pair", same["python_peer_pipelined_rate"],
              ">= 1.0", same["python_peer_pipelined_rate"] is not None and same["python_peer_pipelined_rate"] >= 1.0)
        for who, goal in (("python", 200_000), ("swift", 500_000)):
            p = t.get(f"progress_{who}", {})
            value = rate(p)
            check(f"{transport}: progress events/s to {who} (complete, in order)", value and round(value),
                  f">= {goal:,}", value is not None and value >= goal and p.get("in_order_and_complete") is True)
        # Issue 26: the Python peer against the hand-written pyzmq client, both on the ZeroBridge host.
        peer_share = ratio(rate(t.get("python_w64")), rate(t.get("zb_pyzmq_client_w64")))
        check(f"{transport}: pipelined, Python peer / the pyzmq client, same host", peer_share and round(peer_share, 2),
              ">= 0.6", peer_share is not None and peer_share >= 0.6)
        against_client = r["python_peer_over_pyzmq_client"]
        slower = against_client["sequential_p50"]
        check(f"{transport}: seq p50, Python peer / the pyzmq client, same host", slower, "<= 1.5",
              slower is not None and slower <= 1.5)
        progress_share = against_client["progress_rate"]
        check(f"{transport}: progress events/s, Python peer / the hand-written pyzmq consumer, same host",
              progress_share, ">= 0.8", progress_share is not None and progress_share >= 0.8)
        host_cpu = (t.get("zb_pyzmq_client_w64") or {}).get("server_cpu_us_per_request")
        # 29.8 us: the previous release's host on this machine type; the issue asks for it, then for half of it.
        for goal in (29.8, 14.9):
            check(f"{transport}: host CPU us per plain request, same pyzmq client, 64 in flight",
                  host_cpu and round(host_cpu, 1), f"<= {goal}", host_cpu is not None and host_cpu <= goal)
    for key, modes in results.get("security_ratios", {}).items():
        for mode, goal in (("keyed", 0.9), ("curve+keyed", 0.75)):
            if mode == "curve+keyed" and key.startswith("node"):
                continue  # Node's CURVE is pure JavaScript: no target yet
            value = modes[f"{mode}_over_plain"]
            check(f"tcp: {mode}/plain, {SECURITY_LABELS[key]}", value, f">= {goal}", value is not None and value >= goal)
    for key, quotients in results.get("anchors_ratios", {}).items():
        value = quotients["keyed_over_anchor"]
        anchor = ANCHOR_NAMES[key.split("_")[0]].split(":")[0]
        check(f"tcp: keyed ZeroBridge / {anchor}, {ANCHOR_LABELS[key]}", value, ">= 1.0",
              value is not None and value >= 1.0)
    if "node_curve" in results:
        speedups = node_curve_ratios(results["node_curve"])
        measured = [value for value in speedups.values() if value is not None]
        slowest = min(measured) if measured and len(measured) == len(speedups) else None  # any figure missing: missed
        check("Node CURVE crypto: ours / node-tweetnacl speed, slowest of seal and open at 200 B, 64 KiB, 1 MiB",
              slowest, ">= 1.0", slowest is not None and slowest >= 1.0)
    if "metrics_costs" in results:
        costs = results["metrics_costs"]
        for window in (1, 64):
            lost = costs[f"w{window}_rate_lost"]
            check(f"ipc: rate lost with Prometheus bootstrapped, Swift peer, window {window}", lost, "< 0.05",
                  lost is not None and lost < 0.05)
        share = costs["hooks_none_share_of_host_cpu"]
        check("metrics hooks without a backend: share of a request's host CPU", share, "< 0.005 (none measurable)",
              share is not None and share < 0.005)
    if "telemetry_ratios" in results:
        ratios_ = results["telemetry_ratios"]
        # The span's own CPU, not the hosts' CPU per request side by side: that one moved by -2% to +16% between
        # runs for the same 1 trace in 100 (a host's pace, many or few messages per wake-up, varies more).
        for mode, label in (("on", "every request recorded"), ("sampled", "1 trace in 100 sampled by the host"),
                            ("callers", "1 trace in 100 sampled by the callers, followed")):
            extra = ratios_.get(f"otel_span_share_{mode}")
            check(f"tracing on (swift-otel, OTLP/HTTP, {label}): span CPU / host CPU per request", extra,
                  "< 0.05", extra is not None and extra < 0.05)
        share = ratios_["span_wrapper_share_no_tracer"]
        check("tracing without a tracer: span wrapper / host CPU per request", share, "< 0.01",
              share is not None and share < 0.01)
    if "import_service" in results:
        cost = results["import_service"].get("journal_cost")
        check("import service: files/s lost to the job journal", cost, "< 0.15", cost is not None and cost < 0.15)
    if "browser" in results:
        # Judged on the rates, not on their ratio rounded to 3 places: a third is not one, so 0.33336 rounded to
        # 0.333 was missed against 1/3 while shown as met against "0.33". Shown to 4 places, the goal as written.
        browser = results["browser"]
        for window, goal, written in ((1, 0.5, "0.5"), (64, 1 / 3, "1/3")):
            page, node = rate(browser.get(f"browser_w{window}")), rate(browser.get(f"node_w{window}"))
            value = page / node if page is not None and node else None
            label = "sequential" if window == 1 else f"{window} in flight"
            check(f"tcp/ws, keyed: Chromium page peer / Node peer, {label} req/s", value and round(value, 4),
                  f">= {written}", value is not None and value >= goal)
    if "memory" in results:
        inflight = results["memory"].get("inflight_10000", {})
        value = inflight.get("loaded_rss_mb")
        check("host RSS with 10,000 requests in flight (MB)", value, "< 100",
              value is not None and value < 100 and inflight.get("all_in_flight_when_sampled") is True)
    return checks


# --- the table -------------------------------------------------------------------------------------

def describe(result: dict[str, Any] | None, latency: bool) -> str:
    if not result:
        return "-"
    if "error" in result:
        return "error: " + result["error"][:40]
    text = f"{result['per_second']:>11,.0f}/s"
    if latency:
        text += f"  p50 {result['p50_us']:.1f}  p99 {result['p99_us']:.1f}  p99.9 {result['p999_us']:.1f} us"
    text += cpu_text(result)
    if (server := result.get("server_cpu_us_per_request")) is not None:
        # About how many CPUs the server kept busy: its CPU per request (warm-up included) times the measured rate.
        # Under the pyzmq client at 64 in flight the ZeroBridge host stays near 0.7 whatever the rate
        # (bench/RESULTS.md, nineteenth sitting): its CPU per request there follows the client's pace.
        text += f"  server busy {server * result['per_second'] / 1e6:.2f} CPU"
    return text


def cpu_text(result: dict[str, Any]) -> str:
    """CPU us per request: the server's (host's) / the client's."""
    server, client = result.get("server_cpu_us_per_request"), result.get("cpu_us_per_request")
    if server is None and client is None:
        return ""
    return "  cpu " + " / ".join("-" if v is None else f"{v:.1f}" for v in (server, client)) + " us"


SECURITY_LABELS = {f"{peer}_{scenario}": f"{name}, {what}"
                   for peer, name in (("swift", "Swift peer"), ("python", "Python peer"), ("node", "Node peer"))
                   for scenario, what in (("w1", "sequential"), ("w64", "64 in flight"), ("progress", "progress events"))}


# The anchors section's rows: the security section's, a front-end each.
ANCHOR_LABELS = {key: label.replace(" peer,", " front-end,") for key, label in SECURITY_LABELS.items()}


def security_table(results: dict[str, Any]) -> list[str]:
    security, ratios_ = results["security"], results["security_ratios"]
    lines = ["", "--- security modes, tcp: rate, cpu us per request host / peer " + "-" * 60,
             f"{'':<30}" + "".join(f"{mode:>31}" for mode in security) + "   keyed/plain  curve/plain"]
    for key, label in SECURITY_LABELS.items():
        if not any(key in security[mode] for mode in security):
            continue  # a peer left out (--security-peers)
        cells = []
        for mode in security:
            r = security[mode].get(key)
            if not r:
                cells.append(f"{'-':>31}")
            elif "error" in r:
                cells.append(f"{'error: ' + r['error'][:22]:>31}")
            else:
                host, peer = r.get("server_cpu_us_per_request"), r.get("cpu_us_per_request")
                cells.append(f"{r['per_second']:>12,.0f}/s {host or 0:>7.1f} / {peer or 0:>6.1f}")
        quotients = ratios_.get(key, {})
        marks = "".join(f"{'-' if quotients.get(name) is None else format(quotients[name], '.2f'):>13}"
                        for name in ("keyed_over_plain", "curve+keyed_over_plain"))
        lines.append(f"{label:<30}" + "".join(cells) + marks)
    return lines


def anchors_table(results: dict[str, Any]) -> list[str]:
    anchors, quotients = results["anchors"], results.get("anchors_ratios", {})
    zerobridge = results.get("anchors_zerobridge") or results.get("security", {})
    lines = ["", "--- anchors, tcp, no TLS: rate, cpu us per request server / client, beside ZeroBridge's rows of this "
             "run " + "-" * 16]
    lines.append(f"{'':<34}{'anchor':>31}{'keyed ZeroBridge':>31}{'plain ZeroBridge':>31}   keyed/anchor plain/anchor")

    def cell(r: dict[str, Any] | None) -> str:
        if not r:
            return f"{'-':>31}"
        if "error" in r:
            return f"{'error: ' + r['error'][:22]:>31}"
        server, client = r.get("server_cpu_us_per_request"), r.get("cpu_us_per_request")
        return f"{r['per_second']:>12,.0f}/s {server or 0:>7.1f} / {client or 0:>6.1f}"

    for key, label in ANCHOR_LABELS.items():
        marks = "".join(f"{'-' if quotients.get(key, {}).get(name) is None else format(quotients[key][name], '.2f'):>13}"
                        for name in ("keyed_over_anchor", "plain_over_anchor"))
        lines.append(f"{label:<34}{cell(anchors.get(key))}{cell(zerobridge.get('keyed', {}).get(key))}"
                     f"{cell(zerobridge.get('plain', {}).get(key))}{marks}")
        if key.endswith("_w1"):
            p50s = [p50(r) for r in (anchors.get(key), zerobridge.get("keyed", {}).get(key),
                                     zerobridge.get("plain", {}).get(key))]
            lines.append(f"{'  p50 us':<34}" + "".join(f"{'-' if v is None else format(v, '.1f'):>31}" for v in p50s))
        elif key.endswith("_progress"):
            complete = (anchors.get(key) or {}).get("in_order_and_complete") is True
            lines.append(f"{'  events in order, none lost':<34}{'yes' if complete else 'NO':>31}")
    for peer, name in ANCHOR_NAMES.items():
        apis = {s: (anchors.get(f"{peer}_{s}") or {}).get("api") for s in SECURITY_SCENARIOS}
        kept = f" (grpcio API kept, faster of sync and aio: {', '.join(f'{s} {a}' for s, a in apis.items())})" \
            if peer == "python" else ""
        lines.append(f"  {peer.capitalize()} front-end's anchor: {name}{kept}")
    return lines


def telemetry_table(results: dict[str, Any]) -> list[str]:
    tracing = results.get("telemetry", {}).get("tracing")
    if not tracing:
        return []
    lines = ["", "--- telemetry: tracing, ipc, Swift peer -> echo host; rate, latency, cpu us per request host / client " + "-" * 10]
    for mode, label in (("off", "no tracer, no trace"), ("carried", "no tracer, trace carried"),
                        ("on", "swift-otel, all recorded"), ("sampled", "swift-otel, 1 in 100")):
        for window, latency in ((1, True), (64, False)):
            lines.append(f"{f'tracing {label}, ' + ('sequential' if window == 1 else '64 in flight'):<52} "
                         f"{describe(tracing.get(f'{mode}_w{window}'), latency)}")
    for key, label in (("span_wrapper", "span wrapper alone, no tracer"), ("span_wrapper_traced", "the same, trace carried"),
                       ("span_wrapper_tracer", "the same, in-memory tracer"),
                       ("span_alone_tracer", "in-memory tracer's span alone, no ZeroBridge")):
        result = tracing.get(key) or {}
        text = f"{result['ns_per_request']:>8.0f} ns per request" if "ns_per_request" in result else f"error: {result.get('error')}"
        lines.append(f"{label:<52} {text}")
    for mode in ("on", "sampled"):
        if export := tracing.get(f"{mode}_export"):
            lines.append(f"{f'swift-otel {mode}: spans the OTLP receiver got':<52} {export['spans']:,} of "
                         f"{export['requests']:,} requests, in {export['exports']:,} exports ({export['refused']} refused)")
    for mode, label in (("dropped", "none recorded"), ("sampled", "1 trace in 100"), ("on", "every request recorded"),
                        ("callers", "1 in 100 sampled by callers, followed")):
        result = tracing.get(f"otel_wrapper_{mode}") or {}
        text = (f"{result['cpu_ns_per_request']:>8.0f} ns CPU per request (the exporter's threads too), "
                f"{result['spans_exported']:,} of {result['requests']:,.0f} spans exported"
                if "cpu_ns_per_request" in result else f"error: {result.get('error')}")
        lines.append(f"{f'span wrapper, swift-otel, {label}':<52} {text}")
    r = results.get("telemetry_ratios", {})
    lines.append(f"{'extra host CPU per request, 64 in flight':<52} carried {fraction(r.get('host_cpu_extra_carried'))}, "
                 f"on {fraction(r.get('host_cpu_extra_on'))}, sampled {fraction(r.get('host_cpu_extra_sampled'))}")
    lines.append(f"{'swift-otel span CPU / host CPU per request':<52} none recorded "
                 f"{fraction(r.get('otel_span_share_dropped'))}, 1 in 100 {fraction(r.get('otel_span_share_sampled'))}, "
                 f"every request {fraction(r.get('otel_span_share_on'))}, "
                 f"1 in 100 sampled by callers {fraction(r.get('otel_span_share_callers'))}")
    lines.append(f"{'of the host CPU per request, in-memory tracer':<52} ZeroBridge's span code {fraction(r.get('span_wrapper_share_tracer_own'))}, "
                 f"the in-memory tracer's own span {fraction(r.get('tracer_span_share'))}")
    return lines


def fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def table(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [f"ZeroBridge bench  {machine['cpu_model']}  {machine['cores']} cores  {machine['kernel']}  "
             f"payload ~{results['config']['payload_bytes']} B, {results['config']['seconds']} s per run, "
             f"transports and security: best of {max(3, results['config']['repeat'])}, "
             f"other sections: --repeat {results['config']['repeat']}"]
    rows = [
        ("raw libzmq echo (limit), sequential", "raw_w1", True),
        ("raw libzmq echo, 64 in flight", "raw_w64", False),
        ("raw libzmq echo, 1024 in flight", "raw_w1024", False),
        ("the same, as awaited Swift calls (a floor)", "await_floor_w1024", False),
        ("ZeroBridge <- Swift peer, sequential", "swift_w1", True),
        ("ZeroBridge <- Swift peer, 64 in flight", "swift_w64", False),
        ("ZeroBridge <- Swift peer, 1024 in flight", "swift_w1024", False),
        ("pyzmq server <- pyzmq client, sequential", "pyzmq_server_w1", True),
        ("pyzmq server <- pyzmq client, 64 in flight", "pyzmq_server_w64", False),
        ("ZeroBridge <- pyzmq client, sequential", "zb_pyzmq_client_w1", True),
        ("ZeroBridge <- pyzmq client, 64 in flight", "zb_pyzmq_client_w64", False),
        ("ZeroBridge <- Python peer, sequential", "python_w1", True),
        ("ZeroBridge <- Python peer, 64 in flight", "python_w64", False),
        ("ZeroBridge <- Node peer, sequential", "node_w1", True),
        ("ZeroBridge <- Node peer, 64 in flight", "node_w64", False),
        ("progress host -> Swift peer (events)", "progress_swift", False),
        ("progress host -> Python peer (events)", "progress_python", False),
        ("progress host -> pyzmq consumer (events)", "progress_pyzmq", False),
        ("progress host -> Node peer (events)", "progress_node", False),
    ]
    for transport, t in results.get("transports", {}).items():
        lines.append("")
        lines.append(f"--- {transport}: rate, latency, cpu us per request server / client " + "-" * 50)
        for label, key, latency in rows:
            text = describe(t.get(key), latency)
            if key.startswith("progress") and "error" not in t.get(key, {"error": 1}):
                text += "  in order, none lost" if t[key].get("in_order_and_complete") else "  LOST OR REORDERED"
            lines.append(f"{label:<44} {text}")
        rss = [f"{who} {t[f'{key}_host_rss_after_mb']:.0f} MB" for who, key in
               (("Swift", "swift"), ("pyzmq client", "zb_pyzmq_client"), ("Python", "python"), ("Node", "node"))
               if f"{key}_host_rss_after_mb" in t]
        lines.append(f"{'host RSS after each client group':<44} {', '.join(rss)}")
    if "security" in results:
        lines += security_table(results)
    if "anchors" in results:
        lines += anchors_table(results)
    if "node_curve" in results:
        lines += node_curve_table(results["node_curve"])
    lines.append("")
    memory = results.get("memory", {})
    for key, label in (("inflight_10000", "host RSS, 10,000 requests in flight"), ("peers_1000", "host RSS, 1,000 connected peers")):
        m = memory.get(key, {})
        if "error" in m:
            lines.append(f"{label:<44} error: {m['error']}")
        elif m:
            lines.append(f"{label:<44} {m['loaded_rss_mb']:>8.1f} MB  (idle {m['idle_rss_mb']:.1f} MB, after {m['after_rss_mb']:.1f} MB)")
    codec = results.get("codec", {})
    if "per_second" in codec:
        lines.append(f"{'host codec alone (decode req + encode resp)':<44} {codec['per_second']:>11,.0f}/s")
    costs = results.get("metrics_costs")
    if costs:
        metrics = results["metrics"]
        for window in (1, 64):
            off, on = metrics["off"].get(f"swift_w{window}"), metrics["prometheus"].get(f"swift_w{window}")
            lines.append(f"{'metrics off, Swift peer, window ' + str(window):<44} {describe(off, False)}")
            lines.append(f"{'metrics Prometheus, Swift peer, window ' + str(window):<44} {describe(on, False)}  "
                         f"(rate lost {costs[f'w{window}_rate_lost']}, host cpu added {costs[f'w{window}_host_cpu_added']})")
        lines.append(f"{'metrics hooks per request, no backend':<44} {costs['hooks_none_ns']} ns  "
                     f"({costs['hooks_none_share_of_host_cpu']} of the host's CPU per request)")
        lines.append(f"{'metrics hooks per request, Prometheus':<44} {costs['hooks_prometheus_ns']} ns")
    journal = results.get("import_service", {})
    if "error" in journal:
        lines.append(f"{'import service':<44} error: {journal['error']}")
    elif journal:
        best = journal["best"]
        lines.append(f"{'import service, importFolder as a job':<44} {best['journal']['files_per_second']:>11,.0f} files/s  "
                     f"({journal['files']:,} files, journal in SQLite)")
        lines.append(f"{'import service, importFolder as a request':<44} {best['no_journal']['files_per_second']:>11,.0f} files/s  "
                     f"(no journal): the journal costs {journal['journal_cost']:.1%}")
    page = results.get("browser", {})
    if "error" in page:
        lines.append(f"{'Chromium page peer':<44} error: {page['error']}")
    elif page:
        lines.append("")
        lines.append("--- one keyed host: Node peer over tcp, Chromium page peer over WebSocket " + "-" * 40)
        for label, key, latency in (("Node peer, sequential", "node_w1", True), ("Chromium page peer, sequential", "browser_w1", True),
                                    ("  floor: page, bare WebSocket echo", "browser_floor_w1", True),
                                    ("Node peer, 64 in flight", "node_w64", False), ("Chromium page peer, 64 in flight", "browser_w64", False),
                                    ("  floor: page, bare WebSocket echo", "browser_floor_w64", False)):
            if key in page:
                lines.append(f"{label:<44} {describe(page.get(key), latency)}")
        python = page.get("python_client_p50_us")
        if python:
            lines.append(f"{'  a Python client, sequential p50':<44} bare echo {python['bare_echo']} us, the keyed host "
                         f"{python['host_keyed']} us: what the host's WebSocket path adds without Chromium")
        floors = page.get("floor_ratios", {})
        if floors:
            lines.append("  (floor: the same page through zerobridge-bench ws-raw-server, an echo on the host's WebSocket stack that "
                         "does no bridge work; floor / Node peer: " + ", ".join(f"{k.removeprefix('floor_over_node_')} {v}" for k, v in floors.items()) + ")")
    lines += telemetry_table(results)
    names = [("ZeroBridge/limit", "zerobridge_over_limit"), ("ZeroBridge/pyzmq", "zerobridge_over_pyzmq_baseline")]
    if results["ratios"]:
        lines.append("")
        lines.append("ratios                                         " + "   ".join(f"{t:>6}" for t in results["ratios"]))
    for prefix, group in names if results["ratios"] else []:
        first = next(iter(results["ratios"].values()))[group]
        for key in first:
            values = [results["ratios"][t][group][key] for t in results["ratios"]]
            cells = "   ".join(f"{v:>6.2f}" if v is not None else "     -" for v in values)
            lines.append(f"  {prefix + ' ' + key:<45}{cells}")
    lines.append("")
    lines.append("targets")
    for check in results["targets"]:
        mark = "MET   " if check["met"] else "MISSED"
        value = f"{check['value']:,}" if isinstance(check["value"], (int, float)) else str(check["value"])
        lines.append(f"  {mark} {check['target']:<70} {value:>10}  (goal {check['goal']})")
    if "wall_seconds" in results:
        lines.append("")
        lines.append(f"make bench wall time so far (build included): {results['wall_seconds']:.0f} s")
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build" / "release"))
    parser.add_argument("--seconds", type=float, default=1.0, help="measured time per throughput/latency figure")
    parser.add_argument("--out", default=str(ROOT / ".bench" / "results.json"))
    parser.add_argument("--transports", default="ipc,tcp")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="which parts to run (a subset for quick comparisons)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is kept")
    parser.add_argument("--started", type=float, help="epoch seconds when `make bench` started (for its wall time)")
    parser.add_argument("--security-peers", default="swift,python,node",
                        help="the security section's peers (one peer's rows alone, for quick comparisons)")
    parser.add_argument("--security-modes", default=",".join(SECURITY_MODES),
                        help="the security section's modes, run in this order")
    args = parser.parse_args()

    # 1,000 peers need more than 1,024 descriptors in the host and the load driver, which inherit this limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))

    bench = Bench(bin=Path(args.bin), seconds=args.seconds, repeat=max(1, args.repeat),
                  progress_events={"swift": 500_000, "python": 100_000, "node": 200_000},
                  security_peers=tuple(args.security_peers.split(",")), security_modes=tuple(args.security_modes.split(",")))
    sections = args.sections.split(",")
    if unknown := set(sections) - set(SECTIONS):
        raise SystemExit(f"unknown sections {sorted(unknown)}: choose from {','.join(SECTIONS)}")
    if unknown := set(bench.security_peers) - {"swift", "python", "node"}:
        raise SystemExit(f"unknown security peers {sorted(unknown)}: choose from swift,python,node")
    if unknown := set(bench.security_modes) - set(SECURITY_MODES):
        raise SystemExit(f"unknown security modes {sorted(unknown)}: choose from {','.join(SECURITY_MODES)}")
    # The telemetry and codec sections run zerobridge-bench alone; node-curve runs Node alone, and the security section
    # needs zerobridge-bench only for the Swift peer.
    needs_host = bool(set(sections) - {"telemetry", "codec", "node-curve"})
    needs_bench_tool = bool(set(sections) - {"node-curve", "security"}) or ("security" in sections and "swift" in bench.security_peers)
    for tool in (*(["zerobridge"] if needs_host else []), *(["zerobridge-bench"] if needs_bench_tool else []),
                 *(["import-host"] if "import" in sections else [])):
        if not (bench.bin / tool).exists():
            raise SystemExit(f"{bench.bin / tool} is missing: swift build -c release --product {tool}")
    if "anchors" in sections and not ANCHORS_BIN.exists():
        raise SystemExit(f"{ANCHORS_BIN} is missing: swift build -c release --package-path bench/anchors")
    results: dict[str, Any] = {
        "machine": machine(),
        "config": {"payload_bytes": 100, "seconds": args.seconds, "repeat": bench.repeat,
                   "progress_events": bench.progress_events,
                   "host": "zerobridge serve --conformance --max-in-flight 20000"},
        "transports": {},
    }
    print(f"bench on {results['machine']['cpu_model']}, {results['machine']['cores']} cores", file=sys.stderr)
    try:
        if "transports" in sections:
            for transport in args.transports.split(","):
                results["transports"][transport] = bench.transport(transport)
        if "security" in sections:
            with tempfile.TemporaryDirectory(prefix="zerobridge-bench-") as folder:
                results["security"] = bench.security(Path(folder))
            results["security_ratios"] = security_ratios(results["security"])
        if "anchors" in sections:
            with tempfile.TemporaryDirectory(prefix="zerobridge-bench-") as folder:
                zerobridge = zerobridge_rows_for_anchors(bench, results, Path(folder))
            results["anchors"] = bench.anchors()
            results["anchors_ratios"] = anchors_ratios(zerobridge, results["anchors"])
        if "node-curve" in sections:
            results["node_curve"] = bench.node_curve()
        if "memory" in sections:
            results["memory"] = bench.memory()
        if "codec" in sections:
            results["codec"] = bench.codec()
        if "metrics" in sections:
            results["metrics"] = bench.metrics()
            results["metrics_costs"] = metrics_costs(results["metrics"])
        if "telemetry" in sections:
            results["telemetry"] = bench.telemetry()
            results["telemetry_ratios"] = telemetry_ratios(results["telemetry"])
        if "import" in sections:
            try:
                results["import_service"] = import_service.measure(bench.bin)
            except (RuntimeError, OSError, KeyError, subprocess.CalledProcessError) as error:
                results["import_service"] = {"error": str(error)[:200]}
        if "browser" in sections:
            try:
                results["browser"] = browser_peer.measure(bench.bin, args.seconds, bench.repeat)
            except (RuntimeError, OSError, ImportError) as error:
                results["browser"] = {"error": str(error)[:200]}
    finally:
        for path in bench.socket_files:
            path.unlink(missing_ok=True)
    results["ratios"] = {t: ratios(v) for t, v in results["transports"].items()}
    results["targets"] = targets(results)
    if args.started:
        results["wall_seconds"] = round(time.time() - args.started, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(table(results))
    print(f"\nall figures: {out}")


if __name__ == "__main__":
    main()
