"""The blocking twin of the async peer, for plain scripts.

It is not a second implementation: the async :class:`~zerobridge.peer.Peer` runs on a private
event-loop thread and each method here hands its coroutine to that loop and waits for the answer.
For example::

    with zerobridge.connect_sync("tcp://127.0.0.1:5555", name="script") as peer:
        print(peer.call("add", {"a": 1, "b": 2}))

Handlers registered here run like the async peer's: sync functions in worker threads, async
functions on the private loop. Ctrl-C while waiting on a call cancels it (the host gets ``cancel``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import weakref
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from .describe import UNSET, Catalogue
from .errors import PeerClosed
from .jobs import DEFAULT_LIST_LIMIT, JobRecord, JobState
from .link import DEFAULT_MAX_IN_FLIGHT, DEFAULT_TIMEOUT
from .peer import DEFAULT_CONNECT_TIMEOUT, Handler, Peer, Stream

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="zerobridge-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        # The future exists before the work is handed over, so a Ctrl-C that lands at any point after
        # this line can cancel it; asyncio.run_coroutine_threadsafe returns its future only once the
        # work is scheduled, and a KeyboardInterrupt in between (seen under load) left the call running.
        if self.loop.is_closed():  # the peer's close() stopped the loop: say that, not "Event loop is closed"
            coroutine.close()
            raise PeerClosed("the peer is closed: close() was called on it (connect again for a new peer)")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self.loop.call_soon_threadsafe(_start, coroutine, future)
            return future.result()
        except BaseException:
            # KeyboardInterrupt and friends: cancel the work in the loop too (a call sends `cancel`),
            # and wait until the loop has run the cancellation before the exception goes up. The wait is
            # bounded, but not short: a loaded machine can keep the loop's thread off a core for seconds.
            if future.cancel():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(_settle(), self.loop).result(timeout=30)
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def _start(coroutine: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
    """On the loop: run ``coroutine`` as a task whose outcome is ``future``'s, and which cancelling
    ``future`` cancels. Work cancelled before it starts never starts."""
    if future.cancelled():
        coroutine.close()
        return
    loop = asyncio.get_running_loop()
    task = loop.create_task(coroutine)

    def task_done(task: asyncio.Task[T]) -> None:
        with contextlib.suppress(concurrent.futures.InvalidStateError):  # the caller cancelled meanwhile
            if task.cancelled():
                future.cancel()
            elif (error := task.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(task.result())

    def future_done(future: concurrent.futures.Future[T]) -> None:
        if future.cancelled():
            loop.call_soon_threadsafe(task.cancel)

    task.add_done_callback(task_done)
    future.add_done_callback(future_done)


async def _settle() -> None:
    for _ in range(3):  # a cancelled task needs a few loop turns to run its callbacks
        await asyncio.sleep(0)


async def _apply(function: Callable[..., T], *args: Any) -> T:
    return function(*args)


class SyncStream:
    """The blocking twin of :class:`~zerobridge.peer.Stream`: ``with peer.stream(a, p) as call``.

    ``for p in call.progress`` blocks for each progress payload; ``call.result`` blocks for the result.
    """

    def __init__(self, runner: _LoopThread, stream: Stream) -> None:
        self._runner = runner
        self._stream = stream

    def __enter__(self) -> SyncStream:
        self._runner.run(self._stream.__aenter__())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._runner.run(self._stream.__aexit__(exc_type, exc, tb))

    @property
    def id(self) -> str:
        return self._stream.id

    @property
    def progress(self) -> Iterator[Any]:
        iterator = self._runner.run(_apply(lambda: self._stream.progress))
        try:
            while True:
                try:
                    payload = self._runner.run(_next(iterator))
                except StopAsyncIteration:
                    return
                yield payload
        except GeneratorExit:
            # Left early: closing the async iterator cancels the call, as leaving an async for does.
            with contextlib.suppress(PeerClosed):
                self._runner.run(iterator.aclose())
            raise

    @property
    def result(self) -> Any:
        return self._runner.run(_await(self._stream.result))

    @property
    def skipped(self) -> int:
        """How many progress payloads the host left out so far (coalesced, or no longer in a job's journal)."""
        return self._stream.skipped

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the latest progress payload ``progress`` has yielded: attach to the job again after it."""
        return self._stream.last_seq

    def cancel(self) -> None:
        """Cancels the call (sends ``cancel``): ``result`` then raises BridgeCancelled, unless the answer came first."""
        self._runner.run(_apply(self._stream.cancel))


async def _next(iterator: Any) -> Any:
    return await iterator.__anext__()


async def _await(awaitable: Any) -> Any:
    return await awaitable


class SyncPeer:
    """The blocking twin of :class:`~zerobridge.peer.Peer`; make one with :func:`connect_sync`."""

    def __init__(self, runner: _LoopThread, peer: Peer) -> None:
        self._runner = runner
        self._peer = peer
        _open_peers.add(self)

    def __enter__(self) -> SyncPeer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Say ``bye``, close the socket and stop the private loop."""
        _open_peers.discard(self)
        if not self._runner.loop.is_closed():
            try:
                self._runner.run(self._peer.close())
            finally:
                self._runner.stop()

    @property
    def peer(self) -> Peer:
        """The async peer underneath (its attributes such as ``session`` are safe to read)."""
        return self._peer

    @property
    def connected(self) -> bool:
        return self._peer.connected

    @property
    def session(self) -> str | None:
        return self._peer.session

    @property
    def curve_public_key(self) -> str | None:
        """This peer's CURVE public key (Z85), for the host's allow-list; None without CURVE."""
        return self._peer.curve_public_key

    @property
    def refused_messages(self) -> int:
        """Messages from the host not processed for their signature on a keyed connection (SPEC 3.1)."""
        return self._peer.refused_messages

    @property
    def batches_read(self) -> int:
        """Batches read from the host (SPEC 3.3), for diagnostics."""
        return self._peer.batches_read

    @property
    def batches_sent(self) -> int:
        """Batches sent to the host (SPEC 3.3), for diagnostics."""
        return self._peer.batches_sent

    @property
    def host_catalogue(self) -> str | None:
        """The hash of the host's catalogue from its latest ``welcome`` (None from a host before 1.3)."""
        return self._peer.host_catalogue

    @property
    def catalogue(self) -> Catalogue:
        """This peer's own catalogue (what ``$describe`` answers the host)."""
        return self._peer.catalogue

    @property
    def host_info(self) -> dict[str, Any] | None:
        """The ``info`` object of the host's latest ``welcome`` (None when it sent none)."""
        return self._peer.host_info

    @property
    def host_library_version(self) -> str | None:
        """The ``library_version`` of the host's latest ``welcome``: the ZeroBridge version it runs (None when absent)."""
        return self._peer.host_library_version

    @property
    def topics(self) -> tuple[str, ...]:
        """The broadcast topics this peer subscribes to, sorted (SPEC 7.15)."""
        return self._peer.topics

    def subscribe(self, *topics: str) -> None:
        """As :meth:`zerobridge.Peer.subscribe`: a new ``hello`` with the topics added."""
        self._runner.run(_apply(self._peer.subscribe, *topics))

    def unsubscribe(self, *topics: str) -> None:
        """As :meth:`zerobridge.Peer.unsubscribe`: a new ``hello`` without these topics."""
        self._runner.run(_apply(self._peer.unsubscribe, *topics))

    def call(
        self,
        action: str,
        payload: Any = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotency_key: str | None = None,
    ) -> Any:
        """As :meth:`zerobridge.Peer.call`, blocking: 30 s unless ``timeout`` says otherwise (None: no limit)."""
        return self._runner.run(self._peer.call(action, payload, timeout=timeout, idempotency_key=idempotency_key))

    def stream(
        self,
        action: str,
        payload: Any = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotency_key: str | None = None,
    ) -> SyncStream:
        """As :meth:`zerobridge.Peer.stream`: ``with peer.stream(a, p) as call``."""
        return SyncStream(self._runner, self._peer.stream(action, payload, timeout=timeout, idempotency_key=idempotency_key))

    def start_job(
        self, action: str, payload: Any = None, *, key: str | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> JobRecord:
        """As :meth:`zerobridge.Peer.start_job`: start (or, with ``key``, find) a job and return its record at once."""
        return self._runner.run(self._peer.start_job(action, payload, key=key, timeout=timeout))

    def attach_job(
        self,
        job: str | JobRecord | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        after_seq: int = 0,
        timeout: float | None = None,
    ) -> SyncStream:
        """As :meth:`zerobridge.Peer.attach_job`: ``with peer.attach_job(record) as call``; no timeout by default, and
        leaving the block early only detaches (the job runs on)."""
        stream = self._peer.attach_job(job, action=action, key=key, after_seq=after_seq, timeout=timeout)
        return SyncStream(self._runner, stream)

    def cancel_job(
        self,
        job: str | JobRecord | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> JobRecord:
        """As :meth:`zerobridge.Peer.cancel_job`: cancel a running job and return its record."""
        return self._runner.run(self._peer.cancel_job(job, action=action, key=key, timeout=timeout))

    def list_jobs(
        self,
        *,
        action: str | None = None,
        state: JobState | None = None,
        job: str | JobRecord | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> list[JobRecord]:
        """As :meth:`zerobridge.Peer.list_jobs`: the host's jobs that match, newest first."""
        return self._runner.run(self._peer.list_jobs(action=action, state=state, job=job, limit=limit, timeout=timeout))

    def describe(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> Catalogue:
        """The host's catalogue (``$describe``), as :meth:`zerobridge.Peer.describe`."""
        return self._runner.run(self._peer.describe(timeout=timeout))

    def post(self, action: str, payload: Any = None) -> None:
        """As :meth:`zerobridge.Peer.post`, blocking until it is sent: an event to the host, no reply."""
        self._runner.run(self._peer.post(action, payload))

    def wait_connected(self, timeout: float | None = None) -> None:
        """As :meth:`zerobridge.Peer.wait_connected`, blocking: until the host has welcomed this peer (again, after a
        reconnect); BridgeTimeout after ``timeout`` seconds (None: no limit)."""
        self._runner.run(self._peer.wait_connected(timeout))

    def wait_closed(self, timeout: float | None = None) -> str:
        """As :meth:`zerobridge.Peer.wait_closed`, blocking: until the peer is closed (a peer launched by a host closes
        when its host says bye or is lost), and why; BridgeTimeout after ``timeout`` seconds (None: no limit)."""
        if self._runner.loop.is_closed():  # close() ran: the async peer is closed, its reason kept
            assert self._peer._close_reason is not None
            return self._peer._close_reason
        return self._runner.run(self._peer.wait_closed(timeout))

    def handler(
        self, name: str, *, doc: str | None = None, payload: Any = UNSET, result: Any = UNSET, progress: Any = UNSET
    ) -> Callable[[F], F]:
        """As :meth:`zerobridge.Peer.handler` (``doc``, ``payload``, ``result``, ``progress`` describe the action)."""

        def register(function: F) -> F:
            self.add_handler(name, function, doc=doc, payload=payload, result=result, progress=progress)
            return function

        return register

    def add_handler(
        self,
        name: str,
        function: Handler,
        *,
        doc: str | None = None,
        payload: Any = UNSET,
        result: Any = UNSET,
        progress: Any = UNSET,
    ) -> None:
        """As :meth:`zerobridge.Peer.add_handler`: serve ``name`` with ``function`` (which runs on the peer's own
        event-loop thread, so a blocking function holds up the peer's other work)."""
        self._runner.run(
            _apply(
                lambda: self._peer.add_handler(name, function, doc=doc, payload=payload, result=result, progress=progress)
            )
        )

    def remove_handler(self, name: str) -> None:
        """As :meth:`zerobridge.Peer.remove_handler`: stop serving ``name`` (the host's calls get ``unknown_action``)."""
        self._runner.run(_apply(self._peer.remove_handler, name))

    def on_event(self, name: str) -> Callable[[F], F]:
        """As :meth:`zerobridge.Peer.on_event`: a decorator registering the function for the host's events ``name``."""

        def register(function: F) -> F:
            self._runner.run(_apply(self._peer.on_event(name), function))
            return function

        return register

    def remove_event_handler(self, name: str) -> None:
        """As :meth:`zerobridge.Peer.remove_event_handler`: events ``name`` are dropped from now on."""
        self._runner.run(_apply(self._peer.remove_event_handler, name))


def connect(
    target: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    actions: Mapping[str, Handler] | None = None,
    handlers: Mapping[str, Handler] | None = None,
    evaluate: bool = False,
    heartbeat_ms: int | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    wait_for_name: bool = False,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    curve_server_key: str | bytes | None = None,
    curve_key_pair: tuple[str | bytes, str | bytes] | None = None,
    curve_secret_key_file: str | os.PathLike[str] | None = None,
    key: str | bytes | None = None,
    validate: bool = False,
    topics: Iterable[str] = (),
) -> SyncPeer:
    """Connect now (blocking until the host's welcome) and return the blocking peer.

    Same arguments as :func:`zerobridge.connect` (CURVE, ``key``, ``validate`` and ``topics`` included; no ``target``
    for a peer launched by a host: ``ZEROBRIDGE_CONNECTION_FILE``); the same warning about ``evaluate=True`` applies.
    """
    runner = _LoopThread()
    try:

        async def start() -> Peer:
            peer = Peer(
                target,
                name=name,
                actions=actions,
                handlers=handlers,
                evaluate=evaluate,
                heartbeat_ms=heartbeat_ms,
                connect_timeout=connect_timeout,
                wait_for_name=wait_for_name,
                max_in_flight=max_in_flight,
                curve_server_key=curve_server_key,
                curve_key_pair=curve_key_pair,
                curve_secret_key_file=curve_secret_key_file,
                key=key,
                validate=validate,
                topics=topics,
            )
            await peer.start()
            return peer

        return SyncPeer(runner, runner.run(start()))
    except BaseException:
        runner.stop()
        raise


connect_sync = connect

# Peers a script forgot to close still say bye (and flush a last cancel) when the interpreter exits:
# the loop threads are daemons and would otherwise die with messages still queued.
_open_peers: weakref.WeakSet[SyncPeer] = weakref.WeakSet()


@atexit.register
def _close_open_peers() -> None:
    for peer in list(_open_peers):
        with contextlib.suppress(Exception):
            peer.close()

__all__ = ["SyncPeer", "SyncStream", "connect", "connect_sync"]
