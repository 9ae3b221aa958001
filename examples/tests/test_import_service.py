"""The import service end to end: the import host, the Node ETL peer, and the Python and Node front-ends as real
processes over real sockets, checked against the generator's manifest and the database itself. The ETL peer's own
parsers are tested in examples/etl-peer/test (node --test); these tests see them through the host."""

from __future__ import annotations

import json
import shutil
import tempfile
import pathlib
import signal
import subprocess
import time
from typing import Any

import pytest

from conftest import (ROOT, PY, ImportHost, Process, expected_errors, frontend_command, good_files, run_frontend_json,
                      sent_to_etl_bytes, stored_files)

FRONTENDS = ["python", "node"]


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_frontend_imports_the_folder_and_reports_broken_files(frontend: str, host_with_etl: ImportHost,
                                                              dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    status, output = run_frontend_json(frontend, folder, host_with_etl)

    assert status == 0
    assert output["status"] == "completed"
    result = output["result"]
    assert result["filesTotal"] == manifest["totals"]["files"]
    assert result["filesImported"] == manifest["totals"]["good"]
    assert result["records"] == manifest["totals"]["records"]
    assert {error["file"]: error["kind"] for error in result["errors"]} == expected_errors(manifest)
    assert output["lastProgress"]["filesDone"] == manifest["totals"]["files"]
    assert output["stats"]["records"] == manifest["totals"]["records"]
    # Every good file is in the database with exactly its records.
    assert stored_files(host_with_etl) == {name: (entry["records"],) * 2 for name, entry in good_files(manifest).items()}


def test_imported_records_are_found_by_search(host_with_etl: ImportHost,
                                              dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    run_frontend_json("python", folder, host_with_etl)
    # One file of each format: its marker word is in its first record and nowhere else.
    for wanted in ("csv", "json", "markdown"):
        name, entry = next((name, entry) for name, entry in good_files(manifest).items() if entry["format"] == wanted)
        found = host_with_etl.call_ok("search", {"query": entry["marker"]})
        assert found["total"] == 1, (wanted, found)
        assert (found["hits"][0]["file"], found["hits"][0]["record"], found["hits"][0]["format"]) == (name, 0, wanted)
        assert f"[{entry['marker']}]" in found["hits"][0]["snippet"]
    assert host_with_etl.call_ok("search", {"query": "nosuchwordanywhere"}) == {
        "query": "nosuchwordanywhere", "total": 0, "hits": []}


def test_without_an_etl_peer_every_file_fails_etl_unavailable_after_one_wait(
        host: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    started = time.monotonic()
    completed = host.call("importFolder", {"path": str(folder), "options": {"etlTimeoutMs": 1000}})
    elapsed = time.monotonic() - started

    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.splitlines()[-1])
    assert result["filesImported"] == 0 and result["records"] == 0
    errors = {error["file"]: error for error in result["errors"]}
    unsupported = {name for name, kind in expected_errors(manifest).items() if kind == "unsupported"}
    assert {name for name, error in errors.items() if error["kind"] == "unsupported"} == unsupported
    others = [error for name, error in errors.items() if name not in unsupported]
    assert len(others) == manifest["totals"]["files"] - len(unsupported)
    assert all(error["kind"] == "etl_unavailable" and "ETL peer 'etl'" in error["message"] for error in others), others[:3]
    # The first files wait for the peer (1 s); once that has timed out the rest fail at once instead of waiting too.
    assert elapsed < 10, elapsed


def test_an_etl_peer_joining_later_parses_the_next_import(
        host: ImportHost, dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    host.call("importFolder", {"path": str(folder), "options": {"etlTimeoutMs": 500}})
    host.start_etl()
    status, output = run_frontend_json("python", folder, host)
    assert status == 0
    assert output["result"]["records"] == manifest["totals"]["records"]
    assert output["stats"]["records"] == manifest["totals"]["records"]


def test_reimporting_replaces_records_instead_of_adding_them(host_with_etl: ImportHost,
                                                             dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    run_frontend_json("node", folder, host_with_etl)
    status, output = run_frontend_json("python", folder, host_with_etl)
    assert status == 0
    assert output["stats"]["files"] == manifest["totals"]["good"]
    assert output["stats"]["records"] == manifest["totals"]["records"]
    assert output["stats"]["imports"] == 2
    assert output["stats"]["lastImport"]["status"] == "completed"


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_ctrl_c_cancels_and_leaves_only_whole_files(frontend: str, host_with_etl: ImportHost,
                                                    dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    # Slowed down so that the interrupt lands mid-import (120 files x 25 ms: 3 s at the least).
    frontend_process = Process(frontend_command(frontend, folder, host_with_etl, "--delay-per-file-ms", "25"))
    frontend_process.wait_for_line("progress ")
    frontend_process.popen.send_signal(signal.SIGINT)
    status, lines = frontend_process.finish()

    assert status == 130, lines
    assert any(line.startswith("cancelled: ") for line in lines), lines
    assert any(line.startswith("search ") for line in lines), lines
    run = wait_for_run_to_end(host_with_etl)
    assert run["status"] == "cancelled"
    stored = stored_files(host_with_etl)
    assert 0 < len(stored) < manifest["totals"]["good"]
    expected = good_files(manifest)
    for name, (declared, actual) in stored.items():
        assert declared == actual == expected[name]["records"], name
    with host_with_etl.db() as db:
        assert db.execute("SELECT count(*) FROM record WHERE fileId NOT IN (SELECT id FROM file)").fetchone() == (0,)


def wait_for_run_to_end(host: ImportHost, timeout: float = 20) -> dict[str, Any]:
    """The host answers `cancelled` at once and records the run's end as its handler unwinds: wait for that."""
    deadline = time.monotonic() + timeout
    while True:
        run = host.call_ok("stats")["lastImport"]
        if run["status"] != "running" or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_text_output_without_a_terminal(frontend: str, host_with_etl: ImportHost,
                                        dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    completed = subprocess.run(frontend_command(frontend, folder, host_with_etl, "--search", "lighthouse"), cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    total = manifest["totals"]["files"]
    assert any(line.startswith(f"progress {total}/{total} files") for line in lines), lines
    assert "\r" not in completed.stdout + completed.stderr  # no bar redrawing when nothing is a terminal
    assert any(line.startswith(f"imported {manifest['totals']['good']} of {total} files") for line in lines), lines
    assert any(line.startswith("failed files by kind: ") for line in lines), lines
    assert any(line.startswith(f"database {host_with_etl.database}") for line in lines), lines
    assert any(line.startswith("search ") and "lighthouse" in line for line in lines), lines


def test_unreachable_host_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    # A port nothing listens on: the front-end gives up with a message, not a traceback.
    completed = subprocess.run([PY, "examples/frontends/import.py", str(tmp_path), "--connect", "tcp://127.0.0.1:9",
                                "--connect-timeout", "1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert "cannot reach the import host" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_zerobridge_call_streams_import_progress_and_reports_errors(host_with_etl: ImportHost,
                                                                    dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    folder, manifest = dataset
    completed = host_with_etl.call("importFolder", {"path": str(folder)})
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    progress = [json.loads(line.removeprefix("progress ")) for line in lines[:-1]]
    assert progress and all(line.startswith("progress ") for line in lines[:-1])
    assert progress[-1]["filesDone"] == manifest["totals"]["files"]
    assert [p["filesDone"] for p in progress] == sorted(p["filesDone"] for p in progress)
    assert json.loads(lines[-1])["records"] == manifest["totals"]["records"]

    missing = host_with_etl.call("importFolder", {"path": str(folder / "no-such-folder")})
    assert missing.returncode == 1
    assert missing.stderr.startswith("error invalid_payload: ")
    bad_query = host_with_etl.call("search", {"query": "\"unbalanced", "raw": True})
    assert bad_query.returncode == 1
    assert bad_query.stderr.startswith("error invalid_payload: not a valid full-text query")
    no_words = host_with_etl.call("search", {"query": "?!"})
    assert no_words.stderr.startswith("error invalid_payload: ")


def test_csv_and_json_edge_cases(host_with_etl: ImportHost, tmp_path: pathlib.Path) -> None:
    """The ETL peer's parsers (examples/etl-peer/formats.mjs) through the host, down to what the database holds."""
    host = host_with_etl
    folder = tmp_path / "edge"
    folder.mkdir()
    (folder / "quoted.csv").write_bytes(
        b'name,note\r\n"Smith, Ann","said ""hi""\r\nthen left"\r\n\r\nBob,plain\r\n,\r\n')
    (folder / "no-newline-at-end.csv").write_text("a,b\n1,2")
    (folder / "header-only.csv").write_text("a,b\n")
    (folder / "empty.csv").write_text("")
    (folder / "stray-quote.csv").write_text('a,b\n1,x"y\n')
    (folder / "scalar.json").write_text("42")
    (folder / "array.json").write_text('[{"title": "caf\u00e9 cr\u00e8me"}, 7, "text", {"name": "n", "deep": {"k": [1, "z"]}}]')
    (folder / "latin1.csv").write_bytes("name\ncaf\u00e9\n".encode("latin-1"))
    (folder / ".hidden.csv").write_text("a\n1\n")

    completed = host.call("importFolder", {"path": str(folder)})
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.splitlines()[-1])
    errors = {error["file"]: (error["kind"], error["message"]) for error in result["errors"]}
    assert errors == {
        "empty.csv": ("csv", "empty file: no header row"),
        "stray-quote.csv": ("csv", "line 2: a quote inside a field that does not start with one"),
        "scalar.json": ("json", "a JSON file must hold an object or an array; this one holds 42"),
        "latin1.csv": ("binary", "binary content: not UTF-8 text"),
    }
    assert stored_files(host) == {"quoted.csv": (3, 3), "no-newline-at-end.csv": (1, 1), "header-only.csv": (0, 0),
                                  "array.json": (4, 4)}
    with host.db() as db:
        fields = [json.loads(row[0]) for row in db.execute(
            "SELECT fields FROM record JOIN file ON file.id = fileId WHERE file.name = 'quoted.csv' ORDER BY ordinal")]
    assert fields == [{"name": "Smith, Ann", "note": 'said "hi"\r\nthen left'}, {"name": "Bob", "note": "plain"},
                      {"name": "", "note": ""}]
    assert host.call_ok("search", {"query": "cafe"})["hits"][0]["title"] == "caf\u00e9 cr\u00e8me"  # diacritics folded
    assert host.call_ok("search", {"query": "cre*"})["total"] == 1  # a prefix


def test_the_generator_is_deterministic(tmp_path: pathlib.Path) -> None:
    def generate(name: str, seed: int) -> dict[str, bytes]:
        folder = tmp_path / name
        subprocess.run([PY, "examples/generate_data.py", str(folder), "--files", "60", "--seed", str(seed)],
                       cwd=ROOT, check=True, capture_output=True)
        return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}

    first, again, other = generate("a", 11), generate("b", 11), generate("c", 12)
    assert first == again
    assert first != other
    manifest = json.loads(first[".manifest.json"])
    assert manifest["totals"]["files"] == 60 == len(first) - 1
    assert manifest["totals"]["broken"] > 0


def test_imports_only_from_the_import_roots(host_with_etl: ImportHost, tmp_path: pathlib.Path,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    """importFolder reads nothing outside --import-root: not a folder elsewhere, not through `..`, not through a
    symbolic link planted inside an allowed folder."""
    host = host_with_etl
    outside = pathlib.Path(tempfile.mkdtemp(prefix="zb-outside-"))
    try:
        (outside / "secret.csv").write_text("secret\nhunter2\n")
        refused = host.call("importFolder", {"path": str(outside)})
        assert refused.returncode == 1 and refused.stderr.startswith("error not_allowed: "), refused.stderr
        dotted = host.call("importFolder", {"path": str(tmp_path) + "/" + "/".join([".."] * len(tmp_path.parts)) + str(outside)})
        assert dotted.returncode == 1 and dotted.stderr.startswith("error not_allowed: "), dotted.stderr

        inbox = tmp_path / "inbox"
        inbox.mkdir()
        (inbox / "linked-folder").symlink_to(outside, target_is_directory=True)
        through_link = host.call("importFolder", {"path": str(inbox / "linked-folder")})
        assert through_link.returncode == 1 and through_link.stderr.startswith("error not_allowed: "), through_link.stderr

        (inbox / "fine.csv").write_text("name\nalice\n")
        (inbox / "linked.csv").symlink_to(outside / "secret.csv")
        result = host.call_ok("importFolder", {"path": str(inbox)})
        assert result["records"] == 1, result
        # Both links are reported, never followed (the folder link too: nothing below a root is skipped silently).
        assert [e["file"] for e in result["errors"]] == ["linked-folder", "linked.csv"], result["errors"]
        with host.db() as db:
            assert "hunter2" not in json.dumps(db.execute("select * from record").fetchall())
    finally:
        shutil.rmtree(outside)


def test_the_committed_catalogue_is_the_live_hosts(host: ImportHost) -> None:
    """examples/import-service.catalogue.json is what `$describe` answers (SPEC 7.8): the contract that generated
    clients are built from stays the one the host serves. Regenerate it with
    `zerobridge call '$describe' --connection-file F` when an action's types change."""
    committed = json.loads((ROOT / "examples" / "import-service.catalogue.json").read_text())
    live = host.call_ok("$describe")
    assert live == committed
    assert [action["name"] for action in live["actions"]] == ["folders", "importFolder", "search", "stats"]
    assert [action["name"] for action in live["actions"] if "progress" in action] == ["importFolder"]
