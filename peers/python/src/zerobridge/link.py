"""The link: one conversation with the other side, independent of sockets.

It keeps the calls we made (id, one monotonic deadline each, progress) and the requests the other
side made of us (a handler task each, answered exactly once), answers ``ping``, sends ``cancel``,
and watches the other side's liveness. The owner gives it a ``send(frames)`` function, feeds it
every received message with :meth:`Link.receive`, and serves requests through ``serve``.

Everything here runs on one asyncio event loop; only :meth:`RequestContext.progress` may be called
from another thread (sync handlers run in worker threads).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

from . import errors, wire
from .errors import BridgeCancelled, BridgeError, BridgeTimeout

log = logging.getLogger("zerobridge")

Send = Callable[[list[bytes]], None]
Serve = Callable[[wire.Request, "RequestContext"], Awaitable[Any]]
OnMessage = Callable[[wire.Message], None]


class OutgoingCall:
    """A request we sent: its future result, and its progress in arrival order."""

    def __init__(self, link: Link, request: wire.Request, deadline: float | None) -> None:
        self.id = request.id
        self.action = request.action
        self.deadline = deadline
        self.future: asyncio.Future[Any] = link.loop.create_future()
        self._link = link
        self._wants_progress = request.progress
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._last_seq = 0
        self._timer: asyncio.TimerHandle | None = None
        if deadline is not None:
            self._timer = link.loop.call_at(deadline, self._expire)
        self.future.add_done_callback(self._on_done)

    def cancel(self) -> None:
        """Stop waiting and tell the other side (``cancel``); the call fails with ``cancelled``."""
        if not self.future.done():
            self._link._forget(self, send_cancel=True)
            self.future.set_exception(BridgeCancelled(f"call {self.action!r} was cancelled"))

    async def progress(self) -> AsyncIterator[Any]:
        """The progress payloads until the call ends; raises the call's error if it failed."""
        while True:
            if self._items:
                yield self._items.popleft()
                continue
            if self.future.done():
                if self.future.cancelled():
                    raise BridgeCancelled(f"call {self.action!r} was cancelled")
                error = self.future.exception()
                if error is not None:
                    raise error
                return
            self._waiter = self._link.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    # --- driven by the link ---

    def _on_progress(self, message: wire.Progress) -> None:
        if not self._wants_progress:
            return
        if message.seq <= self._last_seq:
            log.warning("dropped progress seq %d of %s: not after seq %d", message.seq, self.id, self._last_seq)
            return
        self._last_seq = message.seq
        self._items.append(message.payload)
        self._wake()

    def _expire(self) -> None:
        if not self.future.done():
            self._link._forget(self, send_cancel=False)
            self.future.set_exception(BridgeTimeout(f"call {self.action!r} timed out"))

    def _on_done(self, future: asyncio.Future[Any]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if future.cancelled():  # asyncio cancellation of whoever awaited the call
            self._link._forget(self, send_cancel=True)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class RequestContext:
    """What a handler knows about the request it serves (its optional second argument).

    ``id``: the request id. ``action``: its action. ``deadline``: ``time.monotonic()`` value when the
    caller gives up, or None. ``cancelled``: True once the caller cancelled or the deadline passed
    (the asyncio task of an async handler is cancelled too; a sync handler can poll this).
    ``progress(payload)`` sends a progress event when the caller asked for progress.
    """

    def __init__(self, link: Link, request: wire.Request, deadline: float | None) -> None:
        self.id = request.id
        self.action = request.action
        self.deadline = deadline
        self.cancelled = False
        self._link = link
        self._wants_progress = request.progress
        self._seq = 0
        self._answered = False

    def progress(self, payload: Any = None) -> _Sent:
        """Send ``payload`` as the next progress event. Works with and without ``await``, from any thread."""
        if threading.get_ident() == self._link.loop_thread:
            self._send_progress(payload)
        else:
            self._link.loop.call_soon_threadsafe(self._send_progress, payload)
        return _Sent()

    def _send_progress(self, payload: Any) -> None:
        if self._answered or not self._wants_progress:
            return
        self._seq += 1
        try:
            self._link.send(wire.Progress(id=self.id, seq=self._seq, payload=payload))
        except TypeError as error:
            log.warning("progress of %s not sent: %s", self.id, error)


class _Sent:
    """Lets ``await ctx.progress(x)`` and plain ``ctx.progress(x)`` both work."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield


class _Served:
    __slots__ = ("request", "context", "task", "timer")

    def __init__(self, request: wire.Request, context: RequestContext) -> None:
        self.request = request
        self.context = context
        self.task: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None


class Link:
    """One side of a conversation. See the module docstring."""

    def __init__(
        self,
        *,
        send: Send,
        serve: Serve,
        on_message: OnMessage,
        key: bytes = b"",
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.max_message_bytes: int | None = None
        self._send_frames = send
        self._serve = serve
        self._on_message = on_message
        self._key = key
        self._ids = itertools.count(1)
        self._calls: dict[str, OutgoingCall] = {}
        self._served: dict[str, _Served] = {}
        now = self.loop.time()
        self.last_sent = now
        self.last_heard = now

    @property
    def calls_in_flight(self) -> int:
        return len(self._calls)

    @property
    def requests_in_flight(self) -> int:
        return len(self._served)

    # --- sending -------------------------------------------------------------------------

    def send(self, message: wire.Message) -> None:
        """Encode and send ``message``. TypeError when its payload is not JSON."""
        self._send_frames(wire.encode(message, key=self._key))
        self.last_sent = self.loop.time()

    def call(
        self, action: str, payload: Any = None, *, timeout: float | None = None, progress: bool = False
    ) -> OutgoingCall:
        """Send a request; the returned call completes with its response or its deadline."""
        _check_action(action)
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        request_id = str(next(self._ids))
        timeout_ms = None if timeout is None else max(1, math.ceil(timeout * 1000))
        request = wire.Request(request_id, action, payload, timeout_ms, progress)
        frames = wire.encode(request, key=self._key)
        self._check_size(frames)
        deadline = None if timeout is None else self.loop.time() + timeout
        outgoing = OutgoingCall(self, request, deadline)
        self._calls[request_id] = outgoing
        self._send_frames(frames)
        self.last_sent = self.loop.time()
        return outgoing

    def post(self, action: str, payload: Any = None) -> None:
        """Send an event (never answered)."""
        _check_action(action)
        frames = wire.encode(wire.Event(action, payload), key=self._key)
        self._check_size(frames)
        self._send_frames(frames)
        self.last_sent = self.loop.time()

    def _check_size(self, frames: list[bytes]) -> None:
        if self.max_message_bytes is None:
            return
        size = sum(len(f) for f in frames[1:])
        if size > self.max_message_bytes:
            raise BridgeError(
                errors.TOO_LARGE, f"message of {size} bytes is over the host's limit of {self.max_message_bytes}"
            )

    def _forget(self, call: OutgoingCall, *, send_cancel: bool) -> None:
        if self._calls.get(call.id) is call:
            del self._calls[call.id]
            if send_cancel:
                self.send(wire.Cancel(call.id))

    # --- receiving -----------------------------------------------------------------------

    def receive(self, frames: list[bytes]) -> None:
        """Handle one received message. Never raises: bad input is answered or logged."""
        self.last_heard = self.loop.time()
        try:
            message = wire.decode(frames, key=self._key)
        except wire.WireError as error:
            self._on_unreadable(error)
            return
        try:
            self._dispatch(message)
        except Exception:  # a bug here must not end the conversation
            log.exception("failed to handle %r", message)

    def _dispatch(self, message: wire.Message) -> None:
        match message:
            case wire.Response():
                self._on_response(message)
            case wire.Progress():
                call = self._calls.get(message.id)
                if call is None:
                    log.debug("dropped progress for unknown id %r", message.id)
                else:
                    call._on_progress(message)
            case wire.Request():
                self._on_request(message)
            case wire.Cancel():
                self._end_served(message.id, errors.CANCELLED, "cancelled by the caller")
            case wire.Ping():
                self.send(wire.Pong())
            case wire.Pong():
                pass
            case _:
                self._on_message(message)

    def _on_unreadable(self, error: wire.WireError) -> None:
        # Answered like any bad message (SPEC 7.5, 15.4), with the id when readable. A malformed
        # response to one of our calls also ends that call: no better answer will come.
        if error.type == "response" and error.id is not None:
            call = self._calls.pop(error.id, None)
            if call is not None and not call.future.done():
                call.future.set_exception(BridgeError(error.code, f"unreadable response: {error.message}"))
        log.warning("answered an unreadable message with %s: %s", error.code, error.message)
        self.send(wire.Response.failure(error.id, BridgeError(error.code, error.message)))

    def _on_response(self, response: wire.Response) -> None:
        if response.id is None:
            if response.error is not None:
                log.warning("the other side could not read a message: %s", response.error)
            return
        call = self._calls.pop(response.id, None)
        if call is None or call.future.done():
            log.debug("dropped response for unknown or finished id %r", response.id)
            return
        if response.ok:
            call.future.set_result(response.result)
        else:
            assert response.error is not None
            call.future.set_exception(response.error)

    def _on_request(self, request: wire.Request) -> None:
        if request.id in self._served:
            self._respond_raw(
                wire.Response.failure(request.id, BridgeError(errors.DUPLICATE_ID, f"id {request.id!r} is in flight"))
            )
            return
        deadline = None
        if request.timeout_ms is not None:
            deadline = self.loop.time() + request.timeout_ms / 1000
        served = _Served(request, RequestContext(self, request, deadline))
        self._served[request.id] = served
        if deadline is not None:
            served.timer = self.loop.call_at(
                deadline, self._end_served, request.id, errors.TIMEOUT, f"timed out after {request.timeout_ms} ms"
            )
        served.task = self.loop.create_task(self._run(served))

    async def _run(self, served: _Served) -> None:
        try:
            result = await self._serve(served.request, served.context)
        except asyncio.CancelledError:
            self._answer(served, wire.Response.failure(served.request.id, BridgeCancelled("handler cancelled")))
        except BridgeError as error:
            self._answer(served, wire.Response.failure(served.request.id, error))
        except Exception as error:  # the handler's failure is the caller's answer
            message = f"{type(error).__name__}: {error}"
            self._answer(served, wire.Response.failure(served.request.id, BridgeError(errors.HANDLER_ERROR, message)))
        except BaseException as error:  # SystemExit, KeyboardInterrupt: still answer, then let it go up
            message = f"{type(error).__name__}: {error}"
            self._answer(served, wire.Response.failure(served.request.id, BridgeError(errors.HANDLER_ERROR, message)))
            raise
        else:
            self._answer(served, wire.Response.success(served.request.id, result))

    def _end_served(self, request_id: str, code: str, message: str) -> None:
        """Answer ``code`` now and cancel the handler (cancel or timeout)."""
        served = self._served.get(request_id)
        if served is None:
            return  # unknown or finished: ignored
        self._answer(served, wire.Response.failure(request_id, errors.error_from_code(code, message)))
        served.context.cancelled = True
        if served.task is not None:
            served.task.cancel()

    def _answer(self, served: _Served, response: wire.Response) -> None:
        """Send the one response of ``served`` (later answers are discarded)."""
        if served.context._answered:
            return
        served.context._answered = True
        if self._served.get(served.request.id) is served:
            del self._served[served.request.id]
        if served.timer is not None:
            served.timer.cancel()
        self._respond_raw(response)

    def _respond_raw(self, response: wire.Response) -> None:
        try:
            frames = wire.encode(response, key=self._key)
            self._check_size(frames)
        except TypeError as error:
            response = wire.Response.failure(response.id, BridgeError(errors.HANDLER_ERROR, f"result {error}"))
            frames = wire.encode(response, key=self._key)
        except BridgeError as error:
            frames = wire.encode(wire.Response.failure(response.id, error), key=self._key)
        self._send_frames(frames)
        self.last_sent = self.loop.time()

    # --- ending --------------------------------------------------------------------------

    def fail_all(self, error: BridgeError) -> None:
        """The other side is gone: fail our calls with ``error``, cancel its requests unanswered."""
        calls, self._calls = self._calls, {}
        for call in calls.values():
            if not call.future.done():
                call.future.set_exception(errors.error_from_code(error.code, error.message, error.data))
        served, self._served = self._served, {}
        for item in served.values():
            item.context._answered = True  # their responses are discarded
            item.context.cancelled = True
            if item.timer is not None:
                item.timer.cancel()
            if item.task is not None:
                item.task.cancel()

    async def watch(self, heartbeat_ms: int, on_lost: Callable[[str], None]) -> None:
        """Ping after ``heartbeat_ms`` of sending nothing; call ``on_lost`` after 3 x of hearing nothing."""
        interval = heartbeat_ms / 1000
        while True:
            now = self.loop.time()
            if now - self.last_heard >= 3 * interval:
                on_lost(f"heard nothing for {3 * heartbeat_ms} ms")
                return
            if now - self.last_sent >= interval:
                self.send(wire.Ping())
            next_check = min(self.last_sent + interval, self.last_heard + 3 * interval)
            await asyncio.sleep(max(next_check - self.loop.time(), 0.001))


def _check_action(action: str) -> None:
    if not (isinstance(action, str) and 1 <= len(action) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"action must be a string of 1..128 characters, not {action!r}")


__all__ = ["Link", "OutgoingCall", "RequestContext"]
