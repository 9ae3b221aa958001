"""`make demo`: the import service end to end, each step checked.

Generates sample data under .demo/data, starts the import host (Swift), which launches and supervises the Node ETL
peer (it parses every file, whose bytes the host sends it as attachments), keeps a Node front-end watching
`catalogChanged`, and then:

- the Python front-end imports batch-1, is killed (SIGKILL) mid-import, is started again, re-attaches to its job and
  finishes the same import;
- the Node front-end imports batch-2 while the ETL peer is killed mid-import; the host starts it again and the import
  completes, the calls it lost sent again;
- `catalogChanged` reached both front-ends; the bytes crossed as attachments (the ETL peer's own count);
- the opt-in transform (`$evaluate` on the ETL peer) on a small folder; Ctrl-C cancelling an import; `zerobridge call`;
- the page the host serves (examples/web, --web-root), open in headless Chromium from the start: it lists the other
  front-ends' catalogChanged broadcasts as they come, then imports a folder itself with a live progress bar, searches,
  and is saved as a screenshot, .demo/import-page.png.

It prints what each step shows, stops what it started, and exits non-zero if a step did not show what it claims.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable

import zerobridge
from import_page import CHROMIUM, ImportPage
from processes import Process

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
DATA = DEMO / "data"
BIN = pathlib.Path(os.environ.get("SWIFT_BIN", ROOT / ".build" / "debug"))
PY = sys.executable
DATABASE = DEMO / "import.sqlite"
JOURNAL = DEMO / "import-jobs.sqlite"
CONNECTION_FILE = DEMO / "import-host.json"
STATE_FILE = DEMO / "import-py.state.json"
WEB_ROOT = ROOT / "examples" / "web"
SCREENSHOT = DEMO / "import-page.png"
# The host launches it (--etl-command) and tells it where to connect through its environment (SPEC 10.1).
ETL_COMMAND = "node examples/etl-peer/etl-peer.mjs --allow-evaluate"
WAIT = 90  # seconds any one condition may take before the demo calls the step failed


def free_loopback_port() -> int:
    """A port nothing listens on now, for the host's metrics (the host prints where it listens, but to its stderr,
    which the demo shows rather than reads)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


METRICS_URL = f"http://127.0.0.1:{free_loopback_port()}/metrics"


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def show(text: str) -> None:
    print(f"-> {text}", flush=True)


class Failed(AssertionError):
    """A step did not show what it claims (as does an AssertionError from a Process that did not print a line)."""


def check(condition: bool, claim: str) -> None:
    if not condition:
        raise Failed(claim)
    show(claim)


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Polls `condition` until it returns something true (which it returns)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout} s")
        time.sleep(0.02)
    return value


