"""Protocol fixtures (protocol/SPEC.md, section 14): load them, run them, and say exactly what differed.

For example::

    from zerobridge import fixtures

    for conversation in fixtures.load_conversations(["protocol/fixtures/conversations"]):
        fixtures.run_conversation(conversation, "tcp://127.0.0.1:5555")   # raises FixtureFailure

    for case in fixtures.load_message_cases(["protocol/fixtures/messages"]):
        fixtures.check_message_case(case)                                  # this package's wire decoder

    peer = fixtures.PeerProgram("python", [sys.executable, "-m", "zerobridge.conformance_peer"])
    for conversation in fixtures.load_conversations(["protocol/fixtures/peer-conversations"], plays="host"):
        fixtures.run_peer_conversation(conversation, peer)                 # binds a ROUTER, starts the peer

- A conversation (section 14.2) plays one or more peers against a live host over raw pyzmq ``DEALER`` sockets.
- A peer conversation (``"plays": "host"``, section 14.3) binds a ``ROUTER``, starts a peer under test pointed at
  it, and plays the host.
- A message case (section 14.1) runs through :func:`zerobridge.wire.decode`: a valid body decodes and re-encodes
  to an equal body, an invalid one is refused with the case's code.

Failures raise :class:`FixtureFailure` (an ``AssertionError``, so test runners report them as failed tests) whose
text names the step and the JSON path where a received body differs from the expected one. A fixture file that
does not follow the format raises :class:`FixtureFormatError` with the file and the JSON path.

This module is for tests: ``import zerobridge`` does not load it.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq

from . import wire

__all__ = [
    "Conversation",
    "FixtureFailure",
    "FixtureFormatError",
    "MessageCase",
    "Mismatch",
    "PeerProgram",
    "RestartHost",
    "check_message_case",
    "load_conversation",
    "load_conversations",
    "load_message_cases",
    "match",
    "run_conversation",
    "run_peer_conversation",
]

DEFAULT_WITHIN_MS = 30000
_CLIENT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_MATCHERS = {"$any", "$absent", "$oneOf", "$not", "$capture", "$var", "$exact", "$unordered", "$literal"}
_ANY_TYPES = {"value", "string", "number", "integer", "boolean", "null", "array", "object"}
_STEP_OPTIONS = {
    "send": {"client", "repeat", "attachments", "deliberately_invalid", "note"},
    "send_frames": {"client", "note"},
    "expect": {"client", "within_ms", "skip", "repeat", "note"},
    "expect_unordered": {"client", "within_ms", "skip", "note"},
    "expect_nothing_ms": {"client", "skip", "note"},
    "restart_host": {"note"},
}


class FixtureFailure(AssertionError):
    """A fixture did not pass: the text says which step, and what was expected and received."""


class FixtureFormatError(ValueError):
    """A fixture file that does not follow the format (or uses a variable it never captured)."""

    def __init__(self, file: str, path: str, reason: str) -> None:
        where = f"{file}: {path}" if file else path
        super().__init__(f"{where}: {reason}")
        self.file = file
        self.path = path
        self.reason = reason


# --- loading ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """One conversation file. ``plays`` is ``"peers"`` (section 14.2) or ``"host"`` (section 14.3)."""

    description: str
    steps: tuple[dict[str, Any], ...]
    file: str = ""
    plays: str = "peers"
    clients: tuple[str, ...] = ("peer",)
    pings: str = "auto"
    limits: dict[str, int] = field(default_factory=dict)
    evaluate: bool = False

    @property
    def name(self) -> str:
        return self.description

    @property
    def restarts_host(self) -> bool:
        """Whether a step kills the host and starts it again (``restart_host``, SPEC 14.2): running it takes a host the
        runner can restart (``run_conversation(..., restart_host=...)``)."""
        return any("restart_host" in step for step in self.steps)


@dataclass(frozen=True)
class MessageCase:
    """One case of a message fixture file: a body, whether it is valid, and the code that refuses it if not."""

    file: str
    group: str
    description: str
    data: Any
    valid: bool
    error: str | None = None
    # The trace context a receiver decodes (SPEC 7.18, 14.1): ``{"traceparent", "tracestate"?}`` or None for none;
    # False when the case says nothing.
    trace: dict[str, str] | None | bool = False

    @property
    def name(self) -> str:
        """``"<file>: <group>: <case>"``, the test name section 14.1 asks for."""
        return f"{self.file}: {self.group}: {self.description}"


def _json_files(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, bool]]:
    """Each .json file under ``paths`` with whether it was named directly (folders are walked, sorted)."""
    found: list[tuple[Path, bool]] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            found += [(p, False) for p in sorted(path.rglob("*.json"))]
        elif path.is_file():
            found.append((path, True))
        else:
            raise FixtureFormatError(str(path), "", "no such file or folder")
    return found


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (OSError, ValueError) as error:
        raise FixtureFormatError(str(path), "$", f"cannot read it as JSON: {error}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_conversation(path: str | os.PathLike[str]) -> Conversation:
    """The conversation in one file, checked against the format."""
    return _conversation(_read_json(Path(path)), str(path))


def load_conversations(paths: Iterable[str | os.PathLike[str]], *, plays: str | None = "peers") -> list[Conversation]:
    """The conversations in these files and folders, in path order.

    A folder contributes every ``.json`` file under it that holds a conversation (a JSON object); case files
    (arrays) are passed over. ``plays`` keeps only host-facing conversations (``"peers"``, the default), only peer
    conversations (``"host"``), or both (``None``).
    """
    conversations = []
    for path, named in _json_files(paths):
        value = _read_json(path)
        if not isinstance(value, dict) or "steps" not in value:
            if named:
                raise FixtureFormatError(str(path), "$", "a conversation is a JSON object with steps")
            continue
        conversation = _conversation(value, str(path))
        if plays is None or conversation.plays == plays:
            conversations.append(conversation)
    return conversations


def load_message_cases(paths: Iterable[str | os.PathLike[str]]) -> list[MessageCase]:
    """Every case of the case files (JSON arrays of groups) in these files and folders, in file order."""
    cases = []
    for path, named in _json_files(paths):
        value = _read_json(path)
        if not isinstance(value, list):
            if named:
                raise FixtureFormatError(str(path), "$", "a case file is a JSON array of groups")
            continue
        check = _Checker(str(path))
        for g, group in enumerate(value):
            where = f"$[{g}]"
            check.keys(group, where, required={"description", "tests"}, allowed={"description", "tests"})
            check.text(group["description"], f"{where}.description")
            tests = group["tests"]
            if not isinstance(tests, list) or not tests:
                raise check.fail(f"{where}.tests", "must be a non-empty array of cases")
            for c, case in enumerate(tests):
                at = f"{where}.tests[{c}]"
                check.keys(case, at, required={"description", "data", "valid"},
                           allowed={"description", "data", "valid", "error", "trace"})
                check.text(case["description"], f"{at}.description")
                if not isinstance(case["valid"], bool):
                    raise check.fail(f"{at}.valid", "must be a boolean")
                error = case.get("error")
                if error is not None and (case["valid"] or error not in ("bad_message", "unsupported_version")):
                    raise check.fail(f"{at}.error", "must be bad_message or unsupported_version, on an invalid case only")
                trace = case.get("trace", False)
                if trace is not False and (not case["valid"] or not (trace is None or isinstance(trace, dict))):
                    raise check.fail(f"{at}.trace", "must be an object or null, on a valid case only")
                cases.append(MessageCase(path.stem, group["description"], case["description"], case["data"],
                                         case["valid"], error, trace))
    return cases


class _Checker:
    """Checks fixture JSON, failing with the path of the first thing that does not follow the format."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, reason: str) -> FixtureFormatError:
        return FixtureFormatError(self.file, path, reason)

    def keys(self, value: Any, path: str, *, required: set[str], allowed: set[str]) -> None:
        if not isinstance(value, dict):
            raise self.fail(path, "must be an object")
        missing = sorted(required - value.keys())
        if missing:
            raise self.fail(path, f"needs {', '.join(missing)}")
        extra = sorted(value.keys() - allowed)
        if extra:
            raise self.fail(_path(path, extra[0]), f"is not a field here (allowed: {', '.join(sorted(allowed))})")

    def text(self, value: Any, path: str) -> None:
        if not isinstance(value, str) or not value:
            raise self.fail(path, "must be a non-empty string")

    def integer(self, value: Any, path: str, low: int, high: int) -> None:
        if type(value) is not int or not low <= value <= high:
            raise self.fail(path, f"must be an integer in {low}..{high}")

    def frame(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or len(value) not in (1, 2):
            raise self.fail(path, "a frame is {text}, {base64}, {json}, {byte, count} or {concat}")
        if "text" in value and len(value) == 1:
            if not isinstance(value["text"], str):
                raise self.fail(f"{path}.text", "must be a string")
        elif "base64" in value and len(value) == 1:
            text = value["base64"]
            if not isinstance(text, str) or not _BASE64.match(text):
                raise self.fail(f"{path}.base64", "must be standard base64 with padding")
            try:
                base64.b64decode(text, validate=True)
            except binascii.Error as error:
                raise self.fail(f"{path}.base64", f"does not decode: {error}") from None
        elif "json" in value and len(value) == 1:
            pass
        elif set(value) == {"byte", "count"}:
            self.integer(value["byte"], f"{path}.byte", 0, 255)
            self.integer(value["count"], f"{path}.count", 0, 67108864)
        elif "concat" in value and len(value) == 1:
            if not isinstance(value["concat"], list):
                raise self.fail(f"{path}.concat", "must be an array of frames")
            for i, part in enumerate(value["concat"]):
                self.frame(part, f"{path}.concat[{i}]")
        else:
            raise self.fail(path, "a frame is {text}, {base64}, {json}, {byte, count} or {concat}")

    def patterns(self, value: Any, path: str) -> None:
        if not isinstance(value, list) or not value:
            raise self.fail(path, "must be a non-empty array of patterns")


def _conversation(value: Any, file: str) -> Conversation:
    check = _Checker(file)
    if not isinstance(value, dict):
        raise check.fail("$", "a conversation is a JSON object")
    if "plays" in value and value["plays"] != "host":
        raise check.fail("$.plays", 'must be "host" (a peer conversation); leave it out for a conversation with a host')
    plays = "host" if "plays" in value else "peers"
    if plays == "host":
        allowed = {"format", "description", "plays", "evaluate", "pings", "steps"}
        required = {"format", "description", "plays", "steps"}
    else:
        allowed = {"format", "description", "plays", "clients", "pings", "limits", "steps"}
        required = {"format", "description", "clients", "steps"}
    check.keys(value, "$", required=required, allowed=allowed)
    if value["format"] != 1 or type(value["format"]) is not int:
        raise check.fail("$.format", "must be 1 (the conversation format's version)")
    check.text(value["description"], "$.description")
    clients: tuple[str, ...] = ("peer",)
    if plays == "peers":
        listed = value["clients"]
        if not isinstance(listed, list) or not listed:
            raise check.fail("$.clients", "must be a non-empty array of client names")
        for i, name in enumerate(listed):
            if not isinstance(name, str) or not _CLIENT_NAME.match(name):
                raise check.fail(f"$.clients[{i}]", "must match ^[a-z][a-z0-9_-]{0,31}$")
            if name in listed[:i]:
                raise check.fail(f"$.clients[{i}]", f"{name!r} is listed twice")
        clients = tuple(listed)
    pings = value.get("pings", "auto")
    if pings not in ("auto", "manual"):
        raise check.fail("$.pings", 'must be "auto" or "manual"')
    limits = value.get("limits", {})
    check.keys(limits, "$.limits", required=set(), allowed={"max_message_bytes", "max_in_flight"})
    for key, limit in limits.items():
        check.integer(limit, f"$.limits.{key}", 1, 2**63 - 1)
    evaluate = value.get("evaluate", False)
    if not isinstance(evaluate, bool):
        raise check.fail("$.evaluate", "must be a boolean")
    steps = value["steps"]
    if not isinstance(steps, list) or not steps:
        raise check.fail("$.steps", "must be a non-empty array of steps")
    for number, step in enumerate(steps):
        _check_step(check, step, f"$.steps[{number}]", clients, plays)
    return Conversation(value["description"], tuple(steps), file, plays, clients, pings, dict(limits), evaluate)


def _check_step(check: _Checker, step: Any, path: str, clients: tuple[str, ...], plays: str) -> None:
    if not isinstance(step, dict):
        raise check.fail(path, "a step is an object")
    kinds = [k for k in _STEP_OPTIONS if k in step]
    if len(kinds) != 1:
        raise check.fail(path, f"a step has exactly one of {', '.join(_STEP_OPTIONS)}")
    kind = kinds[0]
    allowed = {kind} | _STEP_OPTIONS[kind]
    if plays == "host":
        allowed.discard("client")  # one peer under test
        if kind == "restart_host":
            raise check.fail(f"{path}.restart_host", "is a step of conversations with a host, not of peer conversations")
    check.keys(step, path, required={kind}, allowed=allowed)
    if "client" in step and step["client"] not in clients:
        raise check.fail(f"{path}.client", f"{step['client']!r} is not one of the clients {list(clients)}")
    if "within_ms" in step:
        check.integer(step["within_ms"], f"{path}.within_ms", 1, 600000)
    if "repeat" in step:
        check.integer(step["repeat"], f"{path}.repeat", 1, 100000)
    if "skip" in step:
        check.patterns(step["skip"], f"{path}.skip")
    if kind == "send":
        if not isinstance(step["send"], dict):
            raise check.fail(f"{path}.send", "must be a body (an object)")
        for i, frame in enumerate(step.get("attachments", [])):
            check.frame(frame, f"{path}.attachments[{i}]")
        if "deliberately_invalid" in step:
            check.text(step["deliberately_invalid"], f"{path}.deliberately_invalid")
    elif kind == "send_frames":
        frames = step["send_frames"]
        if not isinstance(frames, list) or not frames:
            raise check.fail(f"{path}.send_frames", "must be a non-empty array of frames")
        for i, frame in enumerate(frames):
            check.frame(frame, f"{path}.send_frames[{i}]")
    elif kind == "expect":
        if not isinstance(step["expect"], dict):
            raise check.fail(f"{path}.expect", "must be a pattern for a body (an object)")
    elif kind == "expect_unordered":
        items = step["expect_unordered"]
        if not isinstance(items, list) or not items:
            raise check.fail(f"{path}.expect_unordered", "must be a non-empty array of {body, repeat?}")
        for i, item in enumerate(items):
            check.keys(item, f"{path}.expect_unordered[{i}]", required={"body"}, allowed={"body", "repeat"})
            if "repeat" in item:
                check.integer(item["repeat"], f"{path}.expect_unordered[{i}].repeat", 1, 100000)
    elif kind == "restart_host":
        if step["restart_host"] != "kill":
            raise check.fail(f"{path}.restart_host", 'must be "kill" (SIGKILL, then start the host again)')
    else:
        check.integer(step["expect_nothing_ms"], f"{path}.expect_nothing_ms", 1, 600000)


# --- matching --------------------------------------------------------------------------------------------------


class _Missing:
    """A member that is not there (only $absent, $oneOf and $not can match it)."""

    def __repr__(self) -> str:
        return "(missing)"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Mismatch:
    """Where (a JSON path such as ``$.error.code``) a received value differs from its pattern, and how."""

    path: str
    expected: str
    received: str

    def __str__(self) -> str:
        return f"{self.path}: expected {self.expected}, received {self.received}"


def _path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if re.match(r"^[A-Za-z_$][A-Za-z0-9_$]*$", key) else f"{path}[{json.dumps(key)}]"


def _short(value: Any, limit: int = 160) -> str:
    if value is MISSING:
        return "nothing (the member is missing)"
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _matcher_key(value: Any) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        if isinstance(key, str) and key.startswith("$"):
            return key
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value (3 equals 3.0), a boolean never equals a number."""
    type_a, type_b = _json_type(a), _json_type(b)
    if type_a != type_b:
        return False
    if type_a == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if type_a == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def match(pattern: Any, value: Any, variables: dict[str, Any] | None = None, path: str = "$") -> Mismatch | None:
    """None when ``value`` matches ``pattern`` (SPEC section 14.2, Patterns), else where and how it differs.

    Captures go into ``variables`` only when the whole value matches. ``value`` may be :data:`MISSING`.
    """
    variables = {} if variables is None else variables
    trial = dict(variables)
    mismatch = _match(pattern, value, trial, path)
    if mismatch is None:
        variables.update(trial)
    return mismatch


def _match(pattern: Any, value: Any, variables: dict[str, Any], path: str) -> Mismatch | None:
    key = _matcher_key(pattern)
    if key is not None:
        return _match_matcher(key, pattern[key], pattern, value, variables, path)
    if value is MISSING:
        return Mismatch(path, _short(pattern), _short(value))
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return Mismatch(path, "an object", _short(value))
        for member, item in pattern.items():
            mismatch = _match(item, value.get(member, MISSING), variables, _path(path, member))
            if mismatch is not None:
                return mismatch
        return None
    if isinstance(pattern, list):
        if not isinstance(value, list) or len(value) != len(pattern):
            return Mismatch(path, f"an array of {len(pattern)}: {_short(pattern, 80)}", _short(value))
        for index, (item, received) in enumerate(zip(pattern, value)):
            mismatch = _match(item, received, variables, _path(path, index))
            if mismatch is not None:
                return mismatch
        return None
    return None if json_equal(pattern, value) else Mismatch(path, _short(pattern), _short(value))


def _match_matcher(key: str, argument: Any, pattern: Any, value: Any, variables: dict[str, Any], path: str) -> Mismatch | None:
    def missing() -> Mismatch:
        return Mismatch(path, _short(pattern), _short(MISSING))

    if key == "$absent":
        return None if value is MISSING else Mismatch(path, "no such member", _short(value))
    if key == "$oneOf":
        reasons = []
        for alternative in argument:
            trial = dict(variables)
            mismatch = _match(alternative, value, trial, path)
            if mismatch is None:
                variables.update(trial)
                return None
            reasons.append(str(mismatch))
        return Mismatch(path, f"one of {len(reasons)} alternatives [{'; '.join(reasons)}]", _short(value))
    if key == "$not":
        if _match(argument, value, dict(variables), path) is None:
            return Mismatch(path, f"anything but {_short(argument)}", _short(value))
        return None
    if key == "$var":
        if argument not in variables:
            raise FixtureFormatError("", path, f'$var "{argument}" is used before any $capture of that name')
        if value is MISSING:
            return missing()
        captured = variables[argument]
        if json_equal(captured, value):
            return None
        return Mismatch(path, f'{_short(captured)} (the value of $var "{argument}")', _short(value))
    if key not in _MATCHERS:
        raise FixtureFormatError("", path, f"{key} is not a matcher (object keys starting with $ are matchers)")
    if value is MISSING:
        return missing()
    if key == "$any":
        if argument not in _ANY_TYPES:
            raise FixtureFormatError("", path, f"$any takes one of {sorted(_ANY_TYPES)}, not {argument!r}")
        kind = _json_type(value)
        if argument == "value" or kind == argument:
            return None
        if argument == "integer" and kind == "number" and math.isfinite(value) and float(value).is_integer():
            return None
        return Mismatch(path, "any value" if argument == "value" else f"any {argument}", _short(value))
    if key == "$capture":
        variables[argument] = value
        return None
    if key == "$literal":
        return None if json_equal(argument, value) else Mismatch(path, _short(argument), _short(value))
    if key == "$exact":
        if not isinstance(value, dict):
            return Mismatch(path, "an object", _short(value))
        listed = {k for k, item in argument.items() if _matcher_key(item) != "$absent"}
        extra = sorted(value.keys() - listed)
        if extra:
            return Mismatch(_path(path, extra[0]), "no such member ($exact)", _short(value[extra[0]]))
        return _match(argument, value, variables, path)
    # $unordered
    if not isinstance(value, list) or len(value) != len(argument):
        return Mismatch(path, f"an array of {len(argument)} in any order: {_short(argument, 80)}", _short(value))
    left = list(argument)
    for index, item in enumerate(value):
        for position, candidate in enumerate(left):
            trial = dict(variables)
            if _match(candidate, item, trial, _path(path, index)) is None:
                variables.update(trial)
                del left[position]
                break
        else:
            return Mismatch(_path(path, index), f"one of the items left: {_short(left, 100)}", _short(item))
    return None


# --- templates and frames --------------------------------------------------------------------------------------


def _with_index(value: Any, index: int | None) -> Any:
    """``{{i}}`` in every string value (not keys, not inside $literal) replaced by ``index``."""
    if index is None:
        return value
    if isinstance(value, str):
        return value.replace("{{i}}", str(index))
    if isinstance(value, list):
        return [_with_index(item, index) for item in value]
    if isinstance(value, dict):
        if _matcher_key(value) == "$literal":
            return value
        return {k: _with_index(v, index) for k, v in value.items()}
    return value


def _fill(template: Any, variables: dict[str, Any], language: str | None, path: str = "$") -> Any:
    """The body to send: $var replaced by its capture, $literal unwrapped, $per_language resolved."""
    key = _matcher_key(template)
    if key == "$literal":
        return template[key]
    if key == "$var":
        name = template[key]
        if name not in variables:
            raise FixtureFormatError("", path, f'$var "{name}" is used before any $capture of that name')
        return variables[name]
    if key == "$per_language":
        choices = template[key]
        if language is None:
            raise FixtureFormatError("", path, "$per_language is only for peer conversations (plays: host)")
        if not isinstance(choices, dict) or language not in choices:
            raise FixtureFormatError("", path, f"$per_language has no value for {language!r}")
        return _fill(choices[language], variables, language, path)
    if key is not None:
        raise FixtureFormatError("", path, f"{key} cannot be sent; wrap it in {{\"$literal\": ...}}")
    if isinstance(template, dict):
        return {k: _fill(v, variables, language, _path(path, k)) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, variables, language, _path(path, i)) for i, v in enumerate(template)]
    return template


def frame_bytes(frame: dict[str, Any]) -> bytes:
    """The bytes of one frame description (``{"text"}``, ``{"base64"}``, ``{"json"}``, ``{"byte", "count"}``, ``{"concat"}``)."""
    if "text" in frame:
        return str(frame["text"]).encode("utf-8")
    if "base64" in frame:
        return base64.b64decode(frame["base64"], validate=True)
    if "json" in frame:
        return _encode_json(frame["json"])
    if "byte" in frame:
        return bytes([frame["byte"]]) * int(frame["count"])
    return b"".join(frame_bytes(part) for part in frame["concat"])


def _encode_json(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, it is still valid JSON in UTF-8
        return json.dumps(value, separators=(",", ":")).encode("utf-8")


# --- message cases ---------------------------------------------------------------------------------------------

# The fields each type defines, with their defaults (absent: no default). Unknown fields are ignored on decode.
_NO_DEFAULT: Any = object()
_FIELDS: dict[str, dict[str, Any]] = {
    "request": {"id": _NO_DEFAULT, "action": _NO_DEFAULT, "payload": None, "timeout_ms": _NO_DEFAULT, "deadline": _NO_DEFAULT,
                "progress": False, "idempotency_key": _NO_DEFAULT},
    "response": {"id": _NO_DEFAULT, "ok": _NO_DEFAULT, "result": _NO_DEFAULT, "error": _NO_DEFAULT},
    "progress": {"id": _NO_DEFAULT, "seq": _NO_DEFAULT, "payload": None, "skipped": _NO_DEFAULT},
    "event": {"action": _NO_DEFAULT, "payload": None, "topic": _NO_DEFAULT},
    "cancel": {"id": _NO_DEFAULT},
    "hello": {"peer": _NO_DEFAULT, "actions": [], "features": [], "session": _NO_DEFAULT, "resume_token": _NO_DEFAULT,
              "heartbeat_ms": _NO_DEFAULT, "catalogue": _NO_DEFAULT, "topics": []},
    "welcome": {"host": _NO_DEFAULT, "session": _NO_DEFAULT, "resume_token": _NO_DEFAULT, "actions": _NO_DEFAULT,
                "heartbeat_ms": _NO_DEFAULT, "limits": _NO_DEFAULT, "catalogue": _NO_DEFAULT, "info": _NO_DEFAULT,
                "library_version": _NO_DEFAULT, "batch": False},
    "ping": {},
    "pong": {},
    "bye": {},
}
_NESTED = {"error": {"code": _NO_DEFAULT, "message": _NO_DEFAULT, "data": None},
           "limits": {"max_message_bytes": _NO_DEFAULT, "max_in_flight": _NO_DEFAULT}}


def _protocol_view(body: dict[str, Any]) -> dict[str, Any]:
    """What a body says in protocol terms: the fields its type defines, defaults filled in, unknown ones gone."""
    fields = dict(_FIELDS[body["type"]])
    if body["type"] == "response" and body.get("ok") is True:
        fields["result"] = None
    view: dict[str, Any] = {"v": body["v"], "type": body["type"]}
    for name, default in fields.items():
        value = body.get(name, default)
        if value is _NO_DEFAULT:
            continue
        if name in _NESTED and isinstance(value, dict):
            value = {k: value.get(k, d) for k, d in _NESTED[name].items() if value.get(k, d) is not _NO_DEFAULT}
        view[name] = value
    return view


def check_message_case(case: MessageCase) -> None:
    """Run one message case through :func:`zerobridge.wire.decode`; raise FixtureFailure if it disagrees.

    A valid body must decode, and re-encode to an equal body (the same fields, defaults filled in, unknown fields
    dropped); an invalid one must be refused with the case's code (``bad_message`` when the case names none).
    """
    frames = [b"", _encode_json(case.data)]
    try:
        message = wire.decode(frames)
    except wire.WireError as error:
        if case.valid:
            raise FixtureFailure(f"{case.name}: a valid body was refused with {error.code}: {error.message}") from None
        expected = case.error or "bad_message"
        if error.code != expected:
            raise FixtureFailure(f"{case.name}: refused with {error.code} ({error.message}), the case says {expected}") from None
        readable = case.data.get("id") if isinstance(case.data, dict) else None
        if isinstance(readable, str) and 1 <= len(readable) <= wire.MAX_ID_LENGTH and error.id != readable:
            raise FixtureFailure(f"{case.name}: the refusal carries id {error.id!r}, not the readable id {readable!r}")
        return
    if not case.valid:
        raise FixtureFailure(f"{case.name}: an invalid body was accepted as {type(message).__name__}")
    if case.trace is not False:
        decoded = getattr(message, "trace", None)
        got = None if decoded is None else decoded.to_wire()
        if got != case.trace:
            raise FixtureFailure(f"{case.name}: decoded the trace context as {got!r}, the case says {case.trace!r}")
    reencoded = json.loads(wire.encode(message)[1])
    mismatch = match({"$exact": _as_literals(_protocol_view(case.data))}, _protocol_view(reencoded))
    if mismatch is not None:
        raise FixtureFailure(f"{case.name}: the re-encoded body differs at {mismatch}\n"
                             f"  fixture:    {_short(case.data, 400)}\n  re-encoded: {_short(reencoded, 400)}")


def _as_literals(view: dict[str, Any]) -> dict[str, Any]:
    return {k: {"$literal": v} for k, v in view.items()}


# --- running ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerProgram:
    """How to start a peer under test: ``command + [endpoint]``, plus ``--evaluate`` when a fixture asks for it.

    ``language`` picks the value of ``$per_language`` templates (``"python"``, ``"node"``, ...).
    """

    language: str
    command: Sequence[str]
    env: dict[str, str] | None = None


class _Received:
    """One received message: its frames as the DEALER sees them, and its body."""

    __slots__ = ("frames", "body")

    def __init__(self, frames: list[bytes], body: dict[str, Any]) -> None:
        self.frames = frames
        self.body = body


class _Transport:
    """The sockets of one run: sends frames for a client, and queues what each client receives."""

    label = "host"
    auto_pong = True

    def __init__(self) -> None:
        self.queues: dict[str, deque[_Received]] = {}

    def send(self, client: str, frames: list[bytes]) -> None:
        raise NotImplementedError

    def pump(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for messages and queue them (answering pings in auto mode)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def queue(self, client: str, frames: list[bytes]) -> None:
        if len(frames) < 2:
            raise FixtureFailure(f"the {self.label} sent a message of {len(frames)} frame(s); every message has a "
                                 f"signature frame and a body: {[f[:80] for f in frames]!r}")
        if frames[0]:
            raise FixtureFailure(f"the {self.label} sent a non-empty signature frame {frames[0][:80]!r} without a key")
        try:
            wire.decode(frames)
        except wire.WireError as error:
            raise FixtureFailure(f"the {self.label} sent a body that is not a valid message ({error.message}): "
                                 f"{frames[1][:300]!r}") from None
        body = json.loads(frames[1])
        if self.auto_pong and body.get("type") == "ping":
            self.send(client, [b"", b'{"v":1,"type":"pong"}'])
            return
        self.queues.setdefault(client, deque()).append(_Received(frames, body))

    def next(self, client: str, deadline: float) -> _Received | None:
        """The client's next message, waiting until ``deadline`` (monotonic); None when nothing came."""
        queue = self.queues.setdefault(client, deque())
        while not queue:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.pump(max(1, min(math.ceil(left * 1000), 100)))
        return queue.popleft()


class _Dealers(_Transport):
    """One DEALER per client, connected to a host."""

    def __init__(self, endpoint: str, clients: Sequence[str], auto_pong: bool) -> None:
        super().__init__()
        self.auto_pong = auto_pong
        self.clients = tuple(clients)
        self.context = zmq.Context()
        self.poller = zmq.Poller()
        self.sockets: dict[str, zmq.Socket[bytes]] = {}
        self.names: dict[zmq.Socket[bytes], str] = {}
        self.open_sockets(endpoint)

    def open_sockets(self, endpoint: str) -> None:
        for client in self.clients:
            socket = self.context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            socket.connect(endpoint)
            self.sockets[client] = socket
            self.names[socket] = client
            self.poller.register(socket, zmq.POLLIN)

    def close_sockets(self) -> None:
        """Close every client's socket; what they received and no step took is dropped (SPEC 14.2, restart_host)."""
        for socket in self.sockets.values():
            self.poller.unregister(socket)
            socket.close(linger=0)
        self.sockets.clear()
        self.names.clear()
        self.queues.clear()

    def send(self, client: str, frames: list[bytes]) -> None:
        self.sockets[client].send_multipart(frames)

    def pump(self, timeout_ms: int) -> None:
        for socket, _ in self.poller.poll(timeout_ms):
            while socket.poll(0):
                self.queue(self.names[socket], socket.recv_multipart())

    def close(self) -> None:
        self.close_sockets()
        self.context.term()


class _PeerUnderTest(_Transport):
    """A ROUTER the runner binds, and the peer process it starts pointed at it."""

    label = "peer under test"

    def __init__(self, program: PeerProgram, evaluate: bool, auto_pong: bool, bind: str) -> None:
        super().__init__()
        self.auto_pong = auto_pong
        self.program = program
        self.context = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        self.router.bind(bind)
        self.endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.routing_id: bytes | None = None
        self.stderr = tempfile.TemporaryFile()
        command = [*program.command, self.endpoint, *(["--evaluate"] if evaluate else [])]
        env = None if program.env is None else {**os.environ, **program.env}
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=self.stderr, env=env)

    def send(self, client: str, frames: list[bytes]) -> None:
        if self.routing_id is None:
            raise FixtureFailure("a step sends to the peer before it has sent anything (expect its hello first)")
        self.router.send_multipart([self.routing_id, *frames])

    def pump(self, timeout_ms: int) -> None:
        self.check_alive()
        if self.router.poll(timeout_ms):
            while self.router.poll(0):
                routing_id, *frames = self.router.recv_multipart()
                self.routing_id = routing_id  # replies go where the peer last spoke from
                self.queue("peer", frames)

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise FixtureFailure(f"the peer under test exited with code {code}; its stderr:\n{self.stderr_text()}")

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stderr.close()
        self.router.close(linger=0)
        self.context.term()


