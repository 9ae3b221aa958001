"""Runs the fuzzers of fuzz/ for a bounded time each and prints what they did (`make fuzz`, part of `make soak`).

    python fuzz/run.py [--seconds 60] [NAME ...]      # fuzz; exit 1 if any fuzzer found something
    python fuzz/run.py --minimize [NAME ...]           # rebuild fuzz/corpus/NAME from fuzz/seed.py's seeds (+ finds)

Each fuzzer starts from its committed corpus, fuzz/corpus/NAME, and writes what it adds to .build-fuzz/work/NAME
(not committed: `--minimize` folds it into the corpus). A finding (crash, failed check, timeout, memory past 2 GB)
is saved as .build-fuzz/crashes/NAME-crash-<sha1>: fix the decoder, add a regression test in that language's suite,
and keep the input in the corpus (`cp` it into fuzz/corpus/NAME), where every test run replays it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".build-fuzz"
CORPUS = ROOT / "fuzz" / "corpus"
PYTHON = os.environ.get("ZEROBRIDGE_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
# libFuzzer's -merge runs the fuzzer again by its argv[0]: the atheris script, by its shebang, must find this Python.
ENVIRONMENT = {**os.environ, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

# name -> (command, whether it takes libFuzzer's flags). The Swift targets are built by `make fuzz`.
FUZZERS: dict[str, tuple[list[str], bool]] = {
    "swift-json": ([str(BUILD / "swift-json")], True),
    "swift-message": ([str(BUILD / "swift-message")], True),
    "python-decoder": ([str(ROOT / "fuzz" / "python" / "fuzz_wire.py")], True),
    "node-zmtp": (["node", str(ROOT / "fuzz" / "node" / "fuzz-zmtp.mjs")], False),
}


def fuzz(name: str, seconds: int) -> dict[str, str]:
    command, libfuzzer = FUZZERS[name]
    work, crashes = BUILD / "work" / name, BUILD / "crashes"
    work.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    if libfuzzer:
        arguments = [f"-max_total_time={seconds}", "-print_final_stats=1", "-timeout=10", "-rss_limit_mb=2048",
                     "-max_len=65536", f"-artifact_prefix={crashes}/{name}-", str(work), str(CORPUS / name)]
    else:
        arguments = ["--seconds", str(seconds), "--artifacts", str(crashes), "--new", str(work), str(CORPUS / name)]
    started = time.monotonic()
    # A hang is a finding too: libFuzzer's -timeout catches one input; this catches the rest.
    run = subprocess.run([*command, *arguments], cwd=ROOT, env=ENVIRONMENT, capture_output=True, text=True, errors="replace",
                         timeout=seconds + 300)
    output = run.stdout + run.stderr
    stats = dict(re.findall(r"^stat::(\w+):\s+(\S+)", output, re.MULTILINE))
    stats["seconds"] = f"{time.monotonic() - started:.0f}"
    stats["corpus"] = str(len(list((CORPUS / name).iterdir())))
    if run.returncode != 0:
        stats["finding"] = "\n".join(line for line in output.splitlines() if not line.startswith(("#", "stat::")))[-4000:]
    return stats


def minimize(name: str) -> None:
    """fuzz/corpus/NAME becomes the smallest set of the seeds, the old corpus and the work folder that covers all."""
    command, libfuzzer = FUZZERS[name]
    with tempfile.TemporaryDirectory() as temporary:
        seeds = Path(temporary) / "seeds"
        subprocess.run([PYTHON, str(ROOT / "fuzz" / "seed.py"), str(seeds)], check=True, capture_output=True)
        sources = [seeds / name, *(p for p in (CORPUS / name, BUILD / "work" / name) if p.is_dir())]
        merged = Path(temporary) / "merged"
        merged.mkdir()
        if libfuzzer:
            subprocess.run([*command, "-merge=1", "-max_len=65536", "-timeout=10", str(merged), *map(str, sources)],
                           cwd=ROOT, env=ENVIRONMENT, check=True, capture_output=True)
        else:  # the seeds are all kept: the behaviours it tells apart are too coarse to choose among them
            subprocess.run([*command, "--minimize", str(merged), *map(str, sources)], cwd=ROOT, check=True,
                           capture_output=True)
        shutil.rmtree(CORPUS / name, ignore_errors=True)
        shutil.copytree(merged, CORPUS / name)
    print(f"{name}: {len(list((CORPUS / name).iterdir()))} inputs in fuzz/corpus/{name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--minimize", action="store_true")
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(FUZZERS) + " (default: all)")
    options = parser.parse_args()
    names = options.names or list(FUZZERS)
    unknown = [name for name in names if name not in FUZZERS]
    if unknown:
        parser.error(f"no fuzzer named {', '.join(unknown)} (there are {', '.join(FUZZERS)})")
    if options.minimize:
        for name in names:
            minimize(name)
        return 0
    print(f"{'fuzzer':<16}{'runs':>12}{'execs/s':>10}{'new':>6}{'corpus':>8}{'peak MB':>9}{'s':>5}  result")
    failed = False
    for name in names:
        stats = fuzz(name, options.seconds)
        finding = stats.get("finding")
        failed |= finding is not None
        print(f"{name:<16}{stats.get('number_of_executed_units', '?'):>12}{stats.get('average_exec_per_sec', '?'):>10}"
              f"{stats.get('new_units_added', '?'):>6}{stats['corpus']:>8}{stats.get('peak_rss_mb', '?'):>9}"
              f"{stats['seconds']:>5}  {'FOUND SOMETHING' if finding else 'ok'}", flush=True)
        if finding:
            print(finding, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
