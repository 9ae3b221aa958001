"""protocol/fixtures/json-texts.json (SPEC 14.1b): every JSON text through the decoder the peer runs on a received
body, :func:`zerobridge.wire.decode`. "accept" means it yields a valid event, "refuse" that it raises WireError
with bad_message."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from zerobridge import wire

FIXTURE = Path(__file__).resolve().parents[3] / "protocol" / "fixtures" / "json-texts.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_the_corpus_is_well_formed() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names)), [name for name, count in Counter(names).items() if count > 1]
    for case in CASES:
        assert set(case) == {"name", "hex", "verdict", "why"}, case["name"]
        assert re.fullmatch(r"[yni]_\S+", case["name"]), case["name"]
        assert re.fullmatch(r"(?:[0-9a-f]{2})*", case["hex"]), f"{case['name']}: hex must be lowercase, whole bytes"
        assert case["verdict"] in ("accept", "refuse"), case["name"]
        assert case["why"].strip(), case["name"]
        if case["name"].startswith("y_"):
            assert case["verdict"] == "accept", f"{case['name']}: a y_ text is accepted"
        if case["name"].startswith("n_"):
            assert case["verdict"] == "refuse", f"{case['name']}: an n_ text is refused"
    categories = Counter(case["name"][:2] for case in CASES)
    assert categories["y_"] >= 50 and categories["n_"] >= 50 and categories["i_"] >= 30, categories


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_json_text(case: dict[str, Any]) -> None:
    body = bytes.fromhex(case["hex"])
    try:
        message = wire.decode([b"", body])
    except wire.WireError as error:
        assert case["verdict"] == "refuse", f"{case['name']} ({case['why']}): refused with {error.code}: {error}"
        assert error.code == "bad_message", f"{case['name']}: refused with {error.code}, not bad_message"
        return
    assert case["verdict"] == "accept", f"{case['name']} ({case['why']}): accepted as {message!r:.200}"
    assert isinstance(message, wire.Event), f"{case['name']}: accepted, but as {type(message).__name__}, not an event"
