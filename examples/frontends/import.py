"""Import a folder through the import host, with a live progress bar; Ctrl-C cancels the import cleanly.

    python examples/frontends/import.py FOLDER [--connect ENDPOINT_OR_CONNECTION_FILE] [--search WORDS]

The import is a job on the host (SPEC 7.16), started with an idempotency key. As its progress arrives, the job's id
and the last progress seen go into a state file (.demo/import-py.state.json; `--state-file`), so a front-end that
was killed and is started again with the same folder re-attaches to the same job after that progress and carries
on with the same bar (`re-attached to job <id> after progress #<seq>`). Each `catalogChanged` the host broadcasts
on the topic `catalog` is printed as one line.

Shows a tqdm bar when stderr is a terminal, plain progress lines (at most one a second) when it is not (CI,
pipes). At the end, or after Ctrl-C, prints the summary (per-file errors included), what the database holds,
and a sample search. Exit status: 0 when the import completed, 130 when it was cancelled, 1 on failure.
`--json` prints one JSON object instead of the text, for scripts and tests.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import pathlib
import signal
import sys
import time
import uuid
from typing import Any

import zerobridge

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CONNECTION_FILE = ROOT / ".demo" / "import-host.json"
DEFAULT_STATE_FILE = ROOT / ".demo" / "import-py.state.json"
ACTION = "importFolder"


class ProgressView:
    """A tqdm bar on a terminal; otherwise a plain line now and then, so logs stay readable."""

    def __init__(self, quiet: bool, resumed_from: dict[str, Any] | None = None) -> None:
        """`resumed_from`: the last progress an earlier run of this front-end saw of the same job; the bar starts there."""
        self.quiet = quiet
        self.bar: Any = None
        self.last_line = 0.0
        self.last: dict[str, Any] | None = resumed_from
        if not quiet and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # the plain lines below still work
                tqdm = None
            if tqdm is not None:
                done = resumed_from or {"filesDone": 0, "filesTotal": 0}
                self.bar = tqdm(total=done["filesTotal"], initial=done["filesDone"], unit="file", dynamic_ncols=True,
                                file=sys.stderr, desc="importing")

    def update(self, progress: dict[str, Any]) -> None:
        self.last = progress
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.total = progress["filesTotal"]
            self.bar.n = progress["filesDone"]
            self.bar.set_postfix_str(
                f"{progress['records']:,} records, {progress['filesFailed']} failed, "
                f"{progress['recordsPerSecond']:,.0f} rec/s{describe_etl(progress)}{at(progress)}",
                refresh=False)
            self.bar.refresh()
            return
        now = time.monotonic()
        if now - self.last_line >= 1.0 or progress["filesDone"] == progress["filesTotal"]:
            self.last_line = now
            print(f"progress {progress['filesDone']}/{progress['filesTotal']} files, {progress['records']:,} records, "
                  f"{progress['filesFailed']} failed, {progress['filesPerSecond']:,.0f} files/s, "
                  f"{progress['recordsPerSecond']:,.0f} records/s{describe_etl(progress)}{at(progress)}",
                  flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def at(progress: dict[str, Any]) -> str:
    """The file finished last; a report relayed before any file finished has none."""
    return f", at {progress['currentFile']}" if progress.get("currentFile") else ""


def describe_etl(progress: dict[str, Any]) -> str:
    """What a progress report says of the ETL peer, when there is news: calls retried after it was lost, and how far
    it is with the long files in flight (the Node front-end says the same)."""
    parts = [f", {progress['etlRetries']} ETL call(s) retried"] if progress.get("etlRetries") else []
    parts += [f", parsing {file['file']} {100 * file['bytesDone'] // max(file['bytesTotal'], 1)}%"
              for file in progress.get("parsing", [])[:2]]
    return "".join(parts)


class JobState:
    """The job this front-end follows, in a small JSON file: `{action, key, job, seq, folder, progress}`. Written before
    the job starts (with its key, so even a kill right after the start finds it) and then as progress arrives, at most
    every `interval` seconds, by writing a temporary file and renaming it over the old one (never half-written).
    Removed once the job has ended."""

    def __init__(self, path: pathlib.Path, folder: str, interval: float = 0.2) -> None:
        self.path = path
        self.folder = folder
        self.interval = interval
        self.saved_at = 0.0
        self.value: dict[str, Any] = {}

    def unfinished(self) -> dict[str, Any] | None:
        """What an earlier run left for this folder, if anything."""
        try:
            value = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(value, dict) or value.get("folder") != self.folder or value.get("action") != ACTION:
            return None
        self.value = value
        return value

    def save(self, *, force: bool = False, **changes: Any) -> None:
        self.value.update(changes, action=ACTION, folder=self.folder)
        now = time.monotonic()
        if not force and now - self.saved_at < self.interval:
            return
        self.saved_at = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The job id in it is what proves the job is ours (SPEC 7.16): owner-only from its first byte.
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(self.value))
        os.replace(temporary, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


async def follow_import(peer: zerobridge.Peer, folder: str, options: dict[str, Any], state: JobState, quiet: bool,
                        say: Any) -> tuple[str, dict[str, Any] | None, ProgressView, bool]:
    """Starts the import as a job (or re-attaches to the one an earlier run left unfinished) and follows it to its end;
    returns ("completed", result) or ("cancelled", None), the view that showed it, and whether the job had ended before
    this front-end connected (then its catalogChanged went out before this front-end subscribed)."""
    earlier = state.unfinished()
    after_seq = 0
    attached = None
    ended_before = False
    if earlier is not None:
        after_seq = int(earlier.get("seq", 0))
        job = earlier.get("job") or {"action": ACTION, "key": earlier["key"]}
        view = ProgressView(quiet, resumed_from=earlier.get("progress"))
        named = earlier.get("job") or f"with key {earlier['key']}"
        attached = f"re-attached to job {named} after progress #{after_seq}"
        if isinstance(job, str):
            # Subscribed since the welcome: a job already ended now broadcast its catalogChanged before that.
            records = await peer.list_jobs(job=job)
            ended_before = bool(records) and records[0].state not in ("running", "suspended")
    else:
        key = uuid.uuid4().hex
        state.save(key=key, job=None, seq=0, progress=None, force=True)
        record = await peer.start_job(ACTION, {"path": folder, "options": options}, key=key)
        state.save(job=record.job, force=True)
        job = record.job
        view = ProgressView(quiet)
    reference = {"job": job} if isinstance(job, str) else job
    try:
        status, result = await follow(peer, reference, after_seq, view, state, say, attached=attached)
    except zerobridge.UnknownJob:
        # The host no longer has it (restarted without its journal, or it ended longer ago than it keeps jobs), or
        # never had it (the earlier run was killed before its start reached the host).
        state.remove()
        if earlier is None:
            raise
        say(f"job {earlier.get('job') or 'with key ' + earlier['key']} is not on the host; starting the import again")
        return await follow_import(peer, folder, options, state, quiet, say)
    state.remove()
    return status, result, view, ended_before


async def follow(peer: zerobridge.Peer, job: dict[str, str], after_seq: int, view: ProgressView, state: JobState,
                 say: Any, *, attached: str | None = None) -> tuple[str, dict[str, Any] | None]:
    """Attaches to the job after `after_seq`, shows and saves its progress; Ctrl-C cancels the job (not just this
    attach: leaving an attach only detaches). `attached` is said once the host has answered the attach with anything
    but `unknown_job`."""
    loop = asyncio.get_running_loop()
    cancelling: list[asyncio.Task[Any]] = []

    def answered() -> None:
        nonlocal attached
        if attached is not None:
            say(attached)
            attached = None

    async with peer.attach_job(job.get("job"), action=job.get("action"), key=job.get("key"), after_seq=after_seq) as call:
        def interrupt() -> None:
            say("\ncancelling the import (Ctrl-C again to quit at once)...")
            cancelling.append(loop.create_task(peer.cancel_job(job.get("job"), action=job.get("action"), key=job.get("key"))))
            loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C gets Python's default
            signal.signal(signal.SIGINT, signal.default_int_handler)

        loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            async for progress in call.progress:
                answered()
                view.update(progress)
                state.save(seq=call.last_seq, progress={k: v for k, v in progress.items() if k != "parsing"})
            result = await call.result
            answered()
            return "completed", result
        except zerobridge.BridgeCancelled:
            answered()
            return "cancelled", None
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            view.close()


def describe_run(status: str, result: dict[str, Any] | None, last: dict[str, Any] | None, shown_errors: int) -> list[str]:
    if result is None:
        done = last or {"filesDone": 0, "filesTotal": 0, "records": 0, "filesFailed": 0}
        return [f"cancelled: the last progress report had {done['filesDone']} of {done['filesTotal']} files done "
                f"({done['records']:,} records, {done['filesFailed']} failed); each file is in the database whole "
                f"or not at all"]
    lines = [
        f"imported {result['filesImported']} of {result['filesTotal']} files ({result['filesFailed']} failed): "
        f"{result['records']:,} records, {result['bytes'] / 1e6:.1f} MB in {result['seconds']:.1f} s, "
        f"{result['filesPerSecond']:,.0f} files/s, {result['recordsPerSecond']:,.0f} records/s"
    ]
    errors = result["errors"]
    if errors:
        kinds = collections.Counter(error["kind"] for error in errors)
        lines.append(f"failed files by kind: " + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())))
        for error in errors[:shown_errors]:
            lines.append(f"  {error['file']}: [{error['kind']}] {error['message']}")
        hidden = len(errors) - shown_errors + result["errorsOmitted"]
        if hidden > 0:
            lines.append(f"  ... and {hidden} more")
    return lines


def describe_search(found: dict[str, Any]) -> list[str]:
    lines = [f"search {found['query']!r}: {found['total']:,} matching records" + (", best first:" if found["hits"] else "")]
    for hit in found["hits"]:
        snippet = " ".join(hit["snippet"].split())
        lines.append(f"  {hit['file']} #{hit['record']} {hit['title']!r}: {snippet}")
    return lines


def describe_change(change: dict[str, Any]) -> str:
    """One line for a `catalogChanged` broadcast (the Node front-end prints the same)."""
    return (f"catalogChanged: run {change['run']} {change['status']} ({change['folder']}): "
            f"{change['filesImported']:,} files, {change['records']:,} records imported; "
            f"the catalogue holds {change['files']:,} files, {change['recordsTotal']:,} records")


async def main(args: argparse.Namespace) -> int:
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else (lambda text: print(text, flush=True))
    options: dict[str, Any] = {}
    if args.delay_per_file_ms is not None:
        options["delayPerFileMs"] = args.delay_per_file_ms
    if args.transform is not None:
        options["transform"] = args.transform
    folder = os.path.abspath(args.folder)
    changes: list[dict[str, Any]] = []
    changed_here = asyncio.Event()

    def catalog_changed(change: dict[str, Any]) -> None:
        changes.append(change)
        say(describe_change(change))
        if change["folder"] == folder:
            changed_here.set()

    try:
        # A short heartbeat: a front-end that was killed lets its name go within 1.5 s, so started again it is
        # welcomed under the same name soon (the host keeps a named session for a resume until its heartbeat runs out).
        # wait_for_name: started again, it waits for that rather than failing at once with name_taken.
        peer = await zerobridge.connect(args.connect, name="import-py", connect_timeout=args.connect_timeout,
                                        topics=["catalog"], heartbeat_ms=500, wait_for_name=True)
    except (zerobridge.BridgeError, OSError, ValueError) as error:
        print(f"import.py: cannot reach the import host at {args.connect}: {error}", file=sys.stderr)
        return 1
    peer.on_event("catalogChanged")(catalog_changed)
    try:
        say(f"importing {folder} through {peer.host} at {peer.endpoint}")
        state = JobState(pathlib.Path(args.state_file), folder)
        try:
            status, result, view, ended_before = await follow_import(peer, folder, options, state, args.json, say)
        except zerobridge.Suspended as error:
            # A checkpointed job cut by the host's graceful stop (SPEC 7.16): it goes on at the host's next start, and
            # the state file still names it, so running this again then re-attaches to it.
            print(f"import.py: the import host stopped; the import resumes when it starts again: {error}", file=sys.stderr)
            return 1
        except zerobridge.BridgeError as error:
            print(f"import.py: the import failed: {error.code}: {error}", file=sys.stderr)
            return 1
        if ended_before:
            say("import.py: the job had ended before this front-end connected again, so its catalogChanged went out "
                "before this front-end subscribed (front-ends connected then got it)")
        elif result is not None and result["filesImported"] > 0:
            # The host broadcasts before it answers; the event is normally handled by now.
            try:
                await asyncio.wait_for(changed_here.wait(), 5)
            except TimeoutError:
                say("import.py: no catalogChanged arrived for this import within 5 s")
        stats = await peer.call("stats")
        found = await peer.call("search", {"query": args.search, "limit": 3})
        if args.json:
            print(json.dumps({"status": status, "result": result, "lastProgress": view.last, "stats": stats,
                              "search": found, "catalogChanged": changes}))
        else:
            for line in describe_run(status, result, view.last, args.show_errors):
                print(line)
            print(f"database {stats['database']}: {stats['files']:,} files, {stats['records']:,} records")
            for line in describe_search(found):
                print(line)
    finally:
        await peer.close()
    return 0 if status == "completed" else 130


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--connect", default=str(DEFAULT_CONNECTION_FILE),
                        help="the host's endpoint or connection file (default: .demo/import-host.json)")
    parser.add_argument("--search", default="lighthouse", help="words for the sample search at the end")
    parser.add_argument("--show-errors", type=int, default=8, help="how many per-file errors to list")
    parser.add_argument("--delay-per-file-ms", type=int, help="ask the host to pause after each file (to watch or cancel)")
    parser.add_argument("--connect-timeout", type=float, default=10.0, help="seconds to wait for the host")
    parser.add_argument("--state-file", default=str(DEFAULT_STATE_FILE),
                        help="where the job being followed is saved, to re-attach to it (default: .demo/import-py.state.json)")
    parser.add_argument("--transform", help="a JavaScript function body of `record` returning the record to store "
                                            "(the ETL peer must run with --allow-evaluate)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
