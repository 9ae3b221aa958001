"""Fixtures: the real conformance host, a scripted in-test host, and `async def` tests without plugins."""

from __future__ import annotations

import asyncio
import hmac
import importlib.util
import inspect
import json
import os
import secrets
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from zerobridge import signing
from zerobridge.link import now_ms

# The Makefile exports ZEROBRIDGE_BIN; run alone, the tests take this checkout's debug build.
ZEROBRIDGE_BIN = os.environ.get("ZEROBRIDGE_BIN", str(Path(__file__).resolve().parents[3] / ".build" / "debug" / "zerobridge"))
ASYNC_TEST_TIMEOUT = 30.0  # no test may hang the suite
READY_TIMEOUT = 15.0


# --- `async def test_...` run by asyncio.run (pytest-asyncio is not a dependency) ------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"async_timeout(seconds): a longer limit for an async test than the {ASYNC_TEST_TIMEOUT:g} s default"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    marker = pyfuncitem.get_closest_marker("async_timeout")
    limit = marker.args[0] if marker is not None else ASYNC_TEST_TIMEOUT
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), limit))
    return True


# --- the real host -------------------------------------------------------------------------


class HostProcess:
    """`zerobridge serve --conformance`, started and stopped by the tests."""

    def __init__(self, endpoint: str, *extra: str) -> None:
        self.args = [ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", endpoint, *extra]
        if not os.access(ZEROBRIDGE_BIN, os.X_OK):
            pytest.fail(f"the conformance host {ZEROBRIDGE_BIN} does not exist (set ZEROBRIDGE_BIN or build it)")
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._stderr)
        self.endpoint = self._read_ready_line()

    def _read_ready_line(self) -> str:
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        line = b""
        deadline = time.monotonic() + READY_TIMEOUT
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                break
            chunk = os.read(self.process.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
        selector.close()
        text = line.decode(errors="replace").strip()
        if not text.startswith("zerobridge ready "):
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self._stderr.seek(0)
            stderr = self._stderr.read().decode(errors="replace")[-2000:]
            self._close_pipes()
            pytest.fail(
                f"{' '.join(self.args)} did not print 'zerobridge ready <endpoint>' within {READY_TIMEOUT} s;"
                f" exit code {self.process.poll()}, stdout {text!r}, stderr {stderr!r}"
            )
        return text.removeprefix("zerobridge ready ").strip()

    def stderr_text(self) -> str:
        """What the host wrote to stderr so far (read at an offset: the host writes through the same file)."""
        descriptor = self._stderr.fileno()
        return os.pread(descriptor, os.fstat(descriptor).st_size, 0).decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_pipes()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


class JournaledHost:
    """A conformance host on a job journal (``--journal FILE``, SPEC 11) that a test can kill with SIGKILL and start
    again with the same flags on the same journal and the same endpoint: the one its first start bound, so a wildcard
    port is resolved once (SPEC 14.2, ``restart_host``)."""

    def __init__(self, journal: Path, *flags: str, endpoint: str = "tcp://127.0.0.1:*") -> None:
        self.journal = journal
        self.flags = ("--journal", str(journal), *flags)
        self.process: HostProcess | None = HostProcess(endpoint, *self.flags)
        self.endpoint = self.process.endpoint
        self.starts = 1

    def kill(self) -> None:
        """SIGKILL: the host gets no chance to finish anything (what it committed to its journal stays)."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def start(self) -> str:
        """Start it again (after :meth:`kill`) on the same journal and endpoint; its endpoint once it is ready."""
        assert self.process is None, "kill the host before starting it again"
        self.process = HostProcess(self.endpoint, *self.flags)
        self.starts += 1
        return self.process.endpoint

    def restart(self) -> str:
        """Kill it and start it again: what a conversation's ``restart_host`` step asks of the runner."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


@pytest.fixture
def journaled_host(tmp_path: Path) -> Iterator[Callable[..., JournaledHost]]:
    """Start conformance hosts on journals in this test's temporary folder (each its own file unless `journal=` says);
    all are stopped afterwards."""
    started: list[JournaledHost] = []

    def start(*flags: str, journal: Path | None = None, endpoint: str = "tcp://127.0.0.1:*") -> JournaledHost:
        host = JournaledHost(journal or tmp_path / f"journal-{len(started) + 1}.sqlite", *flags, endpoint=endpoint)
        started.append(host)
        return host

    yield start
    for host in started:
        host.stop()


@pytest.fixture(scope="session", params=["tcp", "ipc"])
def host(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """One conformance host per transport for the whole session."""
    if request.param == "tcp":
        endpoint = "tcp://127.0.0.1:*"
    else:
        endpoint = f"ipc://{tmp_path_factory.mktemp('host')}/zb.sock"
    process = HostProcess(endpoint)
    yield process
    process.stop()


@pytest.fixture
def start_host(ipc_dir: Path) -> Iterator[Callable[..., HostProcess]]:
    """Start private hosts (for tests that kill or restart them); all are stopped afterwards."""
    started: list[HostProcess] = []

    def start(*extra: str, endpoint: str | None = None) -> HostProcess:
        process = HostProcess(endpoint or f"ipc://{ipc_dir}/host.sock", *extra)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


# --- the host's side of keyed connections (SPEC 3.1, 3.3) -----------------------------------


def _protocol_reference() -> Any:
    """protocol/tests/test_signatures.py: the reference reader and writer of batches the fixtures are checked with,
    so the stand-in host reads and writes them by rules that are not the peer's own code."""
    path = Path(__file__).resolve().parents[3] / "protocol" / "tests" / "test_signatures.py"
    spec = importlib.util.spec_from_file_location("zerobridge_protocol_signatures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _protocol_reference()


class HostChannels:
    """The host's rules of keyed connections, for tests: each connection (a routing id) gets a channel from a signed
    opening `hello` whose ms is within 300 s of the host's clock and whose nonce was never accepted before; after it,
    `p2h` counters must increase. The host signs `h2p` with counters of its own. Unlike a real host it remembers
    every nonce it accepted (it lives for one test)."""

    CLOCK_BOUND_MS = 300_000

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.nonces: set[str] = set()
        self.channels: dict[bytes, list[Any]] = {}  # connection -> [nonce, greatest counter accepted, last sent]
        self.clock_skew_ms: int | None = None  # of the last message, when refused for its clock alone (SPEC 3.1)

    def receive(self, connection: bytes, frame0: bytes, frames: list[bytes], now: int) -> str | None:
        """Why the message is refused, or None when it is accepted."""
        self.clock_skew_ms = None
        signature = signing.parse(frame0)
        channel = self.channels.get(connection)
        if channel is not None:
            if not isinstance(signature, signing.Signed):
                return "not signed m.<counter>.<mac> (or b.) on an open channel"
            if signature.counter <= channel[1]:
                return "counter not increasing"
            kind = signing.P2H_BATCH if signature.batch else signing.P2H
            if not hmac.compare_digest(signature.mac, signing.mac(self.key, kind, channel[0], signature.counter, frames)):
                return "wrong MAC"
            channel[1] = signature.counter
            return None
        if not isinstance(signature, signing.Opening):
            return "the first message is not signed as an opening"
        if not hmac.compare_digest(signature.mac, signing.mac(self.key, signing.HELLO, signature.nonce, signature.ms, frames)):
            return "wrong MAC"
        if _body_type(frames[0]) != "hello":
            return "an opening signature on a message that is not hello"
        if abs(signature.ms - now) > self.CLOCK_BOUND_MS:
            self.clock_skew_ms = signature.ms - now
            return "the opening's clock is more than 300 s off"
        if signature.nonce in self.nonces:
            return "a replayed opening"
        self.nonces.add(signature.nonce)
        self.channels[connection] = [signature.nonce, 0, 0]
        return None

    def sign(self, connection: bytes, frames: list[bytes], kind: str = signing.H2P) -> bytes:
        """Frame 0 for the next message (or, kind `h2p-batch`, batch) to `connection` (which must have a channel)."""
        channel = self.channels[connection]
        channel[2] += 1
        return signing.sign_message(self.key, kind, channel[0], channel[2], frames)


def _body_type(frame: bytes) -> Any:
    try:
        body = json.loads(frame)
    except ValueError:
        return None
    return body.get("type") if isinstance(body, dict) else None


UNAUTHORIZED_ANSWER = json.dumps({"v": 1, "type": "response", "id": None, "ok": False,
                                  "error": {"code": "unauthorized", "message": "wrong signature"}}).encode()


# --- a scripted host inside the test -------------------------------------------------------


class FakeHost:
    """A pyzmq ROUTER playing the host: it answers hello (welcome) and ping (pong) unless `silent`,
    records every body it receives, and sends whatever a test tells it to.

    As a 1.2 host it gives each session a resume token and resumes a session only with it; `tokens=False`
    plays a 1.1 host (no tokens; the session id alone resumes). `refuse_names` answers every hello with
    `name_taken`, as a host does while another live session holds the name. With `curve_secret_key` (Z85) it is a
    CURVE server that accepts any client key. With `key` it is a keyed host (SPEC 3.1): it processes only what
    `HostChannels` accepts, answers the rest with an unsigned `unauthorized` (recorded in `refused`), and signs what it
    sends. `raw` holds every message received as frames, `sent` every message sent, both with their routing ids.
    `info` (an object) goes in every welcome as `welcome.info` (SPEC 1.3). It reads batches (SPEC 3.3, keyed or not) with
    the protocol's reference reader, counting them in `batches_received`; `batch=True` says so in its welcomes, and
    `send_batch` sends one."""

    def __init__(self, *, heartbeat_ms: int = 5000, max_message_bytes: int = 1 << 20, endpoint: str | None = None,
                 rcvhwm: int | None = None, tokens: bool = True, curve_secret_key: bytes | None = None,
                 key: bytes | None = None, info: dict[str, Any] | None = None, batch: bool = False):
        self.heartbeat_ms = heartbeat_ms
        self.batch = batch
        self.batches_received = 0
        self.info = info
        self.tokens: dict[str, str] | None = {} if tokens else None  # session -> its resume token
        self.refuse_names = False
        self.max_message_bytes = max_message_bytes
        self.rcvhwm = rcvhwm
        self.curve_secret_key = curve_secret_key
        self.keyed = HostChannels(key) if key else None
        self.refused: list[tuple[bytes, str]] = []
        self.raw: list[tuple[bytes, list[bytes]]] = []
        self.sent: list[tuple[bytes, list[bytes]]] = []
        self.silent = False
        self.sessions = 0
        self.known_sessions: set[str] = set()
        self.routing: bytes | None = None
        self._endpoint = endpoint
        self._received: list[tuple[bytes, Any]] = []
        self._changed = asyncio.Condition()
        self._taken: set[int] = set()

    async def __aenter__(self) -> FakeHost:
        self.context = zmq.asyncio.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        if self.rcvhwm is not None:  # a small receive queue: a host that stops reading soon stops the peer's sends
            self.socket.setsockopt(zmq.RCVHWM, self.rcvhwm)
            self.socket.setsockopt(zmq.RCVBUF, 4096)
        if self.curve_secret_key is not None:
            self.socket.curve_server = True
            self.socket.curve_secretkey = self.curve_secret_key
        if self._endpoint is None:
            port = self.socket.bind_to_random_port("tcp://127.0.0.1")
            self.endpoint = f"tcp://127.0.0.1:{port}"
        else:
            self.socket.bind(self._endpoint)
            self.endpoint = self._endpoint
        self._reading = asyncio.Event()
        self._reading.set()
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        self.socket.close(0)
        self.context.term()

    def stop_reading(self) -> None:
        """Read nothing more after the message being waited for (what the peer sends piles up in its queues)."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    async def _read(self) -> None:
        while True:
            await self._reading.wait()
            routing, *frames = await self.socket.recv_multipart()
            self.raw.append((routing, frames))
            if self.keyed is not None:
                why = self.keyed.receive(routing, frames[0], frames[1:], now_ms()) if len(frames) >= 2 else "too few frames"
                if why is not None:
                    self.refused.append((routing, why))
                    self.send_frames(routing, [b"", UNAUTHORIZED_ANSWER], sign=False)
                    continue
            if self.is_batch(frames[0]):
                self.batches_received += 1
                for message in REFERENCE.read_batch(frames[1]):  # a whole batch refused raises: the test fails
                    assert isinstance(message, list), f"the peer sent a bad message in a batch: {message}"
                    await self._handle(routing, [b"", *message])
                continue
            await self._handle(routing, frames)

    def is_batch(self, frame0: bytes) -> bool:
        """SPEC 3.3: a batch's frame 0 is `b.<counter>.<mac>` on a keyed connection, exactly `b` without a key."""
        return frame0.startswith(b"b.") if self.keyed is not None else frame0 == b"b"

    async def _handle(self, routing: bytes, frames: list[bytes]) -> None:
        try:
            body = json.loads(frames[1])
        except (IndexError, ValueError):
            body = {"unreadable": frames}
        if not self.silent and isinstance(body, dict):
            if body.get("type") == "hello" and self.refuse_names:
                self.send(routing, {"v": 1, "type": "response", "id": None, "ok": False, "error": {
                    "code": "name_taken", "message": f"the name {body.get('peer')!r} is held by another live session"}})
            elif body.get("type") == "hello":
                self.routing = routing
                session = body.get("session")
                # Resume only what this host made, and (1.2) only with that session's token.
                if session not in self.known_sessions or (
                    self.tokens is not None and body.get("resume_token") != self.tokens.get(session)
                ):
                    self.sessions += 1
                    session = f"session-{self.sessions}"
                    self.known_sessions.add(session)
                    if self.tokens is not None:
                        self.tokens[session] = secrets.token_hex(32)
                self.send(routing, self.welcome(session))
            elif body.get("type") == "ping":
                self.send(routing, {"v": 1, "type": "pong"})
        async with self._changed:
            self._received.append((routing, body))
            self._changed.notify_all()

    def welcome(self, session: str) -> dict[str, Any]:
        body = {
            "v": 1,
            "type": "welcome",
            "host": "fake",
            "session": session,
            "actions": ["echo"],
            "heartbeat_ms": self.heartbeat_ms,
            "limits": {"max_message_bytes": self.max_message_bytes, "max_in_flight": 256},
        }
        if self.tokens is not None and session in self.tokens:
            body["resume_token"] = self.tokens[session]
        if self.info is not None:
            body["info"] = self.info
        if self.batch:
            body["batch"] = True
        return body

    def send(self, routing: bytes | None, body: dict[str, Any] | bytes, *attachments: bytes) -> None:
        """Send a body (a dict is JSON-encoded; bytes go as they are) to `routing` (default: the peer)."""
        frame = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_frames(routing, [b"", frame, *attachments])

    def send_frames(self, routing: bytes | None, frames: list[bytes], *, sign: bool = True) -> None:
        """Send frames as they are, but (a keyed host, `sign`) with frame 0 signed for the connection's channel."""
        target = routing if routing is not None else self.routing
        assert target is not None, "no peer has said hello yet"
        if sign and self.keyed is not None:
            frames = [self.keyed.sign(target, frames[1:]), *frames[1:]]
        self.sent.append((target, frames))
        self.socket.send_multipart([target, *frames])

    def send_batch(self, routing: bytes | None, *messages: list[bytes] | dict[str, Any]) -> None:
        """Send one batch (SPEC 3.3) of `messages` (bodies, or frames 1..n) to `routing` (default: the peer), signed
        h2p-batch for its channel when keyed; one message alone goes in a batch too."""
        batch = REFERENCE.write_batch([m if isinstance(m, list) else [json.dumps(m).encode()] for m in messages])
        self.send_batch_frames(routing, [batch])

    def send_batch_frames(self, routing: bytes | None, frames: list[bytes]) -> None:
        """Send `frames` (a batch's frames 1..n, good or not) behind a batch's frame 0: signed h2p-batch for the
        channel of `routing` (default: the peer) when keyed, the byte b without a key."""
        target = routing if routing is not None else self.routing
        assert target is not None, "no peer has said hello yet"
        frame0 = self.keyed.sign(target, frames, signing.H2P_BATCH) if self.keyed is not None else b"b"
        self.send_frames(target, [frame0, *frames], sign=False)

    async def next(self, type: str, timeout: float = 5.0, **fields: Any) -> dict[str, Any]:
        """The next received body of `type` (with these field values) after those already taken."""
        routing, body = await self.next_with_routing(type, timeout, **fields)
        return body

    async def next_with_routing(self, type: str, timeout: float = 5.0, **fields: Any) -> tuple[bytes, dict[str, Any]]:
        def find() -> tuple[bytes, dict[str, Any]] | None:
            for index, (routing, body) in enumerate(self._received):
                if index in self._taken or not isinstance(body, dict) or body.get("type") != type:
                    continue
                if all(body.get(k) == v for k, v in fields.items()):
                    self._taken.add(index)
                    return routing, body
            return None

        async with self._changed:
            found = await asyncio.wait_for(self._changed.wait_for(find), timeout)
        assert found is not None
        return found

    def bodies(self, type: str) -> list[dict[str, Any]]:
        return [b for _, b in self._received if isinstance(b, dict) and b.get("type") == type]


@pytest.fixture
def fake_host() -> Callable[..., FakeHost]:
    return FakeHost


@pytest.fixture
def ipc_dir() -> Iterator[Path]:
    # ipc paths are limited to ~100 bytes, so not pytest's long tmp_path
    with tempfile.TemporaryDirectory(prefix="zb") as directory:
        yield Path(directory)

