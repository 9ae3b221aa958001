"""The import service's page (examples/web), served by the import host (--web-root) and driven in headless Chromium:
what it shows (files, records, progress totals, search hits, catalogChanged broadcasts) is checked against the
SQLite database itself, and against the generator's manifest."""

from __future__ import annotations

import pathlib
import shutil
from typing import Any, Iterator

import pytest

from conftest import ROOT, ImportHost, good_files, run_frontend_json, stored_files

from import_page import ImportPage  # shared with demo.py

WEB_ROOT = ROOT / "examples" / "web"


class PageHost(ImportHost):
    """An import host serving the page, importing from a folder of sample folders (what the page offers)."""

    def __init__(self, workdir: pathlib.Path, samples: pathlib.Path) -> None:
        super().__init__(workdir, samples, "--web-root", str(WEB_ROOT))
        self.url = self.process.wait_for_line("zerobridge page ").removeprefix("zerobridge page ")


@pytest.fixture
def samples(tmp_path: pathlib.Path, dataset: tuple[pathlib.Path, dict[str, Any]]) -> pathlib.Path:
    """The folder the host imports from: the generated dataset as `inbox`, and an empty folder beside it."""
    root = tmp_path / "samples"
    shutil.copytree(dataset[0], root / "inbox")
    (root / "empty").mkdir()
    return root


@pytest.fixture
def page_host(tmp_path: pathlib.Path, samples: pathlib.Path) -> Iterator[PageHost]:
    host = PageHost(tmp_path, samples)
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def page(page_host: PageHost) -> Iterator[ImportPage]:
    opened = ImportPage(page_host.url)
    try:
        yield opened
    finally:
        opened.stop()


def db_totals(host: ImportHost) -> tuple[int, int]:
    with host.db() as db:
        return db.execute("SELECT (SELECT count(*) FROM file), (SELECT count(*) FROM record)").fetchone()


def db_search(host: ImportHost, word: str, limit: int = 5) -> tuple[int, list[tuple[str, int]]]:
    """What the catalogue holds for one plain word, read from SQLite's full-text index directly: how many records
    match, and the best `limit` (as many as the page shows), in the host's order."""
    match = f'"{word}"'
    with host.db() as db:
        total = db.execute("SELECT count(*) FROM record_fts WHERE record_fts MATCH ?", (match,)).fetchone()[0]
        hits = db.execute("""
            SELECT file.name, record.ordinal FROM record_fts
            JOIN record ON record.id = record_fts.rowid JOIN file ON file.id = record.fileId
            WHERE record_fts MATCH ? ORDER BY bm25(record_fts), record.id LIMIT ?
        """, (match, limit)).fetchall()
    return total, [(name, ordinal) for name, ordinal in hits]


def test_the_page_offers_the_sample_folders(page_host: PageHost, page: ImportPage, samples: pathlib.Path) -> None:
    assert page.folders() == {"empty": str(samples / "empty"), "inbox": str(samples / "inbox")}
    assert page.numbers()["catalogue-files"] == 0


def test_each_page_load_opens_one_session(page_host: PageHost, page: ImportPage) -> None:
    # The WebKit layer's peer serves the page's own code too: one WebSocket, so one session, per load.
    assert len(page.websockets) == 1, page.websockets
    assert page.reload() == "idle"
    assert len(page.websockets) == 2, page.websockets


