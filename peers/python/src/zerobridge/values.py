"""Values checked where they are made (SPEC 7.14): what this peer sends is JSON any side can carry, or it is refused
before anything goes on the wire, naming the path of the first offending part.

A value may hold ``None``, ``bool``, ``str``, finite ``float``, ``int`` in the signed 64-bit range, ``list``/``tuple``,
``dict`` with ``str`` keys (subclasses of these included: ``IntEnum``, ``StrEnum``, ``OrderedDict``, named tuples)
and ``bytes``/``bytearray``/``memoryview`` (sent as attachments), nested at most 64 levels deep counting the message
body as level 1. Refused: NaN and the infinities, integers outside the signed 64-bit range, a container that
contains itself, deeper nesting, sets, keys that are not strings, strings with lone surrogates, and every other
object (a dataclass instance, a ``datetime``, a ``Decimal``, an ``Enum`` member that is not an int or a str, ...):
nothing is converted silently.

The check costs little on the way of a value that is fine: the JSON encoder runs anyway and fails first on NaN,
infinities, cycles and objects it cannot write (``allow_nan=False``, ``check_circular``); the text it writes is then
scanned once with a regular expression for what it lets through (a run of 19 digits or more, which is every integer
that may be out of range; a surrogate escape; a member name that may have been a non-string key) and its brackets
counted. Only a value that fails, or whose text matches, is walked, to confirm and to find the path.

:func:`encode` is :func:`zerobridge.wire.encode` with these checks; :func:`check` checks a value alone.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import re
from array import array
from itertools import accumulate
from typing import Any

from . import wire
from .errors import BridgeError, InvalidPayload

MAX_NESTING = wire.MAX_NESTING
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# What JSON text written by json.dumps (ensure_ascii, compact separators) may hold that a side cannot carry, or that
# stands for something json.dumps changed, found with a translation and substring searches (a regular expression over
# the whole text costs several times more): a run of 19 digits (2^63 has 19; no float is written with more than 17),
# found once every digit is made a 0; a member name that an int, float, bool or None key was turned into, which starts
# with a digit or "-" after `{` or `,` (the translation makes every `,` a `{`), or is "true", "false" or "null"; and a
# surrogate escape (a pair is fine, a lone one is not). A string's own quotes are escaped inside it, so `{"` or `,"`
# in the text starts a member name or an array's string item: each hit is judged by _KEY, and what _KEY finds by the
# walk, which dismisses false alarms and never misses.
_SCAN = bytes.maketrans(b"123456789,", b"000000000{")
_KEY = re.compile(rb'[{,]"(?:-?[0-9][0-9.eE+-]*|true|false|null)":')
# What _KEY can match, once translated: one search from a literal start (a quarter of the cost of five substring
# searches, which it replaced); only what it finds is judged by _KEY.
_MAYBE_KEY = re.compile(rb'\{"(?:[0-]|true"|false"|null")')
# The escapes that matter for surrogates, from the left: an escaped backslash (stepped over, so that `\\ud800` is
# text), a surrogate pair, or a lone surrogate (group 1).
_SURROGATE_ESCAPE = re.compile(rb"\\\\|\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|(\\ud[89a-f][0-9a-f]{2})")
# For the nesting of a text: every byte but brackets and quotes, to delete (what is between quotes is a string, whose
# brackets do not count).
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 for an opening, -1 (as a signed byte) for a closing
_BINARY = (bytes, bytearray, memoryview)
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class UnsendableValue(InvalidPayload):
    """A value JSON cannot carry (SPEC 7.14): code ``invalid_payload``; ``path`` names its first offending part
    (``payload.items[3]``) and ``reason`` what is wrong there. The message is ``"<path>: <reason>"``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# --- paths ---------------------------------------------------------------------------------


def member_path(path: str, name: str) -> str:
    """``path`` and the member ``name``: ``payload.items``, or ``payload["a b"]`` for a name that is no identifier."""
    if _IDENTIFIER.fullmatch(name):
        return f"{path}.{name}"
    return f"{path}[{json.dumps(name)}]"


