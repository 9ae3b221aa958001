"""The browser peer in a real browser (issue 24): Debian's Chromium, headless, driven by Playwright, against the real
`zerobridge serve --conformance --ws` host serving site/ (and /_zerobridge/ from peers/node/src)."""

from __future__ import annotations

import json
import os
import pathlib
import select
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = pathlib.Path(__file__).resolve().parent / "site"
ZEROBRIDGE_BIN = os.environ.get("ZEROBRIDGE_BIN", str(ROOT / ".build" / "debug" / "zerobridge"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
READY_TIMEOUT_S = 60


@dataclass
class Host:
    """A running `zerobridge serve`: its ZeroMQ endpoint, WebSocket endpoint, page URL and connection file (if keyed)."""

    process: subprocess.Popen[bytes]
    endpoint: str
    websocket: str
    page: str
    connection_file: pathlib.Path | None

    def url(self, path: str) -> str:
        return self.page.rstrip("/") + "/" + path.lstrip("/")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_host(tmp: pathlib.Path, *, keyed: bool = True, extra: tuple[str, ...] = ()) -> Host:
    """`serve --conformance --ws 127.0.0.1:0 --web-root site/`, keyed through a connection file unless `keyed` is false."""
    if not os.access(ZEROBRIDGE_BIN, os.X_OK):
        pytest.fail(f"{ZEROBRIDGE_BIN} does not exist (run `swift build`, or set ZEROBRIDGE_BIN)")
    connection_file = tmp / "host.json" if keyed else None
    args = [ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*", "--ws", "127.0.0.1:0",
            "--web-root", str(SITE), *extra]
    args += ["--connection-file", str(connection_file)] if connection_file else ["--no-key", "--ws-allow-unkeyed"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    assert process.stdout is not None
    lines: dict[str, str] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "ready" not in lines:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
            process.kill()
            pytest.fail(f"{' '.join(args)} printed no ready line within {READY_TIMEOUT_S} s")
        line = process.stdout.readline().decode()
        if not line:
            pytest.fail(f"{' '.join(args)} exited with {process.wait()} before it was ready")
        _, word, value = line.strip().split(" ", 2)
        lines[word] = value
    return Host(process, lines["ready"], lines["websocket"], lines["page"], connection_file)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} does not exist (apt-get install chromium, or set CHROMIUM)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def keyed_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    host = start_host(tmp_path_factory.mktemp("keyed"))
    yield host
    host.stop()


@pytest.fixture(scope="module")
def unkeyed_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    host = start_host(tmp_path_factory.mktemp("unkeyed"), keyed=False)
    yield host
    host.stop()


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own browser context), whose console warnings and errors are kept in `page.problems`."""
    context = browser.new_context()
    opened = context.new_page()
    problems: list[str] = []

    def console(message: ConsoleMessage) -> None:
        # Chromium asks every site for /favicon.ico, which site/ does not have.
        if message.type in ("warning", "error") and not message.location.get("url", "").endswith("/favicon.ico"):
            problems.append(message.text)

    opened.on("console", console)
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.problems = problems  # type: ignore[attr-defined]
    yield opened
    context.close()


def connection_key(host: Host) -> str:
    assert host.connection_file is not None
    return str(json.loads(host.connection_file.read_text())["key"])
