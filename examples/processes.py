"""Child processes for `make demo` (demo.py) and the end-to-end tests (tests/conftest.py): each one's stdout is read
line by line as it comes, so a caller can wait for a given line, and keeps every line."""

from __future__ import annotations

import pathlib
import queue
import shlex
import signal
import subprocess
import threading
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Process:
    """A child process run from the repository's root. With `echo`, each stdout line is also printed as it comes,
    labelled (`   [echo] line`), and stderr goes to this process's stderr; without it stderr is kept in
    `stderr_text`. Failures to show a line raise AssertionError, saying what was seen."""

    def __init__(self, command: list[str], *, echo: str | None = None, **options: Any) -> None:
        self.command = command
        self.echo = echo
        if echo is not None:
            print(f"$ {shlex.join(command)}", flush=True)
        self.popen = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                      stderr=None if echo is not None else subprocess.PIPE, **options)
        self.lines: list[str] = []  # every line so far
        self._arrived: queue.Queue[str | None] = queue.Queue()
        self.stderr_text = ""
        self._drained = False
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        if echo is None:
            threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            line = line.rstrip("\n")
            if self.echo is not None:
                print(f"   [{self.echo}] {line}", flush=True)
            self.lines.append(line)
            self._arrived.put(line)
        self._arrived.put(None)

    def _pump_stderr(self) -> None:
        assert self.popen.stderr is not None
        self.stderr_text = self.popen.stderr.read()

    def wait_for_line(self, prefix: str, timeout: float = 20) -> str:
        """The next line starting with `prefix` (lines before it are passed over). The default wait is generous: the
        machines are small and other suites may be running."""
        deadline = time.monotonic() + timeout
        name = self.echo or self.command[0]
        while True:
            try:
                line = self._arrived.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"{name}: no line starting {prefix!r} within {timeout} s; "
                                     f"saw {self.lines[-5:]}") from None
            if line is None:
                self._drained = True
                self.popen.wait()
                raise AssertionError(f"{name} exited ({self.popen.returncode}) before printing {prefix!r}; "
                                     f"stdout {self.lines[-5:]}, stderr {self.stderr_text[-500:]!r}")
            if line.startswith(prefix):
                return line

    def finish(self, timeout: float = 60) -> tuple[int, list[str]]:
        """Waits for the exit; returns the status and every stdout line."""
        status = self.popen.wait(timeout=timeout)
        while not self._drained:
            self._drained = self._arrived.get(timeout=5) is None  # at the end of the pipe every line is in self.lines
        return status, self.lines

    def kill(self) -> None:
        """SIGKILL, as a crash would: no goodbye."""
        self.popen.kill()
        self.popen.wait()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after 15 s."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
