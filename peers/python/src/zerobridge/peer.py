"""The peer: a DEALER socket to one host, a session (hello/welcome), handlers, and the user API.

For example::

    async with zerobridge.connect("tcp://127.0.0.1:5555", name="etl") as peer:
        print(await peer.call("add", {"a": 1, "b": 2}))
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, TypeVar, cast

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from . import curve, errors, jobs, signing, wire
from .describe import UNSET, ActionDescription, Catalogue, describe_handler
from .errors import (
    BridgeError,
    BridgeTimeout,
    HostUnreachable,
    InvalidPayload,
    NameTaken,
    NotAllowed,
    PeerLost,
    Unauthorized,
    UnknownAction,
)
from .evaluate import evaluate as run_script
from .jobs import JobRecord, JobState
from .link import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_TIMEOUT,
    EventContext,
    Link,
    OutgoingCall,
    RequestContext,
    check_name,
    now_ms,
)
from .validate import first_error

# The connect timeout, the same in Swift, Python and Node (SPEC 7.3): refusals known at once end connecting sooner.
DEFAULT_CONNECT_TIMEOUT = 10.0
log = logging.getLogger("zerobridge")

Handler = Callable[..., Any]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """Where and how to reach a host: an endpoint, or the contents of a connection file."""

    endpoint: str
    key: bytes = field(default=b"", repr=False)  # the connection key (SPEC 3.1): a secret, never in a log line
    host: str | None = None
    curve_server_key: str | None = None  # the host's CURVE public key (Z85): connect with CURVE (SPEC 2.1)
    peer: str | None = None  # the name a supervising host launched this peer under (SPEC 10.1)


_ENDPOINT = re.compile(r"^(tcp|ipc|inproc)://[^*]+$")
_HEX_KEY = re.compile(r"^([0-9a-fA-F]{2})*$")


def read_connection_file(path: str | os.PathLike[str]) -> ConnectionInfo:
    """Parse a connection file (SPEC section 10): all five fields required, ``curve_server_key`` and ``peer``
    optional, extra fields ignored.

    ``{"protocol": 1, "endpoint": "tcp://127.0.0.1:41234", "host": "etl", "signature_scheme": "hmac-sha256", "key": ""}``
    """
    where = f"connection file {os.fspath(path)!r}"
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {where}: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} is not a JSON object")
    protocol = data.get("protocol")
    if type(protocol) is not int or protocol != wire.PROTOCOL_VERSION:
        raise ValueError(f"{where}: protocol {protocol!r} is not 1")
    endpoint = data.get("endpoint")
    if not isinstance(endpoint, str) or not _ENDPOINT.match(endpoint):
        raise ValueError(f"{where}: no usable endpoint (tcp://, ipc:// or inproc://, no wildcard): {endpoint!r}")
    host = data.get("host")
    if not (isinstance(host, str) and 1 <= len(host) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"{where}: host must be a name of 1..128 characters")
    if data.get("signature_scheme") != "hmac-sha256":
        raise ValueError(f"{where}: signature_scheme must be 'hmac-sha256', not {data.get('signature_scheme')!r}")
    key = data.get("key")
    if not isinstance(key, str) or not _HEX_KEY.match(key):
        raise ValueError(f"{where}: key must be hex (an even number of digits) or empty")
    server_key = data.get("curve_server_key")
    if server_key is not None and not curve.is_key(server_key):
        raise ValueError(f"{where}: curve_server_key must be a CURVE public key (40 characters of Z85)")
    peer = data.get("peer")
    if "peer" in data and not (isinstance(peer, str) and 1 <= len(peer) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"{where}: peer must be a name of 1..128 characters, not {peer!r}")
    return ConnectionInfo(endpoint=endpoint, key=bytes.fromhex(key), host=host, curve_server_key=server_key, peer=peer)


# What a supervising host hands the peers it launches (SPEC 10.1), in their environment, never on their command line.
CONNECTION_FILE_VARIABLE = "ZEROBRIDGE_CONNECTION_FILE"
PEER_NAME_VARIABLE = "ZEROBRIDGE_PEER_NAME"


def _connection_file_from_environment() -> str:
    """The connection file a supervising host wrote for this process (SPEC 10.1); a ValueError saying what to set when
    there is none, so a peer started by hand fails at once instead of waiting for a host it cannot find."""
    path = os.environ.get(CONNECTION_FILE_VARIABLE)
    if not path:
        raise ValueError(
            f"connect() was not told where the host is and {CONNECTION_FILE_VARIABLE} is not set: give an endpoint "
            f"or a connection file's path, or set {CONNECTION_FILE_VARIABLE} to a connection file's path "
            "(a supervising host sets it for the peers it launches)"
        )
    return path


def _peer_name(name: str | None, info: ConnectionInfo, launched: bool) -> str:
    """The name to say hello with: the one given, else the connection file's ``peer``, else (for a peer launched by a
    host) ``ZEROBRIDGE_PEER_NAME``."""
    if name is None:
        name = info.peer
    if name is None and launched and os.environ.get(PEER_NAME_VARIABLE):
        name = os.environ[PEER_NAME_VARIABLE]
        if len(name) > wire.MAX_ID_LENGTH:
            raise ValueError(f"{PEER_NAME_VARIABLE} must be a name of 1..128 characters, not {name!r}")
    if name is None:
        raise ValueError(
            "name= is required: give a name, or connect through a connection file with a peer field"
            + (f" (or set {PEER_NAME_VARIABLE})" if launched else "")
        )
    if not (isinstance(name, str) and 1 <= len(name) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"name must be a string of 1..128 characters, not {name!r}")
    return name


def resolve_target(target: str | os.PathLike[str]) -> ConnectionInfo:
    """An endpoint (``tcp://``, ``ipc://``, ...) as is; anything else is read as a connection file."""
    text = os.fspath(target)
    check_target_form(text)
    return ConnectionInfo(endpoint=text) if _is_endpoint(text) else read_connection_file(text)


def _is_endpoint(text: str) -> bool:
    return "://" in text and not os.path.exists(text)


# host:port without a scheme (127.0.0.1:5599, localhost:5599, [::1]:5599): an endpoint missing its tcp://, not a file.
_SCHEMELESS_TCP = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$")


def check_target_form(text: str) -> None:
    """A ValueError saying what to write when ``text`` looks like an endpoint without its scheme and no such file
    exists, rather than reading it as a connection file that is not there."""
    if _SCHEMELESS_TCP.match(text) and not os.path.exists(text):
        raise ValueError(f"{text!r} is neither an endpoint nor a connection file: write tcp://{text}")


def _parse_key(key: str | bytes) -> bytes:
    """A connection key given as hex text (as in a connection file) or as raw bytes."""
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    if isinstance(key, str) and _HEX_KEY.fullmatch(key):
        return bytes.fromhex(key)
    raise ValueError("key must be hex (an even number of digits) or bytes")  # the value is not echoed: a secret


@dataclass(frozen=True, slots=True)
class _Registered:
    function: Handler
    arity: int  # 0: f(), 1: f(payload), 2: f(payload, context)
    is_async: bool
    description: ActionDescription | None = None  # request handlers: the action's contract (SPEC 7.8)


def _register(
    name: str, function: Handler, *, reserved_ok: bool = False, described: bool = False, **describe_args: Any
) -> _Registered:
    if not (isinstance(name, str) and 1 <= len(name) <= wire.MAX_ID_LENGTH):
        raise ValueError(f"action name must be a string of 1..128 characters, not {name!r}")
    if name.startswith("$") and not reserved_ok:
        raise ValueError(f"action names starting with '$' are reserved: {name!r}")
    if not callable(function):
        raise TypeError(f"handler for {name!r} is not callable")
    description = describe_handler(name, function, context_class=RequestContext, **describe_args) if described else None
    return _Registered(function, _arity(function), _is_async(function), description)


def _topic_names(topics: Iterable[str]) -> set[str]:
    """Broadcast topics (SPEC 7.15), checked as hello.topics requires: names of 1..128 characters, with a UTF-8 form
    (no unpaired surrogate: SPEC 7.14)."""
    if isinstance(topics, (str, bytes)):
        raise TypeError(f"topics must be an iterable of names, not one {type(topics).__name__}: {topics!r}")
    return {check_name(topic, "a topic") for topic in topics}


def _arity(function: Handler) -> int:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    positional = 0
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            return 2
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            positional += 1
    return min(positional, 2)


def _is_async(function: Handler) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)
    )


