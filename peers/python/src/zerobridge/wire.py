"""The wire format: message bodies <-> ZeroMQ frames, and the validation rules of protocol v1.

A message, as a DEALER sees it, is ``[signature, body, attachments...]``. Frame 0 is written empty
and ignored here: on a keyed connection the peer signs and checks it around this module (SPEC 3.1,
:mod:`zerobridge.signing`), since a signature belongs to a connection, not to a message. The body is one UTF-8 JSON object; ``{"$attachment": i}`` inside it refers to frame ``2 + i`` (a
reference to a frame that is not there is ``bad_message``).

:func:`decode` turns frames into one of the message classes below or raises :class:`WireError`
carrying the code to answer with (``bad_message``, ``unsupported_version``) and
the offending message's id when it could be read. :func:`encode` does the reverse; ``bytes`` values
inside a payload travel as attachments and come back as ``bytes``.

Nothing here does I/O.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, Union

from . import tracecontext
from .errors import BAD_MESSAGE, UNSUPPORTED_VERSION, BridgeError, error_from_code
from .tracecontext import TraceContext

PROTOCOL_VERSION = 1
MAX_ID_LENGTH = 128
MAX_NESTING = 64
# A session's resume token (SPEC 5, since 1.2): 256 bits as lowercase hex.
RESUME_TOKEN = re.compile(r"[0-9a-f]{64}")


class WireError(BridgeError):
    """A message that cannot be understood, with what is known of it for the error response."""

    def __init__(
        self, code: str, message: str, *, id: str | None = None, type: str | None = None
    ) -> None:
        super().__init__(code, message)
        self.id = id
        self.type = type


# --- the message types ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    action: str
    payload: Any = None
    timeout_ms: int | None = None
    progress: bool = False
    deadline: int | None = None  # Unix time in ms on the caller's clock (SPEC 7.3)
    idempotency_key: str | None = None  # names the job a job action starts (SPEC 7.16, since 1.4)
    trace: TraceContext | None = None  # the caller's W3C trace context, when valid (SPEC 7.18, since 1.7)


@dataclass(frozen=True, slots=True)
class Response:
    id: str | None
    ok: bool
    result: Any = None
    error: BridgeError | None = None

    @staticmethod
    def success(id: str, result: Any) -> Response:
        return Response(id=id, ok=True, result=result)

    @staticmethod
    def failure(id: str | None, error: BridgeError) -> Response:
        return Response(id=id, ok=False, error=error)


@dataclass(frozen=True, slots=True)
class Progress:
    id: str
    seq: int
    payload: Any = None
    skipped: int | None = None  # payloads coalesced away since the previous progress (SPEC 7.13)


@dataclass(frozen=True, slots=True)
class Event:
    action: str
    payload: Any = None
    topic: str | None = None  # host -> peer: the topic it was broadcast on (SPEC 7.15, since 1.3)
    trace: TraceContext | None = None  # the sender's W3C trace context, when valid (SPEC 7.18, since 1.7)


@dataclass(frozen=True, slots=True)
class Cancel:
    id: str


@dataclass(frozen=True, slots=True)
class Hello:
    peer: str
    actions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    session: str | None = None
    heartbeat_ms: int | None = None
    resume_token: str | None = field(default=None, repr=False)  # a secret: never in a log line
    catalogue: str | None = None  # the hash of the peer's catalogue (SPEC 7.8, since 1.3)
    topics: tuple[str, ...] = ()  # the broadcast topics subscribed to (SPEC 7.15, since 1.3): each hello replaces the set


@dataclass(frozen=True, slots=True)
class Limits:
    max_message_bytes: int
    max_in_flight: int


@dataclass(frozen=True, slots=True)
class Welcome:
    host: str
    session: str
    actions: tuple[str, ...]
    heartbeat_ms: int
    limits: Limits
    resume_token: str | None = field(default=None, repr=False)  # absent from a 1.0/1.1 host
    catalogue: str | None = None  # the hash of the host's catalogue (SPEC 7.8); absent from a host before 1.3
    info: dict[str, Any] | None = None  # context the host gives every peer, opaque (SPEC 5, since 1.3)
    library_version: str | None = None  # the version of the host's library (SPEC 5, decision 44), informative only
    batch: bool = False  # the host reads batches on this ZeroMQ connection (SPEC 3.3, since 1.10)


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Pong:
    pass


@dataclass(frozen=True, slots=True)
class Bye:
    pass


Message = Union[Request, Response, Progress, Event, Cancel, Hello, Welcome, Ping, Pong, Bye]

_TYPE_NAMES: dict[type, str] = {
    Request: "request",
    Response: "response",
    Progress: "progress",
    Event: "event",
    Cancel: "cancel",
    Hello: "hello",
    Welcome: "welcome",
    Ping: "ping",
    Pong: "pong",
    Bye: "bye",
}


# --- encoding ------------------------------------------------------------------------------


def encode(message: Message) -> list[bytes]:
    """The frames of ``message``, frame 0 empty. Raises TypeError/ValueError when a payload is not JSON."""
    try:  # most messages carry no bytes: written as they are, without looking for bytes first
        return [b"", compact_json(_body_of(message, None)).encode("utf-8")]
    except (TypeError, ValueError):
        pass  # bytes inside, to travel as attachments, or what JSON cannot carry: said below
    attachments: list[bytes] = []
    body = _body_of(message, attachments)
    try:
        text = compact_json(body)
    except (TypeError, ValueError) as error:
        raise TypeError(f"not JSON-serializable: {error}") from None
    frames = [text.encode("utf-8"), *attachments]
    return [b"", *frames]


# Built once: json.dumps with any keyword builds a new encoder per call.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# And below that, json.JSONEncoder.encode builds a new C encoder per call (0.5 us of a request's 1.8). This one is built
# once, without the dict of containers being written that names a cycle: shared, it would be state between threads.
# A cycle then recurses until RecursionError, as nesting past the recursion limit does with json.dumps.
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_COMPACT_JSON: Callable[[Any, int], Sequence[str]] | None = (
    None if _C_MAKE_ENCODER is None
    else _C_MAKE_ENCODER(None, _COMPACT_JSON.default, json.encoder.encode_basestring_ascii, None, ":", ",", False,
                         False, False)
)


def compact_json(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), allow_nan=False)``: the JSON text every message is written in.
    TypeError or ValueError for a value JSON cannot write (a cycle: ValueError)."""
    try:
        if _C_COMPACT_JSON is None:
            return _COMPACT_JSON.encode(value)
        return "".join(_C_COMPACT_JSON(value, 0))
    except RecursionError:
        raise ValueError("a cycle, or nesting deeper than the interpreter's recursion limit") from None


