"""protocol/fixtures run through the Python peer's decoder and connection-file reader (SPEC section 14.1).

Each case is one test named "<file>: <group>: <case>"; a decoder must accept exactly the valid bodies and
answer each invalid one with the code the case names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerobridge import wire
from zerobridge.peer import read_connection_file

FIXTURES = Path(__file__).resolve().parents[3] / "protocol" / "fixtures"


def cases(files: list[Path]) -> list[Any]:
    found = []
    for path in files:
        for group in json.loads(path.read_text(encoding="utf-8")):
            for case in group["tests"]:
                name = f"{path.name}: {group['description']}: {case['description']}"
                found.append(pytest.param(case, id=name))
    return found


MESSAGE_FILES = sorted((FIXTURES / "messages").glob("*.json"))
CONNECTION_FILES = [FIXTURES / "connection-files.json"]


def test_the_fixtures_are_there() -> None:
    assert MESSAGE_FILES, f"no message fixtures under {FIXTURES}"
    assert CONNECTION_FILES[0].is_file()


@pytest.mark.parametrize("case", cases(MESSAGE_FILES))
def test_message_case(case: dict[str, Any]) -> None:
    frames = [b"", json.dumps(case["data"]).encode()]
    if case["valid"]:
        wire.decode(frames)
    else:
        with pytest.raises(wire.WireError) as caught:
            wire.decode(frames)
        assert caught.value.code == case.get("error", "bad_message")


@pytest.mark.parametrize("case", cases(CONNECTION_FILES))
def test_connection_file_case(case: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(case["data"]), encoding="utf-8")
    if case["valid"]:
        info = read_connection_file(path)
        assert info.endpoint == case["data"]["endpoint"]
        assert info.peer == case["data"].get("peer")
    else:
        with pytest.raises(ValueError):
            read_connection_file(path)
