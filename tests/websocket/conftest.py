"""The real `zerobridge serve` host with a WebSocket listener (SPEC 2.2), started per test module on ephemeral ports."""

from __future__ import annotations

import json
import os
import pathlib
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

ROOT = pathlib.Path(__file__).resolve().parents[2]
ZEROBRIDGE_BIN = os.environ.get("ZEROBRIDGE_BIN", str(ROOT / ".build" / "debug" / "zerobridge"))
READY_TIMEOUT = 60


@dataclass
class WebSocketHost:
    process: subprocess.Popen[bytes]
    websocket: str
    page: str | None
    key: str | None
    port: int

    def rss_bytes(self) -> int:
        for line in pathlib.Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_host(tmp: pathlib.Path, *extra: str, keyed: bool = True) -> WebSocketHost:
    """`serve --conformance --ws 127.0.0.1:0`, with a connection file (and so a key) unless `keyed` is false."""
    if not os.access(ZEROBRIDGE_BIN, os.X_OK):
        pytest.fail(f"{ZEROBRIDGE_BIN} does not exist (build it, or set ZEROBRIDGE_BIN)")
    connection_file = tmp / "host.json"
    args = [ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*", "--ws", "127.0.0.1:0", *extra]
    args += ["--connection-file", str(connection_file)] if keyed else ["--no-key", "--ws-allow-unkeyed"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)  # select sees every line
    lines: dict[str, str] = {}
    deadline = time.monotonic() + READY_TIMEOUT
    assert process.stdout is not None
    while "ready" not in lines:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            process.kill()
            pytest.fail(f"{' '.join(args)} did not print its ready line within {READY_TIMEOUT} s")
        line = process.stdout.readline().decode()
        if not line:
            pytest.fail(f"{' '.join(args)} exited with {process.wait()} before it was ready")
        _, word, value = line.strip().split(" ", 2)
        lines[word] = value
    key = json.loads(connection_file.read_text())["key"] if keyed else None
    port = int(lines["websocket"].rsplit(":", 1)[1].split("/")[0])
    return WebSocketHost(process, lines["websocket"], lines.get("page"), key, port)


@pytest.fixture(scope="module")
def web_root(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A folder shaped like a Vite build output, with a link out of it and a hidden file beside the page."""
    base = tmp_path_factory.mktemp("site")
    (base / "secret.txt").write_text("outside the web root")
    root = base / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>App</title>'
                                      '<script type="module" src="/assets/index-abc123.js"></script></head>'
                                      '<body><div id="app"></div></body></html>')
    (root / "assets" / "index-abc123.js").write_text("document.getElementById('app').textContent = 'hi';\n")
    (root / "assets" / "index-abc123.css").write_text("body { margin: 0 }\n")
    (root / "assets" / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (root / "leak.txt").symlink_to(base / "secret.txt")
    (root / "up").symlink_to(base)
    (root / ".env").write_text("SECRET=1")
    return root


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, web_root: pathlib.Path) -> Iterator[WebSocketHost]:
    started = start_host(tmp_path_factory.mktemp("host"), "--web-root", str(web_root),
                         "--allow-origin", "http://localhost:5173", "--max-message-bytes", "65536")
    yield started
    started.stop()