def _body_of(message: Message, attachments: list[bytes] | None) -> dict[str, Any]:
    """The body of ``message``; bytes-like values in what it carries are taken out into ``attachments``, or left in
    place without it."""
    body: dict[str, Any] = {"v": PROTOCOL_VERSION, "type": _TYPE_NAMES[type(message)]}
    match message:
        case Request():
            body["id"] = message.id
            body["action"] = message.action
            body["payload"] = _extract_attachments(message.payload, attachments)
            if message.timeout_ms is not None:
                body["timeout_ms"] = message.timeout_ms
            if message.deadline is not None:
                body["deadline"] = message.deadline
            if message.progress:
                body["progress"] = True
            if message.idempotency_key is not None:
                body["idempotency_key"] = message.idempotency_key
            if message.trace is not None:
                body.update(message.trace.to_wire())
        case Response():
            body["id"] = message.id
            body["ok"] = message.ok
            if message.ok:
                body["result"] = _extract_attachments(message.result, attachments)
            else:
                assert message.error is not None
                error = message.error.to_wire()
                if "data" in error:
                    error["data"] = _extract_attachments(error["data"], attachments)
                body["error"] = error
        case Progress():
            body["id"] = message.id
            body["seq"] = message.seq
            body["payload"] = _extract_attachments(message.payload, attachments)
            if message.skipped is not None:
                body["skipped"] = message.skipped
        case Event():
            body["action"] = message.action
            body["payload"] = _extract_attachments(message.payload, attachments)
            if message.topic is not None:
                body["topic"] = message.topic
            if message.trace is not None:
                body.update(message.trace.to_wire())
        case Cancel():
            body["id"] = message.id
        case Hello():
            body["peer"] = message.peer
            body["actions"] = list(message.actions)
            body["features"] = list(message.features)
            if message.session is not None:
                body["session"] = message.session
            if message.resume_token is not None:
                body["resume_token"] = message.resume_token
            if message.heartbeat_ms is not None:
                body["heartbeat_ms"] = message.heartbeat_ms
            body["topics"] = list(message.topics)  # always, as actions and features: each hello replaces the set
            if message.catalogue is not None:
                body["catalogue"] = message.catalogue
        case Welcome():
            body["host"] = message.host
            body["session"] = message.session
            if message.resume_token is not None:
                body["resume_token"] = message.resume_token
            body["actions"] = list(message.actions)
            body["heartbeat_ms"] = message.heartbeat_ms
            body["limits"] = {
                "max_message_bytes": message.limits.max_message_bytes,
                "max_in_flight": message.limits.max_in_flight,
            }
            if message.catalogue is not None:
                body["catalogue"] = message.catalogue
            if message.info is not None:
                body["info"] = _extract_attachments(message.info, attachments)
            if message.library_version is not None:
                body["library_version"] = message.library_version
            if message.batch:
                body["batch"] = True
        case Ping() | Pong() | Bye():
            pass
    return body


