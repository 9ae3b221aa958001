"""The import service's moving parts (issues 16 and 17), as real processes: file bytes reaching the Node ETL peer as
attachments, the ETL peer killed mid-import and back, `catalogChanged` reaching every connected front-end, a Python
front-end killed mid-import that re-attaches to its job, and the opt-in `$evaluate` transform."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
from typing import Any, Callable

import pytest

from conftest import (IMPORT_HOST, ImportHost, Process, expected_errors, frontend_command, good_files, run_frontend_json,
                      sent_to_etl_bytes, stored_files)


def assert_whole_import(host: ImportHost, result: dict[str, Any], manifest: dict[str, Any]) -> None:
    """The result and the database hold every good file with exactly its records, and every broken one failed as the
    manifest says."""
    assert result["filesTotal"] == manifest["totals"]["files"]
    assert result["filesImported"] == manifest["totals"]["good"]
    assert result["records"] == manifest["totals"]["records"]
    assert {error["file"]: error["kind"] for error in result["errors"]} == expected_errors(manifest)
    assert stored_files(host) == {name: (entry["records"],) * 2 for name, entry in good_files(manifest).items()}


def test_file_bytes_reach_the_etl_peer_as_attachments(host_with_etl: ImportHost,
                                                       dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    result = host_with_etl.call_ok("importFolder", {"path": str(folder)})
    etl = host_with_etl.call_ok("stats")["etl"]

    expected = sent_to_etl_bytes(manifest)
    sent_files = sum(1 for entry in manifest["files"].values() if entry.get("error") != "unsupported")
    assert result["attachmentBytes"] == expected
    # The peer counts only what arrived as bytes (a Buffer): a base64 string would be refused, not counted.
    assert etl == {"peer": "etl", "connected": True, "connections": 1, "filesSent": sent_files,
                   "attachmentBytes": expected, "attachmentBytesReceived": expected, "retriedCalls": 0, "evaluations": 0}


def import_killing_the_etl_peer(host: ImportHost, folder: pathlib.Path, manifest: dict[str, Any],
                                kill: Callable[[], None]) -> dict[str, Any]:
    """Imports the folder through the Node front-end, runs `kill` once 20 files are in, and checks that every file
    landed all the same, a call lost with the peer sent again; returns the import's result."""
    importing = Process(frontend_command("node", folder, host, "--json"))
    host.wait_for_stats(lambda stats: stats["files"] >= 20)
    kill()
    status, lines = importing.finish(timeout=120)
    assert status == 0, lines
    result: dict[str, Any] = json.loads(lines[-1])["result"]
    assert_whole_import(host, result, manifest)
    assert result["etlRetries"] >= 1
    return result


