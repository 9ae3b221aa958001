"""Fixtures for the import service's end-to-end tests: real processes (the built import host, the Node ETL peer,
the front-ends) over loopback tcp, each test with its own database."""

from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import time
from typing import Any, Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from processes import Process  # noqa: E402  (shared with demo.py)
BIN = pathlib.Path(os.environ.get("SWIFT_BIN", ROOT / ".build" / "debug"))
IMPORT_HOST = BIN / "import-host"
ZEROBRIDGE = BIN / "zerobridge"
PY = sys.executable


class ImportHost:
    def __init__(self, workdir: pathlib.Path, import_root: pathlib.Path, *extra: str, signed: bool = True,
                 environment: dict[str, str] | None = None) -> None:
        """`environment`: variables to set for the host process, beside this process's own."""
        if not IMPORT_HOST.exists():
            raise AssertionError(f"{IMPORT_HOST} is missing: build it first (make build, or swift build --product import-host)")
        self.database = workdir / "import.sqlite"
        self.connection_file = workdir / "import-host.json"
        self.journal = workdir / "import-jobs.sqlite"
        self.process = Process([str(IMPORT_HOST), "--database", str(self.database), "--journal", str(self.journal),
                                "--connection-file", str(self.connection_file), "--import-root", str(import_root),
                                *([] if signed else ["--no-key"]), *extra],
                               env={**os.environ, **(environment or {})})
        self.endpoint = self.process.wait_for_line("zerobridge ready ").removeprefix("zerobridge ready ")
        self.etl: Process | None = None

    def start_etl(self, *extra: str) -> None:
        self.etl = Process(["node", "examples/etl-peer/etl-peer.mjs", "--connect", str(self.connection_file), *extra])
        self.etl.wait_for_line("etl ready")

    def kill_etl(self) -> None:
        """SIGKILL, as a crash would: no bye, calls in flight lost."""
        assert self.etl is not None
        self.etl.kill()

    def wait_for_stats(self, condition: Any, timeout: float = 60) -> dict[str, Any]:
        """Polls `stats` until `condition(stats)` holds; fails with the last stats after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.call_ok("stats")
            if condition(stats):
                return stats
            if time.monotonic() > deadline:
                raise AssertionError(f"stats did not reach the condition within {timeout} s: {stats}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.etl is not None:
            self.etl.stop()
        self.process.stop()

    def call(self, action: str, payload: Any = None) -> subprocess.CompletedProcess[str]:
        """`zerobridge call`, as a person poking the host would."""
        return subprocess.run([str(ZEROBRIDGE), "call", action, json.dumps(payload), "--connection-file", str(self.connection_file)],
                              capture_output=True, text=True, timeout=60)

    def call_ok(self, action: str, payload: Any = None) -> Any:
        completed = self.call(action, payload)
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout.splitlines()[-1])

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)


@pytest.fixture
def host(tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImportHost]:
    """An import host with no ETL peer yet (call start_etl), importing only from this session's temporary folders."""
    started = ImportHost(tmp_path, import_root=tmp_path_factory.getbasetemp())
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def host_with_etl(host: ImportHost) -> ImportHost:
    host.start_etl()
    return host


@pytest.fixture(scope="session")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, dict[str, Any]]:
    """A small generated folder (every kind of file, broken ones included) and its manifest."""
    folder = tmp_path_factory.mktemp("data") / "inbox"
    subprocess.run([PY, "examples/generate_data.py", str(folder), "--files", "120", "--seed", "5", "--broken", "0.1"],
                   cwd=ROOT, check=True, capture_output=True)
    return folder, json.loads((folder / ".manifest.json").read_text())


def frontend_command(kind: str, folder: pathlib.Path, host: ImportHost, *extra: str) -> list[str]:
    if kind == "python":
        # Each host (each test) has its own state file, beside its connection file.
        return [PY, "examples/frontends/import.py", str(folder), "--connect", str(host.connection_file),
                "--state-file", str(host.connection_file.with_name("import-py.state.json")), *extra]
    return ["node", "examples/frontends/import.mjs", str(folder), "--connect", str(host.connection_file), *extra]


def run_frontend_json(kind: str, folder: pathlib.Path, host: ImportHost, *extra: str) -> tuple[int, dict[str, Any]]:
    completed = subprocess.run(frontend_command(kind, folder, host, "--json", *extra), cwd=ROOT, capture_output=True,
                               text=True, timeout=120)
    assert completed.stdout.strip(), f"no output; stderr: {completed.stderr}"
    return completed.returncode, json.loads(completed.stdout.strip().splitlines()[-1])


def good_files(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: entry for name, entry in manifest["files"].items() if "records" in entry}


def sent_to_etl_bytes(manifest: dict[str, Any]) -> int:
    """The bytes of every file the host hands to the ETL peer: all but the unsupported ones."""
    return sum(entry["bytes"] for entry in manifest["files"].values() if entry.get("error") != "unsupported")


def expected_errors(manifest: dict[str, Any]) -> dict[str, str]:
    return {name: entry["error"] for name, entry in manifest["files"].items() if "error" in entry}


def stored_files(host: ImportHost) -> dict[str, tuple[int, int]]:
    """name -> (records the file row says, record rows actually there)."""
    with host.db() as db:
        rows = db.execute("""
            SELECT file.name, file.records, (SELECT count(*) FROM record WHERE record.fileId = file.id) FROM file
        """).fetchall()
    return {name: (declared, actual) for name, declared, actual in rows}