RestartHost = Callable[[], str]
"""What a ``restart_host`` step calls: kills the host, starts it again on the same journal and endpoint, returns the
endpoint."""


def run_conversation(conversation: Conversation, endpoint: str, *, restart_host: RestartHost | None = None) -> None:
    """Play the conversation's peers against the host at ``endpoint``; raise FixtureFailure on the first failing step.

    A conversation with a ``restart_host`` step (:attr:`Conversation.restarts_host`) needs ``restart_host``: a function
    that kills the host with SIGKILL, starts it again with the same flags on the same journal and endpoint, waits for
    it to be ready and returns its endpoint. At that step the runner closes every client's socket, calls it, and opens
    a fresh socket for each client. Without it, such a conversation fails before its first step: it cannot be run
    against a host the runner cannot restart (SPEC 14.2).
    """
    if conversation.plays != "peers":
        raise ValueError(f"{conversation.description!r} plays the host: run it with run_peer_conversation")
    if conversation.restarts_host and restart_host is None:
        raise FixtureFailure(
            f"conversation {conversation.description!r} ({Path(conversation.file).name or '(no file)'}) was not run:"
            " it restarts the host (a restart_host step), so it needs a host the runner can kill and start again on the"
            " same journal; pass run_conversation(..., restart_host=...), a function that does that and returns the"
            " host's endpoint"
        )
    transport = _Dealers(endpoint, conversation.clients, conversation.pings == "auto")
    try:
        _Run(conversation, transport, language=None, restart_host=restart_host).run()
    finally:
        transport.close()


