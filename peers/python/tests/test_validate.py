"""validate=True (SPEC 7.14): payloads checked against the host's catalogue before sending, with a validator for the
JSON Schema keywords of SPEC 7.8."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypedDict

import pytest

import zerobridge
from test_describe import CATALOGUE, answer_describe, catalogued_host
from zerobridge import ActionDescription, Catalogue, InvalidPayload
from zerobridge.schema import BYTES_SCHEMA, schema_of
from zerobridge.validate import first_error

LONG = 10.0

# (value, schema, error or None): each keyword, passing and failing.
CASES: dict[str, tuple[Any, Any, str | None]] = {
    "any value ({})": ({"x": [1]}, {}, None),
    "true": (1, True, None),
    "false": (1, False, "payload: expected nothing here (the schema allows no value), got 1"),
    "type integer": (3, {"type": "integer"}, None),
    "integer accepts 1.0": (1.0, {"type": "integer"}, None),
    "integer refuses 1.5": (1.5, {"type": "integer"}, "payload: expected an integer, got 1.5"),
    "integer refuses true": (True, {"type": "integer"}, "payload: expected an integer, got true"),
    "number accepts ints": (3, {"type": "number"}, None),
    "number refuses a string": ("3", {"type": "number"}, 'payload: expected a number, got the string "3"'),
    "boolean": (False, {"type": "boolean"}, None),
    "boolean refuses 0": (0, {"type": "boolean"}, "payload: expected a boolean, got 0"),
    "null": (None, {"type": "null"}, None),
    "string": ("s", {"type": "string"}, None),
    "array accepts a tuple": ((1, 2), {"type": "array"}, None),
    "object": ({}, {"type": "object"}, None),
    "object refuses a list": ([], {"type": "object"}, "payload: expected an object, got an array of 0 items"),
    "a list of types": (None, {"type": ["string", "null"]}, None),
    "a list of types refuses": (1, {"type": ["string", "null"]}, "payload: expected a string or null, got 1"),
    "properties": ({"a": {"b": "x"}}, {"properties": {"a": {"properties": {"b": {"type": "integer"}}}}},
                   'payload.a.b: expected an integer, got the string "x"'),
    "required": ({"a": 1}, {"type": "object", "properties": {"b": {"type": "number"}}, "required": ["a", "b"]},
                 'payload: the required member "b" (a number) is missing'),
    "additionalProperties false": ({"a": 1, "z": 2}, {"properties": {"a": {}}, "additionalProperties": False},
                                   'payload.z: expected no member "z" (the object allows only "a")'),
    "additionalProperties schema": ({"k": "v", "n": 1}, {"additionalProperties": {"type": "string"}},
                                    "payload.n: expected a string, got 1"),
    "member names that are not identifiers": ({"a b": 1}, {"properties": {"a b": {"type": "string"}}},
                                              'payload["a b"]: expected a string, got 1'),
    "items": ([1, 2, "3"], {"items": {"type": "integer"}}, 'payload[2]: expected an integer, got the string "3"'),
    "prefixItems": (["a", 1], {"prefixItems": [{"type": "string"}, {"type": "string"}]}, "payload[1]: expected a string, got 1"),
    "prefixItems then items false": (["a", 1, 2], {"prefixItems": [{}, {}], "items": False},
                                     "payload[2]: expected no item here (at most 2 items), got 2"),
    "prefixItems then items": (["a", 1, 2], {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, None),
    "enum": ("c", {"enum": ["a", "b"]}, 'payload: expected one of "a", "b", got the string "c"'),
    "enum by numeric value": (1.0, {"enum": [1, 2]}, None),
    "enum does not take true for 1": (True, {"enum": [1]}, "payload: expected one of 1, got true"),
    "const": ({"k": [1]}, {"const": {"k": [1]}}, None),
    "const refuses": ("x", {"const": "y"}, 'payload: expected "y", got the string "x"'),
    "anyOf": (None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}, None),
    "anyOf refuses": ("s", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 'payload: expected an integer or null, got the string "s"'),
    "anyOf says why the matching type failed": (
        {"a": "x"}, {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
        'payload.a: expected an integer, got the string "x"'),
    "minimum": (-1, {"minimum": 0}, "payload: expected a number >= 0, got -1"),
    "maximum": (11, {"maximum": 10.5}, "payload: expected a number <= 10.5, got 11"),
    "minimum at the bound": (0, {"minimum": 0, "maximum": 0}, None),
    "minLength counts code points": ("😀", {"minLength": 1, "maxLength": 1}, None),
    "minLength": ("", {"minLength": 1}, "payload: expected a string of at least 1 characters, got 0"),
    "maxLength": ("abc", {"maxLength": 2}, "payload: expected a string of at most 2 characters, got 3"),
    "minItems": ([], {"minItems": 1}, "payload: expected an array of at least 1 items, got 0"),
    "maxItems": ([1, 2], {"maxItems": 1}, "payload: expected an array of at most 1 items, got 2"),
    "uniqueItems": ([1, 2, 1.0], {"uniqueItems": True}, "payload[2]: expected unique items, got a repeat of item 0"),
    "uniqueItems keeps true apart from 1": ([1, True, {"a": 1}, {"a": 2}], {"uniqueItems": True}, None),
    "format is an annotation": ("not a date", {"type": "string", "format": "date-time"}, None),
    "annotations never fail": (1, {"title": "T", "description": "d", "$comment": "c"}, None),
    "unknown keywords are ignored": (1, {"not": {}, "pattern": "x", "$ref": "#/nowhere"}, None),
    "bytes match the bytes schema": (b"\x00\x01", BYTES_SCHEMA, None),
    "bytearray and memoryview too": ([bytearray(b"x"), memoryview(b"y")], {"items": BYTES_SCHEMA}, None),
    "bytes match any value": (b"x", {}, None),
    "bytes are not a plain string": (b"x", {"type": "string"}, "payload: expected a string, got 1 bytes"),
    "base64 text matches the bytes schema": ("AAE=", BYTES_SCHEMA, None),
    "the bytes schema refuses a number": (5, BYTES_SCHEMA, "payload: expected bytes (or base64 text), got 5"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_keyword(case: str) -> None:
    value, schema, error = CASES[case]
    assert first_error(value, schema) == error


class Order(TypedDict):
    id: int
    items: list[str]
    note: str | None


def test_derived_schemas_validate_what_they_describe() -> None:
    schema = schema_of(Order)
    assert first_error({"id": 1, "items": ["a"], "note": None}, schema) is None
    assert first_error({"id": 1, "items": ["a", 2], "note": None}, schema) == "payload.items[1]: expected a string, got 2"
    assert first_error({"id": 1, "items": []}, schema) == 'payload: the required member "note" (a string or null) is missing'
    assert first_error({"id": "1", "items": [], "note": "x"}, schema, "result") == 'result.id: expected an integer, got the string "1"'


# --- validate=True on the peer -------------------------------------------------------------------


async def _connect(host: Any, **options: Any) -> zerobridge.Peer:
    """Connect with validate=True while the host answers the peer's $describe."""
    answering = asyncio.ensure_future(answer_describe(host))
    peer = await zerobridge.connect(host.endpoint, name="v", validate=True, **options)
    await asyncio.wait_for(answering, LONG)
    return peer


