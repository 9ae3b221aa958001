"""Counts what one request costs the ZeroBridge host: allocations, thread hand-offs, context switches.

    .venv/bin/python bench/profile/request_path.py [--bin .build/release] [--requests 20000]

Builds counters.c (gcc) into an LD_PRELOAD library, starts `zerobridge serve --conformance` with it,
warms up, then reads the host's counters before and after N echo requests from each client shape:
the Swift BridgePeer (sends timeout_ms) sequentially and with 64 in flight, and the hand-written pyzmq
client (no timeout_ms) sequentially. Hand-offs: enqueues onto Swift's cooperative pool (socket thread ->
handler task) plus socket-thread wakes (handler task -> socket thread, through its eventfd); libzmq's own
mailbox wakes (application thread <-> libzmq I/O thread) are counted apart.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def build_counters() -> Path:
    library = Path(tempfile.gettempdir()) / f"zerobridge-counters-{os.getuid()}.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(HERE / "counters.c"), "-ldl"], check=True)
    return library


def read_counters(host: subprocess.Popen[str]) -> dict[str, int]:
    host.send_signal(signal.SIGUSR1)
    assert host.stderr is not None
    while True:
        line = host.stderr.readline()
        if not line:
            raise RuntimeError("the host exited")
        if line.startswith("COUNTS"):
            counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}
            break
    switches = 0
    for task in Path(f"/proc/{host.pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                switches += int(line.split()[1])
    counts["context_switches"] = switches
    counts["threads"] = len(list(Path(f"/proc/{host.pid}/task").iterdir()))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build" / "release"))
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    library = build_counters()
    bench = str(Path(args.bin) / "zerobridge-bench")
    socket = Path(tempfile.gettempdir()) / f"zerobridge-profile-{os.getpid()}.sock"
    endpoint = f"ipc://{socket}"
    shapes = [
        ("Swift peer, sequential", [bench, "peer", "--endpoint", endpoint, "--window", "1"]),
        ("Swift peer, 64 in flight", [bench, "peer", "--endpoint", endpoint, "--window", "64"]),
        ("pyzmq client, sequential", [sys.executable, str(ROOT / "bench" / "py_raw_client.py"), endpoint, "--window", "1"]),
    ]
    print(f"{'per request, host process':<28} {'allocs':>7} {'frees':>7} {'pool enqueues':>14} {'socket-thread wakes':>20} "
          f"{'libzmq wakes':>13} {'ctx switches':>13}")
    for label, client in shapes:
        host = subprocess.Popen([str(Path(args.bin) / "zerobridge"), "serve", "--conformance", "--endpoint", endpoint,
                                 "--max-in-flight", "20000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "LD_PRELOAD": str(library)})
        try:
            assert host.stdout is not None
            host.stdout.readline()
            limits = ["--seconds", "600", "--warmup", "1"]
            subprocess.run([*client, "--max", "2000", *limits], check=True, capture_output=True)
            before = read_counters(host)
            subprocess.run([*client, "--max", str(args.requests), *limits], check=True, capture_output=True)
            after = read_counters(host)
        finally:
            host.send_signal(signal.SIGTERM)
            host.wait(10)
        # The second client also connects, says hello and bye: a few dozen allocations over 20,000 requests.
        per = {key: (after[key] - before[key]) / args.requests for key in ("malloc", "free", "enqueues", "wakes", "zmqwakes", "context_switches")}
        print(f"{label:<28} {per['malloc']:>7.2f} {per['free']:>7.2f} {per['enqueues']:>14.2f} {per['wakes']:>20.2f} "
              f"{per['zmqwakes']:>13.2f} {per['context_switches']:>13.2f}")
        time.sleep(0.2)
    socket.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
