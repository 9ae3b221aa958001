"""A real session with the import service, recorded by `zerobridge record`, replays green against a fresh import host:
users turn a session into a regression test this way (issue 7).

The session is `zerobridge call importFolder` (a request that starts the job and streams it). The front-ends start
the job with `$job.start` and attach to it by its id, which a fresh host draws anew, and a recording does not yet
capture a job id from one answer to match it in the next request: their sessions do not replay."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from conftest import ROOT, ZEROBRIDGE, ImportHost, Process


def test_a_recorded_import_session_replays_green(tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory,
                                                 dataset: tuple[pathlib.Path, dict]) -> None:
    # Recordings and replays speak unsigned (SPEC 14.2), so this import host runs without a connection key.
    roots = tmp_path_factory.getbasetemp()
    folder, _ = dataset
    workdir = tmp_path / "service"
    workdir.mkdir()
    recordings = tmp_path / "recorded"

    first = ImportHost(workdir, roots, signed=False)
    try:
        first.start_etl()
        recorder = Process([str(ZEROBRIDGE), "record", "--listen", f"ipc://{tmp_path}/recorder.sock",
                            "--forward", first.endpoint, "--out", str(recordings)])
        try:
            listen = recorder.wait_for_line("zerobridge recording ").removeprefix("zerobridge recording ")
            session = subprocess.run([str(ZEROBRIDGE), "call", "importFolder", json.dumps({"path": str(folder)}),
                                      "--endpoint", listen, "--name", "recorded-import"],
                                     cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert session.returncode == 0, session.stderr
            fixture = recorder.wait_for_line("zerobridge recorded ").removeprefix("zerobridge recorded ")
        finally:
            recorder.stop()
    finally:
        first.stop()
    text = pathlib.Path(fixture).read_text()
    assert '"action": "importFolder"' in text or '"action":"importFolder"' in text

    # The same service from scratch: the same database and job journal paths, emptied, and the ETL peer connected again.
    for leftover in [*workdir.glob("import.sqlite*"), *workdir.glob("import-jobs.sqlite*")]:
        leftover.unlink()
    second = ImportHost(workdir, roots, signed=False)
    try:
        second.start_etl()
        replay = subprocess.run([str(ZEROBRIDGE), "replay", fixture, "--endpoint", second.endpoint],
                                cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert "1 passed, 0 failed" in replay.stdout or "passed, 0 failed" in replay.stdout
    finally:
        second.stop()
