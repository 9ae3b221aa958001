"""Before/after, interleaved: the host's CPU per request under one client, two builds started alternately.

    .venv/bin/python bench/profile/ab_host_cpu.py BEFORE_BIN AFTER_BIN [--mode plain|keyed|curve]
        [--client swift|python|node|pyzmq] [--window 64] [--rounds 3] [--seconds 2] [--python-before SRC] [--threads]

Each round starts a fresh `zerobridge serve --conformance` from each build in turn (with a connection file; keyed is
the default with one), runs the client through it, and reads the host's utime + stime from /proc/PID/stat around the
run. The Swift client is each build's own `zerobridge-bench peer`; `pyzmq` is `bench/py_raw_client.py`, the client
of `make bench`'s host-CPU targets; `--python-before` puts an older Python peer's
`src` first on PYTHONPATH for the before runs. Prints every run, then the best rate and the least CPU of each build:
on a loaded machine the CPU per request moves far less than the rate. `--threads` adds, per request, each busy host
thread's CPU, voluntary context switches and read/write system calls (/proc/PID/task/TID/{stat,status,io}): libzmq's
I/O thread and the thread that runs the host's loop signal each other through eventfd reads and writes (TCP goes
through sendto/recvfrom, which these counters leave out). The loop's thread shows under the name of the dispatch thread
that started it (`oot.default-qos`: Linux threads inherit their creator's name).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from run import SECURITY_MODES, cpu_seconds  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
MODES = {"plain": SECURITY_MODES["plain"], "keyed": SECURITY_MODES["keyed"], "curve": SECURITY_MODES["curve+keyed"]}


def thread_readings(pid: int) -> dict[str, tuple[str, float, int, int, int]]:
    """Per thread: its name, utime + stime (s), voluntary switches, read and write system calls."""
    readings = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            switches = int((task / "status").read_text().split("voluntary_ctxt_switches:")[1].split()[0])
            io = dict(line.split(": ") for line in (task / "io").read_text().splitlines())
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended
        readings[task.name] = (stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / TICKS,
                               switches, int(io["syscr"]), int(io["syscw"]))
    return readings


def thread_summary(before: dict, after: dict, requests: int) -> str:
    """The threads that used at least 1% of the run's host CPU, per request: us, switches, reads, writes."""
    deltas = [(after[tid][0], *(a - b for a, b in zip(after[tid][1:], before[tid][1:]))) for tid in after if tid in before]
    total = sum(d[1] for d in deltas) or 1
    return "  ".join(f"{name}: {cpu * 1e6 / requests:.1f} us, {switches / requests:.3f} sw, {reads / requests:.3f} r, "
                     f"{writes / requests:.3f} w" for name, cpu, switches, reads, writes in deltas if cpu >= total / 100)


def one_run(bin_dir: Path, args: argparse.Namespace, python_path: str | None) -> tuple[float, float, float, str] | None:
    with tempfile.TemporaryDirectory(prefix="zerobridge-ab-") as folder:
        connection = f"{folder}/connection.json"
        host = subprocess.Popen([str(bin_dir / "zerobridge"), "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                                 "--max-in-flight", "20000", "--connection-file", connection, *MODES[args.mode]],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            if not (host.stdout and host.stdout.readline().strip()):
                return None
            timed = ["--window", str(args.window), "--seconds", str(args.seconds)]
            command = {
                "swift": [str(bin_dir / "zerobridge-bench"), "peer", "--endpoint", connection, *timed],
                "python": [sys.executable, str(ROOT / "bench/py_peer.py"), "echo", connection, *timed],
                "node": ["node", str(ROOT / "bench/node_peer.mjs"), "echo", connection, *timed],
                "pyzmq": [sys.executable, str(ROOT / "bench/py_raw_client.py"), connection, *timed],
            }[args.client]
            env = {**os.environ, **({"PYTHONPATH": python_path} if python_path else {})}
            before, threads_before = cpu_seconds(host.pid), thread_readings(host.pid)
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
            used, threads_after = cpu_seconds(host.pid) - before, thread_readings(host.pid)
        finally:
            host.terminate()
            host.wait()
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        print(f"  failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    result = json.loads(lines[-1])
    counted = result["requests"] + result.get("warmup", 0)
    return (result["per_second"], used * 1e6 / counted, result["cpu_us_per_request"],
            thread_summary(threads_before, threads_after, counted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--mode", choices=MODES, default="plain")
    parser.add_argument("--client", choices=("swift", "python", "node", "pyzmq"), default="swift")
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--python-before", help="an older Python peer's src folder, for the before runs")
    parser.add_argument("--threads", action="store_true", help="per request, each busy host thread's CPU, switches, syscalls")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float, float, str]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name, bin_dir in (("before", args.before), ("after", args.after)):
            run = one_run(bin_dir, args, args.python_before if name == "before" else None)
            if run:
                runs[name].append(run)
                print(f"{name:6} {run[0]:>9,.0f}/s  host {run[1]:5.1f} us/req  client {run[2]:5.1f} us/req", flush=True)
                if args.threads:
                    print(f"         {run[3]}", flush=True)
    for name, done in runs.items():
        if done:
            print(f"{name:6} best {max(r[0] for r in done):,.0f}/s, least host CPU {min(r[1] for r in done):.1f} us/req, "
                  f"least client CPU {min(r[2] for r in done):.1f} us/req")


if __name__ == "__main__":
    main()
