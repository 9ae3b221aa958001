"""fixtures/websocket-frames.json against SPEC 3.2, with a reference decoder and encoder in a few lines: the cases
every WebSocket implementation checks itself against are themselves right, and valid against fixture.schema.json."""

from __future__ import annotations

import json
import pathlib
import struct

import pytest
from jsonschema import Draft202012Validator

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
CASES = json.loads((FIXTURES / "websocket-frames.json").read_text())


class Refused(Exception):
    """The payload is bad_message with "id": null (SPEC 3.2)."""


def split(payload: bytes, most: int | None = None) -> list[bytes]:
    """What a payload holds: each part a 4-byte big-endian length and that many bytes, back to back (SPEC 3.2)."""
    parts, at = [], 0
    while at < len(payload):
        if most is not None and len(parts) == most:
            raise Refused(f"more than {most:,} parts")
        if len(payload) - at < 4:
            raise Refused("a length cut short")
        (length,) = struct.unpack_from(">I", payload, at)
        at += 4
        if length > len(payload) - at:
            raise Refused("a length runs past the end")
        parts.append(payload[at:at + length])
        at += length
    return parts


def decode(payload: bytes) -> list[bytes]:
    frames = split(payload)
    if len(frames) < 2:
        raise Refused("fewer than 2 frames")
    return frames


def encode(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(frame)) + frame for frame in frames)


BATCH = "zerobridge.1.batch"
MAX_BATCH_MESSAGES = 1000


def decode_batch(payload: bytes) -> list[list[bytes] | Refused]:
    """A batch's messages (since 1.9): its own lengths are checked first, then each entry alone."""
    entries = split(payload, MAX_BATCH_MESSAGES)
    if not entries:
        raise Refused("an empty batch")
    messages: list[list[bytes] | Refused] = []
    for entry in entries:
        try:
            messages.append(decode(entry))
        except Refused as refusal:
            messages.append(refusal)
    return messages


def encode_batch(messages: list[list[bytes]]) -> bytes:
    return encode([encode(frames) for frames in messages])


def test_the_file_is_a_valid_fixture() -> None:
    schema = json.loads((FIXTURES / "fixture.schema.json").read_text())
    errors = list(Draft202012Validator(schema).iter_errors(CASES))
    assert not errors, [error.message for error in errors]


def test_names_are_unique_and_both_kinds_are_there() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))
    assert sum("frames" in case for case in CASES) >= 5 and sum("error" in case for case in CASES) >= 5
    batches = [case for case in CASES if case.get("subprotocol") == BATCH]
    assert sum("messages" in case for case in batches) >= 4 and sum("error" in case for case in batches) >= 3


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_case(case: dict) -> None:
    payload = bytes.fromhex(case["hex"])
    if case.get("subprotocol") == BATCH:
        if "error" in case:
            with pytest.raises(Refused):
                decode_batch(payload)
            return
        expected = [entry if isinstance(entry, dict) else [bytes.fromhex(frame) for frame in entry] for entry in case["messages"]]
        got = decode_batch(payload)
        assert len(got) == len(expected), case["why"]
        for message, want in zip(got, expected):
            if isinstance(want, dict):
                assert isinstance(message, Refused), case["why"]
            else:
                assert message == want, case["why"]
        if not any(isinstance(want, dict) for want in expected):
            assert encode_batch(expected) == payload, case["why"]
        return
    if "frames" in case:
        frames = [bytes.fromhex(frame) for frame in case["frames"]]
        assert decode(payload) == frames, case["why"]
        assert encode(frames) == payload, case["why"]
    else:
        with pytest.raises(Refused):
            decode(payload)
