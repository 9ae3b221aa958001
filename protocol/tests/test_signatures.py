"""fixtures/signatures.json against SPEC 3.1, recomputed with the standard library: the vectors every
implementation checks itself against are themselves right."""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
import struct

import pytest

FIXTURE = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "signatures.json").read_text())[0]
KEY = bytes.fromhex(FIXTURE["key"])


def frames(case: dict) -> list[bytes]:
    return [f.encode() if isinstance(f, str) else bytes.fromhex(f["hex"]) for f in case["frames"]]


def mac(kind: str, channel: str, stamp: str, parts: list[bytes]) -> str:
    data = f"zerobridge-1\n{kind}\n{channel}\n{stamp}\n".encode()
    for part in parts:
        data += struct.pack(">Q", len(part)) + part
    return hmac.new(KEY, data, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("case", FIXTURE["sign"], ids=lambda case: case["description"])
def test_sign_case(case: dict) -> None:
    if case["kind"] == "hello":
        expected = f"h.{case['channel']}.{case['ms']}.{mac('hello', case['channel'], str(case['ms']), frames(case))}"
    else:
        expected = f"m.{case['counter']}.{mac(case['kind'], case['channel'], str(case['counter']), frames(case))}"
    assert case["frame0"] == expected


def test_frame_boundaries_are_signed() -> None:
    by_description = {case["description"]: case["frame0"] for case in FIXTURE["sign"]}
    assert by_description["frame boundaries are signed: [ab, c] is not [a, bc]"] != by_description["frame boundaries are signed: [a, bc]"]


def test_verify_cases_refuse_and_accept() -> None:
    # Each case shows a receiver that still accepts what is right, and the cases together refuse something.
    assert all(any(message["accept"] for message in case["messages"]) for case in FIXTURE["verify"])
    assert sum(not message["accept"] for case in FIXTURE["verify"] for message in case["messages"]) >= 20