_BINARY = (bytes, bytearray, memoryview)


def _extract_attachments(value: Any, attachments: list[bytes] | None) -> Any:
    """``value`` with every bytes-like replaced by ``{"$attachment": i}`` (bytes appended); without ``attachments``,
    ``value`` itself."""
    if attachments is None:
        return value
    if isinstance(value, _BINARY):
        attachments.append(bytes(value))
        return {"$attachment": len(attachments) - 1}
    if isinstance(value, dict):
        if _any_nested(value.values()):
            return {k: _extract_attachments(v, attachments) for k, v in value.items()}
        return value
    if isinstance(value, (list, tuple)):
        if _any_nested(value):
            return [_extract_attachments(v, attachments) for v in value]
        return value
    return value


_NESTED = (dict, list, tuple, *_BINARY)


def _any_nested(items: Iterable[Any]) -> bool:
    """Whether a container holds a container or bytes (a loop: any() over a generator costs more on small ones)."""
    for item in items:
        if isinstance(item, _NESTED):
            return True
    return False


# --- batches (SPEC 3.2, 3.3) ---------------------------------------------------------------------
# A batch is its messages back to back, each a 4-byte big-endian length and then the message's frames (frame 0 first),
# each behind a 4-byte length of its own: the WebSocket batch of SPEC 3.2, carried on a ZeroMQ connection behind one
# frame 0 (SPEC 3.3: one signature when keyed, the byte b without a key).

BATCH_MAX_MESSAGES = 1000  # the most messages a batch may hold (a receiver refuses more)
BATCH_MAX_BYTES = 65_536  # a sender starts a new batch before one would pass this
MAX_FRAMES = 16_386  # frame 0, the body and 16,384 attachments: a message with more is refused unread
_LENGTH = struct.Struct(">I")
_EMPTY_FRAME = _LENGTH.pack(0)
_COMMON_HEAD = struct.Struct(">III")  # a message's length, then its empty frame 0's and its body's


def batch_entry_size(frames: Sequence[bytes]) -> int:
    """The bytes ``frames`` (frame 0 included) take in a batch."""
    return 4 + 4 * len(frames) + sum(map(len, frames))