def run_peer_conversation(conversation: Conversation, program: PeerProgram, *, bind: str = "tcp://127.0.0.1:*") -> None:
    """Bind a ROUTER at ``bind``, start ``program`` pointed at it, and play the host's part of the conversation."""
    if conversation.plays != "host":
        raise ValueError(f"{conversation.description!r} plays peers: run it with run_conversation")
    transport = _PeerUnderTest(program, conversation.evaluate, conversation.pings == "auto", bind)
    try:
        _Run(conversation, transport, language=program.language).run()
        transport.check_alive()  # a peer that crashed on the last step fails too
    except FixtureFailure as failure:
        if transport.process.poll() is not None and "its stderr" not in str(failure):
            raise FixtureFailure(f"{failure}\n(the peer under test exited with code {transport.process.returncode}; "
                                 f"its stderr:\n{transport.stderr_text()})") from None
        raise
    finally:
        transport.close()


class _Run:
    """One run of one conversation over a transport."""

    def __init__(
        self, conversation: Conversation, transport: _Transport, language: str | None,
        restart_host: RestartHost | None = None,
    ) -> None:
        self.conversation = conversation
        self.transport = transport
        self.language = language
        self.restart_host = restart_host
        self.variables: dict[str, Any] = {}

    def run(self) -> None:
        steps = self.conversation.steps
        for number, step in enumerate(steps):
            try:
                self.step(step)
            except FixtureFailure as failure:
                raise FixtureFailure(f"{self.where(number, step)}: {failure}") from None
            except FixtureFormatError as error:
                where = f"$.steps[{number}]" + (error.path[1:] if error.path.startswith("$") else "")
                raise FixtureFormatError(self.conversation.file, where, error.reason) from None

    def where(self, number: int, step: dict[str, Any]) -> str:
        kind = next(k for k in _STEP_OPTIONS if k in step)
        client = f", client {step['client']!r}" if "client" in step else ""
        name = Path(self.conversation.file).name if self.conversation.file else "(no file)"
        return (f"conversation {self.conversation.description!r} ({name}) failed at step {number + 1} of "
                f"{len(self.conversation.steps)} ({kind}{client}; $.steps[{number}])")

    def step(self, step: dict[str, Any]) -> None:
        client = step.get("client", self.conversation.clients[0])
        indexes: Sequence[int | None] = range(1, step["repeat"] + 1) if "repeat" in step else [None]
        if "send" in step:
            attachments = [frame_bytes(f) for f in step.get("attachments", [])]
            for index in indexes:
                body = _fill(_with_index(step["send"], index), self.variables, self.language, "$.send")
                self.transport.send(client, [b"", _encode_json(body), *attachments])
        elif "send_frames" in step:
            self.transport.send(client, [frame_bytes(f) for f in step["send_frames"]])
        elif "expect" in step:
            for index in indexes:
                self.expect(client, _with_index(step["expect"], index), step)
        elif "expect_unordered" in step:
            self.expect_unordered(client, step)
        elif "restart_host" in step:
            self.restart()
        else:
            self.expect_nothing(client, step)

    def restart(self) -> None:
        """Close the clients' sockets, have the host killed and started again, and connect fresh sockets to it."""
        if self.restart_host is None or not isinstance(self.transport, _Dealers):
            raise FixtureFailure("a restart_host step needs a host the runner can restart (restart_host=)")
        self.transport.close_sockets()
        try:
            endpoint = self.restart_host()
        except FixtureFailure:
            raise
        except Exception as error:
            raise FixtureFailure(f"restarting the host failed: {type(error).__name__}: {error}") from error
        self.transport.open_sockets(endpoint)

    def skipped(self, step: dict[str, Any], body: dict[str, Any]) -> bool:
        return any(match(pattern, body, dict(self.variables)) is None for pattern in step.get("skip", []))

    def receive(self, client: str, step: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        while True:
            received = self.transport.next(client, deadline)
            if received is None:
                return None
            if not self.skipped(step, received.body):
                return received.body

    def expect(self, client: str, pattern: dict[str, Any], step: dict[str, Any]) -> None:
        within = step.get("within_ms", DEFAULT_WITHIN_MS)
        body = self.receive(client, step, time.monotonic() + within / 1000)
        if body is None:
            raise FixtureFailure(f"nothing came within {within} ms\n  expected: {_short(pattern, 600)}")
        mismatch = match(pattern, body, self.variables)
        if mismatch is not None:
            raise FixtureFailure(f"the received body does not match\n  at {mismatch}\n"
                                 f"  expected: {_short(pattern, 600)}\n  received: {_short(body, 600)}")

    def expect_unordered(self, client: str, step: dict[str, Any]) -> None:
        items: list[Any] = []
        for item in step["expect_unordered"]:
            if "repeat" in item:
                items += [_with_index(item["body"], i) for i in range(1, item["repeat"] + 1)]
            else:
                items.append(item["body"])
        total = len(items)
        within = step.get("within_ms", DEFAULT_WITHIN_MS)
        deadline = time.monotonic() + within / 1000
        while items:
            body = self.receive(client, step, deadline)
            if body is None:
                raise FixtureFailure(f"{len(items)} of {total} expected messages did not come within {within} ms; "
                                     f"the first still missing: {_short(items[0], 600)}")
            mismatches = []
            for position, pattern in enumerate(items):
                mismatch = match(pattern, body, self.variables)
                if mismatch is None:
                    del items[position]
                    break
                mismatches.append(mismatch)
            else:
                closest = "\n".join(f"    {m}" for m in mismatches[:3])
                raise FixtureFailure(f"a received body matches none of the {len(items)} expected messages left\n"
                                     f"  received: {_short(body, 600)}\n  against the first of them:\n{closest}")

    def expect_nothing(self, client: str, step: dict[str, Any]) -> None:
        ms = step["expect_nothing_ms"]
        body = self.receive(client, step, time.monotonic() + ms / 1000)
        if body is not None:
            raise FixtureFailure(f"expected nothing for {ms} ms, received: {_short(body, 600)}")
