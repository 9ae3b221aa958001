"""fixtures/catalogues/ against SPEC 7.8, recomputed here with the standard library: the canonical-hash cases
every implementation checks itself against, the conformance host's catalogue and its hash, and the describe
conversation that asserts it on a live host."""

from __future__ import annotations

import hashlib
import json
import math
import pathlib

import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
CASES = json.loads((FIXTURES / "catalogues" / "canonical.json").read_text())
CONFORMANCE = json.loads((FIXTURES / "catalogues" / "conformance-host.json").read_text())


def ecmascript_number(value: float) -> str:
    """Number::toString (ECMA-262), from Python's shortest round-trip digits."""
    if value == 0:
        return "0"
    assert math.isfinite(value)
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    n = len(whole) + int(exponent or 0) - (len(whole + fraction) - len((whole + fraction).lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def canonical(value) -> str:
    """RFC 8785: members sorted by UTF-16 code units, minimal escapes, ECMAScript numbers, no white space."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else ecmascript_number(value)
    if isinstance(value, str):
        escapes = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
        return '"' + "".join(escapes.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 else c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    names = sorted(value, key=lambda name: name.encode("utf-16-be"))
    return "{" + ",".join(canonical(name) + ":" + canonical(value[name]) for name in names) + "}"


def digest(value) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_canonical_case(case: dict) -> None:
    assert canonical(case["value"]) == case["canonical"]
    assert hashlib.sha256(case["canonical"].encode()).hexdigest() == case["sha256"]


def test_the_conformance_catalogue_is_sorted_valid_and_hashed() -> None:
    names = [action["name"] for action in CONFORMANCE["actions"]]
    assert names == sorted(names, key=lambda name: name.encode("utf-16-be"))
    assert set(names) == {"add", "broadcast", "callPeer", "callback", "count", "countJob", "echo", "emit", "evaluate", "fail", "once", "sleep"}
    assert [a["name"] for a in CONFORMANCE["actions"] if "progress" in a] == ["count", "countJob"]
    assert [a["name"] for a in CONFORMANCE["actions"] if a.get("job")] == ["countJob"]
    assert CONFORMANCE["catalogue"] == digest(CONFORMANCE["actions"])


def test_the_describe_conversation_asserts_the_committed_catalogue() -> None:
    """The conversation carries the catalogue literally (with and without `once`, which another conversation may
    have released); both must be this file's, and both hashes right."""
    steps = json.loads((FIXTURES / "conversations" / "describe.json").read_text())["steps"]
    full, without_once = (alternative["$literal"] for alternative in steps[3]["expect"]["result"]["$oneOf"])
    assert full == CONFORMANCE
    assert without_once["actions"] == [a for a in CONFORMANCE["actions"] if a["name"] != "once"]
    assert without_once["catalogue"] == digest(without_once["actions"])
    assert steps[1]["expect"]["catalogue"] == {"$oneOf": [full["catalogue"], without_once["catalogue"]]}
