"""A page peer in Chromium against the Node peer, on one release host over loopback (issue 24).

    .venv/bin/python bench/browser_peer.py [--bin .build/release] [--seconds 1.0] [--repeat 2]

One `zerobridge serve --conformance` listens on tcp and WebSocket (`--ws 127.0.0.1:0`), keyed (a connection file):
the Node peer (bench/node_peer.mjs, through the connection file) and the browser peer (peers/node/src/browser.js, in
headless Chromium, keyed by what the host injects into the page it serves) each echo the same ~100-byte payload,
sequentially and with 64 calls in flight, in the same run. The targets: the page's sequential rate at least 1/2 of
the Node peer's, its rate with 64 in flight at least 1/3. `make bench` runs this too.

Chromium is driven here over the DevTools protocol itself (`DevTools`), not through Playwright as the browser tests
are: Playwright turns on the protocol's Network domain for every page it drives, which reports each WebSocket frame
to the driver, so the browser process, Playwright's Node driver and its Python client did work for every message the
page sent or received (measured: the page peer at 64 in flight, 4,824/s driven by Playwright, 12,528/s driven so;
the page alone is what a user's browser runs).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect as connect_websocket

from common import WARMUP_CALLS, stop_process

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "peers" / "browser-tests" / "site"
CHROMIUM = "/usr/bin/chromium"
WINDOWS = (1, 64)

# The page's measuring loop, shared by the page peer and the floor: `roundTrip` (async) once per call, after the
# warm-up; one at a time with latencies, or `window` callers at once. The same payload, check, warm-up and measured
# phase as bench/node_peer.mjs's echo loop; microseconds to 0.1, as it reports them.
PAGE_MEASURE = """async ({ window, seconds, warmup }, roundTrip) => {
    for (let i = 0; i < warmup; i += 1) await roundTrip();
    const start = performance.now();
    const end = start + seconds * 1000;
    let completed = 0;
    const latencies = [];
    if (window === 1) {
        while (performance.now() < end) {
            const before = performance.now();
            await roundTrip();
            latencies.push(performance.now() - before);
        }
        completed = latencies.length;
    } else {
        const caller = async () => {
            let mine = 0;
            while (performance.now() < end) { await roundTrip(); mine += 1; }
            return mine;
        };
        completed = (await Promise.all(Array.from({ length: window }, caller))).reduce((a, b) => a + b, 0);
    }
    const elapsed = (performance.now() - start) / 1000;
    latencies.sort((a, b) => a - b);
    const result = { window, requests: completed, seconds: elapsed, per_second: completed / elapsed, warmup };
    const at = (fraction) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(fraction * latencies.length))] * 10000) / 10;
    if (latencies.length > 0) Object.assign(result, { p50_us: at(0.5), p99_us: at(0.99), p999_us: at(0.999) });
    return result;
}"""

# The page peer's echo, checked.
PAGE_ECHO = """async (options) => {
    const measure = %s;
    const { connect } = await import('/_zerobridge/browser.js');
    const PAYLOAD = { name: 'bench', seq: 42, text: 'x'.repeat(65) };
    const PAYLOAD_JSON = JSON.stringify(PAYLOAD);
    const peer = await connect({ name: `bench-page-${options.window}` });
    try {
        return await measure(options, async () => {
            const answer = await peer.call('echo', PAYLOAD);
            if (JSON.stringify(answer) !== PAYLOAD_JSON) throw new Error(`echo returned ${JSON.stringify(answer)}`);
        });
    } finally {
        await peer.close();
    }
}""" % PAGE_MEASURE

# The floor: the same page sending a message of a request's size over a bare WebSocket to `zerobridge-bench
# ws-raw-server` (an echo on the host's own swift-nio stack, no bridge), with the same loop. The echo answers in
# order, so each answer settles the oldest call waiting.
PAGE_RAW_ECHO = """async (options) => {
    const measure = %s;
    const socket = new WebSocket(options.url, 'zerobridge.1');
    socket.binaryType = 'arraybuffer';
    await new Promise((resolve, reject) => { socket.onopen = resolve; socket.onerror = () => reject(new Error(`no WebSocket at ${options.url}`)); });
    const message = new Uint8Array(260).fill(120);  // frame 0 (a signature) and the echo request's body, about
    const waiting = [];
    socket.onmessage = () => waiting.shift()?.();
    try {
        return await measure(options, () => new Promise((resolve) => { waiting.push(resolve); socket.send(message); }));
    } finally {
        socket.close();
    }
}""" % PAGE_MEASURE


class RawWebSocketServer:
    """`zerobridge-bench ws-raw-server`: a bare WebSocket echo on loopback, for the page's floor."""

    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen([str(binary / "zerobridge-bench"), "ws-raw-server", "--endpoint", "127.0.0.1:0"],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("ready "):
            stop_process(self.process)
            raise RuntimeError(f"zerobridge-bench ws-raw-server did not start: {line!r}")
        self.url = f"ws://127.0.0.1:{line.split()[1]}/"

    def stop(self) -> None:
        stop_process(self.process)


class Host:
    """`zerobridge serve --conformance` on tcp and WebSocket, keyed, serving the browser tests' site."""

    def __init__(self, binary: Path, folder: Path) -> None:
        self.connection_file = folder / "host.json"
        command = [str(binary / "zerobridge"), "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*", "--ws", "127.0.0.1:0",
                   "--web-root", str(SITE), "--connection-file", str(self.connection_file), "--max-in-flight", "20000"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        assert self.process.stdout is not None
        lines: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while "ready" not in lines:
            if not select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self.stop()
                raise RuntimeError(f"{' '.join(command)} printed no ready line within 60 s")
            line = self.process.stdout.readline().decode()
            if not line:
                raise RuntimeError(f"{' '.join(command)} exited with {self.process.wait()}")
            _, word, value = line.strip().split(" ", 2)
            lines[word] = value
        self.page = lines["page"]

    def stop(self) -> None:
        stop_process(self.process)


class DevTools:
    """Headless Chromium with one tab, driven over the DevTools protocol with the Runtime domain alone."""

    def __init__(self, profile: Path) -> None:
        command = [CHROMIUM, "--headless", "--no-sandbox", "--no-first-run", "--remote-debugging-port=0",
                   f"--user-data-dir={profile}", "about:blank"]
        # Chromium makes its profile's singleton socket in a folder of its own under TMPDIR and, stopped by a signal,
        # leaves it there: a folder in /tmp at every run. Under the profile's folder it goes when the caller's does.
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "TMPDIR": str(profile.parent)})
        assert self.process.stderr is not None
        endpoint = None
        deadline = time.monotonic() + 60
        while endpoint is None:
            if not select.select([self.process.stderr], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self.stop()
                raise RuntimeError("chromium printed no DevTools endpoint within 60 s")
            line = self.process.stderr.readline()
            if not line:
                raise RuntimeError(f"chromium exited with {self.process.wait()} before its DevTools endpoint")
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            endpoint = found.group(1) if found else None
        # Chromium goes on logging to stderr; nothing reads it from here on, so it must not fill a pipe.
        self.process.stderr.close()
        self.ids = itertools.count(1)
        self.closing = contextlib.ExitStack()
        self.socket = self.closing.enter_context(connect_websocket(endpoint, max_size=None, open_timeout=30))
        target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def command(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Sends one command and returns its result; events (none are enabled but the target's own) are skipped."""
        number = next(self.ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv(timeout=300))
            if answer.get("id") == number:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error'].get('message')}")
                result: dict[str, Any] = answer["result"]
                return result

    def open(self, url: str) -> None:
        """Navigates the tab and waits until its document has loaded."""
        self.command("Page.navigate", {"url": url}, self.session)
        deadline = time.monotonic() + 30
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not load within 30 s")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        """The value of `expression` in the tab, awaited if it is a promise; a thrown error raises here."""
        answer = self.command("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                              self.session)
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description") or details.get("text"))
        return answer["result"].get("value")

    def stop(self) -> None:
        if getattr(self, "closing", None) is not None:
            self.closing.close()
        stop_process(self.process)


def node_echo(host: Host, window: int, seconds: float) -> dict[str, Any]:
    done = subprocess.run(["node", str(ROOT / "bench" / "node_peer.mjs"), "echo", str(host.connection_file), "--window", str(window),
                           "--seconds", str(seconds)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def page_echo(browser: DevTools, host: Host, window: int, seconds: float) -> dict[str, Any]:
    browser.open(host.page.rstrip("/") + "/index.html")
    arguments = json.dumps({"window": window, "seconds": seconds, "warmup": WARMUP_CALLS})
    try:
        result: dict[str, Any] = browser.evaluate(f"({PAGE_ECHO})({arguments})")
    except Exception as error:  # a page that failed is a figure missing, reported as such
        return {"error": str(error).splitlines()[0][:300]}
    return result


def page_raw_echo(browser: DevTools, host: Host, server: RawWebSocketServer, window: int, seconds: float) -> dict[str, Any]:
    browser.open(host.page.rstrip("/") + "/index.html")
    arguments = json.dumps({"window": window, "seconds": seconds, "warmup": WARMUP_CALLS, "url": server.url})
    try:
        result: dict[str, Any] = browser.evaluate(f"({PAGE_RAW_ECHO})({arguments})")
    except Exception as error:
        return {"error": str(error).splitlines()[0][:300]}
    return result


def python_round_trip_p50(url: str, key: str | None, rounds: int = 3000) -> float:
    """A Python websockets client's sequential echo, p50 in us: against the bare echo (`key` None, no session) or the
    host (keyed: hello, then signed requests for `echo`). What the host adds to a WebSocket round trip, without
    Chromium in the way."""
    from zerobridge import signing

    def encode(frames: list[bytes]) -> bytes:
        return b"".join(len(frame).to_bytes(4, "big") + frame for frame in frames)

    body = json.dumps({"v": 1, "type": "request", "id": "1", "action": "echo",
                       "payload": {"name": "bench", "seq": 42, "text": "x" * 65}}, separators=(",", ":")).encode()
    channel = signing.PeerChannel(bytes.fromhex(key)) if key else None

    def payload(frames: list[bytes]) -> bytes:
        return encode([channel.sign(frames, int(time.time() * 1000)) or b"" if channel else b"", *frames])

    with connect_websocket(url, subprotocols=["zerobridge.1"], origin=None, ping_interval=None) as socket:  # type: ignore[list-item]
        if channel:
            socket.send(payload([json.dumps({"v": 1, "type": "hello", "peer": f"bench-python-{time.monotonic_ns()}"},
                                            separators=(",", ":")).encode()]))
            while b'"welcome"' not in socket.recv(timeout=10):
                pass
        latencies = []
        for index in range(rounds + 200):
            started = time.perf_counter()
            socket.send(payload([body]))
            socket.recv(timeout=10)
            if index >= 200:  # warm-up
                latencies.append(time.perf_counter() - started)
    latencies.sort()
    return round(latencies[len(latencies) // 2] * 1e6, 1)


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The best of a few runs: other work on a shared machine only ever slows a run down."""
    good = [run for run in runs if "error" not in run]
    if not good:
        return runs[-1]
    chosen = dict(max(good, key=lambda run: run["per_second"]))
    chosen["runs_per_second"] = [round(run["per_second"]) for run in good]
    return chosen


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    if "per_second" not in a or "per_second" not in b or not b["per_second"]:
        return None
    return round(a["per_second"] / b["per_second"], 3)


def measure(binary: Path, seconds: float = 1.0, repeat: int = 2) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="zerobridge-bench-browser-") as folder:
        host = Host(binary, Path(folder))
        raw = RawWebSocketServer(binary)
        try:
            browser = DevTools(Path(folder) / "chromium-profile")
            try:
                for window in WINDOWS:
                    # Alternated, so that a machine getting busier or quieter drifts all alike.
                    node_runs, page_runs, floor_runs = [], [], []
                    for _ in range(repeat):
                        node_runs.append(node_echo(host, window, seconds))
                        page_runs.append(page_echo(browser, host, window, seconds))
                        floor_runs.append(page_raw_echo(browser, host, raw, window, seconds))
                    results[f"node_w{window}"] = best(node_runs)
                    results[f"browser_w{window}"] = best(page_runs)
                    results[f"browser_floor_w{window}"] = best(floor_runs)
                key = json.loads(host.connection_file.read_text()).get("key")
                bridge_url = host.page.replace("http://", "ws://", 1).rstrip("/") + "/zerobridge"
                results["python_client_p50_us"] = {
                    "bare_echo": min(python_round_trip_p50(raw.url, None) for _ in range(repeat)),
                    "host_keyed": min(python_round_trip_p50(bridge_url, key) for _ in range(repeat)),
                }
            finally:
                browser.stop()
        finally:
            raw.stop()
            host.stop()
    results["ratios"] = {f"browser_over_node_w{window}": ratio(results[f"browser_w{window}"], results[f"node_w{window}"])
                         for window in WINDOWS}
    # What no bridge could pass here: a page echoing through a server that does nothing, over the Node peer.
    results["floor_ratios"] = {f"floor_over_node_w{window}": ratio(results[f"browser_floor_w{window}"], results[f"node_w{window}"])
                               for window in WINDOWS}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(ROOT / ".build" / "release"))
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(measure(Path(args.bin), args.seconds, max(1, args.repeat)), indent=2))


if __name__ == "__main__":
    main()
