"""The link: one conversation with the other side, independent of sockets.

It keeps the calls we made (id, one monotonic deadline each, progress) and the requests the other
side made of us (a handler task each, answered exactly once), answers ``ping``, sends ``cancel``,
and watches the other side's liveness. The owner gives it a ``send(frames)`` function, feeds it
every received message with :meth:`Link.receive`, serves requests through ``serve`` (and
events through ``serve_event``), and gets the rest through ``on_message``: session messages, and
responses with ``"id": null``, which answer no call.

Flow control (SPEC 7.13). ``send(frames)`` hands a message to the transport without waiting and
returns False when the transport takes no more for now (its high-water mark is reached); the owner
then calls :meth:`Link.writable` once it has room again. Until then messages wait in the link's own
queue, in order. Responses, cancels, pings and session messages always join that queue; events are
refused with ``overloaded`` while it holds more than :data:`QUEUE_LIMIT_BYTES`, and calls wait for
room up to their deadline. Progress never joins it while the transport is full: each request keeps
its unsent progress (at most :data:`PROGRESS_PER_REQUEST` payloads, :data:`PROGRESS_LIMIT_BYTES` in
all), a payload past those bounds replaces the newest unsent one, and the message that finally
carries it says how many it replaced (``skipped``).

Everything here runs on one asyncio event loop; only :meth:`RequestContext.progress` may be called
from another thread (sync handlers run in worker threads).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

from . import errors, tracecontext, values, wire
from .errors import BridgeCancelled, BridgeError, BridgeTimeout
from .tracecontext import TraceContext
from .values import UnsendableValue

log = logging.getLogger("zerobridge")

Send = Callable[[list[bytes]], bool]
SendBatch = Callable[[list[list[bytes]]], bool]
Serve = Callable[[wire.Request, "RequestContext"], Awaitable[Any]]
ServeEvent = Callable[[wire.Event], Awaitable[None]]
OnMessage = Callable[[wire.Message], None]

# Flow control (SPEC 7.13): the bound of the link's own outgoing queue, and of unsent progress.
QUEUE_LIMIT_BYTES = 8 << 20
PROGRESS_PER_REQUEST = 64
PROGRESS_LIMIT_BYTES = 1 << 20
# How many requests and events from the other side run at once (SPEC 7.11, 7.13).
DEFAULT_MAX_IN_FLIGHT = 4096  # as the Swift and Node peers (SPEC 7.13)
# A call's time limit when its caller gives none (SPEC 7.3, "One default"); None means no limit.
DEFAULT_TIMEOUT = 30.0
"""Seconds a call waits for its answer when it is given no ``timeout`` (SPEC 7.3): the same in Swift and Node."""

P = TypeVar("P")


def now_ms() -> int:
    """The wall clock as Unix time in milliseconds, the unit of ``request.deadline``."""
    return time.time_ns() // 1_000_000


def _size(frames: list[bytes]) -> int:
    return len(frames[1]) if len(frames) == 2 else sum(map(len, frames[1:]))


def _batch_length(queue: collections.deque[list[bytes]]) -> int:
    """How many of the first queued messages go in one batch: as many as keep it within 65,536 bytes and 1,000
    messages (SPEC 3.3). 0 when the first is larger than that: it goes alone."""
    count = size = 0
    for frames in queue:
        size += 12 + len(frames[0]) + len(frames[1]) if len(frames) == 2 else wire.batch_entry_size(frames)
        if size > wire.BATCH_MAX_BYTES or count == wire.BATCH_MAX_MESSAGES:
            break
        count += 1
    return count


# What one turn of the loop queues before it is handed to the transport at once rather than at the turn's end: the
# first 16 leave while the turn still makes the rest, so the host works on them meanwhile instead of waiting for the
# whole turn (the Node peer's rule, and the host's first burst). At 64 calls in flight a whole turn of 64 made peer and
# host take turns, each idle while the other worked: 19.7-28.6 thousand calls/s against 21.6-40.7 thousand with 16
# (ipc and tcp, plain and keyed, interleaved runs: bench/RESULTS.md, seventeenth sitting).
_BATCH_MESSAGES = 16
_BATCH_BYTES = 64 << 10

# The progress of a call that asked for none: appending to it keeps nothing.
_NO_PROGRESS: collections.deque[tuple[int, Any]] = collections.deque(maxlen=0)

# A progress body without its id and payload: {"v":1,"type":"progress","id":"","seq":N,"payload":,"skipped":M}.
_PROGRESS_OVERHEAD = 80


class OutgoingCall:
    """A request we sent: its future result, and its progress in arrival order.

    ``last_seq`` is the ``seq`` of the latest progress payload :meth:`progress` has handed out (``after_seq`` before
    any), so a reader that attaches to a job again with it as ``after_seq`` neither misses nor repeats a payload it
    took (SPEC 7.16). Progress whose ``seq`` is not above ``after_seq`` or the latest arrived is dropped (SPEC 7.2).
    """

    __slots__ = ("id", "action", "deadline", "future", "skipped", "sent", "last_seq", "_link", "_request",
                 "_wants_progress", "_items", "_waiter", "_arrived_seq", "_watched")

    def __init__(
        self, link: Link, request: wire.Request, deadline: float | None, *, after_seq: int = 0, watched: bool = True
    ) -> None:
        self.id = request.id
        self.action = request.action
        self.deadline = deadline
        self.future: asyncio.Future[Any] = link.loop.create_future()
        self.skipped = 0  # progress payloads the other side coalesced away (SPEC 7.13)
        self.sent = False
        self.last_seq = after_seq
        self._link = link
        self._request = request
        self._wants_progress = request.progress
        # (seq, payload), not yet handed out; a call without progress keeps none.
        self._items: collections.deque[tuple[int, Any]] = collections.deque() if request.progress else _NO_PROGRESS
        self._waiter: asyncio.Future[None] | None = None
        self._arrived_seq = after_seq  # of the latest progress arrived
        if deadline is not None:
            link._watch_deadline(request.id, deadline)
        # Unwatched: whoever awaits the future calls _on_done itself when asyncio cancels it (Peer.call does), which
        # saves a callback added, removed and run per call.
        self._watched = watched
        if watched:
            self.future.add_done_callback(self._on_done)

    def cancel(self, why: str = "was cancelled") -> None:
        """Stop waiting and tell the other side (``cancel``); the call fails with ``cancelled``."""
        if not self.future.done():
            self._link._forget(self, send_cancel=True)
            self.future.set_exception(BridgeCancelled(f"call {self.action!r} {why}"))

    async def progress(self) -> AsyncIterator[Any]:
        """The progress payloads until the call ends; raises the call's error if it failed.

        Leaving an ``async for`` over it early (``break``, ``return``, an exception) closes it, which cancels the call
        (the host is sent ``cancel``; on a job, this caller detaches), as in Node: nothing reads what the host would
        still send. asyncio closes an abandoned iterator on the next turn of the loop.
        """
        try:
            while True:
                if self._items:
                    self.last_seq, payload = self._items.popleft()
                    yield payload
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
        except GeneratorExit:
            self.cancel("was cancelled: its progress loop ended early")
            raise

    # --- driven by the link ---

    def _on_progress(self, message: wire.Progress) -> None:
        if not self._wants_progress:
            return
        if message.seq <= self._arrived_seq:
            log.warning("dropped progress seq %d of %s: not after seq %d", message.seq, self.id, self._arrived_seq)
            return
        self._arrived_seq = message.seq
        if message.skipped is not None:
            self.skipped += message.skipped
        self._items.append((message.seq, message.payload))
        self._wake()

    def _expire(self) -> None:
        if not self.future.done():
            self._link._forget(self, send_cancel=False)
            self.future.set_exception(BridgeTimeout(f"call {self.action!r} timed out"))

    def _settle(self, result: Any, error: BridgeError | None) -> None:
        """Settle the call with its answer, doing now what the future's callback would do on the loop's next turn
        (one scheduled callback fewer per call)."""
        future = self.future
        if self._watched:
            future.remove_done_callback(self._on_done)
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
        if self._watched:
            self._on_done(future)

    def _on_done(self, future: asyncio.Future[Any]) -> None:
        """The future is done: if asyncio cancelled it (its awaiting task was cancelled), so is the call."""
        if future.cancelled():  # asyncio cancellation of whoever awaited the call
            self._link._forget(self, send_cancel=True)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class RequestContext(Generic[P]):
    """What a handler knows about the request it serves (its optional second argument).

    ``id``: the request id. ``action``: its action. ``trace``: the W3C trace context it arrived with
    (:class:`~zerobridge.tracecontext.TraceContext`, SPEC 7.18), or None; calls the handler makes carry it.
    ``deadline``: ``time.monotonic()`` value when the
    caller gives up (the earlier of receipt + ``timeout_ms`` and the request's ``deadline``), or None.
    ``cancelled``: True once the caller cancelled or the deadline passed (the asyncio task of an async
    handler is cancelled too; a sync handler can poll this). ``progress(payload)`` reports progress
    when the caller asked for it; it never blocks: while the host reads slowly, payloads wait (and
    the oldest unsent ones are kept, the newest replaced and counted) instead of the handler. A progress payload
    JSON cannot carry (SPEC 7.14) ends the request: it is answered ``handler_error`` naming the payload's offending
    part, and the handler is cancelled as on a timeout.

    Annotating the parameter ``RequestContext[T]`` declares the action's progress payloads as ``T``: its
    ``$describe`` then has a ``progress`` schema derived from ``T`` (SPEC 7.8).
    """

    def __init__(self, link: Link, request: wire.Request, deadline: float | None) -> None:
        self.id = request.id
        self.action = request.action
        self.trace = request.trace
        self.deadline = deadline
        self.cancelled = False
        self._link = link
        self._wants_progress = request.progress
        self._seq = 0
        self._answered = False
        # Unsent progress, oldest first: [payload, encoded size, payloads it replaced].
        self._pending: collections.deque[list[Any]] = collections.deque()
        # Progress reported from other threads, not yet seen by the loop (coalesced the same way).
        self._incoming: list[tuple[Any, int]] = []
        self._incoming_lock = threading.Lock()
        self._drain_scheduled = False

    def progress(self, payload: P = None) -> _Sent:  # type: ignore[assignment]
        """Report ``payload`` as the next progress. Works with and without ``await``, from any thread."""
        if threading.get_ident() == self._link.loop_thread:
            self._link._add_progress(self, payload, 0)
            return _Sent()
        with self._incoming_lock:
            if len(self._incoming) >= PROGRESS_PER_REQUEST:
                _, replaced = self._incoming[-1]
                self._incoming[-1] = (payload, replaced + 1)
            else:
                self._incoming.append((payload, 0))
            schedule = not self._drain_scheduled
            self._drain_scheduled = True
        if schedule:
            self._link.loop.call_soon_threadsafe(self._drain_incoming)
        return _Sent()

    def _drain_incoming(self) -> None:
        with self._incoming_lock:
            incoming, self._incoming = self._incoming, []
            self._drain_scheduled = False
        for payload, replaced in incoming:
            self._link._add_progress(self, payload, replaced)


class EventContext:
    """What an event handler knows about the event it runs (its optional second argument, as a request handler's
    :class:`RequestContext`).

    ``action``: the event's action. ``topic``: the topic the host broadcast it on (SPEC 7.15), or None for an event
    sent to this peer alone and for a broadcast to every peer. ``trace``: as :class:`RequestContext`'s.
    """

    __slots__ = ("action", "topic", "trace")

    def __init__(self, action: str, topic: str | None = None, trace: TraceContext | None = None) -> None:
        self.action = action
        self.topic = topic
        self.trace = trace

    def __repr__(self) -> str:
        return f"EventContext(action={self.action!r}, topic={self.topic!r})"


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
        serve_event: ServeEvent | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        loop: asyncio.AbstractEventLoop | None = None,
        send_batch: SendBatch | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.max_message_bytes: int | None = None
        self.max_in_flight = max_in_flight
        self._send_frames = send
        # Batches (SPEC 3.3): what hands several messages to the transport as one, and whether the other side said
        # it reads them (the owner sets it).
        self._send_batch = send_batch
        self._batching = False
        self._serve = serve
        self._serve_event = serve_event
        self._on_message = on_message
        self._ids = itertools.count(1)
        self._calls: dict[str, OutgoingCall] = {}
        self._served: dict[str, _Served] = {}
        self._overload_warned = -1.0  # loop time of the last warning about an event not run
        # Outgoing: messages not yet taken by the transport, in order; calls waiting for room.
        self._queue: collections.deque[list[bytes]] = collections.deque()
        self.queued_bytes = 0
        self._blocked = False  # the transport refused; the owner calls writable() when it has room
        self._pump_scheduled = False  # a pump at the end of this turn of the loop
        self._waiting_calls: dict[str, OutgoingCall] = {}
        # Our calls' deadlines: one timer for the earliest rather than one per call (asyncio's timer heap compares
        # its handles in Python). A heap of (deadline, order, request id); an id no longer among the calls is skipped.
        self._deadlines: list[tuple[float, int, str]] = []
        self._deadline_order = itertools.count()
        self._deadline_timer: asyncio.TimerHandle | None = None
        # Requests with unsent progress (their contexts hold it), and its size in all.
        self._progress_waiting: dict[str, RequestContext] = {}
        self.pending_progress_bytes = 0
        # Events from the other side: queued or running, delivered one at a time in order.
        self._events: collections.deque[wire.Event] = collections.deque()
        self._event_task: asyncio.Task[None] | None = None
        now = self.loop.time()
        self.last_sent = now
        self.last_heard = now
        self.retired = False

    @property
    def calls_in_flight(self) -> int:
        return len(self._calls)

    @property
    def requests_in_flight(self) -> int:
        return len(self._served)

    @property
    def events_in_flight(self) -> int:
        return len(self._events)

    @property
    def in_flight(self) -> int:
        """The other side's requests and events being run or waiting to run (bounded by ``max_in_flight``)."""
        return len(self._served) + len(self._events)

    @property
    def pending_progress(self) -> int:
        """How many progress payloads wait for the transport to take more."""
        return sum(len(context._pending) for context in self._progress_waiting.values())

    @property
    def over_limit(self) -> bool:
        """True while the outgoing queue holds more than :data:`QUEUE_LIMIT_BYTES`."""
        return self.queued_bytes > QUEUE_LIMIT_BYTES

    @property
    def batching(self) -> bool:
        """Whether messages ready together go to the transport as batches (SPEC 3.3): the owner turns it on once the
        other side says it reads them."""
        return self._batching

    @batching.setter
    def batching(self, on: bool) -> None:
        if on and self._send_batch is None:
            raise ValueError("this link was given no send_batch")
        self._batching = on

    # --- sending -------------------------------------------------------------------------

    def send(self, message: wire.Message) -> None:
        """Encode ``message`` and queue it for sending, whatever the queue holds. UnsendableValue (a BridgeError,
        ``invalid_payload``) when what it carries is not JSON any side can carry (SPEC 7.14)."""
        self._enqueue(values.encode(message))

    def writable(self) -> None:
        """The transport has room again: send what waits, in order."""
        self._blocked = False
        self._pump()

    def _enqueue(self, frames: list[bytes]) -> None:
        if self.retired:
            return
        self._queue.append(frames)
        self.queued_bytes += _size(frames)
        self.last_sent = self.loop.time()
        # The first message of a turn of the loop is handed over at once (a lone call waits no turn for it); the rest
        # at the end of the turn, together: sends back to back wake libzmq's I/O thread about once a turn instead of
        # once a message. A turn that queues more than _BATCH_MESSAGES (many calls at once, a loop of posts that
        # never yields) hands each such burst over at once, so the host starts on it and the transport takes what it
        # can as before, not only the bound.
        if not self._pump_scheduled:
            self._pump_at_turn_end()
            self._pump()
        elif len(self._queue) >= _BATCH_MESSAGES or self.queued_bytes >= _BATCH_BYTES:
            self._pump()

    def _pump_at_turn_end(self) -> None:
        self._pump_scheduled = True
        self.loop.call_soon(self._pump_turn)

    def _pump_turn(self) -> None:
        self._pump_scheduled = False
        self._pump()

    def flush(self) -> None:
        """Hand what is queued to the transport now, not at the end of the loop's turn (its socket is closing)."""
        self._pump()

    def _pump(self) -> None:
        """Hand queued messages, then released calls and unsent progress, to the transport until it refuses."""
        queue = self._queue
        while not self._blocked:
            if self._waiting_calls and not self.over_limit:
                self._release_calls()
            if not queue:
                self._flush_progress()
                return
            if self._batching and len(queue) > 1 and (count := _batch_length(queue)) > 1:
                assert self._send_batch is not None
                messages = list(itertools.islice(queue, count))
                if self._send_batch(messages) is False:
                    self._blocked = True
                    return
                for _ in range(count):
                    queue.popleft()
                self.queued_bytes -= sum(map(_size, messages))
                continue
            frames = queue[0]
            if self._send_frames(frames) is False:
                self._blocked = True
                return
            queue.popleft()
            self.queued_bytes -= _size(frames)

    def call(
        self,
        action: str,
        payload: Any = None,
        *,
        timeout: float | None = None,
        progress: bool = False,
        idempotency_key: str | None = None,
        after_seq: int = 0,
        watched: bool = True,
    ) -> OutgoingCall:
        """Send a request; the returned call completes with its response or its deadline (``timeout`` seconds;
        None: no limit, and no ``timeout_ms``/``deadline`` on the request).

        ``watched``: cancelling the call's future cancels the call. Unwatched, whoever awaits it calls
        ``call._on_done(call.future)`` when asyncio cancels it.

        ``idempotency_key`` goes on the request as is (a job action's key, SPEC 7.16). ``after_seq``: the request
        attaches to a job after that ``seq``, so its progress starts above it (SPEC 7.2).

        While the outgoing queue is over its bound the request waits for room, up to its deadline. A payload JSON
        cannot carry raises UnsendableValue (``invalid_payload``, SPEC 7.14) before anything is sent.
        """
        _check_action(action)
        if idempotency_key is not None:
            check_name(idempotency_key, "idempotency_key")
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        request_id = str(next(self._ids))
        timeout_ms = None if timeout is None else max(1, math.ceil(timeout * 1000))
        wall_deadline = None if timeout_ms is None else now_ms() + timeout_ms
        request = wire.Request(request_id, action, payload, timeout_ms, progress, wall_deadline, idempotency_key,
                               tracecontext.current())
        frames = values.encode(request)
        self._check_size(frames)
        deadline = None if timeout is None else self.loop.time() + timeout
        outgoing = OutgoingCall(self, request, deadline, after_seq=after_seq, watched=watched)
        self._calls[request_id] = outgoing
        if self._waiting_calls or self.over_limit:
            self._waiting_calls[request_id] = outgoing  # sent by _release_calls, or expires waiting
        else:
            outgoing.sent = True
            self._enqueue(frames)
        return outgoing

    def _watch_deadline(self, request_id: str, deadline: float) -> None:
        """The call ``request_id`` expires at ``deadline`` (loop time) unless it ends before."""
        heap = self._deadlines
        # Mostly calls that ended: keep those still running. So it holds at most twice the most calls in flight, and 256.
        if len(heap) > 2 * len(self._calls) + 256:
            heap[:] = [entry for entry in heap if entry[2] in self._calls]
            heapq.heapify(heap)
        entry = (deadline, next(self._deadline_order), request_id)
        heapq.heappush(heap, entry)
        if heap[0] is entry:  # the earliest now
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
            self._deadline_timer = self.loop.call_at(deadline, self._expire_calls, deadline)

    def _expire_calls(self, due: float) -> None:
        """The earliest deadline, ``due``, came: the calls whose deadline passed time out; the timer waits for the
        next one. (The loop may run a timer up to its clock's resolution early: ``due`` itself counts as passed.)"""
        self._deadline_timer = None
        heap, calls, now = self._deadlines, self._calls, max(self.loop.time(), due)
        while heap and (heap[0][0] <= now or heap[0][2] not in calls):
            call = calls.get(heapq.heappop(heap)[2])
            if call is not None:
                call._expire()
        if heap:
            self._deadline_timer = self.loop.call_at(heap[0][0], self._expire_calls, heap[0][0])

    def _release_calls(self) -> None:
        """Queue the calls that waited for room, while the queue is under its bound."""
        while self._waiting_calls and not self.over_limit:
            request_id = next(iter(self._waiting_calls))
            outgoing = self._waiting_calls.pop(request_id)
            if self._calls.get(request_id) is not outgoing or outgoing.future.done():
                continue
            request = outgoing._request
            if outgoing.deadline is not None:  # timeout_ms counts from receipt: only what is left of it
                left = max(1, math.ceil((outgoing.deadline - self.loop.time()) * 1000))
                request = dataclasses.replace(request, timeout_ms=left)
            outgoing.sent = True
            frames = wire.encode(request)
            self._queue.append(frames)
            self.queued_bytes += _size(frames)
            self.last_sent = self.loop.time()

    def post(self, action: str, payload: Any = None) -> None:
        """Send an event (never answered). BridgeError ``overloaded`` while the outgoing queue is over its bound;
        UnsendableValue (``invalid_payload``) for a payload JSON cannot carry (SPEC 7.14)."""
        _check_action(action)
        frames = values.encode(wire.Event(action, payload, trace=tracecontext.current()))
        self._check_size(frames)
        if self.over_limit or self._waiting_calls:
            raise BridgeError(
                errors.OVERLOADED,
                f"event {action!r} not sent: {self.queued_bytes} bytes wait for the other side to read"
                f" (the limit is {QUEUE_LIMIT_BYTES})",
            )
        self._enqueue(frames)

    def _check_size(self, frames: list[bytes]) -> None:
        if self.max_message_bytes is None:
            return
        size = _size(frames)
        if size > self.max_message_bytes:
            raise BridgeError(
                errors.TOO_LARGE, f"message of {size} bytes is over the host's limit of {self.max_message_bytes}"
            )

    def _forget(self, call: OutgoingCall, *, send_cancel: bool) -> None:
        if self._calls.get(call.id) is call:
            del self._calls[call.id]
            self._waiting_calls.pop(call.id, None)
            if send_cancel and call.sent:
                self.send(wire.Cancel(call.id))

    # --- progress (SPEC 7.13) ------------------------------------------------------------

    def _add_progress(self, context: RequestContext, payload: Any, replaced: int) -> None:
        """Send ``payload`` (which stands for ``replaced`` earlier payloads too) as the next progress of
        ``context``, or keep it until the transport has room; never waits, never fails for flow reasons."""
        if context._answered or not context._wants_progress:
            return
        pending = context._pending
        # With batches, what follows the first message of a turn waits for the turn's end, to go out together.
        later_in_turn = self._batching and self._pump_scheduled
        if not pending and not self._blocked and not self._queue and not later_in_turn:
            try:
                frames = values.encode(wire.Progress(context.id, context._seq + 1, payload, replaced or None))
            except UnsendableValue as error:
                self._refuse_progress(context, error)
                return
            if self._send_frames(frames) is not False:
                context._seq += 1
                self.last_sent = self.loop.time()
                if self._batching:
                    self._pump_at_turn_end()
                return
            self._blocked = True
            pending.append([payload, _size(frames), replaced])
            self.pending_progress_bytes += _size(frames)
            self._progress_waiting[context.id] = context
            return
        try:
            size = self._progress_size(context, payload, replaced)
        except UnsendableValue as error:
            self._refuse_progress(context, error)
            return
        full = len(pending) >= PROGRESS_PER_REQUEST or self.pending_progress_bytes + size > PROGRESS_LIMIT_BYTES
        if full and later_in_turn and not self._blocked:
            self._pump()  # what waits for the turn's end goes now (a turn that reports much), rather than coalesced
            full = len(pending) >= PROGRESS_PER_REQUEST or self.pending_progress_bytes + size > PROGRESS_LIMIT_BYTES
        if pending and full:
            newest = pending[-1]  # replaced by the new payload, and counted
            self.pending_progress_bytes += size - newest[1]
            newest[0], newest[1], newest[2] = payload, size, newest[2] + 1 + replaced
        else:
            pending.append([payload, size, replaced])
            self.pending_progress_bytes += size
            self._progress_waiting[context.id] = context
        if not self._blocked and not self._queue and not later_in_turn:
            self._flush_progress()

    def _progress_size(self, context: RequestContext, payload: Any, replaced: int) -> int:
        """About the size of ``payload`` as a progress message (cheaper than encoding it); UnsendableValue if JSON
        cannot carry it (SPEC 7.14)."""
        text = values.check(payload, "payload")
        if text is None:  # attachments (bytes): encode it to know
            return _size(self._encode_progress(context, payload, replaced))
        return len(text) + _PROGRESS_OVERHEAD + len(context.id)

    def _refuse_progress(self, context: RequestContext, error: UnsendableValue) -> None:
        """A progress payload JSON cannot carry is the handler's failure (SPEC 7.14): the request is answered
        ``handler_error`` naming the offending part, and the handler cancelled."""
        log.warning("progress of request %s (%r) refused: %s", context.id, context.action, error.message)
        self._end_served(context.id, errors.HANDLER_ERROR, f"a progress payload was refused: {error.message}")

    def _encode_progress(self, context: RequestContext, payload: Any, replaced: int, ahead: int = 0) -> list[bytes]:
        """The progress message ``ahead`` after the next one ``context`` sends."""
        message = wire.Progress(context.id, context._seq + 1 + ahead, payload, replaced or None)
        return wire.encode(message)

    def _flush_progress(self) -> None:
        """Send unsent progress, oldest first within each request, one request after another (in batches when the
        other side reads them)."""
        while self._progress_waiting:
            if self._batching and (taken := self._progress_batch()):
                assert self._send_batch is not None
                if self._send_batch([frames for _, _, frames in taken]) is False:
                    self._blocked = True
                    return
                for context, size, _ in taken:
                    self._sent_pending(context, size)
                self.last_sent = self.loop.time()
                continue
            for context in list(self._progress_waiting.values()):
                payload, size, replaced = context._pending[0]
                frames = self._encode_progress(context, payload, replaced)
                if self._send_frames(frames) is False:
                    self._blocked = True
                    return
                self._sent_pending(context, size)
                self.last_sent = self.loop.time()

    def _progress_batch(self) -> list[tuple[RequestContext[Any], int, list[bytes]]]:
        """The unsent progress that goes in the next batch, in the order :meth:`_flush_progress` sends it one by one
        (each request's oldest, request after request, then each one's next), as (context, its pending size,
        frames); empty when fewer than two fit in a batch."""
        taken: list[tuple[RequestContext[Any], int, list[bytes]]] = []
        bytes_taken = 0
        depth = 0
        while True:
            added = False
            for context in self._progress_waiting.values():
                if depth >= len(context._pending):
                    continue
                payload, size, replaced = context._pending[depth]
                frames = self._encode_progress(context, payload, replaced, depth)
                bytes_taken += wire.batch_entry_size(frames)
                if bytes_taken > wire.BATCH_MAX_BYTES or len(taken) == wire.BATCH_MAX_MESSAGES:
                    return taken if len(taken) > 1 else []
                taken.append((context, size, frames))
                added = True
            if not added:
                return taken if len(taken) > 1 else []
            depth += 1

    def _sent_pending(self, context: RequestContext, size: int) -> None:
        context._pending.popleft()
        context._seq += 1
        self.pending_progress_bytes -= size
        if not context._pending:
            del self._progress_waiting[context.id]

    def _queue_pending_progress(self, context: RequestContext) -> None:
        """Before ``context``'s response: its unsent progress joins the queue, so that it precedes the response."""
        context._drain_incoming()
        while context._pending:
            payload, size, replaced = context._pending[0]
            frames = self._encode_progress(context, payload, replaced)
            self._queue.append(frames)
            self.queued_bytes += _size(frames)
            self._sent_pending(context, size)

    def _drop_pending_progress(self, context: RequestContext) -> None:
        self.pending_progress_bytes -= sum(entry[1] for entry in context._pending)
        context._pending.clear()
        self._progress_waiting.pop(context.id, None)

    # --- receiving -----------------------------------------------------------------------

    def receive(self, frames: list[bytes]) -> None:
        """Handle one received message. Never raises: bad input is answered or logged."""
        if self.retired:
            return  # the other side was given up: what it sent still is not processed (SPEC 7.3)
        self.last_heard = self.loop.time()
        self._receive_heard(frames)
        self._answer_at_turn_end()

    def _receive_heard(self, frames: list[bytes]) -> None:
        """:meth:`receive` once ``last_heard`` is set."""
        try:
            message = wire.decode(frames)
        except wire.WireError as error:
            self.refuse_unreadable(error)
            return
        try:
            self._dispatch(message)
        except Exception:  # a bug here must not end the conversation
            log.exception("failed to handle %r", message)

    def receive_batch(self, frames: list[bytes]) -> int:
        """Handle a batch (SPEC 3.3) whose frame 0 was accepted (its signature, on a keyed connection): its messages
        in order, each exactly as if it had come alone. A batch whose structure is bad is answered ``bad_message``
        once, and none of it is read; a bad message in a good batch is answered on its own. Returns how many messages it held (1 for a bad batch). Never
        raises."""
        if self.retired:
            return 1
        self.last_heard = self.loop.time()  # once for the batch: its messages arrived together
        try:
            if len(frames) != 2:
                raise wire.WireError(errors.BAD_MESSAGE, f"a batch is one frame after its frame 0, not {len(frames) - 1}")
            messages = wire.split_batch(frames[1])
        except wire.WireError as error:
            self.refuse_unreadable(error)
            return 1
        for message in messages:
            if self.retired:
                break  # given up by one of them: the rest is not processed (SPEC 7.3)
            if isinstance(message, list):
                self._receive_heard(message)
            else:
                self.refuse_unreadable(message)
        self._answer_at_turn_end()
        return len(messages)

    def _answer_at_turn_end(self) -> None:
        """What received messages cause (the next calls of the callers they answered, the answers of handlers they
        started) is sent mostly in the next turn of the loop, where those tasks resume: with batches, it goes out
        together at that turn's end rather than its first message at once and the rest after (one send and one
        wake-up of each side's I/O thread fewer per turn)."""
        if self._batching and not self._pump_scheduled:
            self._pump_at_turn_end()

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
            case wire.Event() if self._serve_event is not None:
                self._on_event(message)
            case wire.Cancel():
                self._end_served(message.id, errors.CANCELLED, "cancelled by the caller")
            case wire.Ping():
                self.send(wire.Pong())
            case wire.Pong():
                pass
            case _:
                self._on_message(message)

    def refuse_unreadable(self, error: wire.WireError) -> None:
        """Answer a message that cannot be read (``"id": null`` unless its id was readable), and log it."""
        # Answered like any bad message (SPEC 7.5, 15.4), with the id when readable. A malformed
        # response to one of our calls also ends that call: no better answer will come.
        if error.type == "response" and error.id is not None:
            call = self._calls.pop(error.id, None)
            if call is not None and not call.future.done():
                call.future.set_exception(BridgeError(error.code, f"unreadable response: {error.message}"))
        log.warning("answered an unreadable message with %s: %s", error.code, error.message)
        self._respond_raw(wire.Response.failure(error.id, BridgeError(error.code, error.message)))

    def _on_response(self, response: wire.Response) -> None:
        if response.id is None:  # answers none of our calls: the owner's to judge (a refused hello, event, ...)
            self._on_message(response)
            return
        call = self._calls.pop(response.id, None)
        if call is None or call.future.done():
            log.debug("dropped response for unknown or finished id %r", response.id)
            return
        if response.ok:
            call._settle(response.result, None)
        else:
            assert response.error is not None
            call._settle(None, response.error)

    def _on_request(self, request: wire.Request) -> None:
        if request.id in self._served:
            self._refuse(request, errors.DUPLICATE_ID, f"id {request.id!r} is in flight")
            return
        received = self.loop.time()
        deadline = None if request.timeout_ms is None else received + request.timeout_ms / 1000
        reason = f"timed out after {request.timeout_ms} ms"
        if request.deadline is not None:
            left_ms = request.deadline - now_ms()
            if left_ms <= 0:  # expired on arrival: never started (SPEC 7.3)
                if request.timeout_ms is not None and -left_ms > request.timeout_ms:
                    log.warning(
                        "request %s (%r) arrived %d ms after its deadline, more than its whole timeout of %d ms:"
                        " the two sides' clocks likely disagree (clock skew; keep them synchronized, e.g. NTP)",
                        request.id, request.action, -left_ms, request.timeout_ms,
                    )
                self._refuse(request, errors.TIMEOUT, f"the request's deadline passed {-left_ms} ms before it arrived")
                return
            by_deadline = received + left_ms / 1000
            if deadline is None or by_deadline < deadline:
                deadline, reason = by_deadline, f"timed out at the request's deadline {request.deadline}"
        if self.in_flight >= self.max_in_flight:
            self._refuse(
                request, errors.OVERLOADED, f"{self.in_flight} requests and events are in flight (max_in_flight {self.max_in_flight})"
            )
            return
        served = _Served(request, RequestContext(self, request, deadline))
        self._served[request.id] = served
        if deadline is not None:
            served.timer = self.loop.call_at(deadline, self._end_served, request.id, errors.TIMEOUT, reason)
        served.task = self.loop.create_task(self._run(served))

    def _refuse(self, request: wire.Request, code: str, message: str) -> None:
        self._respond_raw(wire.Response.failure(request.id, errors.error_from_code(code, message)))

    async def _run(self, served: _Served) -> None:
        if served.context.cancelled or served.context._answered:
            return  # cancelled (or timed out) before it began: it never begins (SPEC 7.3)
        try:
            with tracecontext.handling(served.request.trace, served.request.action):
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
        served.context.cancelled = True
        self._answer(served, wire.Response.failure(request_id, errors.error_from_code(code, message)))
        if served.task is not None:
            served.task.cancel()

    def _answer(self, served: _Served, response: wire.Response) -> None:
        """Send the one response of ``served`` (later answers are discarded), after its unsent progress."""
        if served.context._answered:
            return
        self._queue_pending_progress(served.context)
        served.context._answered = True
        if self._served.get(served.request.id) is served:
            del self._served[served.request.id]
        if served.timer is not None:
            served.timer.cancel()
        self._respond_raw(response)

    def _respond_raw(self, response: wire.Response) -> None:
        if response.id is None and self.queued_bytes > QUEUE_LIMIT_BYTES:
            # SPEC 7.13, decision 54: an answer to a refused event or an unreadable message answers nothing anyone
            # waits for; past the queue's bound, to a side that sends such messages and reads nothing, it is dropped.
            log.debug("answer not queued (%s): %d bytes wait for the other side", response.error.code, self.queued_bytes)
            return
        try:
            frames = values.encode(response)
            self._check_size(frames)
        except UnsendableValue as error:  # the handler's result (or error data) JSON cannot carry: its failure (SPEC 7.14)
            what = "result" if response.ok else "error data"
            log.warning("the %s of request %s was refused: %s", what, response.id, error.message)
            message = f"the handler's {what} was refused: {error.message}"
            frames = wire.encode(wire.Response.failure(response.id, BridgeError(errors.HANDLER_ERROR, message)))
        except TypeError as error:
            response = wire.Response.failure(response.id, BridgeError(errors.HANDLER_ERROR, f"result {error}"))
            frames = wire.encode(response)
        except BridgeError as error:
            frames = wire.encode(wire.Response.failure(response.id, error))
        self._enqueue(frames)

    # --- events from the other side --------------------------------------------------------

    def _on_event(self, event: wire.Event) -> None:
        """Run ``event`` after those before it; over ``max_in_flight`` it is not run but answered ``overloaded``."""
        if self.in_flight >= self.max_in_flight:
            # At warning level at most once a second: a flood of events must not flood the log.
            now = self.loop.time()
            level = logging.WARNING if now - self._overload_warned >= 1.0 else logging.DEBUG
            if level == logging.WARNING:
                self._overload_warned = now
            log.log(level, "event %r not run: %d requests and events in flight", event.action, self.in_flight)
            self._respond_raw(
                wire.Response.failure(
                    None,
                    BridgeError(
                        errors.OVERLOADED,
                        f"event {event.action!r} not run: {self.in_flight} requests and events are in flight"
                        f" (max_in_flight {self.max_in_flight})",
                    ),
                )
            )
            return
        self._events.append(event)
        if self._event_task is None or self._event_task.done():
            self._event_task = self.loop.create_task(self._deliver_events())

    async def _deliver_events(self) -> None:
        assert self._serve_event is not None
        events = self._events
        while events:
            event = events[0]
            try:
                with tracecontext.handling(event.trace, event.action, event=True):
                    await self._serve_event(event)
            except Exception:
                log.exception("event handler for %r failed", event.action)
            finally:
                if events and events[0] is event:
                    events.popleft()

    # --- ending --------------------------------------------------------------------------

    def fail_all(self, error: BridgeError) -> None:
        """The other side is gone: fail our calls with ``error``, cancel its requests and events unanswered,
        and drop everything queued for it."""
        calls, self._calls = self._calls, {}
        self._waiting_calls = {}
        self._deadlines.clear()
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        for call in calls.values():
            if not call.future.done():
                call.future.set_exception(errors.error_from_code(error.code, error.message, error.data))
        served, self._served = self._served, {}
        for item in served.values():
            item.context._answered = True  # their responses are discarded
            item.context.cancelled = True
            self._drop_pending_progress(item.context)
            if item.timer is not None:
                item.timer.cancel()
            if item.task is not None:
                item.task.cancel()
        self._events.clear()
        if self._event_task is not None:
            self._event_task.cancel()
            self._event_task = None
        self._queue.clear()
        self.queued_bytes = 0

    def retire(self, error: BridgeError) -> None:
        """Give the other side up for good: :meth:`fail_all`, then neither process nor send anything more."""
        self.fail_all(error)
        self.retired = True

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


def check_name(value: Any, what: str) -> str:
    """``value`` when it is a protocol name (1..128 code points, with a UTF-8 form: no unpaired surrogate, SPEC 7.14),
    else ValueError naming ``what``."""
    if not (isinstance(value, str) and 1 <= len(value) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"{what} must be a string of 1..128 characters, not {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must have a UTF-8 form, without unpaired surrogates: {value!r}") from None
    return value


__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_TIMEOUT",
    "EventContext",
    "PROGRESS_LIMIT_BYTES",
    "PROGRESS_PER_REQUEST",
    "QUEUE_LIMIT_BYTES",
    "Link",
    "OutgoingCall",
    "RequestContext",
    "now_ms",
]