async def _invoke(registered: _Registered, payload: Any, context: RequestContext | EventContext) -> Any:
    """Run a handler: async ones on the loop, sync ones in a worker thread (they may block).

    A request cancelled (or timed out) before its sync handler got a thread never starts it (SPEC 7.3).
    """
    args = (payload, context)[: registered.arity]
    if registered.is_async:
        return await registered.function(*args)

    def start() -> Any:
        if isinstance(context, RequestContext) and context.cancelled:
            raise asyncio.CancelledError()
        return registered.function(*args)

    result = await asyncio.to_thread(start)
    if inspect.isawaitable(result):
        result = await result
    return result


class Stream:
    """A call with progress: ``async with peer.stream(...) as call`` (and ``peer.attach_job(...)``).

    ``call.progress`` yields progress payloads in order and ends when the call does (raising its
    error if it failed); ``await call.result`` gives the result. Leaving the block before the call
    finished cancels it, and so does leaving an ``async for`` over ``call.progress`` early (the
    iterator it dropped is closed): to read progress in several loops, keep one iterator
    (``steps = call.progress``) and loop over it. ``call.skipped`` counts the payloads the host coalesced away because this
    peer read them too slowly (SPEC 7.13); the newest always arrives. ``call.last_seq`` is the
    ``seq`` of the latest payload ``call.progress`` has yielded: attaching to a job again after it
    (``peer.attach_job(..., after_seq=call.last_seq)``) gets every later payload once (SPEC 7.16).

    On a job (a job action's request, or an attach), leaving early or ``call.cancel()`` only
    detaches this caller: the job runs on (``peer.cancel_job`` ends it).
    """

    def __init__(
        self,
        peer: Peer,
        action: str,
        payload: Any,
        timeout: float | None,
        *,
        idempotency_key: str | None = None,
        after_seq: int = 0,
    ) -> None:
        self._peer = peer
        self._args = (action, payload, timeout)
        self._idempotency_key = idempotency_key
        self._after_seq = after_seq
        self._call: OutgoingCall | None = None

    async def __aenter__(self) -> Stream:
        action, payload, timeout = self._args
        self._call = self._peer._start_call(
            action, payload, timeout=timeout, progress=True, idempotency_key=self._idempotency_key, after_seq=self._after_seq
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        call = self._started()
        if not call.future.done():
            call.cancel()
        if call.future.done() and not call.future.cancelled():
            call.future.exception()  # the error, if any, was the caller's to see; do not warn at GC

    def _started(self) -> OutgoingCall:
        if self._call is None:
            raise RuntimeError("use `async with peer.stream(...) as call` before reading it")
        return self._call

    @property
    def id(self) -> str:
        return self._started().id

    @property
    def progress(self) -> AsyncIterator[Any]:
        return self._started().progress()

    @property
    def skipped(self) -> int:
        """How many progress payloads the host left out so far: coalesced (SPEC 7.13), or, on a job, no longer in its
        journal."""
        return self._started().skipped

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the latest progress payload ``progress`` has yielded (on an attach, its ``after_seq`` before
        any): attach again with ``after_seq=call.last_seq`` to go on where this reader left off."""
        return self._started().last_seq

    @property
    def result(self) -> Awaitable[Any]:
        return _await_future(self._started().future)

    def cancel(self) -> None:
        """Cancel the call: the host is sent ``cancel``; ``result`` raises BridgeCancelled."""
        self._started().cancel()


async def _await_future(future: asyncio.Future[Any]) -> Any:
    return await future


class Peer:
    """A connection to one host. Make one with :func:`connect`; see the package docstring."""

    def __init__(
        self,
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
    ) -> None:
        if heartbeat_ms is not None and not (type(heartbeat_ms) is int and heartbeat_ms > 0):
            raise ValueError(f"heartbeat_ms must be a positive integer, not {heartbeat_ms!r}")
        if not (type(max_in_flight) is int and max_in_flight > 0):
            raise ValueError(f"max_in_flight must be a positive integer, not {max_in_flight!r}")
        launched = target is None  # by a supervising host (SPEC 10.1): the environment names the connection file
        if target is None:
            self._connection_file: str | None = _connection_file_from_environment()
            self.info = read_connection_file(self._connection_file)
        else:
            self.info = resolve_target(target)
            self._connection_file = None if _is_endpoint(os.fspath(target)) else os.fspath(target)
        # (The connection file is read again when the host refuses our key: a restarted host writes a new one.)
        name = _peer_name(name, self.info, launched)
        if key is not None:
            if self._connection_file is not None:
                raise ValueError("key= goes with an endpoint: a connection file brings its own key")
            self.info = replace(self.info, key=_parse_key(key))
        self._curve = curve.configure(
            curve_server_key if curve_server_key is not None else self.info.curve_server_key,
            curve_key_pair,
            curve_secret_key_file,
        )
        self.name = name
        self.evaluate_enabled = evaluate
        # Why $evaluate was withdrawn (SPEC 2.1: without CURVE, only the first host that welcomed us gets it).
        self._evaluate_withdrawn: str | None = None
        self._heartbeat_wish = heartbeat_ms
        self._connect_timeout = connect_timeout
        self._wait_for_name = wait_for_name
        self.max_in_flight = max_in_flight
        self._handlers: dict[str, _Registered] = {}
        for mapping in (actions, handlers):
            for action, function in (mapping or {}).items():
                if action in self._handlers:
                    raise ValueError(f"two handlers for {action!r}")
                self._handlers[action] = _register(action, function, described=True)
        self._catalogue: Catalogue | None = None  # of our handlers; made again when they change
        self._topics = _topic_names(topics)  # broadcast topics (SPEC 7.15): in every hello
        # validate=True (SPEC 7.14): the host's catalogue, fetched once welcomed and again when welcome.catalogue
        # changes; each call's, stream's and event's payload is checked against its action's payload schema.
        self.validate = validate
        self._host_schemas: dict[str, Any] | None = None
        self._fetched_for: Any = UNSET  # the welcome.catalogue the host's catalogue was last fetched for
        self._fetch_task: asyncio.Task[None] | None = None
        self._event_handlers: dict[str, _Registered] = {}
        self._eval_namespace: dict[str, Any] = {"__name__": "__zerobridge_evaluate__"}

        self._state = "new"  # new -> connecting -> connected <-> lost -> closed
        # SPEC 10.1: a peer launched by a host (connected from the environment) ends with its host: once welcomed, its
        # host's bye or loss closes it instead of reconnecting.
        self._launched = launched
        self._closed = asyncio.Event()  # set once closed, for whatever reason: wait_closed()
        self._close_reason: str | None = None
        self._closing: asyncio.Task[None] | None = None  # a launched peer closing itself (held: tasks are weakly kept)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: zmq.asyncio.Context | None = None
        self._socket: zmq.asyncio.Socket | None = None
        self._monitor: zmq.asyncio.Socket | None = None
        self._link: Link | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._socket_tasks: list[asyncio.Task[Any]] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._pump: _SocketPump | None = None  # moves messages between the socket and the link
        self._connected = asyncio.Event()
        self._hello_scheduled = False
        # What a hello says (actions, topics) changed after the last hello was sent, while no session was in force:
        # the welcome to come answers an older hello, so another follows it.
        self._hello_stale = False
        # While waiting for a welcome: the host's latest name_taken, and the timer that says hello again (SPEC 6, Names).
        self._refused: BridgeError | None = None
        self._hello_retry: asyncio.TimerHandle | None = None
        self._handshake_failure: str | None = None  # why the last transport handshake failed, for the timeout's message
        # What ends the first connect at once (nothing listening, a refused key, a taken name), before its timeout.
        self._connect_error: BridgeError | None = None
        self._connect_failed = asyncio.Event()
        # Keyed connections (SPEC 3.1): what was refused, why (for the timeout's message), when it was last warned
        # about (a flood must not flood the log), and the timer that reads the connection file again.
        self._refused_count = 0
        self._batches_read = 0  # batches from the host accepted and read (SPEC 3.3)
        self._batches_sent = 0  # batches handed to libzmq
        self._refusal: str | None = None
        self._refusal_warned: dict[bool, float] = {}
        self._key_check: asyncio.TimerHandle | None = None

        self.session: str | None = None
        self._resume_token: str | None = None  # the session's secret (SPEC 6): sent to resume it, never logged
        self.host: str | None = None
        self.host_actions: tuple[str, ...] = ()
        self.heartbeat_ms: int | None = None
        self.limits: wire.Limits | None = None
        self.host_catalogue: str | None = None  # welcome.catalogue: the hash of the host's catalogue (None before 1.3)
        self.host_info: dict[str, Any] | None = None  # welcome.info: what the host tells every peer (None before 1.3)
        # welcome.library_version: the ZeroBridge version the host runs (decision 44; None from earlier hosts)
        self.host_library_version: str | None = None

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Peer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __await__(self) -> Generator[Any, None, Peer]:
        return self._start_returning_self().__await__()

    async def _start_returning_self(self) -> Peer:
        await self.start()
        return self

    @property
    def endpoint(self) -> str:
        return self.info.endpoint

    @property
    def curve_public_key(self) -> str | None:
        """This peer's CURVE public key (Z85), for the host's allow-list; None without CURVE."""
        return self._curve.public_key if self._curve is not None else None

    @property
    def curve_server_key(self) -> str | None:
        """The host's CURVE public key this peer requires the host to prove; None without CURVE."""
        return self._curve.server_key if self._curve is not None else None

    @property
    def refused_messages(self) -> int:
        """How many messages from the host were not processed for their signature on a keyed connection (SPEC 3.1),
        the host's unsigned ``unauthorized`` answers included, since the peer was made."""
        return self._refused_count

    @property
    def batches_read(self) -> int:
        """How many batches (SPEC 3.3: several messages in one ZeroMQ message, under one signature when keyed) this
        peer read from the host since it was made; for diagnostics."""
        return self._batches_read

    @property
    def batches_sent(self) -> int:
        """How many batches this peer sent the host since it was made (it sends them on a connection whose host said
        it reads them, SPEC 3.3); for diagnostics."""
        return self._batches_sent

    @property
    def connected(self) -> bool:
        """True while a session with the host is in force."""
        return self._state == "connected"

    async def start(self) -> None:
        """Connect, say hello, and wait for the host's welcome.

        Fails after ``connect_timeout`` with NameTaken when the host refused the name all along (another
        live session holds it; the peer said hello again every second), else with BridgeTimeout.
        """
        if self._state != "new":
            raise RuntimeError(f"peer already {self._state}")
        self._state = "connecting"
        self._loop = asyncio.get_running_loop()
        self._context = zmq.asyncio.Context()
        self._open_socket()
        started = time.monotonic()
        try:
            await self._wait_welcomed_or_refused()
            if self._connect_error is not None:
                refusal = self._connect_error
                await self._close(f"connecting failed: {refusal}")
                raise refusal
            if self._fetch_task is not None:  # validate=True: the host's catalogue before the first call
                left = max(self._connect_timeout - (time.monotonic() - started), 0.1)
                await asyncio.wait({self._fetch_task}, timeout=left)
        except asyncio.TimeoutError:
            error: BridgeError
            if self._refused is not None:
                error = NameTaken(
                    f"the name {self.name!r} is held by another live session at {self.endpoint}:"
                    f" not welcomed within {self._connect_timeout} s"
                )
            else:
                why = self._handshake_failure or self._refusal or "is the host running?"
                error = BridgeTimeout(f"no welcome from {self.endpoint} within {self._connect_timeout} s ({why})")
            await self._close(f"connecting failed: {error}")
            raise error from None
        except BaseException:
            await self.close()
            raise

    async def _wait_welcomed_or_refused(self) -> None:
        """Until the first welcome, or a refusal known at once (:meth:`_fail_connecting`); TimeoutError after the
        connect timeout."""
        waits = {asyncio.ensure_future(self._connected.wait()), asyncio.ensure_future(self._connect_failed.wait())}
        try:
            done, _ = await asyncio.wait(waits, timeout=self._connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        if not done:
            raise asyncio.TimeoutError

    def _fail_connecting(self, error: BridgeError) -> None:
        """The first connect cannot succeed (the host or the kernel said so): :meth:`start` fails with ``error`` now
        instead of after its timeout. Later reconnects keep trying, as before."""
        if self._state == "connecting" and self._connect_error is None:
            self._connect_error = error
            self._connect_failed.set()

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until a session is in force (after a reconnect, for example)."""
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except asyncio.TimeoutError:
            why = f" (another live session holds the name {self.name!r})" if self._refused is not None else ""
            if not why and (self._handshake_failure or self._refusal) is not None:
                why = f" ({self._handshake_failure or self._refusal})"
            raise BridgeTimeout(f"not reconnected to {self.endpoint} within {timeout} s{why}") from None

    async def wait_closed(self, timeout: float | None = None) -> str:
        """Wait until the peer is closed, for whatever reason, and return why: ``"the program closed the peer"`` after
        :meth:`close` (or leaving ``async with``), ``"connecting failed: ..."``, or, for a peer launched by a host (one
        connected without a target), ``"lost the host: ..."`` (``... the host said bye``, ``... heard nothing for N
        ms``, ...): such a peer ends with its host instead of reconnecting (SPEC 10.1), and its program should then exit.
        Returns at once when already closed; BridgeTimeout after ``timeout`` seconds (None: no limit)."""
        try:
            await asyncio.wait_for(self._closed.wait(), timeout)
        except asyncio.TimeoutError:
            raise BridgeTimeout(f"the peer was not closed within {timeout} s") from None
        assert self._close_reason is not None
        return self._close_reason

    async def close(self) -> None:
        """Say ``bye``, fail calls still in flight with ``peer_lost``, and close the socket."""
        await self._close("the program closed the peer")

    async def _close(self, reason: str) -> None:
        if self._state == "closed":
            await self._closed.wait()  # a close under way (a launched peer's own, say): done when it is
            return
        was_connected = self._state == "connected"
        self._state = "closed"
        self._close_reason = reason
        self._connected.clear()
        if self._link is not None:
            self._link.fail_all(PeerLost("the peer was closed"))
            if was_connected:
                with contextlib.suppress(Exception):
                    self._link.send(wire.Bye())
        await self._release(linger_ms=200 if was_connected else 0)

    async def _release(self, *, linger_ms: int) -> None:
        """The second half of closing: the socket, the tasks and the context; then wait_closed() returns."""
        try:
            await self._close_socket(linger_ms=linger_ms)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._context is not None:
                context, self._context = self._context, None
                context.destroy(linger=0)  # closes anything still open; waits out the bye's linger
        finally:
            self._closed.set()

    # --- calling the host ----------------------------------------------------------------

    async def call(
        self,
        action: str,
        payload: Any = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotency_key: str | None = None,
    ) -> Any:
        """Call ``action`` on the host and return its result; raise BridgeError (or a subclass) if it fails.

        ``timeout`` (seconds, default 30: SPEC 7.3) is sent as ``timeout_ms`` and as the absolute
        ``deadline``, and the call fails with BridgeTimeout at that deadline whatever the host does (also
        while it waits for the host to read what was sent before it). ``timeout=None`` waits without a
        limit: the request then carries neither. Cancelling the awaiting task sends ``cancel``. While
        there is no session with the host (it was lost, a reconnect is under way) it fails at once
        with PeerLost.

        A payload JSON cannot carry (NaN, an integer past 64 bits, a cycle, a set, ...: SPEC 7.14) raises
        InvalidPayload (code ``invalid_payload``) at once, naming the offending part; nothing is sent. So
        does, with ``validate=True``, a payload that does not match the action's schema in the host's catalogue.

        ``idempotency_key`` (1..128 characters; SPEC 7.16) names the job when the host serves ``action`` as a job:
        a call repeating the key attaches to the job it started (its outcome, however the first call ended) instead of
        running the action again, even across reconnects and host restarts. Other actions ignore it. On a job, a
        timeout or cancel ends this call, not the job.
        """
        call = self._start_call(
            action, payload, timeout=timeout, progress=False, idempotency_key=idempotency_key, watched=False
        )
        try:
            return await call.future
        except asyncio.CancelledError:
            call._on_done(call.future)  # asyncio cancelled the future with this task: the call too
            raise

    def stream(
        self,
        action: str,
        payload: Any = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotency_key: str | None = None,
    ) -> Stream:
        """A call whose progress you read: ``async with peer.stream(a, p) as call``. ``timeout`` and
        ``idempotency_key`` as for :meth:`call` (30 s by default, None for no limit)."""
        return Stream(self, action, payload, timeout, idempotency_key=idempotency_key)

    # --- jobs (SPEC 7.16) -------------------------------------------------------------------

    async def start_job(
        self, action: str, payload: Any = None, *, key: str | None = None, timeout: float | None = DEFAULT_TIMEOUT
    ) -> JobRecord:
        """Start a job running ``action`` with ``payload`` on the host (``$job.start``) and return its record at once,
        without waiting for it to run. With ``key`` (an idempotency key, 1..128 characters, per action), a job the key
        already names is returned instead (``record.created`` is False), running or finished.

        InvalidPayload when the host does not serve ``action`` as a job (or, with ``validate=True``, the payload does
        not match its schema); ``overloaded`` when the host runs as many jobs as it allows.
        """
        request = jobs.start_payload(action, payload, key)
        self._check_payload(action, payload)
        return await self._job_request(jobs.START, request, timeout)

    def attach_job(
        self,
        job: str | JobRecord | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        after_seq: int = 0,
        timeout: float | None = None,
    ) -> Stream:
        """Attach to a job (``$job.attach``): ``async with peer.attach_job(record) as call``, the same :class:`Stream` as
        :meth:`stream`. Name the job by its id (or record), or by ``action=`` and ``key=``.

        ``call.progress`` yields the job's progress with ``seq`` above ``after_seq``, each once and in order: first what
        its journal kept, then live; ``await call.result`` is the job's outcome (its result, or its error: the handler's
        code, BridgeCancelled, Interrupted, JournalFull; Suspended when the host stopped gracefully and will resume the
        job at its next start: attach again then), at once for a finished job. ``call.last_seq`` is where to attach again
        after a disconnect. UnknownJob when the host has no such job (never started, or no longer kept).

        ``timeout`` is **None by default** (unlike :meth:`call`'s 30 s), since a job may run for hours: the attach
        waits for the job's end, and a host that dies is still noticed by the heartbeat (PeerLost). Leaving the block
        early, ``call.cancel()``, a timeout or closing the peer only **detaches**: the job runs on
        (:meth:`cancel_job` ends it).
        """
        payload = jobs.attach_payload(jobs.job_reference(job, action, key), after_seq)
        return Stream(self, jobs.ATTACH, payload, timeout, after_seq=after_seq)

    async def cancel_job(
        self,
        job: str | JobRecord | None = None,
        *,
        action: str | None = None,
        key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> JobRecord:
        """Cancel a running job (``$job.cancel``), named by its id (or record) or by ``action=`` and ``key=``, and
        return its record: ``cancelled`` (unless it finished first; cancelling a finished job changes nothing). Every
        caller attached to it gets its outcome. UnknownJob when the host has no such job."""
        return await self._job_request(jobs.CANCEL, jobs.job_reference(job, action, key), timeout)

    async def list_jobs(
        self,
        *,
        action: str | None = None,
        state: JobState | None = None,
        job: str | JobRecord | None = None,
        limit: int = jobs.DEFAULT_LIST_LIMIT,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> list[JobRecord]:
        """The caller's own jobs (``$job.list``) that match every filter given, newest first, at most ``limit``
        (1..1000). A job belongs to its starter's CURVE key, else its peer name: an anonymous peer lists none (SPEC
        7.16)."""
        result = await self.call(jobs.LIST, jobs.list_payload(action, state, job, limit), timeout=timeout)
        try:
            return jobs.records_of_list(result)
        except ValueError as error:
            raise BridgeError(errors.BAD_MESSAGE, f"the host's {jobs.LIST} result is not a list of jobs: {error}") from None

    async def _job_request(self, action: str, payload: dict[str, Any], timeout: float | None) -> JobRecord:
        """A reserved job action whose result is one job record."""
        result = await self.call(action, payload, timeout=timeout)
        try:
            return JobRecord.from_json(result)
        except ValueError as error:
            raise BridgeError(errors.BAD_MESSAGE, f"the host's {action} result is not a job record: {error}") from None

    async def post(self, action: str, payload: Any = None) -> None:
        """Send an event to the host's ``action`` (never answered).

        Raises BridgeError ``overloaded`` while more than 8 MiB wait for the host to read them,
        PeerLost while there is no session with the host, and InvalidPayload (nothing sent) for a payload
        JSON cannot carry or, with ``validate=True``, one that does not match the action's payload schema.
        """
        link = self._live_link()
        self._check_payload(action, payload)
        link.post(action, payload)

    async def describe(self, *, timeout: float | None = DEFAULT_TIMEOUT) -> Catalogue:
        """The host's catalogue (its ``$describe`` result, SPEC 7.8): a :class:`~zerobridge.describe.Catalogue`,
        with ``.hash``, the descriptions by name (``catalogue["add"].payload``) and ``.to_json()``.

        BridgeError ``bad_message`` when the answer is not a catalogue; a host before 1.3 answers
        ``unknown_action`` (UnknownAction)."""
        result = await self.call("$describe", None, timeout=timeout)
        try:
            catalogue = Catalogue.from_json(result)
        except ValueError as error:
            raise BridgeError(errors.BAD_MESSAGE, f"the host's $describe result is not a catalogue: {error}") from None
        try:
            computed = catalogue.computed_hash()
        except ValueError as error:
            computed = f"none ({error})"
        if computed != catalogue.hash:
            log.warning("the host's catalogue says its hash is %s, but its actions hash to %s", catalogue.hash, computed)
        return catalogue

    def _start_call(
        self,
        action: str,
        payload: Any,
        *,
        timeout: float | None,
        progress: bool,
        idempotency_key: str | None = None,
        after_seq: int = 0,
        watched: bool = True,
    ) -> OutgoingCall:
        link = self._live_link()
        self._check_payload(action, payload)
        return link.call(
            action, payload, timeout=timeout, progress=progress, idempotency_key=idempotency_key, after_seq=after_seq,
            watched=watched,
        )

    def _check_payload(self, action: str, payload: Any) -> None:
        """validate=True: refuse a payload that does not match the action's schema in the host's catalogue."""
        if self._host_schemas is None:
            return
        schema = self._host_schemas.get(action)
        if schema is None:
            return  # an action the catalogue does not describe (a reserved one, or one the host does not serve)
        error = first_error(payload, schema, "payload")
        if error is not None:
            raise InvalidPayload(f"{error} (the payload schema of {action!r} in the host's catalogue)")

    async def _fetch_host_catalogue(self) -> None:
        """validate=True: fetch the host's catalogue, whose payload schemas calls are checked against from then on."""
        try:
            catalogue = await self.describe()
        except BridgeError as error:
            if isinstance(error, (PeerLost, BridgeTimeout)):
                self._fetched_for = UNSET  # fetched again after the next welcome
            log.warning(
                "validate=True: the host's catalogue could not be fetched (%s); payloads are not checked against it", error
            )
            return
        self._host_schemas = {action.name: action.payload for action in catalogue}

    def _live_link(self) -> Link:
        if self._state == "connected" and self._link is not None:
            if self._hello_scheduled:  # the host must learn new actions before what we send next
                self._flush_hello()
            return self._link
        if self._state == "new":
            raise RuntimeError("not connected: use `async with zerobridge.connect(...)` or `await peer.start()`")
        if self._state == "closed":
            raise PeerLost(f"the peer was closed ({self._close_reason})")
        raise PeerLost(f"no session with {self.endpoint}: reconnecting")

    # --- serving the host ----------------------------------------------------------------

    def handler(
        self, name: str, *, doc: str | None = None, payload: Any = UNSET, result: Any = UNSET, progress: Any = UNSET
    ) -> Callable[[F], F]:
        """Decorator: serve ``name`` to the host with this function.

        The function takes ``payload`` and optionally a :class:`RequestContext`; it may be sync (run in
        a worker thread) or async (cancelled on ``cancel`` or timeout). Its return value is the result;
        raising BridgeError answers with that code, any other exception with ``handler_error``.

        ``$describe`` (SPEC 7.8) describes the action from the function: ``doc`` is the first line of its
        docstring, the payload and result schemas come from its payload parameter's and return annotations,
        and a second parameter annotated ``RequestContext[T]`` declares progress payloads of type ``T``. The
        keyword arguments say what type hints cannot, or override them: ``doc=`` a line of text, and
        ``payload=``/``result=``/``progress=`` a JSON Schema (a dict) or a type to derive one from
        (``progress=None``: no progress).
        """

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
        """Serve ``name`` with ``function`` (replacing any earlier one); re-announces the actions and the catalogue's
        hash. ``doc``, ``payload``, ``result`` and ``progress`` describe it, as for :meth:`handler`."""
        self._handlers[name] = _register(
            name, function, described=True, doc=doc, payload=payload, result=result, progress=progress
        )
        self._catalogue = None
        self._announce()

    def remove_handler(self, name: str) -> None:
        """Stop serving ``name``; re-announces the actions and the catalogue's hash."""
        if self._handlers.pop(name, None) is not None:
            self._catalogue = None
            self._announce()

    @property
    def catalogue(self) -> Catalogue:
        """This peer's catalogue: the descriptions of the actions it serves, as ``$describe`` answers the host (SPEC
        7.8); ``catalogue.hash`` goes in every ``hello``."""
        if self._catalogue is None:
            self._catalogue = Catalogue.of(
                registered.description for registered in self._handlers.values() if registered.description is not None
            )
        return self._catalogue

    @property
    def actions(self) -> tuple[str, ...]:
        """The actions this peer serves, as listed in ``hello``."""
        return tuple(sorted(self._handlers))

    # --- broadcast topics (SPEC 7.15) -------------------------------------------------------

    @property
    def topics(self) -> tuple[str, ...]:
        """The broadcast topics this peer subscribes to, sorted, as listed in every ``hello``."""
        return tuple(sorted(self._topics))

    def subscribe(self, *topics: str) -> None:
        """Receive the host's broadcasts on these topics too; re-announces the topics (a new ``hello``, as when
        handlers change). Events broadcast on a topic reach the handlers of their action (:meth:`on_event`), their
        ``EventContext.topic`` saying which topic. Subscribing to a topic already subscribed to changes nothing."""
        names = _topic_names(topics)
        if not names <= self._topics:
            self._topics |= names
            self._announce()

    def unsubscribe(self, *topics: str) -> None:
        """Stop receiving the host's broadcasts on these topics (a new ``hello``, as for :meth:`subscribe`); topics not
        subscribed to are ignored. Broadcasts to every peer still arrive."""
        names = _topic_names(topics)
        if names & self._topics:
            self._topics -= names
            self._announce()

    def on_event(self, name: str) -> Callable[[F], F]:
        """Decorator: call this function with the payload of each ``event`` the host sends to ``name``.

        The function takes ``payload`` and optionally an :class:`~zerobridge.link.EventContext`, whose ``topic`` is
        the topic the host broadcast the event on (SPEC 7.15; None for an event sent to this peer alone or broadcast
        to every peer). Events are delivered one at a time, in order; sync functions run in a worker thread. Events
        waiting or running count toward ``max_in_flight`` with the host's requests (one over it is not
        run: the host is answered ``overloaded``); a handler still running when the session ends is
        cancelled.
        """

        def register(function: F) -> F:
            self._event_handlers[name] = _register(name, function, reserved_ok=True)
            return function

        return register

    def remove_event_handler(self, name: str) -> None:
        """Stops handling the host's events called ``name`` (registered with :meth:`on_event`): they are dropped from
        now on, as events nobody handles are. Removing a name that has no handler does nothing."""
        self._event_handlers.pop(name, None)

    async def _serve(self, request: wire.Request, context: RequestContext) -> Any:
        if request.action == "$evaluate":
            if not self.evaluate_enabled:
                raise NotAllowed("evaluation is off on this peer (connect(..., evaluate=True) turns it on)")
            if self._evaluate_withdrawn is not None:
                raise NotAllowed(self._evaluate_withdrawn)
            return await run_script(request.payload, self._eval_namespace)
        if request.action == "$actions":
            return list(self.actions)
        if request.action == "$describe":
            return self.catalogue.to_json()
        registered = self._handlers.get(request.action)
        if registered is None:
            raise UnknownAction(f"this peer serves no action {request.action!r}")
        return await _invoke(registered, request.payload, context)

    async def _serve_event(self, event: wire.Event) -> None:
        registered = self._event_handlers.get(event.action)
        if registered is None:
            log.info("dropped event %r: no handler", event.action)
            return
        await _invoke(registered, event.payload, EventContext(event.action, event.topic, event.trace))  # the link logs a failure

    # --- the session ---------------------------------------------------------------------

    def _on_message(self, message: wire.Message) -> None:
        match message:
            case wire.Welcome():
                self._on_welcome(message)
            case wire.Bye():
                self._on_host_lost("the host said bye")
            case wire.Hello():  # only a peer says hello (SPEC 7.5, step 8)
                assert self._link is not None
                self._link.send(wire.Response.failure(None, BridgeError(errors.BAD_MESSAGE, "a host does not send hello")))
            case wire.Response(error=BridgeError(code=errors.NAME_TAKEN) as error):
                self._on_name_taken(error)
            case wire.Response(error=error) if error is not None:  # "id": null: it answers none of our calls
                log.warning("the host refused a message: %s", error)
                if error.code == errors.UNAUTHORIZED:  # (a keyed peer never gets here: such answers are unsigned)
                    self._refusal = "the host requires a key: connect through its connection file, or give key="
                    self._fail_connecting(Unauthorized(f"{error.message}: {self._refusal}", error.data))

    def _on_welcome(self, welcome: wire.Welcome) -> None:
        if self._state in ("closed", "new"):
            return
        assert self._link is not None
        if self.session is not None and welcome.session != self.session and self._state == "connected":
            # The host no longer knows our old session: nothing it owed us will arrive.
            self._link.fail_all(PeerLost(f"the host started a new session {welcome.session!r}"))
        self.session = welcome.session
        self._resume_token = welcome.resume_token  # None from a 1.1 host: then hellos resume by session alone
        self._refused = None
        self._refusal = None
        self._cancel_hello_retry()
        self.host = welcome.host
        self.host_actions = welcome.actions
        self.host_catalogue = welcome.catalogue
        self.host_info = welcome.info
        self.host_library_version = welcome.library_version
        if self.validate and (self._fetched_for is UNSET or welcome.catalogue != self._fetched_for):
            self._fetched_for = welcome.catalogue  # a 1.2 host sends none: fetched once
            self._fetch_task = self._spawn(self._fetch_host_catalogue())
        self.limits = welcome.limits
        self._link.max_message_bytes = welcome.limits.max_message_bytes
        # Batches to the host once its welcome on this connection says it reads them (SPEC 3.3); a new connection has
        # a new link, which starts without.
        self._link.batching = welcome.batch
        if welcome.heartbeat_ms != self.heartbeat_ms or self._heartbeat_task is None:
            self.heartbeat_ms = welcome.heartbeat_ms
            self._restart_heartbeat()
        self._state = "connected"
        self._connected.set()
        if self._hello_stale:  # actions or topics changed after the hello this welcome answers
            self._announce()

    def _on_name_taken(self, error: BridgeError) -> None:
        """Another live session holds our name (SPEC 6, Names): not yet. Say hello again in a while;
        :meth:`start` fails with this only when its connect timeout passes."""
        if self._state == "connected":
            # That hello was to resume our session: the host has it no more, and the name went to someone else.
            self._on_host_lost(f"another live session holds the name {self.name!r}")
            return
        if self._state not in ("connecting", "lost") or self._loop is None:
            return
        if self._state == "connecting" and not self._wait_for_name:
            self._fail_connecting(
                NameTaken(
                    f"the host at {self.endpoint} refused the name {self.name!r}: another live session holds it"
                    f" ({error.message}); close that peer, pick another name, or connect with wait_for_name=True"
                )
            )
            return
        if self._refused is None:
            log.info(
                "the host at %s refuses the name %r for now (%s); saying hello again every %g s",
                self.endpoint, self.name, error.message, HELLO_RETRY_INTERVAL,
            )
        self._refused = error
        if self._hello_retry is None:
            self._hello_retry = self._loop.call_later(HELLO_RETRY_INTERVAL, self._retry_hello, self._link)

    def _retry_hello(self, link: Link | None) -> None:
        self._hello_retry = None
        if self._state in ("connecting", "lost") and link is self._link and link is not None and not link.retired:
            self._send_hello(resume=False)  # a waiting peer has no session to resume: it asks for a fresh one

    def _cancel_hello_retry(self) -> None:
        if self._hello_retry is not None:
            self._hello_retry.cancel()
            self._hello_retry = None

    # --- keyed connections (SPEC 3.1) ------------------------------------------------------

    def _accepts(self, channel: signing.PeerChannel, link: Link, frames: list[bytes]) -> bool:
        """Whether a message from the host is signed for this connection's channel with a counter past those accepted
        before. What is refused is counted and logged, never answered."""
        if channel.accepts_next(frames):
            return True
        why = channel.refusal(frames[0], frames[1:]) if len(frames) >= 2 else "fewer than 2 frames"
        if why is None:
            return True
        self._refused_count += 1
        answer = _unauthorized_answer(frames)
        if answer is not None:  # the host refused something of ours: its clock is far from ours, or it holds another key
            skew = signing.clock_skew_diagnosis(answer.data)
            cause = skew or "is the key the host's?"
            refusal = f"the host refused this peer's messages as unauthorized ({answer.message}): {cause}"
            # The first refusal names the cause; hellos retried on the refused channel are refused for being on it.
            if self._refusal is None or not self._refusal.startswith("the host refused"):
                self._refusal = refusal
            self._fail_connecting(Unauthorized(refusal, answer.data))
            self._warn_refusal(True, f"{refusal} ({self._refused_count} refused so far)")
            if self._key_check is None and skew is None:
                self._check_key(link)
            return False
        self._warn_refusal(False, f"dropped a message from the host: {why} ({self._refused_count} refused so far)")
        if self._refusal is None:
            self._refusal = f"messages from the host were refused: {why} (does it use this key?)"
        return False

    def _warn_refusal(self, unauthorized: bool, message: str) -> None:
        """A warning at most every REFUSAL_WARN_INTERVAL for each kind of refusal; the rest at debug level."""
        now = time.monotonic()
        last = self._refusal_warned.get(unauthorized)
        if last is None or now - last >= REFUSAL_WARN_INTERVAL:
            self._refusal_warned[unauthorized] = now
            log.warning("%s", message)
        else:
            log.debug("%s", message)

    def _check_key(self, link: Link) -> None:
        """The host refuses our key. If it came from a connection file, read the file again, now and every
        KEY_CHECK_INTERVAL until welcomed: a host restarted through the file has written a new key in it, which a
        new connection then uses. (A file without a key is not followed: that would turn signing off.)"""
        self._key_check = None
        if self._connection_file is None or link is not self._link or self._state not in ("connecting", "lost"):
            return
        try:
            key = read_connection_file(self._connection_file).key
        except ValueError:
            key = b""  # not there (yet): a host removes it when it stops, and writes it once bound
        if key and key != self.info.key:
            log.info("the connection file %s holds a new key: opening a new connection with it", self._connection_file)
            self.info = replace(self.info, key=key)
            self._refusal = None
            link.retire(PeerLost("the connection key changed"))
            self._spawn(self._reopen())
        elif self._loop is not None:
            self._key_check = self._loop.call_later(KEY_CHECK_INTERVAL, self._check_key, link)

    def _announce(self) -> None:
        """Send a new hello (once per loop turn) so the host learns our current actions and topics. Without a session
        in force, the next hello carries them; one already on its way is followed by another once welcomed."""
        if self._state in ("connecting", "lost"):
            self._hello_stale = True
            return
        if self._state != "connected" or self._hello_scheduled or self._loop is None:
            return
        self._hello_scheduled = True
        self._loop.call_soon(self._flush_hello)

    def _flush_hello(self) -> None:
        if self._hello_scheduled:
            self._hello_scheduled = False
            if self._state == "connected":
                self._send_hello(resume=True)

    def _send_hello(self, *, resume: bool) -> None:
        assert self._link is not None
        self._hello_stale = False
        self._link.send(
            wire.Hello(
                peer=self.name,
                actions=self.actions,
                features=self._features(),
                session=self.session if resume else None,
                resume_token=self._resume_token if resume else None,
                heartbeat_ms=self._heartbeat_wish,
                catalogue=self.catalogue.hash,
                topics=self.topics,
            )
        )

    def _features(self) -> tuple[str, ...]:
        """``hello.features``: ``evaluate`` when the user turned it on (and it holds), and ``batch``: this peer reads
        batches on every ZeroMQ connection (SPEC 3.3)."""
        return ("evaluate", "batch") if self.evaluate_enabled and self._evaluate_withdrawn is None else ("batch",)

    def _restart_heartbeat(self) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        assert self._link is not None and self.heartbeat_ms is not None
        self._heartbeat_task = self._spawn(self._link.watch(self.heartbeat_ms, self._on_host_lost))

    def _on_host_lost(self, reason: str) -> None:
        """Fail everything in flight, then start over on a fresh socket with a fresh hello.

        What was queued for the lost host is discarded with the old socket (closed without lingering),
        so nothing sent before the loss arrives later (SPEC 7.3); until the new welcome, calls and
        events fail at once with PeerLost.

        A peer launched by a host (SPEC 10.1) closes instead, once welcomed: its life is bounded by its host's, and a
        host that comes back after a crash launches its own peers anew (this one would only hold their name).
        """
        if self._state in ("closed", "new"):
            return
        log.log(logging.INFO if reason.endswith("bye") else logging.WARNING, "lost the host at %s: %s", self.endpoint, reason)
        self._withdraw_evaluate()
        if self._launched and self._state == "connected":
            log.info("a peer launched by its host ends with it (SPEC 10.1): closing, not reconnecting")
            if self._link is not None:
                self._link.retire(PeerLost(f"lost the host: {reason}"))
            # Closed from now on (calls fail at once, saying so); no bye: this host's session is over.
            self._state = "closed"
            self._close_reason = f"lost the host: {reason}"
            self._connected.clear()
            self._closing = asyncio.ensure_future(self._release(linger_ms=0))
            return
        self._state = "lost"
        self._connected.clear()
        self._refused = None
        if self._link is not None:
            self._link.retire(PeerLost(f"lost the host: {reason}"))
        self._spawn(self._reopen())

    def _withdraw_evaluate(self) -> None:
        """SPEC 2.1: without CURVE, nothing proves that the host we reach next is the one that welcomed us (another
        local process may have taken the endpoint meanwhile), so $evaluate is for that first host only."""
        if not self.evaluate_enabled or self._curve is not None or self.host is None or self._evaluate_withdrawn:
            return
        self._evaluate_withdrawn = (
            "evaluation was turned off when this peer lost the first host that welcomed it: without CURVE nothing"
            " proves a host is that one (connect with curve_server_key to keep it across reconnects)"
        )
        log.warning(
            "lost the connection to the host at %s: $evaluate is refused from now on, since without CURVE nothing"
            " proves that the host reached next is the same one (connect with curve_server_key to keep it)",
            self.endpoint,
        )

    async def _reopen(self) -> None:
        await self._close_socket(linger_ms=0)
        if self._state in ("connecting", "lost"):
            self.session = self._resume_token = None  # a fresh session: what the old one owed us is failed already
            self._open_socket()

    # --- the socket ----------------------------------------------------------------------

    def _open_socket(self) -> None:
        assert self._context is not None
        socket = self._context.socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        if self._state == "connecting" and self.endpoint.startswith("ipc://") and not os.path.exists(self.endpoint[6:]):
            # No host has ever bound there (libzmq would retry in silence): known at once.
            self._fail_connecting(
                HostUnreachable(f"no host listens at {self.endpoint}: the socket file does not exist (is the host running?)")
            )
        socket.setsockopt(zmq.SNDHWM, SEND_HWM)
        # A frame from the host past this is refused by libzmq as its header arrives (the connection is dropped and
        # made again), so a hostile host cannot make this peer allocate without bound (SPEC 7.10).
        socket.setsockopt(zmq.MAXMSGSIZE, RECEIVE_LIMIT)
        if self._curve is not None:
            self._curve.apply(socket)
        # The monitor first: over ipc a loaded machine can finish the handshake before a monitor set up after connect,
        # and a keyed connection must see it to know that a later disconnect broke a connection that was up.
        monitor = socket.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED | _HANDSHAKE_FAILED
        )
        socket.connect(self.endpoint)
        self._socket = socket
        self._monitor = monitor

        # A keyed connection's channel lives and dies with the socket (SPEC 3.1: a new one for every connection).
        channel = signing.PeerChannel(self.info.key) if self.info.key else None

        def send(frames: list[bytes]) -> bool:  # this link only ever sends on this socket
            return self._send_frames(socket, pump, channel, frames)

        def send_batch(messages: list[list[bytes]]) -> bool:
            return self._send_batch(socket, pump, channel, messages)

        def receive(frames: list[bytes]) -> int:
            """Read one ZeroMQ message; how many protocol messages it held (a batch holds several)."""
            # A batch's frame 0 (SPEC 3.3) is `b.<counter>.<mac>` on a keyed connection, exactly `b` without a key.
            if (frames[0][:2] == b"b.") if channel is not None else (frames[0] == _UNKEYED_BATCH):
                if (size := sum(map(len, frames[1:]))) > BATCH_RECEIVE_LIMIT:
                    # Refused before any MAC is computed; one frame is already bounded by RECEIVE_LIMIT.
                    link.refuse_unreadable(
                        wire.WireError(errors.TOO_LARGE, f"a batch of {size} bytes; the limit is {BATCH_RECEIVE_LIMIT}")
                    )
                elif channel is None or self._accepts(channel, link, frames):
                    self._batches_read += 1
                    return link.receive_batch(frames)
            elif len(frames) > 1 and (
                size := len(frames[1]) if len(frames) == 2 else sum(map(len, frames[1:]))  # no slice for the usual two
            ) > MAX_MESSAGE_BYTES:
                # SPEC 7.10: answered too_large, unread (only its id looked for) and before any MAC is computed.
                link.refuse_unreadable(wire.WireError(
                    errors.TOO_LARGE, f"the message has {size} bytes; the limit is {MAX_MESSAGE_BYTES}",
                    id=wire.readable_id(frames[1]),
                ))
            elif channel is None or self._accepts(channel, link, frames):
                link.receive(frames)
            return 1

        link = Link(
            send=send,
            serve=self._serve,
            serve_event=self._serve_event,
            on_message=self._on_message,
            max_in_flight=self.max_in_flight,
            send_batch=send_batch,
        )
        self._link = link
        pump = _SocketPump(socket, receive=receive, writable=link.writable)
        self._pump = pump
        self._heartbeat_task = None
        self._socket_tasks = [self._spawn(self._watch_transport(monitor, link, keyed=channel is not None))]
        self._send_hello(resume=False)

    async def _close_socket(self, *, linger_ms: int) -> None:
        if self._link is not None:
            self._link.flush()  # what was queued this turn (a bye) goes before the socket closes
        if self._pump is not None:
            # Reading stops before anything here waits, and before the socket (and its descriptor) is gone.
            self._pump.close()
            self._pump = None
        self._cancel_hello_retry()
        if self._key_check is not None:
            self._key_check.cancel()
            self._key_check = None
        tasks = self._socket_tasks
        if self._heartbeat_task is not None:
            tasks = [*tasks, self._heartbeat_task]
            self._heartbeat_task = None
        self._socket_tasks = []
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()
        await asyncio.gather(*(t for t in tasks if t is not current), return_exceptions=True)
        # The monitor is stopped before its socket closes: libzmq says "monitor stopped" with a blocking send, which
        # never returns once the receiving end is gone (seen as a hang at close, one run in several under load).
        if self._socket is not None:
            with contextlib.suppress(zmq.ZMQError):
                self._socket.disable_monitor()
        if self._monitor is not None:
            monitor, self._monitor = self._monitor, None
            monitor.close(linger=0)
        if self._socket is not None:
            socket, self._socket = self._socket, None
            socket.close(linger=linger_ms)

    def _send_frames(
        self, socket: zmq.asyncio.Socket, pump: _SocketPump, channel: signing.PeerChannel | None, frames: list[bytes]
    ) -> bool:
        """Hand ``frames`` to libzmq without waiting, signed on a keyed connection; False when its queue is
        full (the pump tells the link once it has room). Messages for a closed socket are dropped."""
        if socket.closed:
            head = bytes(frames[1][:80])
            if head.startswith(b'{"v":1,"type":"hello"'):
                head = b'{"v":1,"type":"hello",...'  # it may carry the resume token, which is never logged
            log.debug("not sent (socket closed): %r", head)
            return True
        # Signed as it is handed over, so that counters follow the order on the wire.
        if channel is not None and not channel.sign_in_place(frames, now_ms):
            log.debug("not sent: a keyed connection opens with hello")
            return True
        handed = self._hand_over(pump, channel, frames)
        if handed is False and channel is not None:
            frames[0] = b""  # it waits in the link's queue, maybe to go in a batch: signed again when it goes
        return handed is not False

    def _send_batch(
        self,
        socket: zmq.asyncio.Socket,
        pump: _SocketPump,
        channel: signing.PeerChannel | None,
        messages: list[list[bytes]],
    ) -> bool:
        """Hand ``messages`` (each with its empty frame 0) to libzmq as one batch (SPEC 3.3: under one signature on a
        keyed connection, behind the byte ``b`` without a key), as :meth:`_send_frames` hands one message."""
        if socket.closed:
            log.debug("not sent (socket closed): a batch of %d messages", len(messages))
            return True
        batch = wire.join_batch(messages)
        handed = self._hand_over(pump, channel, [channel.sign_batch(batch) if channel is not None else _UNKEYED_BATCH, batch])
        if handed:
            self._batches_sent += 1
        return handed is not False

    @staticmethod
    def _hand_over(pump: _SocketPump, channel: signing.PeerChannel | None, frames: list[bytes]) -> bool | None:
        """Hand one ZeroMQ message to libzmq: True when taken, False when its queue is full (the signature's counter
        is given back), None when the send failed (logged; the message is lost with the connection)."""
        try:
            if pump.send(frames):
                return True
        except zmq.ZMQError as error:
            log.warning("send failed: %s", error)
            return None
        if channel is not None:
            channel.unsent()
        return False

    async def _watch_transport(self, monitor: zmq.asyncio.Socket, link: Link, *, keyed: bool) -> None:
        """After the TCP/IPC connection comes back, say hello again to learn whether our session survived.

        On a keyed connection a broken connection is a loss instead: libzmq would send what it still holds, signed
        for the old channel, on the next connection before any new opening hello, and the host would refuse it all.
        So a new socket opens a new channel, as after any loss."""
        dropped = False
        handshook = False
        while True:
            try:
                message = parse_monitor_message(await monitor.recv_multipart())
            except zmq.ZMQError:
                if monitor.closed:
                    return
                continue
            event = message["event"]
            if event == zmq.EVENT_DISCONNECTED:
                dropped = True
                self._withdraw_evaluate()  # the next connection may reach another process
                # A launched peer's host is lost with its connection too, keyed or not: it closes (SPEC 10.1).
                ends = self._launched and self._state == "connected"
                if (keyed or ends) and handshook and link is self._link and not link.retired:
                    self._on_host_lost(
                        "the connection broke" if ends
                        else "the connection broke (on a keyed connection a new one opens a new channel)"
                    )
                    return
            elif event == zmq.EVENT_CONNECT_RETRIED:
                if not handshook:  # refused before any connection was made: nothing listens there
                    self._fail_connecting(
                        HostUnreachable(f"no host listens at {self.endpoint}: the connection was refused (is the host running?)")
                    )
            elif event & _HANDSHAKE_FAILED:
                self._on_handshake_failed(event, message["value"])
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshake_failure = None
                handshook = True
                if dropped:
                    dropped = False
                    if self._state == "connected":
                        self._send_hello(resume=True)

    def _on_handshake_failed(self, event: int, value: int) -> None:
        """Say why libzmq keeps failing to connect (logged when the reason changes; the connect timeout names it)."""
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            why = f"the host refused this peer's key (ZAP status {value})"
            if self._curve is not None:
                why += f": is {self._curve.public_key} on its allow-list?"
        elif self._curve is not None:
            why = f"the CURVE handshake failed: is {self._curve.server_key} the host's public key, and does it use CURVE?"
        else:
            why = "the handshake failed: does the host require CURVE (curve_server_key)?"
        if why != self._handshake_failure:
            log.warning("cannot connect to %s: %s", self.endpoint, why)
        self._handshake_failure = why
        self._fail_connecting(Unauthorized(f"cannot connect to {self.endpoint}: {why}"))

    def _spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


