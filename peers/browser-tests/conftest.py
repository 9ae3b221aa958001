"""The browser peer in a real browser (issue 24): Debian's Chromium, headless, driven by Playwright, against the real
`zerobridge serve --conformance --ws` host serving site/ (and /_zerobridge/ from peers/node/src)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = pathlib.Path(__file__).resolve().parent / "site"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def _websocket_helpers() -> ModuleType:
    """tests/websocket/conftest.py, the host's own WebSocket tests' helpers, loaded under a name of its own (two
    modules named conftest cannot share sys.modules)."""
    spec = importlib.util.spec_from_file_location("websocket_host_helpers", ROOT / "tests" / "websocket" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


WEBSOCKET = _websocket_helpers()


@dataclass
class Host:
    """A running `zerobridge serve --conformance --ws ... --web-root site/`, and its connection file when keyed."""

    running: Any  # tests/websocket/conftest.py's WebSocketHost
    connection_file: pathlib.Path | None

    @property
    def websocket(self) -> str:
        return str(self.running.websocket)

    def url(self, path: str) -> str:
        return str(self.running.page).rstrip("/") + "/" + path.lstrip("/")

    def stop(self) -> None:
        self.running.stop()


def start_host(tmp: pathlib.Path, *extra: str, keyed: bool = True) -> Host:
    """The host's WebSocket tests' host (tests/websocket), serving site/, with `extra` arguments; keyed through
    tmp/host.json unless `keyed` is false."""
    running = WEBSOCKET.start_host(tmp, "--web-root", str(SITE), *extra, keyed=keyed)
    return Host(running, tmp / "host.json" if keyed else None)


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
