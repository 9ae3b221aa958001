"""How far one client's rate moves from run to run, and from one host process to another of the same build and mode.

    .venv/bin/python bench/profile/run_spread.py [--bin .build/release] [--client swift|swift-progress|python]
        [--window 1024] [--mode plain|keyed|curve+keyed] [--runs 10] [--hosts 0]

`--hosts 0` (the default): a fresh `zerobridge serve --conformance` (tcp, with a connection file) for every run.
`--hosts N`: N hosts side by side, the runs taking turns among them, `--runs` each; then each host's best and median.
Every run prints when it ended, its rate, the host's CPU a request (utime + stime from /proc/PID/stat over the run,
warm-up included) and the client's own. What this showed on the 2-CPU VM of bench/RESULTS.md (fourteenth sitting):
slow spells of several runs in a row with twice the client's CPU a call, and hosts of one build and mode that stay
apart for their whole life; `make bench` samples both sides of a ratio together, on fresh processes, because of it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from run import PY, SECURITY_MODES, Server, run_client  # noqa: E402


def client_command(args: argparse.Namespace, file: Path) -> list[str]:
    tool = str(Path(args.bin) / "zerobridge-bench")
    if args.client == "swift":
        return [tool, "peer", "--endpoint", str(file), "--window", str(args.window), "--seconds", "1"]
    if args.client == "swift-progress":
        return [tool, "progress", "--endpoint", str(file), "--events", "500000"]
    return [PY, str(ROOT / "bench" / "py_peer.py"), "echo", str(file), "--window", str(args.window), "--seconds", "1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--client", choices=("swift", "swift-progress", "python"), default="swift")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--mode", choices=SECURITY_MODES, default="plain")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=0, help="hosts side by side (0: a fresh host for every run)")
    args = parser.parse_args()

    def start(file: Path) -> Server:
        return Server("zerobridge host", [str(Path(args.bin) / "zerobridge"), "serve", "--conformance", "--endpoint",
                                          "tcp://127.0.0.1:*", "--max-in-flight", "20000", "--connection-file",
                                          str(file), *SECURITY_MODES[args.mode]])

    def measured(host: Server, file: Path) -> float | None:
        result = run_client(client_command(args, file), server=host)
        if "error" in result:
            print(f"{time.strftime('%H:%M:%S')}  {result['error']}")
            return None
        print(f"{time.strftime('%H:%M:%S')}  {result['per_second']:>11,.0f}/s  host {result['server_cpu_us_per_request']:.2f}"
              f"  client {result['cpu_us_per_request']:.2f} us a request", flush=True)
        return float(result["per_second"])

    with tempfile.TemporaryDirectory() as folder:
        if args.hosts == 0:
            rates = []
            for run in range(args.runs):
                file = Path(folder) / f"{run}.json"
                host = start(file)
                try:
                    rates.append(measured(host, file))
                finally:
                    host.stop()
            good = [r for r in rates if r is not None]
            if good:
                print(f"{len(good)} runs: {min(good):,.0f} to {max(good):,.0f}/s, median {statistics.median(good):,.0f}")
            return
        files = [Path(folder) / f"{index}.json" for index in range(args.hosts)]
        hosts = []
        try:
            for file in files:
                hosts.append(start(file))
            runs: list[list[float]] = [[] for _ in hosts]
            for _ in range(args.runs):
                for index, (host, file) in enumerate(zip(hosts, files)):
                    print(f"host {index}: ", end="")
                    rate = measured(host, file)
                    if rate is not None:
                        runs[index].append(rate)
            for index, rates in enumerate(runs):
                if rates:
                    print(f"host {index}: best {max(rates):,.0f}/s, median {statistics.median(rates):,.0f}, "
                          f"{len(rates)} runs")
        finally:
            for host in hosts:
                host.stop()


if __name__ == "__main__":
    main()
