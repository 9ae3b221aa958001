"""$describe (SPEC 7.8): schemas derived from type hints, the peer's catalogue and its hash in hello, the host's
catalogue hash from welcome and `peer.describe()`."""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import functools
import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NewType, NotRequired, Optional, Required, TypedDict, Union

import pytest

import zerobridge
from conftest import FakeHost
from zerobridge import Catalogue, RequestContext, UnknownAction, canonical
from zerobridge.describe import ActionDescription, describe_handler
from zerobridge.schema import BYTES_SCHEMA, KEYWORDS, schema_of, unknown_keywords

REPO = Path(__file__).resolve().parents[3]
LONG = 10.0


# --- derived schemas, one annotation kind at a time ----------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(TypedDict):
    x: float
    y: float


class Options(TypedDict, total=False):
    name: Required[str]
    limit: int
    tags: list[str]


class Mixed(TypedDict):
    id: int
    note: NotRequired[str | None]


@dataclasses.dataclass
class Box:
    width: int
    label: str = ""
    items: list[int] = dataclasses.field(default_factory=list)


class Tree(TypedDict):
    name: str
    children: list[Tree]


class Pair(NamedTuple):
    key: str
    value: int


UserId = NewType("UserId", int)
T = typing.TypeVar("T", bound=str)


class Custom:
    pass


