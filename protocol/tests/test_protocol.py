"""Checks protocol/: the schemas, the message cases and the conversations against each other.

Every schema must be a valid draft 2020-12 schema; every message case must be exactly as valid as it says under
schema/message.schema.json; every conversation must be a valid fixture whose sent bodies and expected bodies are
valid messages (unless a step says it sends an invalid body on purpose). Running conversations against a live
host is the runners' job (SPEC.md, Fixtures); this suite needs no host.
"""
from __future__ import annotations

import base64
import itertools
import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

PROTOCOL = Path(__file__).resolve().parent.parent
SCHEMA_DIR = PROTOCOL / "schema"
FIXTURES = PROTOCOL / "fixtures"
MESSAGE_CASE_FILES = sorted((FIXTURES / "messages").glob("*.json"))
CONNECTION_CASE_FILE = FIXTURES / "connection-files.json"
STATS_CASE_FILE = FIXTURES / "stats.json"
CONVERSATION_FILES = sorted((FIXTURES / "conversations").glob("*.json"))
PEER_CONVERSATION_FILES = sorted((FIXTURES / "peer-conversations").glob("*.json"))

SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.json"))
FIXTURE_SCHEMA_FILE = FIXTURES / "fixture.schema.json"
MESSAGE_TYPES = ["hello", "welcome", "request", "response", "progress", "event", "cancel", "ping", "pong", "bye"]
CONFORMANCE_ACTIONS = {"echo", "add", "sleep", "count", "fail", "callback", "evaluate", "emit", "once"}
CONFORMANCE_PEER_ACTIONS = {"echo", "add", "fail", "sleep", "count", "emit", "callback"}
# Every code the conformance host can put on the wire. peer_lost is only ever a local failure there (the lost
# peer's answers are discarded; peer-lost-*.json show what is observable) and unauthorized needs a keyed host.
WIRE_CODES = {"bad_message", "unsupported_version", "unknown_action", "invalid_payload", "handler_gone",
              "handler_error", "timeout", "cancelled", "duplicate_id", "too_large", "overloaded", "not_allowed"}


def load(path: Path):
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def build_registry() -> tuple[Registry, dict[str, dict]]:
    schemas = {path.name: load(path) for path in SCHEMA_FILES + [FIXTURE_SCHEMA_FILE]}
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas.values())
    return registry, schemas


REGISTRY, SCHEMAS = build_registry()


def validator(schema_file: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[schema_file], registry=REGISTRY)


MESSAGE = validator("message.schema.json")
CONNECTION_FILE = validator("connection-file.schema.json")
FIXTURE = validator("fixture.schema.json")
STATS = validator("stats.schema.json")
TRACEPARENT = Draft202012Validator(SCHEMAS["common.schema.json"]["$defs"]["traceparent"])


def explain(v: Draft202012Validator, instance) -> str:
    return "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message[:200]}"
                     for e in v.iter_errors(instance)) or "no errors"


# --- schemas -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SCHEMA_FILES + [FIXTURE_SCHEMA_FILE], ids=lambda p: p.name)
def test_schema_is_valid_2020_12(path: Path):
    schema = load(path)
    assert schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    # Relative $refs resolve against the $id, so each $id must end with the file's own name.
    assert schema["$id"].endswith("/" + path.parent.name + "/" + path.name)


def test_every_message_type_has_its_schema():
    for message_type in MESSAGE_TYPES:
        schema = SCHEMAS[f"{message_type}.schema.json"]
        assert schema["properties"]["type"] == {"const": message_type}
    assert SCHEMAS["message.schema.json"]["properties"]["type"]["enum"] == MESSAGE_TYPES


# --- message and connection-file cases --------------------------------------------------------------------------

def cases(files: list[Path]):
    for path in files:
        for group in load(path):
            for case in group["tests"]:
                yield pytest.param(case, id=f"{path.stem}: {group['description']}: {case['description']}")


def expected_error(body) -> str:
    """The code a receiver answers an invalid body with (SPEC.md, Bad input): the version is judged first."""
    if isinstance(body, dict) and "v" in body:
        v = body["v"]
        if isinstance(v, int) and not isinstance(v, bool) and v != 1:
            return "unsupported_version"
    return "bad_message"


