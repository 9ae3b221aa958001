"""`make bench-security`: what signing (SPEC 3.1) and CURVE (SPEC 2.1) cost, Python peer to release host over
loopback tcp, in one run on the same machine.

    .venv/bin/python bench/security.py [--bin .build/release] [--seconds 2.0] [--out .bench/security.json]

Three hosts (`zerobridge serve --conformance`): plaintext and unsigned, keyed (the default once a host writes a
connection file), and CURVE with a key. Each is measured with the Python peer (bench/py_peer.py) for sequential
round trips (p50 latency) and 64 calls in flight (throughput). Prints a table and writes the figures to JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import stop_process

ROOT = Path(__file__).resolve().parent.parent
MODES = {
    "plain": ["--no-key"],
    "keyed": [],
    "curve+keyed": ["--curve"],
}


def measure(binary: Path, mode: str, options: list[str], seconds: float, folder: Path) -> dict[str, float]:
    connection_file = folder / f"{mode}.json"
    host = subprocess.Popen([str(binary), "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                             "--connection-file", str(connection_file), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert host.stdout is not None
        ready = host.stdout.readline()
        if not ready.startswith("zerobridge ready "):
            raise SystemExit(f"{mode}: the host did not start: {ready!r}")
        figures: dict[str, float] = {}
        for window in (1, 64):
            completed = subprocess.run([sys.executable, str(ROOT / "bench" / "py_peer.py"), "echo", str(connection_file),
                                        "--window", str(window), "--seconds", str(seconds)],
                                       capture_output=True, text=True, timeout=120, cwd=ROOT / "bench")
            if completed.returncode != 0:
                raise SystemExit(f"{mode}: the peer failed: {completed.stderr}")
            result = json.loads(completed.stdout.splitlines()[-1])
            if window == 1:
                figures["sequential_per_second"] = result["per_second"]
                figures["p50_us"] = result.get("p50_us", 0.0)
            else:
                figures["window64_per_second"] = result["per_second"]
        return figures
    finally:
        stop_process(host, grace=15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(ROOT / ".build" / "release"))
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--out", default=str(ROOT / ".bench" / "security.json"))
    args = parser.parse_args()
    binary = Path(args.bin) / "zerobridge"
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="zb-bench-security-") as folder:
        for mode, options in MODES.items():
            results[mode] = measure(binary, mode, options, args.seconds, Path(folder))
    print(f"{'mode':<14}{'sequential/s':>14}{'p50 us':>10}{'64 in flight/s':>16}")
    for mode, figures in results.items():
        print(f"{mode:<14}{figures['sequential_per_second']:>14.0f}{figures['p50_us']:>10.0f}"
              f"{figures['window64_per_second']:>16.0f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
