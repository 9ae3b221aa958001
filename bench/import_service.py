"""The import service with and without its job journal: what journaling costs in files per second (issue 16).

    .venv/bin/python bench/import_service.py [--bin .build/release] [--files 2000] [--runs 3]

Each run starts a fresh release `import-host` on a fresh database, with `--journal` (importFolder is a job: its
progress and result are written to SQLite) or `--no-jobs` (an ordinary request), launching its Node ETL peer
(`--etl-command`); once the peer is up, a Python peer imports the same generated folder once and the run's files per
second are counted from the caller's side (start to result, so the job's own start and attach are included). The
modes alternate, so a machine that gets busier or quieter drifts both alike; the best run of each mode is kept.
`make bench` runs this too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import stop_process

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
MODES = {"journal": lambda folder: ["--journal", str(folder / "jobs.sqlite")], "no_journal": lambda folder: ["--no-jobs"]}


class ImportService:
    """A release import host on a database of its own, and its ETL peer, as `make demo` runs them."""

    def __init__(self, bin_dir: Path, data: Path, folder: Path, mode: str) -> None:
        self.connection_file = folder / "import-host.json"
        self.processes: list[subprocess.Popen[str]] = []
        self._start([str(bin_dir / "import-host"), "--database", str(folder / "import.sqlite"),
                     "--connection-file", str(self.connection_file), "--import-root", str(data),
                     "--etl-command", "node examples/etl-peer/etl-peer.mjs", *MODES[mode](folder)], "zerobridge ready ")

    def _start(self, command: list[str], ready: str) -> None:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(ready):
            self.stop()
            raise RuntimeError(f"{command[0]} did not start (it said {line!r})")

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_process(process, grace=15)


async def import_once(connection_file: Path, data: Path) -> dict[str, Any]:
    import zerobridge

    async with zerobridge.connect(str(connection_file), name="bench-import") as peer:
        deadline = time.monotonic() + 60
        while not (await peer.call("stats"))["etl"]["connected"]:  # the host launched it; not timed
            if time.monotonic() > deadline:
                raise RuntimeError("the ETL peer the host launched was not up within 60 s")
            await asyncio.sleep(0.05)
        started = time.perf_counter()
        result = await peer.call("importFolder", {"path": str(data)}, timeout=None)
        seconds = time.perf_counter() - started
    return {"files": result["filesTotal"], "failed": result["filesFailed"], "records": result["records"],
            "seconds": round(seconds, 3), "files_per_second": round(result["filesTotal"] / seconds, 1)}


def measure(bin_dir: Path, files: int = 2000, runs: int = 3) -> dict[str, Any]:
    """Files per second with and without the journal, the best of `runs` alternating runs each, and the cost."""
    data = ROOT / ".bench" / f"import-data-{files}"
    if not (data / ".manifest.json").exists():  # the same seed gives the same files: made once, kept in .bench
        subprocess.run([PY, "examples/generate_data.py", str(data), "--files", str(files), "--seed", "16"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
    figures: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for _ in range(runs):
        for mode in MODES:
            with tempfile.TemporaryDirectory(prefix=f"zerobridge-bench-import-{mode}-") as folder:
                service = ImportService(bin_dir, data, Path(folder), mode)
                try:
                    figures[mode].append(asyncio.run(import_once(service.connection_file, data)))
                finally:
                    service.stop()
            print(f"  import service, {mode}: {figures[mode][-1]['files_per_second']:,.0f} files/s", file=sys.stderr)
    best = {mode: max(runs_, key=lambda r: r["files_per_second"]) for mode, runs_ in figures.items()}
    cost = 1 - best["journal"]["files_per_second"] / best["no_journal"]["files_per_second"]
    return {"files": files, "runs": figures, "best": best, "journal_cost": round(cost, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build" / "release"))
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(Path(args.bin), args.files, args.runs), indent=2))


if __name__ == "__main__":
    main()