def item_path(path: str, index: int) -> str:
    return f"{path}[{index}]"


# --- the walk ------------------------------------------------------------------------------


def find_problem(value: Any, root: str = "payload", depth: int = 2) -> tuple[str, str] | None:
    """The path and reason of the first part of ``value`` (in document order) that JSON cannot carry, or None.

    ``depth`` is the nesting level of ``value`` itself in its message (a payload or result is at 2: the body is 1).
    """
    return _walk(value, root, depth, set())


def _walk(value: Any, path: str, depth: int, active: set[int]) -> tuple[str, str] | None:
    kind = type(value)
    if value is None or kind is bool:
        return None
    if kind is str:
        return None if value.isascii() else _string_problem(value, path, "the string")
    if kind is int:
        return None if INT64_MIN <= value <= INT64_MAX else (path, _big_int(value))
    if kind is float:
        return None if value - value == 0 else (path, _not_finite(value))
    if isinstance(value, dict):
        identity = id(value)
        if identity in active:
            return path, "a cycle: this object contains itself"
        if depth > MAX_NESTING:
            return path, f"nested deeper than {MAX_NESTING} levels (the message body is level 1)"
        active.add(identity)
        for name, item in value.items():
            if not isinstance(name, str):
                return path, f"the key {_short(name)} ({type(name).__name__}) is not a string: object keys must be strings"
            if not name.isascii():
                problem = _string_problem(name, path, f"the key {name[:40]!r}")
                if problem is not None:
                    return problem
            problem = _walk(item, member_path(path, name), depth + 1, active)
            if problem is not None:
                return problem
        active.discard(identity)
        return None
    if isinstance(value, (list, tuple)):
        identity = id(value)
        if identity in active:
            return path, f"a cycle: this {'list' if isinstance(value, list) else 'tuple'} contains itself"
        if depth > MAX_NESTING:
            return path, f"nested deeper than {MAX_NESTING} levels (the message body is level 1)"
        active.add(identity)
        for index, item in enumerate(value):
            problem = _walk(item, item_path(path, index), depth + 1, active)
            if problem is not None:
                return problem
        active.discard(identity)
        return None
    if isinstance(value, bool) or isinstance(value, _BINARY):
        return None
    if isinstance(value, str):
        return None if value.isascii() else _string_problem(value, path, "the string")
    if isinstance(value, enum.Enum) and not isinstance(value, (int, str)):
        return path, f"an Enum member ({value!s}) cannot be carried in JSON: send its value ({type(value).__name__}.X.value)"
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else (path, _big_int(value))
    if isinstance(value, float):
        return None if value - value == 0 else (path, _not_finite(value))
    return path, _not_data(value)


def _string_problem(text: str, path: str, what: str) -> tuple[str, str] | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        unit = ord(text[error.start])
        return path, f"{what} holds a lone surrogate (U+{unit:04X}), which has no UTF-8 form"
    return None


def _big_int(value: int) -> str:
    digits = len(str(abs(value))) if value.bit_length() < 14000 else None
    shown = str(value) if digits is not None and digits <= 40 else f"of {digits or 'over 4000'} digits"
    return f"the integer {shown} is outside the signed 64-bit range"


def _not_finite(value: float) -> str:
    name = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return f"{name} cannot be carried in JSON"


