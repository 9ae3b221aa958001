"""Where a Chromium page peer's time goes: CPU per call of each process (and of the renderer's threads), and the
page's own JavaScript profile, while it echoes with N calls in flight against a keyed release host.

    .venv/bin/python bench/profile/page_profile.py [--bin .build/release] [--window 64] [--seconds 3] [--profile]
        [--top 30]

The host, the page and the DevTools driver are bench/browser_peer.py's (the page as `make bench` measures it, the
driver with the Runtime domain alone). CPU comes from /proc (utime + stime) over the measured run, divided by the
calls made (warm-up included); the renderer's thread named `chromium` is the page's main thread, where its
JavaScript runs. `--profile` adds the DevTools sampling profiler (every 100 us: it slows the page by about a
fifth) and prints the functions with the most samples of their own, `(idle)` being the main thread waiting.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import browser_peer  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def descendants(root: int) -> list[tuple[int, str]]:
    """Every process under `root`, with its Chromium `--type` (or its command name)."""
    table = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
    for line in table.splitlines():
        pid, ppid, args = line.split(None, 2)
        kind = args.split("--type=")[1].split()[0] if "--type=" in args else Path(args.split()[0]).name
        children[int(ppid)].append((int(pid), kind))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child[0])
    return found


def thread_seconds(pid: int) -> dict[str, tuple[str, float]]:
    readings = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            readings[task.name] = (stat[stat.index("(") + 1 : stat.rindex(")")], cpu_seconds(task / "stat"))
        except FileNotFoundError:  # a thread that ended
            continue
    return readings


def self_samples(profile: dict[str, Any], top: int) -> list[tuple[float, str]]:
    nodes = {node["id"]: node for node in profile["nodes"]}
    counts: collections.Counter[str] = collections.Counter()
    for sample in profile["samples"]:
        frame = nodes[sample]["callFrame"]
        counts[f"{frame['functionName'] or '(anonymous)'} {frame['url'].rsplit('/', 1)[-1]}:{frame['lineNumber'] + 1}"] += 1
    total = sum(counts.values()) or 1
    return [(100 * count / total, name) for name, count in counts.most_common(top)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / ".build/release"))
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--profile", action="store_true", help="also sample the page's JavaScript")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zerobridge-page-profile-") as folder:
        host = browser_peer.Host(Path(args.bin), Path(folder))
        browser = None
        try:
            browser = browser_peer.DevTools(Path(folder) / "chromium-profile")
            browser_peer.page_echo(browser, host, args.window, 1.0)  # warm-up: the page's modules compiled
            processes = [(browser.process.pid, "browser"), *descendants(browser.process.pid)]
            renderer = max((pid for pid, kind in processes if kind == "renderer"),
                           key=lambda pid: cpu_seconds(Path(f"/proc/{pid}/stat")))
            if args.profile:
                browser.command("Profiler.enable", None, browser.session)
                browser.command("Profiler.setSamplingInterval", {"interval": 100}, browser.session)
                browser.command("Profiler.start", None, browser.session)
            watched = [(host.process.pid, "host"), *processes]
            before = {pid: cpu_seconds(Path(f"/proc/{pid}/stat")) for pid, _ in watched}
            threads_before = thread_seconds(renderer)
            result = browser_peer.page_echo(browser, host, args.window, args.seconds)
            after = {pid: cpu_seconds(Path(f"/proc/{pid}/stat")) for pid, _ in watched}
            threads_after = thread_seconds(renderer)
            profile = browser.command("Profiler.stop", None, browser.session)["profile"] if args.profile else None
        finally:
            if browser is not None:
                browser.stop()
            host.stop()
    if "error" in result:
        raise SystemExit(f"the page failed: {result['error']}")
    calls = result["requests"] + result["warmup"]
    print(f"page peer, {args.window} in flight: {result['per_second']:,.0f} calls/s; CPU us a call:")
    for pid, kind in watched:
        spent = after[pid] - before[pid]
        if spent > 0:
            print(f"  {kind:<14} {spent / calls * 1e6:6.2f}" + ("  (the page's renderer)" if pid == renderer else ""))
    for tid, (name, seconds) in sorted(threads_after.items(), key=lambda item: -item[1][1]):
        spent = seconds - threads_before.get(tid, (name, 0.0))[1]
        if spent > 0:
            print(f"    thread {name:<16} {spent / calls * 1e6:6.2f}")
    if profile is not None:
        print("the page's JavaScript, samples of its own (100 us apart):")
        for share, name in self_samples(profile, args.top):
            print(f"  {share:5.1f}%  {name}")


if __name__ == "__main__":
    main()