SCHEMAS: dict[str, tuple[Any, dict[str, Any]]] = {
    "int": (int, {"type": "integer"}),
    "float": (float, {"type": "number"}),
    "str": (str, {"type": "string"}),
    "bool": (bool, {"type": "boolean"}),
    "None": (None, {"type": "null"}),
    "NoneType": (type(None), {"type": "null"}),
    "bytes": (bytes, BYTES_SCHEMA),
    "bytearray": (bytearray, BYTES_SCHEMA),
    "list[int]": (list[int], {"type": "array", "items": {"type": "integer"}}),
    "typing.List[str]": (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
    "Sequence[float]": (collections.abc.Sequence[float], {"type": "array", "items": {"type": "number"}}),
    "typing.Sequence[bool]": (typing.Sequence[bool], {"type": "array", "items": {"type": "boolean"}}),  # noqa: UP006
    "bare list": (list, {"type": "array"}),
    "list[Any]": (list[Any], {"type": "array"}),
    "tuple[int, ...]": (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    "tuple[str, int]": (
        tuple[str, int],
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False, "minItems": 2, "maxItems": 2},
    ),
    "tuple[()]": (tuple[()], {"type": "array", "maxItems": 0}),
    "set[str]": (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    "dict[str, int]": (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    "Mapping[str, list[str]]": (
        collections.abc.Mapping[str, list[str]],
        {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    ),
    "dict[str, Any]": (dict[str, Any], {"type": "object"}),
    "bare dict": (dict, {"type": "object"}),
    "int | None": (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    "Optional[str]": (Optional[str], {"anyOf": [{"type": "string"}, {"type": "null"}]}),  # noqa: UP045
    "Union[int, str]": (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
    "int | str | None": (int | str | None, {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
    "Literal of several": (Literal["a", "b", 3], {"enum": ["a", "b", 3]}),
    "Literal of one": (Literal["only"], {"const": "only"}),
    "Literal of an enum member": (Literal[Colour.RED], {"const": "red"}),
    "Enum": (Colour, {"enum": ["red", "green"]}),
    "IntEnum": (Level, {"enum": [1, 2]}),
    "TypedDict": (
        Point,
        {"type": "object", "title": "Point", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]},
    ),
    "TypedDict total=False with Required": (
        Options,
        {
            "type": "object", "title": "Options",
            "properties": {"name": {"type": "string"}, "limit": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["name"],
        },
    ),
    "TypedDict with NotRequired": (
        Mixed,
        {
            "type": "object", "title": "Mixed",
            "properties": {"id": {"type": "integer"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "required": ["id"],
        },
    ),
    "dataclass": (
        Box,
        {
            "type": "object", "title": "Box",
            "properties": {"width": {"type": "integer"}, "label": {"type": "string"}, "items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["width"],
        },
    ),
    "recursive TypedDict": (
        Tree,
        {
            "type": "object", "title": "Tree",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$comment": "Tree contains itself: described as any value"}},
            },
            "required": ["name", "children"],
        },
    ),
    "NamedTuple": (
        Pair,
        {"type": "array", "title": "Pair", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False,
         "minItems": 2, "maxItems": 2},
    ),
    "Annotated with keywords": (Annotated[int, {"minimum": 0, "maximum": 10}], {"type": "integer", "minimum": 0, "maximum": 10}),
    "Annotated with other metadata": (Annotated[str, "ignored"], {"type": "string"}),
    "NewType": (UserId, {"type": "integer"}),
    "TypeVar with a bound": (T, {"type": "string"}),
    "Any": (Any, {}),
    "object": (object, {}),
    "a class that is not data": (Custom, {"$comment": "not derivable from Custom: a class that is not plain JSON data"}),
}


@pytest.mark.parametrize("kind", SCHEMAS)
def test_schema_of_each_annotation_kind(kind: str) -> None:
    annotation, expected = SCHEMAS[kind]
    schema = schema_of(annotation)
    assert schema == expected
    assert unknown_keywords(schema) == set(), "derived schemas stay inside the keyword subset of SPEC 7.8"
    json.dumps(schema)  # JSON, hashable canonically
    canonical.canonical_text(schema)


def test_the_keyword_subset_is_the_specs() -> None:
    spec = (REPO / "protocol" / "SPEC.md").read_text(encoding="utf-8")
    listed = spec[spec.index("**Schemas** use these keywords"):spec.index("A generator treats a schema using anything else")]
    for keyword in KEYWORDS - {"contentEncoding"}:
        assert f"`{keyword}`" in listed, keyword
    assert "contentEncoding" in spec  # the bytes schema


# --- describing handlers -------------------------------------------------------------------------


class AddPayload(TypedDict):
    a: float
    b: float


class Step(TypedDict):
    i: int


async def add(payload: AddPayload) -> float:
    """Adds two numbers.

    More text that is not the summary.
    """
    return payload["a"] + payload["b"]


def count(payload: int, request: RequestContext[Step]) -> list[int]:
    return list(range(payload))


def untyped(payload, request):  # type: ignore[no-untyped-def]
    return payload


def nothing() -> None:
    """Takes nothing."""


class Callable_:
    """A callable object."""

    def __call__(self, payload: str) -> str:
        return payload


class Service:
    def method(self, payload: list[int]) -> int:
        """Sums."""
        return sum(payload)


def _describe(function: Any, **arguments: Any) -> dict[str, Any]:
    return describe_handler("x", function, context_class=RequestContext, **arguments).to_json()


def test_a_handler_is_described_by_its_hints_and_docstring() -> None:
    assert _describe(add) == {
        "name": "x", "doc": "Adds two numbers.",
        "payload": {"type": "object", "title": "AddPayload", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
        "result": {"type": "number"},
    }


def test_progress_comes_from_request_context_of_t() -> None:
    assert _describe(count) == {
        "name": "x", "doc": "", "payload": {"type": "integer"},
        "result": {"type": "array", "items": {"type": "integer"}},
        "progress": {"type": "object", "title": "Step", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    }


def test_missing_annotations_are_any_value_and_no_progress() -> None:
    assert _describe(untyped) == {"name": "x", "doc": "", "payload": {}, "result": {}}
    assert _describe(nothing) == {"name": "x", "doc": "Takes nothing.", "payload": {}, "result": {"type": "null"}}
    assert _describe(lambda p: p) == {"name": "x", "doc": "", "payload": {}, "result": {}}


def test_callable_objects_methods_and_partials_are_described() -> None:
    assert _describe(Callable_()) == {"name": "x", "doc": "A callable object.", "payload": {"type": "string"}, "result": {"type": "string"}}
    assert _describe(Service().method) == {
        "name": "x", "doc": "Sums.", "payload": {"type": "array", "items": {"type": "integer"}}, "result": {"type": "integer"},
    }
    assert _describe(functools.partial(add)) == _describe(add)


def test_explicit_arguments_say_what_hints_cannot_or_override_them() -> None:
    described = _describe(
        untyped,
        doc="Echoes.\nSecond line.",
        payload={"type": "string", "maxLength": 10},
        result=list[str],
        progress={"type": "integer", "minimum": 0},
    )
    assert described == {
        "name": "x", "doc": "Echoes. Second line.", "payload": {"type": "string", "maxLength": 10},
        "result": {"type": "array", "items": {"type": "string"}}, "progress": {"type": "integer", "minimum": 0},
    }
    assert "progress" not in _describe(count, progress=None)
    assert _describe(add, doc="")["doc"] == ""
    with pytest.raises(ValueError, match="payload schema is not JSON"):
        _describe(add, payload={"minimum": float("nan")})


def test_a_local_type_that_cannot_be_resolved_is_described_as_any_value_with_a_comment() -> None:
    def handler(payload: "NoSuchType") -> int:  # type: ignore[name-defined]  # noqa: F821
        return 1

    described = _describe(handler)
    assert described["payload"] == {"$comment": "not derivable from 'NoSuchType': the name could not be resolved"}
    assert described["result"] == {"type": "integer"}


# --- the catalogue ---------------------------------------------------------------------------------


def test_the_catalogue_is_sorted_by_utf16_code_units_and_hashed_canonically() -> None:
    peer = zerobridge.connect("tcp://127.0.0.1:1", name="p")
    for name in ("\ufb01", "\U0001f600", "b", "B", "a"):
        peer.add_handler(name, add)
    catalogue = peer.catalogue
    assert catalogue.names == ("B", "a", "b", "\U0001f600", "\ufb01")
    body = catalogue.to_json()
    assert list(body) == ["catalogue", "actions"]
    assert body["catalogue"] == catalogue.hash == canonical.catalogue_hash(body["actions"])
    assert catalogue.computed_hash() == catalogue.hash
    assert Catalogue.from_json(json.loads(json.dumps(body))) == catalogue
    assert catalogue["a"].doc == "Adds two numbers." and "a" in catalogue and "zz" not in catalogue and len(catalogue) == 5

def test_a_job_action_keeps_its_job_flag_through_the_catalogue_and_its_hash() -> None:
    """A host's description of a job action carries "job": true (SPEC 7.8, 7.16); reading it must keep the flag, or
    the hash computed here differs from the host's (as it did before this peer knew the field)."""
    described = {"name": "countJob", "doc": "Counts.", "payload": {}, "result": {}, "progress": {}, "job": True}
    plain = {"name": "add", "doc": "", "payload": {}, "result": {}}
    body = {"catalogue": canonical.catalogue_hash([plain, described]), "actions": [plain, described]}
    catalogue = Catalogue.from_json(body)
    assert catalogue["countJob"].job is True and catalogue["add"].job is False
    assert catalogue.computed_hash() == body["catalogue"]
    assert catalogue.to_json() == body
    for bad in (False, 1, "true", None):
        with pytest.raises(ValueError, match='"job"'):
            Catalogue.from_json({"catalogue": body["catalogue"], "actions": [plain, {**described, "job": bad}]})



def test_the_catalogue_is_valid_per_catalogue_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    referencing = pytest.importorskip("referencing")
    from zerobridge.conformance_peer import handlers_for

    schemas = [json.loads(p.read_text()) for p in (REPO / "protocol" / "schema").glob("*.json")]
    registry = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in schemas
    )
    schema = next(s for s in schemas if s["$id"].endswith("/catalogue.schema.json"))
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    peer = zerobridge.connect("tcp://127.0.0.1:1", name="p", handlers=handlers_for([]))
    body = peer.catalogue.to_json()
    assert validator.is_valid(body), list(validator.iter_errors(body))
    for action in body["actions"]:
        for part in ("payload", "result", "progress"):
            assert unknown_keywords(action.get(part, {})) == set()
    assert [a["name"] for a in body["actions"] if "progress" in a] == ["count"]


def test_the_conformance_peers_schemas_name_required_members_and_types() -> None:
    from zerobridge.conformance_peer import handlers_for

    catalogue = zerobridge.connect("tcp://127.0.0.1:1", name="p", handlers=handlers_for([])).catalogue
    assert catalogue["add"].payload["required"] == ["a", "b"]
    assert catalogue["count"].payload["properties"]["n"] == {"type": "integer", "minimum": 0}
    assert catalogue["count"].payload["required"] == ["n"]
    assert catalogue["count"].progress == {
        "type": "object", "title": "CountProgress", "properties": {"i": {"type": "integer"}, "n": {"type": "integer"}}, "required": ["i", "n"],
    }
    assert catalogue["callback"].payload["properties"]["timeout_ms"] == {"type": "integer", "minimum": 1}
    assert catalogue["echo"].payload == {} and catalogue["echo"].progress is None
    assert all(action.doc for action in catalogue)


# --- hello, $describe and welcome on the wire ------------------------------------------------------


def _request(request_id: str, action: str, payload: Any = None) -> dict[str, Any]:
    return {"v": 1, "type": "request", "id": request_id, "action": action, "payload": payload}


async def test_hello_carries_the_hash_and_describe_is_served(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", handlers={"add": add})
        async with peer:
            hello = await host.next("hello")
            assert hello["catalogue"] == peer.catalogue.hash
            assert len(hello["catalogue"]) == 64
            host.send(None, _request("d1", "$describe", {"ignored": True}))
            response = await host.next("response", id="d1", timeout=LONG)
            assert response["ok"] and response["result"] == peer.catalogue.to_json()
            assert response["result"]["catalogue"] == hello["catalogue"]
            assert response["result"]["catalogue"] == canonical.catalogue_hash(response["result"]["actions"])
            host.send(None, _request("a1", "$actions"))
            assert (await host.next("response", id="a1", timeout=LONG))["result"] == ["add"]  # $describe not listed


async def test_a_new_hello_carries_the_new_hash_when_handlers_change(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", handlers={"add": add})
        async with peer:
            first = (await host.next("hello"))["catalogue"]
            peer.add_handler("count", count, doc="Counts.")
            second = await host.next("hello", timeout=LONG)
            assert second["actions"] == ["add", "count"] and second["catalogue"] == peer.catalogue.hash != first
            peer.add_handler("count", count, doc="Counts differently.")  # the same actions, another contract
            third = await host.next("hello", timeout=LONG)
            assert third["actions"] == ["add", "count"] and third["catalogue"] not in (first, second["catalogue"])
            peer.remove_handler("count")
            assert (await host.next("hello", timeout=LONG))["catalogue"] == first
            host.send(None, _request("d", "$describe"))
            result = (await host.next("response", id="d", timeout=LONG))["result"]
            assert result["catalogue"] == first and [a["name"] for a in result["actions"]] == ["add"]


async def test_the_decorator_takes_the_describing_arguments(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p")

        @peer.handler("echo", doc="Echoes its payload.", payload={"type": "string"}, result=str)
        async def echo(payload: Any) -> Any:
            return payload

        async with peer:
            await host.next("hello")
            assert peer.catalogue["echo"] == ActionDescription("echo", "Echoes its payload.", {"type": "string"}, {"type": "string"})


CATALOGUE = Catalogue.of([
    ActionDescription("add", "Adds.", {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}, {"type": "number"}),
    ActionDescription("count", "Counts.", {"type": "integer"}, {}, {"type": "integer"}),
])


def catalogued_host(fake_host: type[FakeHost], catalogue: Catalogue | None = CATALOGUE, **options: Any) -> FakeHost:
    """A fake host whose welcome carries `catalogue`'s hash and which answers $describe with it."""

    class Catalogued(fake_host):  # type: ignore[misc, valid-type]
        served = catalogue

        def welcome(self, session: str) -> dict[str, Any]:
            body = super().welcome(session)
            if self.served is not None:
                body["catalogue"] = self.served.hash
            return body

    return Catalogued(**options)


async def answer_describe(host: FakeHost, times: int = 1) -> None:
    for _ in range(times):
        request = await host.next("request", action="$describe", timeout=LONG)
        served = getattr(host, "served", None)
        if served is None:
            host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": False,
                             "error": {"code": "unknown_action", "message": "no $describe here"}})
        else:
            host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": served.to_json()})


async def test_the_hosts_catalogue_hash_and_describe(fake_host: Any) -> None:
    async with catalogued_host(fake_host) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        assert peer.host_catalogue == CATALOGUE.hash
        answering = asyncio.ensure_future(answer_describe(host))
        catalogue = await peer.describe()
        await answering
        assert isinstance(catalogue, Catalogue) and catalogue == CATALOGUE
        assert catalogue.hash == peer.host_catalogue and catalogue["count"].progress == {"type": "integer"}
        sent = host.bodies("request")[-1]
        assert sent["action"] == "$describe" and sent["timeout_ms"] == 30000


async def test_a_host_without_a_catalogue(fake_host: Any) -> None:
    async with catalogued_host(fake_host, None) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        assert peer.host_catalogue is None
        answering = asyncio.ensure_future(answer_describe(host))
        with pytest.raises(UnknownAction):
            await peer.describe()
        await answering


async def test_an_answer_that_is_not_a_catalogue_is_bad_message(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        call = asyncio.ensure_future(peer.describe())
        request = await host.next("request", action="$describe", timeout=LONG)
        host.send(None, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": {"actions": "no"}})
        with pytest.raises(zerobridge.BridgeError) as caught:
            await call
        assert caught.value.code == "bad_message" and "not a catalogue" in caught.value.message


async def test_a_welcome_with_a_malformed_catalogue_is_answered_bad_message(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p") as peer:
        welcome = host.welcome(peer.session or "session-1")
        welcome["catalogue"] = "NOT-HEX"
        host.send(None, welcome)
        answer = await host.next("response", timeout=LONG)
        assert answer["error"]["code"] == "bad_message" and "catalogue" in answer["error"]["message"]
        assert peer.connected


def test_the_blocking_twin_describes_too(fake_host: Any) -> None:
    async def scenario() -> None:
        async with catalogued_host(fake_host) as host:
            def blocking() -> tuple[str | None, Catalogue, str]:
                with zerobridge.connect_sync(host.endpoint, name="twin", handlers={"add": add}) as peer:
                    return peer.host_catalogue, peer.describe(), peer.catalogue.hash

            answering = asyncio.ensure_future(answer_describe(host))
            host_hash, catalogue, own = await asyncio.to_thread(blocking)
            await answering
            assert host_hash == CATALOGUE.hash and catalogue == CATALOGUE
            assert (await host.next("hello"))["catalogue"] == own

    asyncio.run(asyncio.wait_for(scenario(), 30))


async def test_against_the_conformance_host_describe_agrees_with_its_welcome(host: Any) -> None:
    """The Swift host serves $describe from 1.3 on; until it does, it answers unknown_action and sends no hash. When it
    does, the hash in its welcome is its catalogue's, as this peer computes it too (RFC 8785 in both languages)."""
    async with zerobridge.connect(host.endpoint, name="describer") as peer:
        try:
            catalogue = await peer.describe()
        except UnknownAction:
            assert peer.host_catalogue is None
            return
        assert catalogue.computed_hash() == catalogue.hash
        if peer.host_catalogue is not None:
            assert peer.host_catalogue == catalogue.hash
        assert "echo" in catalogue and "$describe" not in catalogue
        committed = REPO / "protocol" / "fixtures" / "catalogues" / "conformance-host.json"
        if "once" in catalogue and committed.exists():  # `once` may have been released by another test
            assert catalogue.to_json() == json.loads(committed.read_text(encoding="utf-8"))
    # With the catalogue in hand, validate=True refuses what the host would refuse, before sending it.
    async with zerobridge.connect(host.endpoint, name="validator", validate=True) as peer:
        with pytest.raises(zerobridge.InvalidPayload, match='payload.a: expected a number, got the string "x"'):
            await peer.call("add", {"a": "x", "b": 1})
        assert await peer.call("add", {"a": 1, "b": 2}) == 3