def join_batch(messages: Iterable[Sequence[bytes]]) -> bytes:
    """A batch of ``messages``, each given as its frames with frame 0 (empty in a ZeroMQ batch, SPEC 3.3)."""
    pack, pack_common = _LENGTH.pack, _COMMON_HEAD.pack
    parts: list[bytes] = []
    for frames in messages:
        if len(frames) == 2 and not frames[0]:  # most are an empty frame 0 and a body: their three lengths at once
            parts.append(pack_common(len(frames[1]) + 8, 0, len(frames[1])))
            parts.append(frames[1])
            continue
        parts.append(pack(batch_entry_size(frames) - 4))
        for frame in frames:
            parts.append(pack(len(frame)))
            parts.append(frame)
    return b"".join(parts)


def split_batch(batch: bytes) -> list[list[bytes] | WireError]:
    """The messages of a batch, each as its frames (frame 0 empty, then the body and attachments) or as the
    ``bad_message`` (``"id": null``) it alone is answered with. Raises WireError when the batch is refused whole
    (empty, a length cut short or running past the end, more than :data:`BATCH_MAX_MESSAGES`): nothing of it is
    handed on before all its lengths are checked."""
    unpack, end = _LENGTH.unpack_from, len(batch)
    messages: list[Any] = []  # each message's frames, or where it lies when it is not the common kind
    others = False
    at = 0
    while at < end:
        if len(messages) == BATCH_MAX_MESSAGES:
            raise WireError(BAD_MESSAGE, f"a batch holds at most {BATCH_MAX_MESSAGES:,} messages")
        if end - at < 4:
            raise WireError(BAD_MESSAGE, "a batch's last length is cut short")
        (length,) = unpack(batch, at)
        at += 4
        if length > end - at:
            raise WireError(BAD_MESSAGE, f"a batch's message says {length} bytes, {end - at} follow")
        stop = at + length
        # Most messages are an empty frame 0 and a body: taken at once, without the general loop.
        if length >= 8 and batch[at : at + 4] == _EMPTY_FRAME and unpack(batch, at + 4)[0] == length - 8:
            messages.append([b"", batch[at + 8 : stop]])
        else:
            messages.append((at, stop))
            others = True
        at = stop
    if not messages:
        raise WireError(BAD_MESSAGE, "an empty batch")
    if others:
        for index, message in enumerate(messages):
            if isinstance(message, tuple):
                frames = _batch_message(batch, *message)
                messages[index] = frames if isinstance(frames, list) else WireError(BAD_MESSAGE, frames)
    return messages


def _batch_message(batch: bytes, at: int, stop: int) -> list[bytes] | str:
    """The frames of the batch's message in ``batch[at:stop]``, or why it is refused."""
    unpack = _LENGTH.unpack_from
    frames: list[bytes] = []
    while at < stop:
        if len(frames) == MAX_FRAMES:
            return f"a message in a batch has more than {MAX_FRAMES:,} frames"
        if stop - at < 4:
            return "a message in a batch has a frame length cut short"
        (length,) = unpack(batch, at)
        at += 4
        if length > stop - at:
            return f"a frame in a batch's message says {length} bytes, {stop - at} follow"
        frames.append(batch[at : at + length])
        at += length
    if len(frames) < 2:
        return f"a message in a batch needs frame 0 and a body; it has {len(frames)} frame(s)"
    if frames[0]:
        return "frame 0 of a message in a batch must be empty: the batch's frame 0 stands for it"
    return frames


# --- decoding ------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# What JSON can write but a side cannot carry (SPEC 4) is looked for on the text, not on the parsed value, so that a
# member a later duplicate replaced is checked too (SPEC 4: the whole text counts), and only where it may be:
# - A number rounds to infinity only with a positive exponent of three digits or more, or with a run of 209 digits or
#   more (with neither, it is below 10^208 * 10^99). Numbers with an exponent (or a fraction) are checked as they are
#   parsed; integers only in texts with such a run.
# - A lone surrogate needs a \u escape of one. A high one not followed by a low one, or a low one not preceded by a
#   high one, is lone, once escaped backslashes are out of the way ("\\ud800" is an escaped backslash, then text):
#   they are replaced by two characters that are not backslashes, so that what they separated stays apart.
_DIGITS = "0123456789"
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
# For the nesting of a text, once its strings are gone: the brackets, all of one kind.
_BRACKETS_ONLY = str.maketrans("{}", "[]", " \t\n\r0123456789-+.eEtruefalsn,:")


