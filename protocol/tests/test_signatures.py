"""fixtures/signatures.json against SPEC 3.1, recomputed with the standard library: the vectors every
implementation checks itself against are themselves right."""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
import re
import struct
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # also when loaded by path (the Python peer's tests)
from test_websocket_frames import Refused, split  # noqa: E402  SPEC 3.2's reference reader: a batch's frame 1 is read the same

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
    if case["kind"] in BATCH_KINDS:
        expected = f"b.{case['counter']}.{mac(case['kind'], case['channel'], str(case['counter']), frames(case))}"
    elif case["kind"] == "hello":
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


# Batches (SPEC 3.3, since 1.10): their signatures, their frame 1, and a reference receiver for the verify cases that
# play them.

BATCH_KINDS = {"p2h-batch", "h2p-batch"}


def test_batch_sign_cases_use_the_b_form() -> None:
    cases = [case for case in FIXTURE["sign"] if case["kind"] in BATCH_KINDS]
    assert {case["kind"] for case in cases} == BATCH_KINDS
    for case in cases:
        assert len(case["frames"]) == 1
        assert case["frame0"] == f"b.{case['counter']}.{mac(case['kind'], case['channel'], str(case['counter']), frames(case))}"
        # A batch's frame 1 is a batch the reference decoder reads (section 3.3).
        assert all(isinstance(message, list) for message in read_batch(frames(case)[0]))


def read_batch(frame1: bytes) -> list[list[bytes] | Refused]:
    """Each message's frames 1..n, or why it alone is refused; raises when the whole batch is."""
    entries = split(frame1, 1000)
    if not entries:
        raise Refused("an empty batch")
    messages: list[list[bytes] | Refused] = []
    for entry in entries:
        try:
            parts = split(entry)
            if len(parts) < 2:
                raise Refused("fewer than 2 frames")
            if parts[0]:
                raise Refused("frame 0 of a message in a batch is empty")
            messages.append(parts[1:])
        except Refused as refusal:
            messages.append(refusal)
    return messages


def write_batch(messages: list[list[bytes]]) -> bytes:
    def payload(parts: list[bytes]) -> bytes:
        return b"".join(struct.pack(">I", len(part)) + part for part in [b"", *parts])
    return b"".join(struct.pack(">I", len(entry)) + entry for entry in map(payload, messages))


def expected_frames(entry: list) -> list[bytes]:
    return frames({"frames": entry})


@pytest.mark.parametrize("case", FIXTURE["batches"], ids=lambda case: case["description"])
def test_batch_case(case: dict) -> None:
    frame1 = bytes.fromhex(case["hex"])
    if "error" in case:
        assert case["error"] == "bad_message"
        with pytest.raises(Refused):
            read_batch(frame1)
        return
    read = read_batch(frame1)
    assert len(read) == len(case["messages"])
    for got, want in zip(read, case["messages"]):
        if isinstance(want, dict):
            assert want == {"error": "bad_message"} and isinstance(got, Refused)
        else:
            assert got == expected_frames(want)
    if not any(isinstance(want, dict) for want in case["messages"]):
        assert write_batch([expected_frames(want) for want in case["messages"]]) == frame1


def test_batch_cases_cover_both_verdicts() -> None:
    assert sum("error" in case for case in FIXTURE["batches"]) >= 4
    assert sum(isinstance(entry, dict) for case in FIXTURE["batches"] for entry in case.get("messages", [])) >= 4


def verdicts(case: dict) -> list[bool]:
    """A reference receiver for the cases that play batches: parses frame 0 strictly, opens the channel with the
    first hello (these cases' openings are in the clock window and fresh), and checks kinds and counters."""
    receiving = "p2h" if case["side"] == "host" else "h2p"
    channel = None if case["side"] == "host" else case["channel"]
    last = 0
    out = []
    number = r"(0|[1-9][0-9]{0,18})"
    for message in case["messages"]:
        frame0, parts = message["frame0"], frames(message)
        accepted = False
        if opening := re.fullmatch(rf"h\.([0-9a-f]{{32}})\.{number}\.([0-9a-f]{{64}})", frame0):
            nonce, ms, code = opening.groups()
            accepted = channel is None and case["side"] == "host" and hmac.compare_digest(code, mac("hello", nonce, ms, parts))
            if accepted:
                channel = nonce
        elif signed := re.fullmatch(rf"([mb])\.{number}\.([0-9a-f]{{64}})", frame0):
            form, counter, code = signed.groups()
            kind = receiving + ("-batch" if form == "b" else "")
            accepted = (channel is not None and int(counter) > last
                        and hmac.compare_digest(code, mac(kind, channel, counter, parts)))
            if accepted:
                last = int(counter)
        out.append(accepted)
    return out


@pytest.mark.parametrize("case", [case for case in FIXTURE["verify"] if "batch" in case["description"]],
                         ids=lambda case: case["description"])
def test_batch_verify_case(case: dict) -> None:
    assert verdicts(case) == [message["accept"] for message in case["messages"]]
