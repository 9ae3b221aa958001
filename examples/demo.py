"""`make demo`: the import service end to end.

Generates sample data under .demo/data, starts the import host (Swift) and the Node ETL peer, imports one
folder through the Python front-end and another through the Node front-end, shows Ctrl-C cancelling an import
cleanly, pokes the host with `zerobridge call`, prints where the database is, and stops what it started.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
BIN = pathlib.Path(os.environ.get("SWIFT_BIN", ROOT / ".build" / "debug"))
PY = sys.executable
DATABASE = DEMO / "import.sqlite"
CONNECTION_FILE = DEMO / "import-host.json"


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def start(command: list[str], ready_prefix: str) -> subprocess.Popen[str]:
    """Starts a process and waits for its one-line ready message."""
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(ready_prefix):
        process.kill()
        raise SystemExit(f"{command[0]} did not start (said {line!r})")
    print(line, flush=True)
    return process


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(command: list[str]) -> int:
    print("$ " + shlex.join(str(part) for part in command), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def interrupt_after(command: list[str], seconds: float) -> int:
    """Runs a front-end and sends it SIGINT, as Ctrl-C would, once it has been importing for a while."""
    print("$ " + shlex.join(command) + f"    # Ctrl-C after {seconds} s", flush=True)
    process = subprocess.Popen(command, cwd=ROOT)
    time.sleep(seconds)
    process.send_signal(signal.SIGINT)
    return process.wait(timeout=60)


def main() -> int:
    started = time.monotonic()
    DEMO.mkdir(exist_ok=True)
    for stale in DEMO.glob("import.sqlite*"):
        stale.unlink()  # a fresh database, so the figures below are this run's

    step("sample data: two folders of CSV, JSON and Markdown, a few files broken on purpose")
    batch_1, batch_2 = DEMO / "data" / "batch-1", DEMO / "data" / "batch-2"
    run([PY, "examples/generate_data.py", str(batch_1), "--files", "2500", "--seed", "42"])
    run([PY, "examples/generate_data.py", str(batch_2), "--files", "1500", "--seed", "7"])

    step("the import host (Swift, GRDB over SQLite) and the ETL peer (Node, parses Markdown)")
    host = start([str(BIN / "import-host"), "--database", str(DATABASE), "--connection-file", str(CONNECTION_FILE),
                  "--import-root", str(DEMO / "data")],
                 "zerobridge ready ")
    processes = [host]
    try:
        processes.append(start(["node", "examples/etl-peer/etl-peer.mjs", "--connect", str(CONNECTION_FILE)], "etl ready"))
        frontend_failures = 0

        step("the Python front-end imports batch-1")
        frontend_failures += run([PY, "examples/frontends/import.py", str(batch_1.relative_to(ROOT))]) != 0

        step("the Node front-end imports batch-2")
        frontend_failures += run(["node", "examples/frontends/import.mjs", str(batch_2.relative_to(ROOT)),
                                  "--search", "saffron harbor"]) != 0

        step("Ctrl-C: the Python front-end re-imports batch-1, slowed down, and is interrupted")
        status = interrupt_after([PY, "examples/frontends/import.py", str(batch_1.relative_to(ROOT)),
                                  "--delay-per-file-ms", "2"], 1.5)
        frontend_failures += status != 130

        step("poking the host by hand")
        run([str(BIN / "zerobridge"), "call", "search", '{"query": "lighthouse espresso", "limit": 2}',
             "--connection-file", str(CONNECTION_FILE)])
    finally:
        step("stopping the ETL peer and the host")
        for process in reversed(processes):
            stop(process)

    step("done")
    print(f"the database: {DATABASE} (open it with: sqlite3 {DATABASE.relative_to(ROOT)})")
    print(f"the sample data: {DEMO / 'data'}")
    print(f"demo wall time: {time.monotonic() - started:.1f} s")
    return 1 if frontend_failures else 0


if __name__ == "__main__":
    if not (BIN / "import-host").exists():
        sys.exit(f"{BIN / 'import-host'} is missing: run `swift build --product import-host` (make demo does)")
    if shutil.which("node") is None:
        sys.exit("node is missing: make demo installs it (make deps-system)")
    sys.exit(main())