async def _answer_next(host: Any, action: str, result: Any = None) -> dict[str, Any]:
    request = await host.next("request", action=action, timeout=LONG)
    host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": result})
    return request


async def test_connecting_fetches_the_catalogue_and_payloads_are_checked(fake_host: Any) -> None:
    async with catalogued_host(fake_host) as host:
        peer = await _connect(host)
        try:
            answering = asyncio.ensure_future(_answer_next(host, "add", 3))
            assert await peer.call("add", {"a": 1.5}) == 3
            await answering
            with pytest.raises(InvalidPayload) as caught:
                await peer.call("add", {"a": "1"})
            assert caught.value.code == "invalid_payload"
            assert caught.value.message == (
                "payload.a: expected a number, got the string \"1\" (the payload schema of 'add' in the host's catalogue)"
            )
            with pytest.raises(InvalidPayload, match=r'payload: the required member "a" \(a number\) is missing'):
                await peer.call("add", {})
            with pytest.raises(InvalidPayload, match="payload: expected an integer"):
                async with peer.stream("count", "three"):
                    pass
            with pytest.raises(InvalidPayload, match="payload: expected an object"):
                await peer.post("add", [1])
            # Actions the catalogue does not describe are not checked (the host answers for them).
            answering = asyncio.ensure_future(_answer_next(host, "echo", "anything"))
            assert await peer.call("echo", {"any": "thing"}) == "anything"
            await answering
            sent = [body["action"] for body in host.bodies("request")] + [body["action"] for body in host.bodies("event")]
            assert sent == ["$describe", "add", "echo"]  # nothing refused was sent
        finally:
            await peer.close()


