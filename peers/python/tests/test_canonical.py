"""RFC 8785 canonical JSON and catalogue hashes (SPEC 7.8): every case of protocol/fixtures/catalogues/canonical.json,
and the places where Python's own json module would get it wrong."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from zerobridge.canonical import canonical_hash, canonical_text, catalogue_hash, ecmascript_number

REPO = Path(__file__).resolve().parents[3]
CASES = json.loads((REPO / "protocol" / "fixtures" / "catalogues" / "canonical.json").read_text(encoding="utf-8"))


def test_the_cases_are_there() -> None:
    assert len(CASES) >= 6
    assert all({"name", "value", "canonical", "sha256"} <= set(case) for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_canonical_case(case: dict[str, Any]) -> None:
    assert canonical_text(case["value"]) == case["canonical"]
    assert canonical_hash(case["value"]) == case["sha256"]
    assert hashlib.sha256(case["canonical"].encode("utf-8")).hexdigest() == case["sha256"]


def test_a_catalogue_hash_is_the_hash_of_its_actions() -> None:
    actions = next(case for case in CASES if case["name"] == "a catalogue")
    assert catalogue_hash(actions["value"]) == actions["sha256"]
    assert catalogue_hash([]) == hashlib.sha256(b"[]").hexdigest()


def test_members_sort_by_utf16_code_units_not_code_points() -> None:
    # U+FB01 sorts before U+1F600 by code point, after it by UTF-16 (D83D DE00): json.dumps(sort_keys=True) differs.
    value = {"\ufb01": 1, "\U0001f600": 2}
    assert canonical_text(value) == '{"\U0001f600":2,"\ufb01":1}'
    assert json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) != canonical_text(value)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"), (-0.0, "0"), (0.0, "0"), (1.0, "1"), (100.0, "100"), (-1.5, "-1.5"), (1e-7, "1e-7"),
        (1e-6, "0.000001"), (1e16, "10000000000000000"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
        (123e-20, "1.23e-18"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.1 + 0.2, "0.30000000000000004"), (2**53, "9007199254740992"), (-(2**63), "-9223372036854775808"),
        (2**63 - 1, "9223372036854775807"), (10**21, "1e+21"), (123456789012345678901, "123456789012345680000"),
    ],
)
def test_numbers_are_written_as_ecmascript_writes_them(number: float, text: str) -> None:
    assert ecmascript_number(number) == text


def test_strings_escape_only_what_rfc_8785_escapes() -> None:
    assert canonical_text("\u007f\u2028/é\x01\x1f\"\\") == '"\u007f\u2028/é\\u0001\\u001f\\"\\\\"'


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), [float("-inf")], {1: "a"}, "\ud800", b"bytes", {1, 2}, 10**400],
    ids=["nan", "inf", "-inf", "int key", "lone surrogate", "bytes", "set", "huge int"],
)
def test_what_json_cannot_carry_has_no_canonical_form(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical_text(value)


def test_the_conformance_hosts_committed_catalogue_hashes_to_its_hash() -> None:
    """The same catalogue hashes the same in every language: the Swift host's, recomputed here."""
    path = REPO / "protocol" / "fixtures" / "catalogues" / "conformance-host.json"
    if not path.exists():
        pytest.skip("fixtures/catalogues/conformance-host.json is not there yet")
    catalogue = json.loads(path.read_text(encoding="utf-8"))
    assert catalogue_hash(catalogue["actions"]) == catalogue["catalogue"]
