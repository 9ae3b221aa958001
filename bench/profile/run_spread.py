"""How far one client's rate moves from run to run, and from one host process to another of the same build and mode.

    .venv/bin/python bench/profile/run_spread.py [--bin .build/release] [--client swift|swift-progress|python|node]
        [--window 1024] [--mode plain|keyed|curve+keyed | --modes plain,keyed] [--runs 10] [--hosts 0]

`--hosts 0` (the default): a fresh `zerobridge serve --conformance` (tcp, with a connection file) for every run.
`--hosts N`: N hosts side by side, the runs taking turns among them, `--runs` each; then each host's best and median.
`--modes A,B`: fresh hosts in mode A and B taking turns, `--runs` each, as `make bench`'s security section runs them;
then each mode's spread, and how often the best of 3 (and of 5) runs of B over the best of as many of A reaches 0.9
when the runs are drawn from those measured (the target's ratio: is a miss the code's cost or a draw?).
Every run prints when it ended, its rate, the host's CPU a request (utime + stime from /proc/PID/stat over the run,
warm-up included) and the client's own. What this showed on the 2-CPU VM of bench/RESULTS.md (fourteenth sitting):
slow spells of several runs in a row with twice the client's CPU a call, and hosts of one build and mode that stay
apart for their whole life; `make bench` samples both sides of a ratio together, on fresh processes, because of it.
"""

from __future__ import annotations

import argparse
import random
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
    if args.client == "node":
        return ["node", str(ROOT / "bench" / "node_peer.mjs"), "echo", str(file), "--window", str(args.window),
                "--seconds", "1"]
    return [PY, str(ROOT / "bench" / "py_peer.py"), "echo", str(file), "--window", str(args.window), "--seconds", "1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--client", choices=("swift", "swift-progress", "python", "node"), default="swift")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--mode", choices=SECURITY_MODES, default="plain")
    parser.add_argument("--modes", help="two modes, comma-separated, taking turns on fresh hosts (A,B: B / A)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=0, help="hosts side by side (0: a fresh host for every run)")
    args = parser.parse_args()

    def start(file: Path, mode: str = args.mode) -> Server:
        return Server("zerobridge host", [str(Path(args.bin) / "zerobridge"), "serve", "--conformance", "--endpoint",
                                          "tcp://127.0.0.1:*", "--max-in-flight", "20000", "--connection-file",
                                          str(file), *SECURITY_MODES[mode]])

    def measured(host: Server, file: Path) -> float | None:
        result = run_client(client_command(args, file), server=host)
        if "error" in result:
            print(f"{time.strftime('%H:%M:%S')}  {result['error']}")
            return None
        print(f"{time.strftime('%H:%M:%S')}  {result['per_second']:>11,.0f}/s  host {result['server_cpu_us_per_request']:.2f}"
              f"  client {result['cpu_us_per_request']:.2f} us a request", flush=True)
        return float(result["per_second"])

    with tempfile.TemporaryDirectory() as folder:
        if args.modes:
            modes = args.modes.split(",")
            if len(modes) != 2 or any(mode not in SECURITY_MODES for mode in modes):
                parser.error(f"--modes: two of {', '.join(SECURITY_MODES)}, comma-separated")
            by_mode: dict[str, list[float]] = {mode: [] for mode in modes}
            for run in range(args.runs):
                for mode in modes:
                    file = Path(folder) / f"{mode}-{run}.json"
                    host = start(file, mode)
                    try:
                        print(f"{mode:<11} ", end="")
                        rate = measured(host, file)
                    finally:
                        host.stop()
                    if rate is not None:
                        by_mode[mode].append(rate)
            compare_modes(by_mode, modes)
            return
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


def compare_modes(by_mode: dict[str, list[float]], modes: list[str]) -> None:
    """Each mode's spread; the ratio of medians; how often best-of-N ratios drawn from these runs reach 0.9."""
    first, second = (by_mode[mode] for mode in modes)
    for mode in modes:
        rates = by_mode[mode]
        if rates:
            print(f"{mode}: {len(rates)} runs, {min(rates):,.0f} to {max(rates):,.0f}/s, "
                  f"median {statistics.median(rates):,.0f}")
    if not first or not second:
        return
    print(f"{modes[1]} / {modes[0]}: medians {statistics.median(second) / statistics.median(first):.3f}, "
          f"bests {max(second) / max(first):.3f}")
    draw = random.Random(1)
    for turns in (3, 5):
        if min(len(first), len(second)) < turns:
            continue
        ratios = [max(draw.sample(second, turns)) / max(draw.sample(first, turns)) for _ in range(20_000)]
        reached = sum(ratio >= 0.9 for ratio in ratios) / len(ratios)
        print(f"best of {turns} / best of {turns}, drawn from these runs: >= 0.9 in {reached:.0%} of 20,000 draws, "
              f"median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
