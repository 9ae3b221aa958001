"""What keyed costs a Python client, sequential: the hand-written pyzmq client against the Python peer.

    .venv/bin/python bench/profile/python_keyed_floor.py [--bin .build/release] [--turns 3] [--seconds 3] [--pin CPU]

A plain and a keyed `zerobridge serve --conformance` run side by side; in turns, the hand-written client
(`bench/py_raw_client.py`: a blocking DEALER that signs and checks with the peer's own `signing` module, nothing more)
and the Python peer (`bench/py_peer.py`, asyncio) each call `echo` one at a time against both. Prints every run, then
each client's keyed / plain from its best runs and from its median runs. `--pin CPU` runs every process on that one
CPU, which takes the two CPUs' wake-ups out of the figures and leaves the work.

The two clients do the same keyed work per call (one MAC made, one checked, with the same code); what differs is the
code around it. So the hand-written client's keyed / plain is the floor for a Python client on this machine, and the
gap to the peer's is what the peer's other per-call work does to it (run cold, the same instructions take longer).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from run import SECURITY_MODES  # noqa: E402

CLIENTS = {"hand-written": "py_raw_client.py", "peer": "py_peer.py"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--pin", help="one CPU for every process (taskset -c CPU)")
    args = parser.parse_args()
    pin = ["taskset", "-c", args.pin] if args.pin is not None else []
    python = sys.executable
    hosts: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        try:
            for mode in ("plain", "keyed"):
                file = Path(folder) / f"{mode}.json"
                host = subprocess.Popen(
                    [*pin, f"{args.bin}/zerobridge", "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                     "--connection-file", str(file), *SECURITY_MODES[mode]],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                hosts[mode] = (host, file)
                assert host.stdout is not None
                if not host.stdout.readline():  # the host prints its endpoint once it is bound
                    raise SystemExit(f"the {mode} host did not start (exit status {host.wait()})")
            for _ in range(args.turns):
                for client, script in CLIENTS.items():
                    for mode, (_, file) in hosts.items():
                        run = subprocess.run(
                            [*pin, python, str(ROOT / "bench" / script), *(["echo"] if client == "peer" else []),
                             str(file), "--window", "1", "--seconds", str(args.seconds)],
                            capture_output=True, text=True, cwd=ROOT / "bench", check=True)
                        result = json.loads(run.stdout.strip().splitlines()[-1])
                        rates.setdefault((client, mode), []).append(result["per_second"])
                        print(f"{client:<12} {mode:<5} {result['per_second']:8,.0f}/s  p50 {result['p50_us']:6.1f} us  "
                              f"client CPU {result['cpu_us_per_request']:5.1f} us a call", flush=True)
        finally:
            for host, _ in hosts.values():
                host.terminate()
                host.wait()
    for client in CLIENTS:
        plain, keyed = rates[(client, "plain")], rates[(client, "keyed")]
        print(f"{client}: keyed / plain {max(keyed) / max(plain):.3f} (best runs), "
              f"{statistics.median(keyed) / statistics.median(plain):.3f} (median runs)")


if __name__ == "__main__":
    main()
