"""Every message case (protocol/fixtures/messages) through the Python peer's wire decoder via zerobridge.fixtures,
one test each named "<file>: <group>: <case>": valid bodies decode and re-encode to an equal body, invalid ones are
refused with the case's code. Plus the loader's and checker's own failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerobridge import fixtures

FIXTURES = Path(__file__).resolve().parents[3] / "protocol" / "fixtures"
CASES = fixtures.load_message_cases([FIXTURES / "messages"])


def test_the_cases_are_there() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_message_case(case: fixtures.MessageCase) -> None:
    fixtures.check_message_case(case)


def test_a_case_that_disagrees_with_the_decoder_fails() -> None:
    ping = {"v": 1, "type": "ping"}
    with pytest.raises(fixtures.FixtureFailure, match="an invalid body was accepted"):
        fixtures.check_message_case(fixtures.MessageCase("f", "g", "ping said invalid", ping, False, "bad_message"))
    wrong_code = {"v": 2, "type": "ping"}
    with pytest.raises(fixtures.FixtureFailure, match="refused with unsupported_version .* the case says bad_message"):
        fixtures.check_message_case(fixtures.MessageCase("f", "g", "v2", wrong_code, False, "bad_message"))
    with pytest.raises(fixtures.FixtureFailure, match="a valid body was refused with bad_message"):
        fixtures.check_message_case(fixtures.MessageCase("f", "g", "no id", {"v": 1, "type": "cancel"}, True))


def test_loading_errors_name_the_file_and_the_json_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": 1, "description": "d", "clients": ["peer"],
                                "steps": [{"send": {"v": 1, "type": "ping"}}, {"expect": {}, "within_ms": 0}]}))
    with pytest.raises(fixtures.FixtureFormatError, match=r"bad\.json: \$\.steps\[1\]\.within_ms: must be an integer"):
        fixtures.load_conversation(path)
    path.write_text(json.dumps({"format": 1, "description": "d", "clients": ["peer"],
                                "steps": [{"send": {"v": 1, "type": "ping"}, "client": "other"}]}))
    with pytest.raises(fixtures.FixtureFormatError, match=r"\$\.steps\[0\]\.client: 'other' is not one of the clients"):
        fixtures.load_conversation(path)


def test_matching_names_the_path_and_forgets_failed_captures() -> None:
    variables: dict = {}
    pattern = {"a": [{"b": {"$capture": "x"}}, {"c": 2}]}
    assert str(fixtures.match(pattern, {"a": [{"b": 1}, {"c": 3}]}, variables)) == "$.a[1].c: expected 2, received 3"
    assert variables == {}
    assert fixtures.match(pattern, {"a": [{"b": 1}, {"c": 2.0}], "extra": True}, variables) is None
    assert variables == {"x": 1}
    assert fixtures.match({"ok": True}, {"ok": 1}) is not None  # a boolean never equals a number
    assert fixtures.match({"k": {"$absent": True}}, {}) is None
    assert fixtures.match({"k": {"$not": 1}}, {}) is None  # a missing member is not 1
    assert fixtures.match({"$exact": {"a": 1}}, {"a": 1, "b": 2}).path == "$.b"
    assert fixtures.match({"$unordered": [1, {"$any": "string"}]}, ["s", 1]) is None
    assert fixtures.match({"n": {"$any": "integer"}}, {"n": 3.0}) is None
    assert fixtures.match({"n": {"$any": "integer"}}, {"n": 3.5}) is not None
