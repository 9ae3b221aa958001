"""The import service's page (examples/web) in headless Chromium, driven through Playwright, for `make demo` (demo.py)
and the end-to-end tests (tests/test_import_page.py): open it, choose a folder, import, cancel, search, and read what
it shows. Chromium is Debian's (`/usr/bin/chromium`): Playwright's own browser download is not used."""

from __future__ import annotations

import os
import pathlib
from typing import Any

from playwright.sync_api import Browser, Page, Playwright, sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")  # as peers/browser-tests take it
# How long the page may take to reach a state: generous, as the machines are small and shared.
WAIT_MS = 120_000


class ImportPage:
    """One page, open in one headless Chromium; `stop()` ends both. Every wait is for a condition on the page."""

    def __init__(self, url: str, *, width: int = 1100, height: int = 1000) -> None:
        self.url = url
        self._playwright: Playwright = sync_playwright().start()
        try:
            self._browser: Browser = self._playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            self.page: Page = self._browser.new_page(viewport={"width": width, "height": height})
            self.console: list[str] = []  # the page's console messages and uncaught errors, for failure reports
            self.page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
            self.page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))
            self.websockets: list[str] = []  # the URL of every WebSocket the page opened, in order
            self.page.on("websocket", lambda socket: self.websockets.append(socket.url))
            self.page.goto(url)
            self.wait_for_state("idle")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            if hasattr(self, "_browser"):
                self._browser.close()
        finally:
            self._playwright.stop()

    def reload(self) -> str:
        """Reloads the page, as a person pressing F5 would; returns the state it comes back to (importing, when it
        attached again to the import it had running)."""
        self.page.reload()
        return self.wait_for_state("idle", "importing", "completed", "cancelled", "failed")

    def state(self) -> str:
        return self.page.eval_on_selector("body", "body => body.dataset.state")

    def wait_for_state(self, *states: str, timeout_ms: int = WAIT_MS) -> str:
        """Waits until the page's state is one of `states` (idle, importing, completed, cancelled, failed); returns it.
        A page that went `disconnected` instead fails at once, with its console."""
        wanted = [*states, "disconnected"]
        try:
            self.page.wait_for_function("states => states.includes(document.body.dataset.state)", arg=wanted,
                                        timeout=timeout_ms)
        except Exception as error:
            raise AssertionError(f"the page did not reach {states} ({error}); it is {self.state()!r}, "
                                 f"saying {self.text('#connection')!r} / {self.text('#progress-text')!r}; "
                                 f"console: {self.console[-10:]}") from None
        state = self.state()
        if state == "disconnected" and "disconnected" not in states:
            raise AssertionError(f"the page could not connect: {self.text('#connection')!r}; console: {self.console[-10:]}")
        return state

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def folders(self) -> dict[str, str]:
        """The folder choice: name -> path."""
        return self.page.eval_on_selector_all("#folder option", "options => Object.fromEntries(options.map(o => [o.text, o.value]))")

    def start_import(self, folder_name: str) -> None:
        started = int(self.page.eval_on_selector("body", "body => body.dataset.imports ?? '0'"))
        self.page.select_option("#folder", label=folder_name)
        self.page.click("#start")
        self.page.wait_for_function("n => Number(document.body.dataset.imports ?? 0) > n", arg=started, timeout=WAIT_MS)

    def import_folder(self, folder_name: str) -> str:
        """Imports a folder from the page; returns how it ended (completed, cancelled or failed)."""
        self.start_import(folder_name)
        return self.wait_for_state("completed", "cancelled", "failed")

    def wait_for_number(self, figure: str, at_least: int, *, exactly: bool = False) -> int:
        """Waits until one of the page's figures (the id of its <data> element: files-done, records, catalogue-files
        ...) is at least `at_least` (or, `exactly`, equal to it); returns it."""
        self.page.wait_for_function(
            "([id, n, exactly]) => { const v = Number(document.getElementById(id).value); return exactly ? v === n : v >= n; }",
            arg=[figure, at_least, exactly], timeout=WAIT_MS)
        return self.numbers()[figure]

    def cancel(self) -> str:
        self.page.click("#cancel")
        return self.wait_for_state("cancelled", "completed", "failed")

    def numbers(self) -> dict[str, int]:
        """The figures the page shows, as the numbers its <data> elements hold."""
        return self.page.eval_on_selector_all(
            "data[id]", "items => Object.fromEntries(items.map(d => [d.id, Number(d.value)]))")

    def bar(self) -> tuple[float, float]:
        """The progress bar's value and maximum."""
        return tuple(self.page.eval_on_selector("#bar", "bar => [bar.value, bar.max]"))  # type: ignore[return-value]

    def search(self, query: str) -> tuple[int, list[tuple[str, int]]]:
        """Searches from the page; returns the total it shows and its hits as (file, record)."""
        self.page.fill("#query", query)
        self.page.eval_on_selector("#search-summary", "summary => delete summary.dataset.total")
        self.page.click("#search")
        self.page.wait_for_function("document.getElementById('search-summary').dataset.total !== undefined",
                                    timeout=WAIT_MS)
        total = int(self.page.eval_on_selector("#search-summary", "summary => summary.dataset.total"))
        hits = self.page.eval_on_selector_all("#hits li", "items => items.map(i => [i.dataset.file, Number(i.dataset.record)])")
        return total, [(file, record) for file, record in hits]

    def changes(self) -> list[dict[str, Any]]:
        """The catalogChanged broadcasts the page listed, oldest first, as the host sent them (`mine`: "true" on the
        page's own import's)."""
        items = self.page.eval_on_selector_all("#changes li", "items => items.map(i => ({...i.dataset}))")
        numeric = ("run", "filesImported", "records", "files", "recordsTotal")
        return [{key: int(value) if key in numeric else value for key, value in item.items()} for item in reversed(items)]

    def wait_for_change(self, folder: str, count: int = 1, timeout_ms: int = WAIT_MS) -> dict[str, Any]:
        """The latest catalogChanged of `folder` the page lists, once it lists `count` of them."""
        self.page.wait_for_function(
            "([folder, count]) => [...document.querySelectorAll('#changes li')].filter(i => i.dataset.folder === folder).length >= count",
            arg=[folder, count], timeout=timeout_ms)
        return [change for change in self.changes() if change["folder"] == folder][-1]

    def screenshot(self, path: pathlib.Path) -> pathlib.Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path
