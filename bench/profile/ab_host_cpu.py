"""Before/after, interleaved: the host's CPU per request under one client, two builds started alternately.

    .venv/bin/python bench/profile/ab_host_cpu.py BEFORE_BIN AFTER_BIN [--mode plain|keyed|curve]
        [--client swift|python|node] [--window 64] [--rounds 3] [--seconds 2] [--python-before SRC]

Each round starts a fresh `zerobridge serve --conformance` from each build in turn (with a connection file; keyed is
the default with one), runs the client through it, and reads the host's utime + stime from /proc/PID/stat around the
run. The Swift client is each build's own `zerobridge-bench peer`; `--python-before` puts an older Python peer's
`src` first on PYTHONPATH for the before runs. Prints every run, then the best rate and the least CPU of each build:
on a loaded machine the CPU per request moves far less than the rate.
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

MODES = {"plain": SECURITY_MODES["plain"], "keyed": SECURITY_MODES["keyed"], "curve": SECURITY_MODES["curve+keyed"]}


def one_run(bin_dir: Path, args: argparse.Namespace, python_path: str | None) -> tuple[float, float, float] | None:
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
            }[args.client]
            env = {**os.environ, **({"PYTHONPATH": python_path} if python_path else {})}
            before = cpu_seconds(host.pid)
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
            used = cpu_seconds(host.pid) - before
        finally:
            host.terminate()
            host.wait()
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        print(f"  failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    result = json.loads(lines[-1])
    counted = result["requests"] + result.get("warmup", 0)
    return result["per_second"], used * 1e6 / counted, result["cpu_us_per_request"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--mode", choices=MODES, default="plain")
    parser.add_argument("--client", choices=("swift", "python", "node"), default="swift")
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--python-before", help="an older Python peer's src folder, for the before runs")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name, bin_dir in (("before", args.before), ("after", args.after)):
            run = one_run(bin_dir, args, args.python_before if name == "before" else None)
            if run:
                runs[name].append(run)
                print(f"{name:6} {run[0]:>9,.0f}/s  host {run[1]:5.1f} us/req  client {run[2]:5.1f} us/req", flush=True)
    for name, done in runs.items():
        if done:
            print(f"{name:6} best {max(r[0] for r in done):,.0f}/s, least host CPU {min(r[1] for r in done):.1f} us/req, "
                  f"least client CPU {min(r[2] for r in done):.1f} us/req")


if __name__ == "__main__":
    main()