# libzmq's reports of a failed ZMTP handshake (a CURVE key refused or not proved, a mechanism mismatch).
_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
# How often a peer whose name the host refuses (name_taken) says hello again while it waits for a welcome (SPEC 6).
HELLO_RETRY_INTERVAL = 1.0
# Keyed connections: how often refused messages are warned about (the rest go to debug), and how often the
# connection file is read again while the host refuses the peer's key.
REFUSAL_WARN_INTERVAL = 10.0
KEY_CHECK_INTERVAL = 1.0
# How many messages one wake-up of the reader handles before letting other tasks run (a batch counts its messages).
_DRAIN_BATCH = 256
# libzmq's send high-water mark (messages): past it, sends wait in the link's own bounded queue.
SEND_HWM = 1000
# The largest frame taken from the host: 64 MiB and the 64 KiB slack of SPEC 7.10, as the Swift peer.
RECEIVE_LIMIT = (64 << 20) + (64 << 10)
# The largest message processed (frames 1..n, SPEC 7.10), as the Swift peer's default; a larger one is answered
# too_large unread.
MAX_MESSAGE_BYTES = 64 << 20
# The largest batch read (frames 1..n; SPEC 3.3: the limit and 128 KiB); a larger one is answered too_large unread.
BATCH_RECEIVE_LIMIT = MAX_MESSAGE_BYTES + (128 << 10)
_UNKEYED_BATCH = b"b"  # frame 0 of a batch on a connection without a key (SPEC 3.3)