def _has_digit_run(text: str, length: int) -> bool:
    """Whether ``text`` has ``length`` ASCII digits in a row. Every such run covers one of the places looked at, one
    in ``length``, so the cost is a small fraction of the text's."""
    for i in range(length - 1, len(text), length):
        if text[i] in _DIGITS:
            before, after = text[i - length + 1 : i], text[i + 1 : i + length]
            if 1 + len(before) - len(before.rstrip(_DIGITS)) + len(after) - len(after.lstrip(_DIGITS)) >= length:
                return True
    return False


def _double(text: str) -> float:
    """A number with a fraction or exponent, refused (ValueError) when it rounds to an infinite double."""
    value = float(text)
    if math.isinf(value):
        raise ValueError("a number is outside the range of a double")
    return value


def _integer(text: str) -> int:
    """An integer, refused (ValueError) when it is past the range of a double (rounding as a double does)."""
    value = int(text)
    if len(text) > 308:  # 10^308 has 309 digits: shorter integers are far inside the range
        try:
            float(value)
        except OverflowError:
            raise ValueError("a number is outside the range of a double") from None
    return value


# Built once: json.loads with any keyword builds a new decoder per call, which costs as much as a small body's parse.
# Every number with a fraction or exponent goes through _double (as cheap as a text search for exponents, and only
# where there are such numbers); integers through _integer only in texts with a run of 209 digits.
_PLAIN_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_double)
_CHECKED_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_double, parse_int=_integer)
# Their scanners: what decode() runs once it has skipped leading whitespace (an attribute typeshed does not declare).
_Scan = Callable[[str, int], tuple[Any, int]]
_PLAIN_SCAN: _Scan = _PLAIN_JSON.scan_once  # type: ignore[attr-defined]
_CHECKED_SCAN: _Scan = _CHECKED_JSON.scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """The JSON value of ``text``, or ValueError (also for NaN/Infinity, a number past a double's range, and a \\u
    escape that leaves a surrogate unpaired)."""
    if len(text) < 209 or not _has_digit_run(text, 209):
        decoder, scan = _PLAIN_JSON, _PLAIN_SCAN
    else:
        decoder, scan = _CHECKED_JSON, _CHECKED_SCAN
    try:
        body, end = scan(text, 0)  # what decode() does, without its whitespace searches
    except StopIteration:
        end = -1
    if end != len(text):  # leading or trailing whitespace, extra data, not JSON: json.loads says which
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        body = decoder.decode(text)
    if "\\u" in text and _MAYBE_SURROGATE.search(text) is not None:
        escapes = text.replace("\\\\", "__") if "\\\\" in text else text
        if _LONE_SURROGATE.search(escapes) is not None:
            raise ValueError("a \\u escape leaves a surrogate unpaired")
    return body


def _deeper_than(text: str, limit: int) -> bool:
    """Whether the JSON text ``text`` (which parsed) nests arrays and objects deeper than ``limit`` (the outermost is
    depth 1). On the text, so a member a later duplicate replaced counts too; by whole-string operations only."""
    if "\\" in text:  # drop escaped backslashes, then escaped quotes: what is left of a string has no quote inside
        text = text.replace("\\\\", "").replace('\\"', "")
    brackets = "".join(text.split('"')[::2]).translate(_BRACKETS_ONLY)  # outside the strings, only the brackets
    for _ in range(limit):  # each round takes the innermost level away
        if not brackets:
            return False
        brackets = brackets.replace("[]", "")
    return bool(brackets)