@pytest.mark.parametrize("case", list(cases(MESSAGE_CASE_FILES)))
def test_message_case(case):
    assert MESSAGE.is_valid(case["data"]) == case["valid"], explain(MESSAGE, case["data"])
    if not case["valid"]:
        assert case.get("error") == expected_error(case["data"])
    if case.get("trace") is not None:
        # What a receiver decodes and carries on is always in the form a sender writes (SPEC 7.18).
        assert case["data"]["type"] in ("request", "event"), "only requests and events carry trace context"
        assert TRACEPARENT.is_valid(case["trace"]["traceparent"]), explain(TRACEPARENT, case["trace"]["traceparent"])


@pytest.mark.parametrize("case", list(cases([CONNECTION_CASE_FILE])))
def test_connection_file_case(case):
    assert CONNECTION_FILE.is_valid(case["data"]) == case["valid"], explain(CONNECTION_FILE, case["data"])


@pytest.mark.parametrize("case", list(cases([STATS_CASE_FILE])))
def test_stats_case(case):
    assert STATS.is_valid(case["data"]) == case["valid"], explain(STATS, case["data"])


@pytest.mark.parametrize("path", MESSAGE_CASE_FILES + [CONNECTION_CASE_FILE, STATS_CASE_FILE], ids=lambda p: p.name)
def test_case_file_is_a_valid_fixture(path: Path):
    data = load(path)
    assert FIXTURE.is_valid(data), explain(FIXTURE, data)
    names = [(g["description"], c["description"]) for g in data for c in g["tests"]]
    assert len(names) == len(set(names)), "case descriptions must be unique: they name the tests"


def test_message_cases_cover_every_type_both_ways():
    bodies = [case.values[0] for case in cases(MESSAGE_CASE_FILES)]
    seen = {(case["data"]["type"], case["valid"]) for case in bodies
            if isinstance(case["data"], dict) and isinstance(case["data"].get("type"), str)}
    for message_type in MESSAGE_TYPES:
        assert (message_type, True) in seen, f"no valid {message_type} case"
    for message_type in ["hello", "welcome", "request", "response", "progress", "event", "cancel"]:
        assert (message_type, False) in seen, f"no invalid {message_type} case"
    assert len(list(cases(MESSAGE_CASE_FILES))) >= 80


# --- conversations ---------------------------------------------------------------------------------------------

MISSING = object()  # a pattern instance standing for "this member is absent"
MATCHER_KEYS = {"$any", "$absent", "$oneOf", "$not", "$capture", "$var", "$exact", "$unordered", "$literal"}
ANY_SAMPLES = {"value": "any", "string": "s", "number": 1.5, "integer": 1, "boolean": True, "null": None,
               "array": [], "object": {}}


def matcher_key(value) -> str | None:
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value
        if key in MATCHER_KEYS:
            return key
    return None


# A placeholder stands for a captured string; where the schema constrains a member's strings further, it takes a
# value of that shape instead.
SHAPED_PLACEHOLDERS = {"resume_token": "0" * 64, "catalogue": "0" * 64}


def placeholder_for(member: str, value):
    if isinstance(value, str) and value.startswith("placeholder-"):
        return SHAPED_PLACEHOLDERS.get(member, value)
    return value


def instances(pattern, member: bool = False):
    """Every body shape a pattern stands for, with placeholders for captured and wildcard values.

    For example {"ok": {"$oneOf": [true, false]}} stands for {"ok": true} and {"ok": false}. MISSING comes out
    where $absent is allowed: as an object member's value (member=True).
    """
    key = matcher_key(pattern)
    if key == "$any":
        yield ANY_SAMPLES[pattern[key]]
    elif key == "$absent":
        assert member, "$absent is only meaningful as an object member's value"
        yield MISSING
    elif key == "$oneOf":
        for alternative in pattern[key]:
            yield from instances(alternative, member)
    elif key in ("$not", "$capture", "$var"):
        yield f"placeholder-{key[1:]}"
    elif key == "$exact":
        yield from instances(pattern[key])
    elif key == "$unordered":
        yield from instances(list(pattern[key]))
    elif key == "$literal":
        yield pattern[key]
    elif isinstance(pattern, dict):
        keys = list(pattern)
        for values in itertools.product(*(list(instances(pattern[k], member=True)) for k in keys)):
            yield {k: placeholder_for(k, v) for k, v in zip(keys, values) if v is not MISSING}
    elif isinstance(pattern, list):
        for values in itertools.product(*(list(instances(item)) for item in pattern)):
            yield list(values)
    else:
        yield pattern