# Plain integers: pyzmq's enum flags cost a conversion on every call.
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)


class _SocketPump:
    """Moves messages between one DEALER socket and its link on the socket's event loop, with plain non-blocking calls
    on a shadow of the socket: pyzmq's awaitable sends and receives build an asyncio Future (and several enum flags)
    per message, which cost more than the message's own decoding.

    One reader on the socket's descriptor takes everything readable at each wake-up (at most ``_DRAIN_BATCH``
    messages, then the rest on the next turn of the loop, so other tasks run). libzmq's descriptor is
    edge-triggered and a send or a receive may consume its signal, so ZMQ_EVENTS is read again after them: messages
    that wait, or room the link waits for, are acted on without a further signal."""

    def __init__(
        self, socket: zmq.asyncio.Socket, *, receive: Callable[[list[bytes]], int], writable: Callable[[], None]
    ) -> None:
        plain: zmq.Socket[Any] = zmq.Socket.shadow(socket.underlying)
        self._recv = plain.recv
        self._send = plain.send
        # Only integer options are read here (ZMQ_EVENTS, ZMQ_FD).
        self._get = cast("Callable[[int], int]", plain.getsockopt)
        self._receive = receive
        self._writable = writable
        self._loop = asyncio.get_running_loop()
        self._fd = self._get(zmq.FD)
        self._wants_room = False
        self._check_scheduled = False
        self._closed = False
        self._loop.add_reader(self._fd, self._ready)
        self._schedule_check()  # what arrived before the reader was added

    def send(self, frames: list[bytes]) -> bool:
        """Hand ``frames`` to libzmq; False when its queue is full (``writable`` is called once it has room).
        libzmq takes a multipart message whole or not at all: only its first frame can be refused."""
        send = self._send
        try:
            for frame in frames[:-1]:
                send(frame, _SNDMORE_NOBLOCK)
            send(frames[-1], _NOBLOCK)
        except zmq.Again:
            self._wants_room = True
            self._look_after_send()
            return False
        self._look_after_send()
        return True

    def close(self) -> None:
        """Stop reading; before the socket closes."""
        if not self._closed:
            self._closed = True
            self._loop.remove_reader(self._fd)

    def _look_after_send(self) -> None:
        """A send may have taken the descriptor's signal (libzmq handles pending commands in it): ZMQ_EVENTS, read now,
        says whether a message or room waits, and only then is a look scheduled. A look scheduled for every send cost
        a sequential call a turn of the loop of its own (3 to 4 us of its ~80); sends are few a turn (the link hands
        a turn's messages over together), so reading ZMQ_EVENTS after each costs about what the one look did."""
        if self._check_scheduled or (events := self._events()) is None:
            return
        if events & _POLLIN or (events & _POLLOUT and self._wants_room):
            self._schedule_check()

    def _events(self) -> int | None:
        """ZMQ_EVENTS; None once the socket is closed."""
        try:
            return self._get(_EVENTS)
        except zmq.ZMQError:
            return None

    def _schedule_check(self) -> None:
        if not self._check_scheduled:
            self._check_scheduled = True
            self._loop.call_soon(self._ready)

    def _ready(self) -> None:
        """The descriptor signalled, or a send or a long drain asked for a look: act on what ZMQ_EVENTS says."""
        self._check_scheduled = False
        if self._closed or (events := self._events()) is None:
            return
        if events & _POLLOUT and self._wants_room:
            self._wants_room = False
            self._writable()
        if events & _POLLIN and not self._closed:
            self._drain()

    def _drain(self) -> None:
        recv, get, receive = self._recv, self._get, self._receive
        read = 0  # protocol messages: a batch counts each of its messages
        while read < _DRAIN_BATCH:
            try:
                # A frame object says whether more follow: no ZMQ_RCVMORE look per frame (0.3 us a message).
                frame = recv(_NOBLOCK, copy=False)
                frames = [frame.bytes]
                while frame.more:
                    frame = recv(_NOBLOCK, copy=False)
                    frames.append(frame.bytes)
            except zmq.Again:
                return  # all read: the descriptor signals the next arrival
            except zmq.ZMQError as error:
                if not self._closed:  # not seen on a DEALER: the next signal of the descriptor tries again
                    log.warning("receive failed: %s", error)
                return
            first = read == 0
            read += receive(frames)
            if self._closed:
                return
            if first and not get(_EVENTS) & _POLLIN:
                # A lone message (a sequential call's answer) ends the wake-up without a receive that fails: raising
                # zmq.Again costs several times a look at ZMQ_EVENTS. Longer runs are read until Again.
                return
        self._schedule_check()  # more may wait: read on the next turn, after what else is ready


