"""Import a folder through the import host, with a live progress bar; Ctrl-C cancels the import cleanly.

    python examples/frontends/import.py FOLDER [--connect ENDPOINT_OR_CONNECTION_FILE] [--search WORDS]

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
from typing import Any

import zerobridge

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_CONNECTION_FILE = ROOT / ".demo" / "import-host.json"


class ProgressView:
    """A tqdm bar on a terminal; otherwise a plain line now and then, so logs stay readable."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.last_line = 0.0
        self.last: dict[str, Any] | None = None
        if not quiet and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # the plain lines below still work
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=0, unit="file", dynamic_ncols=True, file=sys.stderr, desc="importing")

    def update(self, progress: dict[str, Any]) -> None:
        self.last = progress
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.total = progress["filesTotal"]
            self.bar.n = progress["filesDone"]
            self.bar.set_postfix_str(
                f"{progress['records']:,} records, {progress['filesFailed']} failed, "
                f"{progress['recordsPerSecond']:,.0f} rec/s, {progress['currentFile']}", refresh=False)
            self.bar.refresh()
            return
        now = time.monotonic()
        if now - self.last_line >= 1.0 or progress["filesDone"] == progress["filesTotal"]:
            self.last_line = now
            print(f"progress {progress['filesDone']}/{progress['filesTotal']} files, {progress['records']:,} records, "
                  f"{progress['filesFailed']} failed, {progress['filesPerSecond']:,.0f} files/s, "
                  f"{progress['recordsPerSecond']:,.0f} records/s, at {progress['currentFile']}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


async def run_import(peer: zerobridge.Peer, folder: str, options: dict[str, Any], view: ProgressView,
                     say: Any) -> tuple[str, dict[str, Any] | None]:
    """Streams importFolder; returns ("completed", result) or ("cancelled", None)."""
    loop = asyncio.get_running_loop()
    async with peer.stream("importFolder", {"path": folder, "options": options}) as call:
        def interrupt() -> None:
            say("\ncancelling the import (Ctrl-C again to quit at once)...")
            call.cancel()
            loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C gets Python's default
            signal.signal(signal.SIGINT, signal.default_int_handler)

        loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            async for progress in call.progress:
                view.update(progress)
            return "completed", await call.result
        except zerobridge.BridgeCancelled:
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


async def main(args: argparse.Namespace) -> int:
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else (lambda text: print(text, flush=True))
    options: dict[str, Any] = {}
    if args.delay_per_file_ms is not None:
        options["delayPerFileMs"] = args.delay_per_file_ms
    folder = os.path.abspath(args.folder)
    try:
        peer = await zerobridge.connect(args.connect, name="import-py", connect_timeout=args.connect_timeout)
    except (zerobridge.BridgeError, OSError, ValueError) as error:
        print(f"import.py: cannot reach the import host at {args.connect}: {error}", file=sys.stderr)
        return 1
    try:
        view = ProgressView(quiet=args.json)
        say(f"importing {folder} through {peer.host} at {peer.endpoint}")
        try:
            status, result = await run_import(peer, folder, options, view, say)
        except zerobridge.BridgeError as error:
            print(f"import.py: the import failed: {error.code}: {error}", file=sys.stderr)
            return 1
        stats = await peer.call("stats")
        found = await peer.call("search", {"query": args.search, "limit": 3})
        if args.json:
            print(json.dumps({"status": status, "result": result, "lastProgress": view.last, "stats": stats,
                              "search": found}))
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
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