def decode(frames: Sequence[bytes]) -> Message:
    """The message carried by ``frames`` (as a DEALER receives them; frame 0 is not looked at), or raise WireError."""
    if len(frames) < 2:
        raise WireError(BAD_MESSAGE, f"expected at least 2 frames (signature, body), got {len(frames)}")
    try:
        text = str(frames[1], "utf-8")
    except UnicodeDecodeError:
        raise WireError(BAD_MESSAGE, "body is not UTF-8") from None
    try:
        body = _loads(text)
    except (ValueError, RecursionError) as error:
        raise WireError(BAD_MESSAGE, f"body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise WireError(BAD_MESSAGE, "body is not a JSON object")

    raw_id = body.get("id")
    readable_id = raw_id if isinstance(raw_id, str) and 0 < len(raw_id) <= MAX_ID_LENGTH else None  # _is_id, inline
    raw_type = body.get("type")
    readable_type = raw_type if isinstance(raw_type, str) else None

    # Only bodies with that many brackets could nest that deep; the text is judged, not the value (a member a later
    # duplicate replaced counts too). The walk below only matters for bodies that could carry references.
    if text.count("[") + text.count("{") > MAX_NESTING and _deeper_than(text, MAX_NESTING):
        raise _bad(f"nesting deeper than {MAX_NESTING}", readable_id, readable_type)
    version = body.get("v")
    if type(version) is not int:  # _is_int, inline
        raise _bad('"v" must be the integer 1', readable_id, readable_type)
    if version != PROTOCOL_VERSION:
        raise _bad(
            f"protocol version {version} is not supported (this peer speaks 1)", readable_id, readable_type,
            UNSUPPORTED_VERSION,
        )

    if "$attachment" in text or "\\u" in text:  # "\u0024attachment" is the same key
        try:
            body = _resolve_attachments(body, [bytes(f) for f in frames[2:]])
        except IndexError as error:
            raise _bad(str(error), readable_id, readable_type) from None

    try:
        match raw_type:
            case "request":
                timeout_ms = body.get("timeout_ms", _MISSING)
                if timeout_ms is not _MISSING and not (_is_int(timeout_ms) and timeout_ms > 0):
                    raise ValueError('"timeout_ms" must be a positive integer')
                deadline = body.get("deadline", _MISSING)
                if deadline is not _MISSING and not (_is_int(deadline) and deadline >= 0):
                    raise ValueError('"deadline" must be an integer >= 0 (Unix time in ms)')
                progress = body.get("progress", False)
                if not isinstance(progress, bool):
                    raise ValueError('"progress" must be a boolean')
                return Request(
                    id=_required_id(body),
                    action=_name(body, "action"),
                    payload=body.get("payload"),
                    timeout_ms=None if timeout_ms is _MISSING else timeout_ms,
                    progress=progress,
                    deadline=None if deadline is _MISSING else deadline,
                    idempotency_key=_name(body, "idempotency_key") if "idempotency_key" in body else None,
                    trace=tracecontext.read(body),
                )
            case "response":
                ok = body.get("ok")
                if not isinstance(ok, bool):
                    raise ValueError('"ok" must be a boolean')
                if "id" not in body or (body["id"] is not None and readable_id is None):
                    raise ValueError('"id" must be a string of 1..128 characters or null')
                if ok:
                    if readable_id is None:
                        raise ValueError('only an error response may have "id": null')
                    if "error" in body:
                        raise ValueError('a successful response has no "error"')
                    return Response(readable_id, True, body.get("result"))
                if "result" in body:
                    raise ValueError('a failed response has no "result"')
                return Response(id=readable_id, ok=False, error=_error(body.get("error")))
            case "progress":
                seq = body.get("seq")
                if not (_is_int(seq) and seq >= 1):
                    raise ValueError('"seq" must be an integer >= 1')
                skipped = body.get("skipped", _MISSING)
                if skipped is not _MISSING and not (_is_int(skipped) and skipped >= 1):
                    raise ValueError('"skipped" must be an integer >= 1')
                if readable_id is None:
                    raise ValueError('"id" must be a string of 1..128 characters')  # as _required_id says it
                return Progress(readable_id, seq, body.get("payload"), None if skipped is _MISSING else skipped)
            case "event":
                return Event(
                    action=_name(body, "action"),
                    payload=body.get("payload"),
                    topic=_name(body, "topic") if "topic" in body else None,
                    trace=tracecontext.read(body),
                )
            case "cancel":
                return Cancel(id=_required_id(body))
            case "hello":
                heartbeat_ms = body.get("heartbeat_ms", _MISSING)
                if heartbeat_ms is not _MISSING and not (_is_int(heartbeat_ms) and heartbeat_ms > 0):
                    raise ValueError('"heartbeat_ms" must be a positive integer')
                return Hello(
                    peer=_name(body, "peer"),
                    actions=_names(body, "actions"),
                    features=_names(body, "features"),
                    session=_name(body, "session") if "session" in body else None,
                    heartbeat_ms=None if heartbeat_ms is _MISSING else heartbeat_ms,
                    resume_token=_resume_token(body),
                    catalogue=_catalogue(body),
                    topics=_names(body, "topics"),
                )
            case "welcome":
                heartbeat_ms = body.get("heartbeat_ms")
                if not (_is_int(heartbeat_ms) and heartbeat_ms > 0):
                    raise ValueError('"heartbeat_ms" must be a positive integer')
                limits = body.get("limits")
                if not isinstance(limits, dict):
                    raise ValueError('"limits" must be an object')
                max_bytes = limits.get("max_message_bytes")
                max_in_flight = limits.get("max_in_flight")
                if not (_is_int(max_bytes) and _is_int(max_in_flight) and max_bytes > 0 and max_in_flight > 0):
                    raise ValueError('"limits" needs positive integers max_message_bytes and max_in_flight')
                if "actions" not in body:
                    raise ValueError('"actions" is missing')
                batch = body.get("batch", False)
                if not isinstance(batch, bool):
                    raise ValueError('"batch" must be a boolean')
                return Welcome(
                    host=_name(body, "host"),
                    session=_name(body, "session"),
                    actions=_names(body, "actions"),
                    heartbeat_ms=heartbeat_ms,
                    limits=Limits(max_message_bytes=max_bytes, max_in_flight=max_in_flight),
                    resume_token=_resume_token(body),
                    catalogue=_catalogue(body),
                    info=_info(body),
                    library_version=_name(body, "library_version") if "library_version" in body else None,
                    batch=batch,
                )
            case "ping":
                return Ping()
            case "pong":
                return Pong()
            case "bye":
                return Bye()
            case None:
                raise ValueError('"type" is missing')
            case _:
                raise ValueError(f"unknown type {raw_type!r}")
    except ValueError as error:
        raise _bad(f"{readable_type or 'message'}: {error}", readable_id, readable_type) from None


_MISSING: Any = object()


def _bad(reason: str, readable_id: str | None, readable_type: str | None, code: str = BAD_MESSAGE) -> WireError:
    """The error a message is refused with, with what could be read of it."""
    return WireError(code, reason, id=readable_id, type=readable_type)


def _is_int(value: Any) -> TypeGuard[int]:
    return type(value) is int  # bool is an int subclass but not a protocol integer


# How much of a body that will not be processed (too large) is read to find its id (SPEC 7.10).
ID_PREFIX_BYTES = 4096
_PREFIX_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def readable_id(body: bytes) -> str | None:
    """The ``id`` of a body that will not be processed, when it is a top-level string member that ends within the
    body's first :data:`ID_PREFIX_BYTES` bytes (SPEC 7.10): the rest is never read, so refusing a message costs the
    same whatever its size. Member names count as decoded (``"\\u0069d"`` is ``id``); None otherwise."""
    prefix = body[:ID_PREFIX_BYTES]
    try:
        text = prefix.decode()
    except UnicodeDecodeError as error:
        if error.start < len(prefix) - 3:  # not a character cut at the prefix's end: the body is not UTF-8
            return None
        text = prefix[: error.start].decode()
    scanstring = json.decoder.scanstring
    index = _SPACE.match(text, 0).end()
    if not text.startswith("{", index):
        return None
    index += 1
    try:
        while True:
            index = _SPACE.match(text, index).end()
            if not text.startswith('"', index):
                return None
            key, index = scanstring(text, index + 1)
            index = _SPACE.match(text, index).end()
            if not text.startswith(":", index):
                return None
            index = _SPACE.match(text, index + 1).end()
            if key == "id":
                if not text.startswith('"', index):
                    return None
                value, _ = scanstring(text, index + 1)
                return value if _is_id(value) else None
            _, index = _PREFIX_DECODER.raw_decode(text, index)  # bounded by the prefix: at most 4096 bytes parsed
            index = _SPACE.match(text, index).end()
            if not text.startswith(",", index):
                return None
            index += 1
    except (ValueError, RecursionError):  # cut by the prefix's end, or not JSON
        return None


def _is_id(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH


def _required_id(body: dict[str, Any]) -> str:
    value = body.get("id")
    if not _is_id(value):
        raise ValueError('"id" must be a string of 1..128 characters')
    return value


def _name(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not (isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH):
        raise ValueError(f'"{key}" must be a string of 1..128 characters')
    return value


def _names(body: dict[str, Any], key: str) -> tuple[str, ...]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and 1 <= len(v) <= MAX_ID_LENGTH for v in value):
        raise ValueError(f'"{key}" must be a list of strings of 1..128 characters')
    return tuple(value)


def _resume_token(body: dict[str, Any]) -> str | None:
    if "resume_token" not in body:
        return None
    value = body["resume_token"]
    if not (isinstance(value, str) and RESUME_TOKEN.fullmatch(value)):
        raise ValueError('"resume_token" must be 64 lowercase hex digits')  # the value is not echoed: it may be a secret
    return value


def _catalogue(body: dict[str, Any]) -> str | None:
    if "catalogue" not in body:
        return None
    value = body["catalogue"]
    if not (isinstance(value, str) and RESUME_TOKEN.fullmatch(value)):  # the same form: 64 lowercase hex digits
        raise ValueError('"catalogue" must be 64 lowercase hex digits')
    return value


def _info(body: dict[str, Any]) -> dict[str, Any] | None:
    if "info" not in body:
        return None
    value = body["info"]
    if not isinstance(value, dict):
        raise ValueError('"info" must be an object')
    return value


def _error(value: Any) -> BridgeError:
    if not isinstance(value, dict):
        raise ValueError('"error" must be an object when "ok" is false')
    code = value.get("code")
    message = value.get("message")
    if not (isinstance(code, str) and 1 <= len(code) <= MAX_ID_LENGTH):
        raise ValueError('"error.code" must be a string of 1..128 characters')
    if not isinstance(message, str):
        raise ValueError('"error.message" must be a string')
    return error_from_code(code, message, value.get("data"))


def _resolve_attachments(value: Any, attachments: list[bytes]) -> Any:
    """``value`` with each ``{"$attachment": i}`` replaced by attachment i; IndexError if it is not there."""
    if isinstance(value, dict):
        if len(value) == 1 and "$attachment" in value:
            index = value["$attachment"]
            # A lone "$attachment" member is always a reference (SPEC 3): a bad index is bad_message, as in Swift and Node.
            if not _is_int(index) or index < 0:
                raise IndexError(f"attachment reference {json.dumps(index)} is not a non-negative integer")
            if index >= len(attachments):
                raise IndexError(f"attachment {index} is referred to but not sent")
            return attachments[index]
        if not any(isinstance(v, (dict, list)) for v in value.values()):
            return value
        return {k: _resolve_attachments(v, attachments) for k, v in value.items()}
    if isinstance(value, list):
        if not any(isinstance(v, (dict, list)) for v in value):
            return value
        return [_resolve_attachments(v, attachments) for v in value]
    return value