def fill(template, index: int | None, language: str | None = None):
    """A sent body as the runner builds it: {{i}} and $var replaced by placeholders, $literal unwrapped,
    $per_language resolved for `language`."""
    if isinstance(template, dict) and list(template) == ["$per_language"]:
        return fill(template["$per_language"][language], index, language)
    key = matcher_key(template)
    if key == "$var":
        return f"placeholder-{template[key]}"
    if key == "$literal":
        return template[key]
    if isinstance(template, dict):
        return {k: placeholder_for(k, fill(v, index, language)) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, index, language) for v in template]
    if isinstance(template, str) and index is not None:
        return template.replace("{{i}}", str(index))
    return template


def walk(value, found: list[tuple[str, str]]):
    """Collects the ($capture | $var, name) uses in a template or pattern, in document order."""
    key = matcher_key(value)
    if key in ("$capture", "$var"):
        found.append((key, value[key]))
    elif key == "$literal":
        return
    elif isinstance(value, dict):
        for item in value.values():
            walk(item, found)
        if list(value) == ["$per_language"]:
            found.extend(("$language", name) for name in value["$per_language"])
    elif isinstance(value, list):
        for item in value:
            walk(item, found)


def expected_patterns(step) -> list:
    if "expect" in step:
        return [step["expect"]]
    if "expect_unordered" in step:
        return [item["body"] for item in step["expect_unordered"]]
    return []


def frame_bytes(frame) -> int:
    if "text" in frame:
        return len(frame["text"].encode("utf-8"))
    if "base64" in frame:
        return len(base64.b64decode(frame["base64"], validate=True))
    if "json" in frame:
        return len(json.dumps(frame["json"]).encode("utf-8"))
    if "byte" in frame:
        return frame["count"]
    return sum(frame_bytes(part) for part in frame["concat"])


def all_frames(step):
    frames = list(step.get("send_frames", [])) + list(step.get("attachments", []))
    while frames:
        frame = frames.pop()
        yield frame
        frames.extend(frame.get("concat", []))


@pytest.mark.parametrize("path", CONVERSATION_FILES, ids=lambda p: p.stem)
def test_conversation(path: Path):
    conversation = load(path)
    assert "plays" not in conversation, "a conversation with the host does not say plays (peer-conversations/ do)"
    check_conversation(conversation)


def check_conversation(conversation):
    assert FIXTURE.is_valid(conversation), explain(FIXTURE, conversation)
    clients = conversation.get("clients", ["peer"])
    captured: set[str] = set()
    for number, step in enumerate(conversation["steps"], start=1):
        where = f"step {number}"
        assert step.get("client", clients[0]) in clients, f"{where}: unknown client"
        uses: list[tuple[str, str]] = []
        walk(step.get("send"), uses)
        for pattern in expected_patterns(step) + step.get("skip", []):
            walk(pattern, uses)
        languages = {name for kind, name in uses if kind == "$language"} or {None}
        for kind, name in uses:
            if kind == "$capture":
                captured.add(name)
            elif kind == "$var":
                assert name in captured, f"{where}: $var {name!r} is used before it is captured"

        if "send" in step:
            indexes = [1] if "repeat" in step else [None]
            for body in (fill(step["send"], i, language) for i in indexes for language in sorted(languages, key=str)):
                if "deliberately_invalid" in step:
                    assert not MESSAGE.is_valid(body), f"{where} says it sends an invalid body, but it is valid"
                else:
                    assert MESSAGE.is_valid(body), f"{where} sends an invalid body: {explain(MESSAGE, body)}"
        for pattern in expected_patterns(step):
            for body in instances(fill(pattern, 1)):
                assert body is not MISSING and MESSAGE.is_valid(body), \
                    f"{where} expects a body no valid message can match: {explain(MESSAGE, body)}"
        for frame in all_frames(step):
            frame_bytes(frame)  # base64 must decode


@pytest.mark.parametrize("path", PEER_CONVERSATION_FILES, ids=lambda p: p.stem)
def test_peer_conversation(path: Path):
    conversation = load(path)
    assert conversation.get("plays") == "host", "peer-conversations/ hold conversations that play the host"
    check_conversation(conversation)
    first = conversation["steps"][0]
    assert first.get("expect", {}).get("type") == "hello", "a peer conversation starts by expecting the peer's hello"
    features = first["expect"].get("features")
    expected = {"$unordered": ["batch", "evaluate"]} if conversation.get("evaluate") else ["batch"]
    assert features == expected, \
        "the hello's features say that the conformance peer reads batches (SPEC 3.3), and whether evaluation is on"
    for step in conversation["steps"]:
        for language_values in per_language_values(step.get("send")):
            assert {"python", "node"} <= set(language_values), "scripts are given for every peer library"