async def test_a_new_catalogue_hash_in_a_welcome_fetches_it_again(fake_host: Any) -> None:
    async with catalogued_host(fake_host) as host:
        peer = await _connect(host)
        try:
            with pytest.raises(InvalidPayload):
                await peer.call("add", {"a": "x"})
            # The host's contract changes: add now takes strings; its next welcome says so by its hash.
            host.served = Catalogue.of([ActionDescription("add", "", {"type": "object", "properties": {"a": {"type": "string"}}}, {})])
            answering = asyncio.ensure_future(answer_describe(host))
            peer.add_handler("ping", lambda payload: payload)  # a new hello, answered with a welcome
            await asyncio.wait_for(answering, LONG)
            for _ in range(100):
                if peer.host_catalogue == host.served.hash and peer._host_schemas and peer._host_schemas["add"] == host.served["add"].payload:
                    break
                await asyncio.sleep(0.02)
            assert peer.host_catalogue == host.served.hash
            answering = asyncio.ensure_future(_answer_next(host, "add", "ok"))
            assert await peer.call("add", {"a": "x"}) == "ok"
            await answering
            with pytest.raises(InvalidPayload, match="payload.a: expected a string, got 1"):
                await peer.call("add", {"a": 1})
            # A welcome with the same hash fetches nothing.
            peer.add_handler("pong", lambda payload: payload)
            await host.next("hello", timeout=LONG)
            await asyncio.sleep(0.3)
            assert [body["action"] for body in host.bodies("request")].count("$describe") == 2
        finally:
            await peer.close()


async def test_a_host_without_describe_is_warned_about_and_nothing_is_checked(
    fake_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="zerobridge")
    async with catalogued_host(fake_host, None) as host:
        peer = await _connect(host)
        try:
            assert "the host's catalogue could not be fetched" in caplog.text
            answering = asyncio.ensure_future(_answer_next(host, "add", None))
            assert await peer.call("add", {"a": "not checked"}) is None
            await answering
        finally:
            await peer.close()


async def test_without_validate_nothing_is_fetched_or_checked(fake_host: Any) -> None:
    async with catalogued_host(fake_host) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        answering = asyncio.ensure_future(_answer_next(host, "add", None))
        assert await peer.call("add", {"a": "unchecked"}) is None
        await answering
        assert [body["action"] for body in host.bodies("request")] == ["add"]


def test_the_blocking_twin_validates(fake_host: Any) -> None:
    async def scenario() -> None:
        async with catalogued_host(fake_host) as host:
            def blocking() -> str:
                with zerobridge.connect_sync(host.endpoint, name="twin", validate=True) as peer:
                    with pytest.raises(InvalidPayload) as caught:
                        peer.call("add", {"a": None})
                    return caught.value.message

            answering = asyncio.ensure_future(answer_describe(host))
            message = await asyncio.to_thread(blocking)
            await answering
            assert message.startswith("payload.a: expected a number, got null")

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_the_catalogue_used_by_these_tests() -> None:
    assert CATALOGUE.names == ("add", "count")