def test_an_import_from_the_page_shows_what_the_database_holds(page_host: PageHost, page: ImportPage,
                                                                samples: pathlib.Path,
                                                                dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    page_host.start_etl()
    _, manifest = dataset
    assert page.import_folder("inbox") == "completed"

    files, records = db_totals(page_host)
    assert (files, records) == (manifest["totals"]["good"], manifest["totals"]["records"])
    shown = page.numbers()
    assert shown["files-total"] == shown["files-done"] == manifest["totals"]["files"]
    assert shown["files-done"] - shown["files-failed"] == files
    assert shown["records"] == records
    assert page.bar() == (manifest["totals"]["files"], manifest["totals"]["files"])
    # The catalogue's figures come from `stats` after the import, through the WebKit message handler.
    page.wait_for_number("catalogue-records", records, exactly=True)
    assert (page.numbers()["catalogue-files"], page.numbers()["catalogue-records"]) == (files, records)
    assert stored_files(page_host) == {name: (entry["records"],) * 2 for name, entry in good_files(manifest).items()}

    # Its own import's broadcast arrives too, with the database's figures.
    change = page.wait_for_change(str(samples / "inbox"))
    assert (change["status"], change["filesImported"], change["records"]) == ("completed", files, records)
    assert (change["files"], change["recordsTotal"]) == (files, records)
    assert change.get("mine") == "true"  # marked as this page's

    # Search: a marker word is in exactly one record; a common word's total and best hits are the database's.
    name, entry = next((name, entry) for name, entry in good_files(manifest).items() if entry["format"] == "markdown")
    assert page.search(entry["marker"]) == db_search(page_host, entry["marker"]) == (1, [(name, 0)])
    common = page.search("lighthouse")
    assert common == db_search(page_host, "lighthouse")
    assert common[0] > 0


def test_cancel_from_the_page_leaves_whole_files(page_host: PageHost, page: ImportPage,
                                                 dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    _, manifest = dataset
    # 120 files, 4 at a time, each held 200 ms: 6 s at the least, so the cancel lands mid-way.
    page_host.start_etl("--delay-per-file-ms", "200")
    page.start_import("inbox")
    page.wait_for_number("records", 1)  # a file is in the database
    assert page.cancel() == "cancelled"

    run = page_host.wait_for_stats(lambda stats: stats["lastImport"]["status"] != "running")["lastImport"]
    assert run["status"] == "cancelled"
    stored = stored_files(page_host)
    assert 0 < len(stored) < manifest["totals"]["good"]
    expected = good_files(manifest)
    assert all(declared == actual == expected[name]["records"] for name, (declared, actual) in stored.items())
    # The page's last progress never claims more than the database holds.
    shown = page.numbers()
    assert shown["files-done"] - shown["files-failed"] <= len(stored)
    assert shown["records"] <= sum(actual for _, actual in stored.values())
    assert "Cancelled" in page.text("#progress-text")


def test_a_reloaded_page_attaches_again_to_its_import(page_host: PageHost, page: ImportPage,
                                                       dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    """The import is a job: reloading the page mid-import does not lose it. The page attaches to it again by the id
    it kept (sessionStorage) and shows its outcome; the host ran it once."""
    _, manifest = dataset
    page_host.start_etl("--delay-per-file-ms", "200")
    page.start_import("inbox")
    page.wait_for_number("records", 1)
    page.reload()
    # Whether the job was still running or had just finished, the page follows it to its outcome.
    assert page.wait_for_state("completed", "cancelled", "failed") == "completed", page.text("#progress-text")
    files, records = db_totals(page_host)
    shown = page.numbers()
    assert (shown["files-done"], shown["files-done"] - shown["files-failed"], shown["records"]) == (
        manifest["totals"]["files"], files, records)
    assert (files, records) == (manifest["totals"]["good"], manifest["totals"]["records"])
    with page_host.db() as db:
        assert db.execute("SELECT count(*), min(status) FROM importRun").fetchone() == (1, "completed")
    assert page.reload() == "idle"  # the job ended: nothing is left to attach to


def test_another_frontends_import_arrives_as_a_broadcast(page_host: PageHost, page: ImportPage, samples: pathlib.Path,
                                                         dataset: tuple[pathlib.Path, dict[str, Any]]) -> None:
    page_host.start_etl()
    _, manifest = dataset
    status, output = run_frontend_json("node", samples / "inbox", page_host)
    assert status == 0

    change = page.wait_for_change(str(samples / "inbox"))
    files, records = db_totals(page_host)
    with page_host.db() as db:
        run = db.execute("SELECT id, status, filesImported, records FROM importRun").fetchall()
    assert run == [(change["run"], "completed", files, records)]
    assert (change["filesImported"], change["records"], change["files"], change["recordsTotal"]) == (
        files, records, files, records)
    assert "mine" not in change  # not this page's import
    assert output["result"]["records"] == records == manifest["totals"]["records"]
    # The page asks for stats again when a broadcast arrives.
    assert page.wait_for_number("catalogue-records", records, exactly=True) == records