def per_language_values(value):
    if isinstance(value, dict):
        if list(value) == ["$per_language"]:
            yield value["$per_language"]
        for item in value.values():
            yield from per_language_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from per_language_values(item)


def test_peer_conversations_cover_the_conformance_peer():
    actions, codes, sent, expected = set(), set(), set(), set()
    evaluate_modes = set()
    for path in PEER_CONVERSATION_FILES:
        conversation = load(path)
        evaluate_modes.add(conversation.get("evaluate", False))
        for step in conversation["steps"]:
            if "send" in step:
                sent.add(step["send"]["type"])
                if step["send"]["type"] == "request":
                    actions.add(step["send"].get("action"))
            if "send_frames" in step:
                sent.add("frames")
        for direction, body in sent_and_expected(conversation):
            if direction == "expected":
                expected.add(body.get("type"))
                if body.get("type") == "response" and body.get("ok") is False:
                    codes.add(body["error"]["code"])
    assert CONFORMANCE_PEER_ACTIONS | {"$actions", "$evaluate"} <= actions, \
        f"no peer conversation calls {sorted(CONFORMANCE_PEER_ACTIONS | {'$actions', '$evaluate'} - actions)}"
    peer_codes = {"bad_message", "unsupported_version", "unknown_action", "invalid_payload", "handler_error",
                  "timeout", "cancelled", "duplicate_id", "not_allowed"}
    assert peer_codes <= codes, f"no peer conversation expects {sorted(peer_codes - codes)}"
    assert {"welcome", "request", "response", "progress", "event", "cancel", "ping", "pong", "frames"} <= sent
    assert {"hello", "request", "response", "progress", "event", "ping", "pong"} <= expected
    assert evaluate_modes == {False, True}, "peer conversations run the conformance peer with evaluation off and on"
    assert len(PEER_CONVERSATION_FILES) >= 12


def test_conversation_descriptions_are_unique():
    descriptions = [load(path)["description"] for path in CONVERSATION_FILES + PEER_CONVERSATION_FILES]
    assert len(descriptions) == len(set(descriptions))


def sent_and_expected(conversation):
    for step in conversation["steps"]:
        yield from ([("sent", step["send"])] if "send" in step else [])
        for pattern in expected_patterns(step):
            for body in instances(pattern):
                yield "expected", body


def test_conversations_cover_the_conformance_host():
    actions, codes, types_sent = set(), set(), set()
    for path in CONVERSATION_FILES:
        for direction, body in sent_and_expected(load(path)):
            if direction == "sent":
                types_sent.add(body.get("type"))
                if body.get("type") == "request":
                    actions.add(body.get("action"))
            elif body.get("type") == "response" and body.get("ok") is False:
                codes.add(body["error"]["code"])
    assert CONFORMANCE_ACTIONS <= actions, f"no conversation calls {sorted(CONFORMANCE_ACTIONS - actions)}"
    assert WIRE_CODES <= codes, f"no conversation expects {sorted(WIRE_CODES - codes)}"
    assert set(MESSAGE_TYPES) - {"welcome"} <= types_sent, "every type a peer sends should be sent somewhere"
    assert len(CONVERSATION_FILES) >= 20


def test_repeat_placeholders_only_in_repeated_steps():
    for path in CONVERSATION_FILES + PEER_CONVERSATION_FILES:
        for number, step in enumerate(load(path)["steps"], start=1):
            text = json.dumps({k: v for k, v in step.items() if k != "note"})
            items_repeat = any("repeat" in item for item in step.get("expect_unordered", []))
            if "{{i}}" in text:
                assert "repeat" in step or items_repeat, f"{path.stem} step {number}: {{{{i}}}} without repeat"



def test_spec_documents_every_type_code_action_and_fixture_it_names():
    spec = (PROTOCOL / "SPEC.md").read_text(encoding="utf-8")
    for word in MESSAGE_TYPES + sorted(WIRE_CODES | {"peer_lost", "unauthorized"}) + sorted(CONFORMANCE_ACTIONS):
        assert f"`{word}`" in spec, f"SPEC.md never mentions `{word}`"
    for named in set(re.findall(r"`([a-z0-9-]+\.json)`", spec)):
        assert any((folder / named).exists() for folder in (FIXTURES / "conversations", FIXTURES / "peer-conversations", FIXTURES)), named