def _unauthorized_answer(frames: list[bytes]) -> BridgeError | None:
    """The error of an unsigned ``response`` with ``"id": null`` and code ``unauthorized`` (how a host refuses what it
    cannot verify, SPEC 3.1); None for anything else."""
    if len(frames) < 2 or len(frames[0]) != 0:
        return None
    try:
        message = wire.decode(frames)
    except wire.WireError:
        return None
    if isinstance(message, wire.Response) and message.id is None and message.error is not None:
        return message.error if message.error.code == errors.UNAUTHORIZED else None
    return None


def _log_send_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("send failed: %s", future.exception())


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
) -> Peer:
    """A peer for the host at ``target`` (an endpoint, or the path of a connection file).

    Without ``target`` (a peer launched by a host, SPEC 10.1) the connection file is the one the environment variable
    ``ZEROBRIDGE_CONNECTION_FILE`` names; unset, connecting fails at once with a ValueError saying so. ``name`` is
    ``hello.peer``; when not given it is the connection file's ``peer`` (else, without ``target``,
    ``ZEROBRIDGE_PEER_NAME``). A name that differs from the file's ``peer`` is allowed, but a host that launched the
    peer waits for the file's name. Such a peer ends with its host: once welcomed, its host's ``bye`` or loss closes it
    instead of reconnecting (``await peer.wait_closed()`` returns then, saying why), and its program should then exit.

    Use it as ``async with zerobridge.connect(...) as peer`` (or ``peer = await zerobridge.connect(...)``
    and later ``await peer.close()``). Handlers given in ``actions``/``handlers`` (name -> function) or
    registered with ``@peer.handler`` before entering are listed in the first hello.

    ``evaluate=True`` lets the host run arbitrary Python in this process through ``$evaluate``:
    only turn it on for a host you trust. Without CURVE it holds only for the first host that
    welcomed the peer (SPEC 2.1). ``heartbeat_ms`` is this peer's wish; the host's welcome says the
    value in force. ``max_in_flight`` bounds how many of the host's requests and events run at once;
    more are answered ``overloaded``.

    CURVE (SPEC 2.1): with the host's public key (``curve_server_key``, Z85, or a connection file's
    ``curve_server_key``) every socket the peer opens is encrypted and refuses a host that cannot
    prove that key. The peer's own key pair is ``curve_key_pair`` (public, secret), or the one whose
    secret key ``curve_secret_key_file`` holds (created, mode 0600, when missing), else a new one;
    ``peer.curve_public_key`` is what goes on the host's allow-list.

    Keyed connections (SPEC 3.1): a connection file with a ``key`` (as ``zerobridge serve --connection-file``
    writes by default), or ``key`` (hex or bytes) beside an endpoint, makes the peer sign everything it sends
    and process only what the host signed for the current connection; ``peer.refused_messages`` counts the rest.

    ``validate=True`` (SPEC 7.14): once welcomed, the peer fetches the host's catalogue (``$describe``; again when a
    later welcome's ``catalogue`` hash differs) and checks each call's, stream's and event's payload against its
    action's payload schema before sending, failing at once with InvalidPayload naming the path and what was expected.
    Connecting waits for that first catalogue; a host that does not serve ``$describe`` is warned about, and nothing
    is checked then.

    ``topics`` (SPEC 7.15): the broadcast topics to subscribe to from the first ``hello`` on; ``peer.subscribe()`` and
    ``peer.unsubscribe()`` change them later. ``peer.host_info`` is the ``info`` object of the host's latest ``welcome``.

    Connecting fails at once, not after ``connect_timeout``, when the cause is known at once (docs/errors.md):
    HostUnreachable when nothing listens at the endpoint, Unauthorized when the host refuses the peer's key, NameTaken
    when another live session holds the name (``wait_for_name=True`` waits for it instead, saying hello again every
    second until the connect timeout), and a ValueError for ``127.0.0.1:5599`` without its ``tcp://``.
    """
    return Peer(
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


__all__ = ["ConnectionInfo", "EventContext", "Peer", "RequestContext", "Stream", "connect", "read_connection_file"]