def test_the_etl_peer_killed_mid_import_comes_back_and_every_file_lands(
        host: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    # Each file held 20 ms, so that the peer always has calls in hand when it is killed.
    host.start_etl("--delay-per-file-ms", "20")

    def kill_and_start_again() -> None:
        host.kill_etl()
        host.start_etl()

    result = import_killing_the_etl_peer(host, folder, manifest, kill_and_start_again)
    etl = host.call_ok("stats")["etl"]
    assert etl["connections"] == 2 and etl["connected"]
    assert etl["retriedCalls"] == result["etlRetries"]
    # What was lost with the peer was sent again: more bytes went out than the folder holds.
    assert result["attachmentBytes"] > sent_to_etl_bytes(manifest)


def process_is_gone(pid: int) -> bool:
    """No process with this pid runs (a zombie waiting to be reaped has ended too)."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return any(line.startswith("State:") and "Z" in line.split()[1] for line in status.splitlines())


def test_the_host_launches_the_etl_peer_and_restarts_it_when_it_is_killed_mid_import(
        tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory,
        dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    """import-host --etl-command (SPEC 10.1): the host launches the ETL peer and keeps it running. Killed with calls in
    hand, it is started again by the host, the calls it held go to the new one, and every file lands; the host's
    shutdown stops the peer it launched."""
    folder, manifest = dataset
    host = ImportHost(tmp_path / "host", tmp_path_factory.getbasetemp(),
                      "--etl-command", "node examples/etl-peer/etl-peer.mjs --delay-per-file-ms 20")
    try:
        # Connected in the host's session table, and past starting in its supervisor's view (which hears of it after).
        first = host.wait_for_stats(lambda stats: stats["etl"]["connected"]
                                    and stats["etl"]["supervised"]["state"] != "starting")["etl"]["supervised"]
        assert first["state"] == "up" and first["restarts"] == 0
        result = import_killing_the_etl_peer(host, folder, manifest, lambda: os.kill(first["pid"], signal.SIGKILL))
        etl = host.call_ok("stats")["etl"]
        assert etl["supervised"]["restarts"] == 1 and etl["supervised"]["state"] == "up"
        assert etl["supervised"]["pid"] != first["pid"] and etl["connections"] == 2 and etl["connected"]
        assert etl["retriedCalls"] == result["etlRetries"]
        second = etl["supervised"]["pid"]
    finally:
        host.stop()
    assert process_is_gone(second), "the host's shutdown stops the ETL peer it launched"


def test_an_etl_command_that_keeps_failing_is_given_up_on_and_files_fail_etl_unavailable(
        tmp_path: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A launched ETL peer that exits at once is restarted with a backoff (0.25 s doubling) until it has restarted 5
    times within a minute; then the host gives up on it, stats says why, and files fail etl_unavailable saying so."""
    host = ImportHost(tmp_path / "host", tmp_path_factory.getbasetemp(),
                      "--etl-command", "node -e 'process.exit(3)'", "--etl-timeout-ms", "500")
    try:
        supervised = host.wait_for_stats(lambda stats: stats["etl"]["supervised"]["state"] == "gave up")["etl"]["supervised"]
        assert supervised["restarts"] == 5 and "pid" not in supervised
        assert "exit code 3" in supervised["gaveUp"], supervised
        result = host.call_ok("importFolder", {"path": str(small_folder(tmp_path))})
        assert result["filesImported"] == 0
        assert {error["kind"] for error in result["errors"]} == {"etl_unavailable"}
        assert "the host gave up on peer 'etl'" in result["errors"][0]["message"], result["errors"][0]
    finally:
        host.stop()


@pytest.mark.parametrize(("option", "says"), [
    (["--etl-command", "   "], "--etl-command takes a command"),
    (["--etl-peer", ""], "--etl-peer takes a name of 1 to 128 characters"),
    (["--etl-peer", "x" * 129], "--etl-peer takes a name of 1 to 128 characters"),
])
def test_a_malformed_etl_option_is_refused_at_start(option: list[str], says: str) -> None:
    refused = subprocess.run([str(IMPORT_HOST), *option], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and says in refused.stderr, refused.stderr


def start_watcher(host: ImportHost) -> Process:
    """A Node front-end that imports nothing and prints each catalogChanged (--watch), once it is subscribed."""
    watcher = Process(["node", "examples/frontends/import.mjs", "--watch", "--connect", str(host.connection_file)])
    watcher.wait_for_line("watching catalogChanged on ")
    return watcher


def test_catalog_changed_reaches_every_connected_frontend(host_with_etl: ImportHost,
                                                          dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    watcher = start_watcher(host_with_etl)
    try:
        status, output = run_frontend_json("python", folder, host_with_etl)
        assert status == 0

        run = output["stats"]["lastImport"]
        expected = {"run": run["id"], "folder": str(folder), "status": "completed",
                    "filesImported": manifest["totals"]["good"], "filesFailed": manifest["totals"]["broken"],
                    "records": manifest["totals"]["records"], "files": manifest["totals"]["good"],
                    "recordsTotal": manifest["totals"]["records"]}
        assert output["catalogChanged"] == [expected]  # the importing front-end's copy
        line = watcher.wait_for_line("catalogChanged: ")  # the watching one's
        assert line.startswith(f"catalogChanged: run {run['id']} completed ({folder}): "
                               f"{manifest['totals']['good']:,} files, {manifest['totals']['records']:,} records imported")
    finally:
        watcher.stop()
    status, lines = watcher.finish()
    assert status == 0 and lines[-1] == "watched 1 catalogChanged broadcast(s)"


def test_a_killed_python_frontend_started_again_reattaches_to_its_job(
        host_with_etl: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    state_file = host_with_etl.connection_file.with_name("import-py.state.json")
    command = frontend_command("python", folder, host_with_etl, "--delay-per-file-ms", "20")
    first = Process(command)
    first.wait_for_line("progress ")
    saved = wait_for_state(state_file, lambda state: state["seq"] >= 2)
    first.kill()
    saved = json.loads(state_file.read_text())  # what it had written when it died
    assert saved["job"] and saved["folder"] == str(folder)

    second = Process(command)
    assert second.wait_for_line("re-attached to job ") == f"re-attached to job {saved['job']} after progress #{saved['seq']}"
    status, lines = second.finish(timeout=120)
    assert status == 0, lines
    total = manifest["totals"]["files"]
    assert any(line.startswith(f"imported {manifest['totals']['good']} of {total} files") for line in lines), lines
    # The bar went on from where the first one was, to the end.
    progress = [int(line.split()[1].split("/")[0]) for line in lines if line.startswith("progress ")]
    assert progress and progress[0] > saved["progress"]["filesDone"] and progress[-1] == total
    assert not state_file.exists()
    # One job, one run: the second front-end followed the first one's import rather than starting another.
    stats = host_with_etl.call_ok("stats")
    assert stats["imports"] == 1 and stats["lastImport"]["status"] == "completed"
    assert stored_files(host_with_etl) == {name: (entry["records"],) * 2 for name, entry in good_files(manifest).items()}


def wait_for_state(path: pathlib.Path, condition: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            state = json.loads(path.read_text())
            if condition(state):
                return state
        except (OSError, ValueError):
            pass  # not written yet
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not reach the condition within {timeout} s")
        time.sleep(0.02)


UPPERCASE = "record.title = 'T:' + record.title.toUpperCase(); return record;"


def small_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "people"
    folder.mkdir()
    (folder / "people.csv").write_text("name,city\nada,oslo\ngrace,kyoto\n")
    (folder / "note.md").write_text("# harbor\ntext\n")
    return folder


def test_the_transform_is_refused_unless_the_etl_peer_allows_evaluate(host_with_etl: ImportHost,
                                                                      tmp_path: pathlib.Path) -> None:
    folder = small_folder(tmp_path)
    refused = host_with_etl.call("importFolder", {"path": str(folder), "options": {"transform": UPPERCASE}})
    assert refused.returncode == 1
    assert refused.stderr.startswith("error not_allowed: the transform runs on the ETL peer 'etl' through $evaluate"), refused.stderr
    assert "--allow-evaluate" in refused.stderr
    # Refused before any file was read: no run, nothing stored.
    stats = host_with_etl.call_ok("stats")
    assert (stats["imports"], stats["files"]) == (0, 0)
    # Without the transform the same peer imports the folder.
    assert host_with_etl.call_ok("importFolder", {"path": str(folder)})["records"] == 3


def test_the_transform_maps_records_through_evaluate_when_enabled(host: ImportHost, tmp_path: pathlib.Path) -> None:
    host.start_etl("--allow-evaluate")
    folder = small_folder(tmp_path)

    result = host.call_ok("importFolder", {"path": str(folder), "options": {"transform": UPPERCASE}})
    assert (result["records"], result["transformed"]) == (3, 3)
    assert [hit["title"] for hit in host.call_ok("search", {"query": "ada"})["hits"]] == ["T:ADA"]
    assert host.call_ok("stats")["etl"]["evaluations"] == 1 + 2  # the check, then one per file

    # Off unless asked for: the same import without it stores the records as parsed.
    plain = host.call_ok("importFolder", {"path": str(folder)})
    assert plain["transformed"] == 0
    assert [hit["title"] for hit in host.call_ok("search", {"query": "ada"})["hits"]] == ["ada"]

    broken = host.call("importFolder", {"path": str(folder), "options": {"transform": "return record.("}})
    assert broken.returncode == 1 and broken.stderr.startswith("error invalid_payload: the transform is not a JavaScript"), broken.stderr
    not_a_record = host.call_ok("importFolder", {"path": str(folder), "options": {"transform": "return 7;"}})
    assert {error["file"]: error["kind"] for error in not_a_record["errors"]} == {"people.csv": "transform", "note.md": "transform"}
    assert "record 0: the transform returned 7" in not_a_record["errors"][0]["message"]


def test_a_transform_cannot_use_the_etl_peers_powers(host: ImportHost, tmp_path: pathlib.Path) -> None:
    """The transform runs in the ETL peer's sandbox (examples/etl-peer/sandbox.mjs): writing a file, reading
    /etc/passwd or starting a process fails each file `transform` with the refusal, nothing is written or stored, and
    one that loops forever is stopped at the time limit."""
    host.start_etl("--allow-evaluate", "--evaluate-time-limit-ms", "1500")
    folder = small_folder(tmp_path)
    written = tmp_path / "written-by-a-transform"
    # process.getBuiltinModule reaches Node's modules from any script (before the sandbox, these ran in the peer).
    builtin = "process.getBuiltinModule"
    attempts = {
        f"{builtin}('node:fs').writeFileSync({json.dumps(str(written))}, 'pwned'); return record;": "FileSystemWrite",
        f"record.body = {builtin}('node:fs').readFileSync('/etc/passwd', 'utf8'); return record;": "FileSystemRead (/etc/passwd)",
        f"{builtin}('node:child_process').execFileSync('/bin/touch', [{json.dumps(str(written))}]); return record;": "ChildProcess",
        f"{builtin}('node:process').kill(process.pid, 'SIGKILL'); return record;": "Signal",
    }
    for transform, refusal in attempts.items():
        result = host.call_ok("importFolder", {"path": str(folder), "options": {"transform": transform}})
        assert result["filesImported"] == 0, result
        assert {error["file"]: error["kind"] for error in result["errors"]} == {"people.csv": "transform", "note.md": "transform"}
        assert all(f"the script was refused {refusal}" in error["message"] for error in result["errors"]), result["errors"]
    assert not written.exists()
    assert host.call_ok("stats")["records"] == 0

    started = time.monotonic()
    looping = host.call_ok("importFolder", {"path": str(folder), "options": {"transform": "for (;;) {} return record;"}})
    assert {error["kind"] for error in looping["errors"]} == {"transform"}, looping["errors"]
    assert all("ran longer than its limit of 1500 ms and was stopped" in error["message"] for error in looping["errors"])
    assert time.monotonic() - started < 30  # generous: stopped at its limit, not at some later timeout
    # The peer is still there and serves the next import.
    assert host.call_ok("importFolder", {"path": str(folder), "options": {"transform": UPPERCASE}})["transformed"] == 3


def test_the_etl_peer_connects_as_a_launched_peer_from_its_environment(host: ImportHost, tmp_path: pathlib.Path) -> None:
    """What a supervising host hands the peer it launches (SPEC 10.1): ZEROBRIDGE_CONNECTION_FILE and
    ZEROBRIDGE_PEER_NAME, no command-line arguments."""
    environment = {**os.environ, "ZEROBRIDGE_CONNECTION_FILE": str(host.connection_file), "ZEROBRIDGE_PEER_NAME": "etl"}
    host.etl = Process(["node", "examples/etl-peer/etl-peer.mjs"], env=environment)
    host.etl.wait_for_line("etl ready")
    assert host.call_ok("importFolder", {"path": str(small_folder(tmp_path))})["records"] == 3


def long_csv(tmp_path: pathlib.Path) -> tuple[pathlib.Path, list[str]]:
    """A folder holding long.csv: a header and 2500 rows (the ETL peer reports progress at 1000 and 2000)."""
    folder = tmp_path / "long"
    folder.mkdir()
    rows = [f"{i},name {i},caf\u00e9 {i % 7}" for i in range(2500)]
    (folder / "long.csv").write_text("id,name,note\n" + "".join(row + "\n" for row in rows))
    return folder, rows


def test_the_etl_peers_progress_on_a_long_file_reaches_the_frontend(host: ImportHost, tmp_path: pathlib.Path) -> None:
    """The ETL peer reports {records, bytesDone, bytesTotal} every 1000 records; the host relays what it has in
    `progress.parsing` (checked every 100 ms). The peer holds the parsed file 400 ms before answering, so the relay
    comes while the file is still in flight."""
    host.start_etl("--delay-per-file-ms", "400")
    folder, rows = long_csv(tmp_path)
    text = (folder / "long.csv").read_text()

    completed = host.call("importFolder", {"path": str(folder)})
    assert completed.returncode == 0, completed.stderr
    progress = [json.loads(line.removeprefix("progress ")) for line in completed.stdout.splitlines()[:-1]]
    relayed = [p["parsing"] for p in progress if p["parsing"]]
    through_2000 = len(("id,name,note\n" + "".join(row + "\n" for row in rows[:2000])).encode())
    assert relayed and relayed[-1] == [{"file": "long.csv", "records": 2000, "bytesDone": through_2000,
                                        "bytesTotal": len(text.encode())}], progress
    assert progress[-1]["filesDone"] == 1 and progress[-1]["parsing"] == []
    assert json.loads(completed.stdout.splitlines()[-1])["records"] == 2500


def test_a_cancelled_import_that_wrote_files_is_announced_too(host_with_etl: ImportHost,
                                                              dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, _ = dataset
    watcher = start_watcher(host_with_etl)
    try:
        importing = Process(frontend_command("python", folder, host_with_etl, "--delay-per-file-ms", "25"))
        importing.wait_for_line("progress ")
        host_with_etl.wait_for_stats(lambda stats: stats["files"] >= 5)
        importing.popen.send_signal(signal.SIGINT)
        assert importing.finish()[0] == 130
        line = watcher.wait_for_line("catalogChanged: ")
        stats = host_with_etl.call_ok("stats")
        assert line.startswith(f"catalogChanged: run {stats['lastImport']['id']} cancelled ({folder}): "
                               f"{stats['lastImport']['filesImported']:,} files"), line
    finally:
        watcher.stop()


def test_a_state_file_naming_a_job_the_host_does_not_have_starts_the_import_afresh(
        host_with_etl: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    """A front-end killed after writing its key but before its start reached the host (or a host that forgot the
    job) leaves a state file the host cannot attach to: the next run says so and imports."""
    folder, manifest = dataset
    state_file = host_with_etl.connection_file.with_name("import-py.state.json")
    state_file.write_text(json.dumps({"action": "importFolder", "folder": str(folder), "key": "never-started",
                                      "job": None, "seq": 0, "progress": None}))
    status, lines = Process(frontend_command("python", folder, host_with_etl)).finish(timeout=120)
    assert status == 0, lines
    assert "job with key never-started is not on the host; starting the import again" in lines
    assert not any(line.startswith("re-attached") for line in lines)
    assert any(line.startswith(f"imported {manifest['totals']['good']} of ") for line in lines), lines
    assert not state_file.exists()


def test_files_over_the_size_limit_are_not_read(tmp_path: pathlib.Path) -> None:
    """--max-file-bytes: a file and its records each travel whole in one message, so a larger file is refused
    (too_large) before it is read; the rest of the folder imports."""
    folder = tmp_path / "sizes"
    folder.mkdir()
    (folder / "small.csv").write_text("name\n" + "ada\n" * 10)  # 45 bytes
    (folder / "large.csv").write_text("name\n" + "grace\n" * 100)  # 605 bytes
    host = ImportHost(tmp_path / "host", tmp_path, "--max-file-bytes", "100")
    try:
        host.start_etl()
        result = host.call_ok("importFolder", {"path": str(folder)})
        assert result["errors"] == [{"file": "large.csv", "kind": "too_large",
                                     "message": "605 bytes; the host imports files up to 100"}]
        assert result["records"] == 10 and host.call_ok("stats")["etl"]["attachmentBytes"] == 45
    finally:
        host.stop()
    refused = subprocess.run([str(IMPORT_HOST), "--max-file-bytes", str(64 << 20)], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0 and "--max-file-bytes must be between 1 and" in refused.stderr


@pytest.mark.parametrize("frontend", ["python", "node"])
def test_frontends_show_the_etl_peers_progress_before_any_file_is_done(frontend: str, host: ImportHost,
                                                                        tmp_path: pathlib.Path) -> None:
    """The first report of an import of one long file is relayed from the ETL peer before any file is done: it has
    no currentFile, and the front-ends say how far the peer is instead."""
    host.start_etl("--delay-per-file-ms", "400")
    folder, _ = long_csv(tmp_path)
    status, lines = Process(frontend_command(frontend, folder, host)).finish(timeout=120)
    assert status == 0, lines
    progress = [line for line in lines if line.startswith("progress ")]
    assert progress[0].startswith("progress 0/1 files") and ", parsing long.csv " in progress[0], progress
    assert progress[-1].startswith("progress 1/1 files") and progress[-1].endswith(", at long.csv"), progress
