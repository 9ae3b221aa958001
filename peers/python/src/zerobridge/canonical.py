"""The JSON Canonicalization Scheme (RFC 8785), for catalogue hashes (SPEC 7.8).

The canonical form of a JSON value is its text with no white space, object members sorted by the UTF-16 code units
of their names, strings with only ``"``, ``\\`` and the control characters escaped (``\\b \\t \\n \\f \\r``, else
``\\u00xx`` in lowercase hex), and numbers as ECMAScript's ``Number.prototype.toString`` writes them. The hash of a
catalogue is the lowercase hex SHA-256 of the UTF-8 bytes of the canonical form of its ``actions`` array::

    >>> canonical_text({"b": 1, "a": [0.1, 1e21, "\\u00e9"]})
    '{"a":[0.1,1e+21,"é"],"b":1}'
    >>> catalogue_hash([])  # doctest: +ELLIPSIS
    '4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945'

Python's own ``json.dumps(sort_keys=True)`` is not this: it sorts by code point (``"ﬁ"``, U+FB01, before ``"😀"``,
U+1F600, which UTF-16 writes as the surrogates D83D DE00 and so sorts first) and writes ``1e-07``, ``1e+16`` and
``100.0`` where ECMAScript writes ``1e-7``, ``10000000000000000`` and ``100``.

Integers (Python ``int``) in the signed 64-bit range are written exactly, as the Swift side writes them (the same
digits ECMAScript writes for every integer up to 2^53); larger ones are written as the double they round to, as
ECMAScript would. Bytes, NaN, the infinities, non-string keys and strings with lone surrogates have no canonical
form: :func:`canonical_text` raises ``ValueError`` for them.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def ecmascript_number(value: float | int) -> str:
    """``value`` as ECMAScript's ``Number::toString`` writes it (RFC 8785 section 3.2.2.3)."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return str(int(value))
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(f"the integer {value} is outside the range of a double") from None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value} has no JSON form")
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    # Python's repr gives the shortest digits that round-trip, the closest to the value: ECMAScript's digits too.
    written = repr(abs(value))
    mantissa, _, exponent = written.partition("e")
    integral, _, fraction = mantissa.partition(".")
    digits = integral + fraction
    n = len(integral) + (int(exponent) if exponent else 0)  # value = 0.digits x 10^n
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exponent_text = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + exponent_text
    return sign + digits[0] + "." + digits[1:] + "e" + exponent_text


def _utf16_key(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare as the code units do. (A lone surrogate fails here; it is refused below anyway.)
    return name.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    # json.dumps with ensure_ascii=False escapes exactly RFC 8785's set: " and \ and the control characters, with
    # \b \t \n \f \r and \u00xx in lowercase hex; everything else (DEL, U+2028, ...) is written as it is.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"the string {text[:40]!r} holds a lone surrogate, which has no UTF-8 form") from None
    return json.dumps(text, ensure_ascii=False)


def _write(value: Any, out: list[str], depth: int) -> None:
    if depth > 1000:
        raise ValueError("nested too deep (or a cycle)")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (int, float)):
        out.append(ecmascript_number(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        for name in value:
            if not isinstance(name, str):
                raise ValueError(f"the key {name!r} is not a string")
        out.append("{")
        for index, name in enumerate(sorted(value, key=_utf16_key)):
            if index:
                out.append(",")
            out.append(_string(name))
            out.append(":")
            _write(value[name], out, depth + 1)
        out.append("}")
    else:
        raise ValueError(f"a {type(value).__name__} has no canonical JSON form")


def canonical_text(value: Any) -> str:
    """The RFC 8785 canonical JSON text of ``value`` (a JSON value in Python's types); ValueError if it has none."""
    out: list[str] = []
    _write(value, out, 0)
    return "".join(out)


def canonical_hash(value: Any) -> str:
    """The lowercase hex SHA-256 of the UTF-8 bytes of ``value``'s canonical text."""
    return hashlib.sha256(canonical_text(value).encode("utf-8")).hexdigest()


def catalogue_hash(actions: list[Any]) -> str:
    """The hash of a catalogue (SPEC 7.8): :func:`canonical_hash` of its ``actions`` array."""
    return canonical_hash(actions)


__all__ = ["canonical_hash", "canonical_text", "catalogue_hash", "ecmascript_number"]