def _not_data(value: Any) -> str:
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, (set, frozenset)):
        return f"a {kind.__name__} cannot be carried in JSON (send a list)"
    if dataclasses.is_dataclass(value):
        return f"a dataclass instance ({name}) cannot be carried in JSON: convert it first (dataclasses.asdict)"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return f"a {name} cannot be carried in JSON: send an ISO-8601 string (.isoformat())"
    if isinstance(value, decimal.Decimal):
        return f"a {name} cannot be carried in JSON: send a float or a string"
    return (
        f"a {name} object cannot be carried in JSON (only None, bool, int, float, str, list, tuple, dict with str"
        " keys and bytes can)"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --- the checks ----------------------------------------------------------------------------


def _suspect(text: bytes, depth: int) -> bool:
    """Whether the JSON ``text`` of a value at nesting ``depth`` may hold what a side cannot carry (see the comment
    on _SCAN); False means it certainly does not."""
    scanned = text.translate(_SCAN)
    if b"0000000000000000000" in scanned:
        return True
    if _MAYBE_KEY.search(scanned) is not None and _KEY.search(text) is not None:
        return True
    if b"\\ud" in text and _lone_surrogate_escape(text):
        return True
    limit = MAX_NESTING - depth + 1  # the levels the text itself may use
    return text.count(b"[") + text.count(b"{") > limit and _nesting(text) > limit


def _lone_surrogate_escape(text: bytes) -> bool:
    return any(match.group(1) is not None for match in _SURROGATE_ESCAPE.finditer(text))


def _nesting(text: bytes) -> int:
    """How deep the JSON ``text`` nests arrays and objects (a flat array is 1)."""
    if b"\\" in text:
        # Escapes out of the way: scanning from the left, two backslashes are an escaped backslash (the escapes of
        # JSON are \X and \uXXXX), and a backslash before a quote, what is left, an escaped quote.
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(text.translate(None, _NOT_STRUCTURE).split(b'"')[::2])  # the even parts are not in strings
    return max(accumulate(array("b", outside.translate(_STEPS))), default=0)


def check(value: Any, root: str = "payload", *, depth: int = 2) -> bytes | None:
    """Raise :class:`UnsendableValue` if ``value`` cannot be carried; else return its JSON text (ASCII), or None when
    it holds bytes (which travel as attachments, so its text is not the value's).

    ``root`` names the value in the message (``payload``, ``result``); ``depth`` is its nesting level there."""
    try:
        text = wire.compact_json(value).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        problem = find_problem(value, root, depth)
        if problem is not None:
            raise UnsendableValue(*problem) from None
        return None  # bytes somewhere inside: fine
    if _suspect(text, depth):
        problem = find_problem(value, root, depth)
        if problem is not None:
            raise UnsendableValue(*problem)
    return text


def _carried(message: wire.Message) -> tuple[Any, str] | None:
    """The value a message carries for its sender's code, and its name in the body; None for session messages."""
    match message:
        case wire.Request() | wire.Event() | wire.Progress():
            return message.payload, "payload"
        case wire.Response(ok=True):
            return message.result, "result"
        case wire.Response(error=BridgeError(data=data)) if data is not None:
            return data, "error.data"
    return None


def encode(message: wire.Message) -> list[bytes]:
    """:func:`zerobridge.wire.encode`, refusing (:class:`UnsendableValue`) a payload, result or error data that JSON
    cannot carry (SPEC 7.14)."""
    try:
        frames = wire.encode(message)
    except (TypeError, ValueError, RecursionError):
        problem = _problem_carried(message)
        if problem is None:
            raise
        raise UnsendableValue(*problem) from None
    # What a message carries is looked for only when its text is suspect: most are not.
    if _suspect(frames[1], 1) and _carried(message) is not None:
        problem = _problem_carried(message)
        if problem is not None:
            raise UnsendableValue(*problem)
        _check_names(message)
    return frames


def _problem_carried(message: wire.Message) -> tuple[str, str] | None:
    """The path and reason of the first part of what ``message`` carries that JSON cannot carry, or None."""
    carried = _carried(message)
    if carried is None:
        return None
    value, root = carried
    return find_problem(value, root, 3 if root == "error.data" else 2)


def _check_names(message: wire.Message) -> None:
    """The action of a request or event, which the caller chose, has no lone surrogate either."""
    action = getattr(message, "action", None)
    if isinstance(action, str) and not action.isascii():
        problem = _string_problem(action, "action", "the action name")
        if problem is not None:
            raise UnsendableValue(*problem)


__all__ = ["UnsendableValue", "check", "encode", "find_problem", "item_path", "member_path"]