def read_json(path: pathlib.Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # not written yet, or being replaced


def main() -> int:
    started = time.monotonic()
    DEMO.mkdir(exist_ok=True)
    for stale in [*DEMO.glob("import.sqlite*"), *DEMO.glob("import-jobs.sqlite*"), STATE_FILE, SCREENSHOT]:
        stale.unlink(missing_ok=True)  # a fresh database and journal, so the figures below are this run's

    step("sample data: folders of CSV, JSON and Markdown, a few files broken on purpose (each with a manifest)")
    batch_1, batch_2, people = DATA / "batch-1", DATA / "batch-2", DATA / "small"
    for folder, files, seed in ((batch_1, 2500, 42), (batch_2, 1500, 7), (people, 12, 3)):
        subprocess.run([PY, "examples/generate_data.py", str(folder), "--files", str(files), "--seed", str(seed)],
                       cwd=ROOT, check=True)
    manifests = {folder: json.loads((folder / ".manifest.json").read_text()) for folder in (batch_1, batch_2, people)}

    step("the import host (Swift, GRDB over SQLite), which launches the ETL peer (Node: parses CSV, JSON and Markdown)")
    host = Process([str(BIN / "import-host"), "--database", str(DATABASE), "--journal", str(JOURNAL),
                    "--connection-file", str(CONNECTION_FILE), "--import-root", str(DATA), "--etl-command", ETL_COMMAND,
                    "--web-root", str(WEB_ROOT),
                    "--metrics", METRICS_URL.removeprefix("http://").removesuffix("/metrics")],

                   echo="host")
    children: list[Any] = [host]
    failures: list[str] = []
    try:
        host.wait_for_line("zerobridge ready ")
        url = host.wait_for_line("zerobridge page ").removeprefix("zerobridge page ")
        show(f"the page: {url} (the host serves examples/web and injects the endpoint and key into it)")
        with zerobridge.connect_sync(str(CONNECTION_FILE), name="demo") as demo:
            # Connected in the host's session table, and past starting in its supervisor's view, which hears of the
            # session a moment later.
            etl = wait_until(lambda: (e := demo.call("stats")["etl"])["connected"] and e["supervised"]["state"] != "starting" and e,
                             "the ETL peer up")
            check(etl["supervised"]["state"] == "up",
                  f"the host launched the ETL peer ({ETL_COMMAND}, pid {etl['supervised']['pid']}), told it where to "
                  f"connect through its environment, and it is up")
            run_steps(demo, manifests, children, failures, url)
    except AssertionError as broken:
        failures.append(str(broken))
        print(f"!! {broken}", flush=True)
    finally:
        step("stopping the front-ends and the host (which stops the ETL peer it launched)")
        for child in reversed(children):
            child.stop()

    step("done")
    print(f"the database: {DATABASE} (open it with: sqlite3 {DATABASE.relative_to(ROOT)})")
    print(f"the sample data: {DATA}")
    if SCREENSHOT.exists():
        print(f"the page's screenshot: {SCREENSHOT}")
    print(f"demo wall time: {time.monotonic() - started:.1f} s")
    if failures:
        print(f"\n{len(failures)} step(s) did not show what they claim:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    return 0


def run_steps(demo: Any, manifests: dict[pathlib.Path, Any], children: list[Any], failures: list[str], url: str) -> None:
    """The demo's steps. A step that fails is recorded, and the next one runs."""
    batch_1, batch_2, people = manifests
    frontend_py = [PY, "examples/frontends/import.py", "--state-file", str(STATE_FILE)]
    frontend_node = ["node", "examples/frontends/import.mjs"]

    def attempt(title: str, body: Callable[[], None]) -> None:
        step(title)
        try:
            body()
        except AssertionError as failure:
            failures.append(str(failure))
            print(f"!! {failure}", flush=True)
        except Exception as error:  # a step that broke is a step that did not show what it claims
            failures.append(f"{title}: {error!r}")
            print(f"!! {title}: {error!r}", flush=True)

    watcher = Process([*frontend_node, "--watch"], echo="node watch")
    children.append(watcher)
    step("a Node front-end stays connected, subscribed to the topic `catalog` (--watch)")
    watcher.wait_for_line("watching catalogChanged on ")

    pages: list[ImportPage] = []

    def open_page() -> None:
        show(f"opening {url}")
        pages.append(ImportPage(url))
        children.append(pages[0])
        show(f"the page is connected; it offers the folders {', '.join(pages[0].folders())}")

    attempt(f"the page in headless Chromium ({CHROMIUM}), through Playwright: it stays open, subscribed to `catalog`",
            open_page)

    def python_killed_and_reattached() -> None:
        total = manifests[batch_1]["totals"]["files"]
        first = Process([*frontend_py, str(batch_1.relative_to(ROOT))], echo="python")
        state = wait_until(lambda: (s := read_json(STATE_FILE)) and s.get("job") and (s.get("progress") or {}).get(
            "filesDone", 0) >= total // 5 and s, "the Python front-end's state file at 20% of batch-1")
        first.kill()
        state = read_json(STATE_FILE)
        show(f"killed the Python front-end (SIGKILL) at {state['progress']['filesDone']}/{total} files; its state file "
             f"says job {state['job']}, progress #{state['seq']}")
        second = Process([*frontend_py, str(batch_1.relative_to(ROOT))], echo="python")
        line = second.wait_for_line("re-attached to job ")
        check(line == f"re-attached to job {state['job']} after progress #{state['seq']}",
              f"the Python front-end started again {line}")
        status, _ = second.finish(timeout=WAIT)
        good = manifests[batch_1]["totals"]["good"]
        check(status == 0 and any(l.startswith(f"imported {good} of {total} files") for l in second.lines),
              f"...and finished the same import: {good} of {total} files imported (job {state['job']}, resumed after "
              f"progress #{state['seq']})")
        check(demo.call("stats")["imports"] == 1, "one import run in the database: the job was not started twice")
        # The job goes on while its front-end is down; when it ended before the front-end came back, the broadcast
        # went out before that front-end subscribed, and the watching front-end shows it instead.
        if any(l.startswith("import.py: the job had ended before this front-end connected again") for l in second.lines):
            wait_until(lambda: any(l.startswith("catalogChanged: ") and str(batch_1) in l for l in watcher.lines),
                       "the catalogChanged of batch-1 at the watcher")
            show("the job ended while the Python front-end was down: the watching Node front-end printed its catalogChanged")
        else:
            check(any(l.startswith("catalogChanged: ") and str(batch_1) in l for l in second.lines),
                  "the Python front-end printed the catalogChanged of its import")

    attempt("the Python front-end imports batch-1; it is killed mid-import, started again, and re-attaches to its job",
            python_killed_and_reattached)

    def etl_killed_mid_import() -> None:
        before = demo.call("stats")
        good = manifests[batch_2]["totals"]["good"]
        importing = Process([*frontend_node, str(batch_2.relative_to(ROOT)), "--search", "saffron harbor"], echo="node")
        children.append(importing)
        wait_until(lambda: demo.call("stats")["files"] - before["files"] >= good // 5,
                   "20% of batch-2 in the database")
        killed = demo.call("stats")["etl"]["supervised"]["pid"]
        os.kill(killed, signal.SIGKILL)
        show(f"killed the ETL peer (SIGKILL, pid {killed}) mid-import; the host sees its process exit, fails the calls "
             f"it held with peer_lost, and starts it again")
        status, _ = importing.finish(timeout=WAIT)
        total = manifests[batch_2]["totals"]["files"]
        check(status == 0 and any(l.startswith(f"imported {good} of {total} files") for l in importing.lines),
              f"the import completed with every good file: {good} of {total} files (checked against the manifest)")
        after = demo.call("stats")["etl"]
        supervised = after["supervised"]
        check(supervised["restarts"] == 1 and supervised["state"] == "up" and supervised["pid"] != killed
              and after["connections"] == 2 and after["connected"],
              f"the host restarted the ETL peer once (now pid {supervised['pid']}); it connected {after['connections']} "
              f"times in all and is up")
        show(f"calls the host sent again after losing the ETL peer: {after['retriedCalls']}")
        check(any(l.startswith("catalogChanged: ") and str(batch_2) in l for l in importing.lines),
              "the Node front-end printed the catalogChanged of its import")

    attempt("the Node front-end imports batch-2; the ETL peer is killed mid-import and the host restarts it",
            etl_killed_mid_import)

    def broadcasts() -> None:
        seen = wait_until(lambda: [l for l in watcher.lines if l.startswith("catalogChanged: ")] if sum(
            l.startswith("catalogChanged: ") for l in watcher.lines) >= 2 else None, "two catalogChanged at the watcher")
        check(any(str(batch_1) in l for l in seen) and any(str(batch_2) in l for l in seen),
              "the watching Node front-end printed the catalogChanged of both imports, as did each importing "
              "front-end (above): the broadcast reached every front-end connected")

    attempt("catalogChanged: broadcast on the topic `catalog` to every connected front-end", broadcasts)

    def attachments() -> None:
        etl_stats = demo.call("stats")["etl"]
        expected = sum(entry["bytes"] for manifest in (manifests[batch_1], manifests[batch_2])
                       for entry in manifest["files"].values() if entry.get("error") != "unsupported")
        show(f"{etl_stats['filesSent']:,} files sent to the ETL peer, {etl_stats['attachmentBytes'] / 1e6:.2f} MB as "
             f"attachment frames (calls lost with the peer and sent again count twice)")
        check(etl_stats["attachmentBytesReceived"] == expected,
              f"the ETL peer received {etl_stats['attachmentBytesReceived'] / 1e6:.2f} MB as bytes (Buffers, not base64 "
              f"text): every byte of the two folders, each file once")

    attempt("bytes crossing as attachments", attachments)

    def the_page() -> None:
        check(bool(pages), "the page is open")
        page = pages[0]
        listed = [change["folder"] for change in page.changes()]
        check(str(batch_1) in listed and str(batch_2) in listed,
              f"the page listed the catalogChanged of both front-ends' imports ({len(listed)} broadcast(s))")
        show("choosing batch-2 on the page and pressing Import: progress streams to the page's bar through the "
             "browser peer (WebSocket), as it does to the terminal front-ends")
        page.start_import("batch-2")
        page.wait_for_number("files-done", manifests[batch_2]["totals"]["files"] // 4)
        shown = page.numbers()
        show(f"mid-import the page shows {shown['files-done']} of {shown['files-total']} files, {shown['records']:,} records")
        check(page.wait_for_state("completed", "cancelled", "failed") == "completed", "the page's import completed")
        shown = page.numbers()
        totals = manifests[batch_2]["totals"]
        check((shown["files-done"], shown["files-done"] - shown["files-failed"], shown["records"])
              == (totals["files"], totals["good"], totals["records"]),
              f"the page shows {shown['files-done']:,} files done, {shown['files-failed']} failed, "
              f"{shown['records']:,} records: the manifest's figures")
        stats = demo.call("stats")
        page.wait_for_number("catalogue-records", stats["records"], exactly=True)  # stats asked after the broadcast
        check((page.numbers()["catalogue-files"], page.numbers()["catalogue-records"]) == (stats["files"], stats["records"]),
              f"the page's catalogue figures are the database's: {stats['files']:,} files, {stats['records']:,} records")
        total, hits = page.search("lighthouse espresso")
        check(total == demo.call("search", {"query": "lighthouse espresso"})["total"] and len(hits) > 0,
              f"the page's search (a WebKit message handler call) found {total} records, as the host's search says")
        page.wait_for_change(str(batch_2), count=2)
        print(f"screenshot: {page.screenshot(SCREENSHOT)}", flush=True)

    attempt("the page imports batch-2 itself, with a live progress bar, and searches the catalogue", the_page)

    def transform() -> None:
        manifest = manifests[people]
        name, entry = next((n, e) for n, e in sorted(manifest["files"].items()) if e.get("format") == "csv" and "marker" in e)
        script = "record.title = record.title.toUpperCase(); return record;"
        run = Process([*frontend_py, str(people.relative_to(ROOT)), "--transform", script,
                       "--search", entry["marker"]], echo="python")
        check(run.finish(timeout=WAIT)[0] == 0, "imported with the transform")
        hits = demo.call("search", {"query": entry["marker"]})["hits"]
        title = hits[0]["title"] if hits else ""
        check(bool(hits) and hits[0]["file"] == name and title == title.upper() and title != title.lower(),
              f"the record {name} #0 is stored with its title upper-cased by the transform: {title!r}")
        check(demo.call("stats")["etl"]["evaluations"] == 1 + manifest["totals"]["files"],
              "the host sent $evaluate only for this import: once to check the transform, then once per file")

    attempt("the opt-in transform: a record transform the front-end asks for, run by the ETL peer through $evaluate",
            transform)

    def ctrl_c() -> None:
        run = Process([*frontend_py, str(batch_1.relative_to(ROOT)), "--delay-per-file-ms", "2"], echo="python")
        run.wait_for_line("progress ")
        wait_until(lambda: (read_json(STATE_FILE) or {}).get("seq", 0) >= 2, "some progress of the re-import")
        run.popen.send_signal(signal.SIGINT)
        status, _ = run.finish(timeout=WAIT)
        check(status == 130 and any(l.startswith("cancelled: ") for l in run.lines),
              "Ctrl-C cancelled the job; the files written before it are whole")
        check(wait_until(lambda: (r := demo.call("stats")["lastImport"])["status"] != "running" and r, "the run's end")
              ["status"] == "cancelled", "the host recorded the run as cancelled")

    attempt("Ctrl-C: the Python front-end re-imports batch-1, slowed down, and is interrupted", ctrl_c)

    def by_hand() -> None:
        command = [str(BIN / "zerobridge"), "call", "search", '{"query": "lighthouse espresso", "limit": 2}',
                   "--connection-file", str(CONNECTION_FILE)]
        print("$ " + shlex.join(command), flush=True)
        completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(completed.stdout.strip())
        check(completed.returncode == 0 and json.loads(completed.stdout.splitlines()[-1])["total"] > 0,
              "zerobridge call search answered with matches")

    attempt("poking the host by hand", by_hand)

    def metrics_and_top() -> None:
        show(f"the host's metrics can be scraped at {METRICS_URL} (Prometheus text format; `--metrics [HOST:]PORT`)")
        with urllib.request.urlopen(METRICS_URL, timeout=WAIT) as response:
            text = response.read().decode()
        wanted = ("zerobridge_requests_total{", "zerobridge_request_duration_seconds_bucket{", "zerobridge_jobs_ended_total{",
                  'zerobridge_supervised_restarts_total{peer="etl"} 1')
        for line in (l for l in text.splitlines() if l.startswith(("zerobridge_requests_total", "zerobridge_supervised"))):
            print(f"   {line}")
        check(all(w in text for w in wanted),
              "requests by action and outcome, their latency histogram, jobs by state and the ETL peer's one restart")
        command = [str(BIN / "zerobridge"), "top", "--once", "--connection-file", str(CONNECTION_FILE)]
        print("$ " + shlex.join(command), flush=True)
        completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=WAIT)
        print(completed.stdout.rstrip())
        check(completed.returncode == 0 and "host import-host" in completed.stdout and "etl up (restarts 1)" in completed.stdout,
              "zerobridge top --once shows the host's sessions, refusals, jobs and its supervised ETL peer")

    attempt("metrics where Prometheus scrapes them, and the live view", metrics_and_top)


if __name__ == "__main__":
    if not (BIN / "import-host").exists():
        sys.exit(f"{BIN / 'import-host'} is missing: run `swift build --product import-host` (make demo does)")
    if shutil.which("node") is None:
        sys.exit("node is missing: make demo installs it (make deps-system)")
    sys.exit(main())
