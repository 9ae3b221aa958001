"""Catalogues (SPEC 7.8): what ``$describe`` answers, built from a peer's handlers, and read from a host's answer.

A catalogue is ``{"catalogue": hash, "actions": [description, ...]}``, the descriptions sorted by name (by UTF-16
code units), each ``{"name", "doc", "payload", "result", "progress"?}``; the hash is the SHA-256 of the RFC 8785
form of ``actions`` (:mod:`zerobridge.canonical`).

:func:`describe_handler` makes one description from a handler: its schemas come from the handler's type hints
(:mod:`zerobridge.schema`) unless given explicitly, and its ``doc`` from the first line of its docstring.
:class:`Catalogue` is the typed form of a ``$describe`` result, as :meth:`zerobridge.Peer.describe` returns it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from . import canonical, schema, values

# Given for an argument that was not given (None is not: it is no schema).
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


@dataclasses.dataclass(frozen=True, slots=True)
class ActionDescription:
    """One action's contract: ``doc`` (one line), and the JSON Schemas of its ``payload``, ``result`` and, for an
    action that sends progress, ``progress`` (None otherwise). ``{}`` is any value. ``job`` is True for an action
    the host serves as a job (SPEC 7.16), which a description carries as ``"job": true``."""

    name: str
    doc: str = ""
    payload: schema.Schema = dataclasses.field(default_factory=dict)
    result: schema.Schema = dataclasses.field(default_factory=dict)
    progress: schema.Schema | None = None
    job: bool = False

    def to_json(self) -> dict[str, Any]:
        """The description as ``$describe`` carries it."""
        body: dict[str, Any] = {"name": self.name, "doc": self.doc, "payload": self.payload, "result": self.result}
        if self.progress is not None:
            body["progress"] = self.progress
        if self.job:
            body["job"] = True
        return body

    @classmethod
    def from_json(cls, value: Any) -> ActionDescription:
        """A description from its JSON; ValueError when it is not one."""
        if not isinstance(value, dict):
            raise ValueError("a description is an object")
        name, doc = value.get("name"), value.get("doc")
        if not (isinstance(name, str) and 1 <= len(name) <= 128):
            raise ValueError(f'a description\'s "name" must be a string of 1..128 characters, not {name!r}')
        if not isinstance(doc, str):
            raise ValueError(f'the description of {name!r} has no "doc" string')
        parts = {}
        for part in ("payload", "result", "progress"):
            if part not in value:
                if part != "progress":
                    raise ValueError(f'the description of {name!r} has no "{part}" schema')
                continue
            if not isinstance(value[part], (dict, bool)):
                raise ValueError(f'the "{part}" schema of {name!r} is not a schema (an object or a boolean)')
            parts[part] = value[part]
        job = value.get("job", False)
        if "job" in value and job is not True:
            raise ValueError(f'the description of {name!r} has "job" {job!r}: it is true when present')
        return cls(name=name, doc=doc, job=job, **parts)


def _utf16(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


@dataclasses.dataclass(frozen=True, slots=True)
class Catalogue:
    """A ``$describe`` result: ``hash`` (the ``catalogue`` member) and the ``actions`` by name.

    ``catalogue["add"]`` (or ``.get("add")``) is that action's :class:`ActionDescription`; ``"add" in catalogue``,
    ``len(catalogue)`` and iterating (descriptions, sorted by name) work as expected; :meth:`to_json` gives the JSON
    back, and :meth:`computed_hash` the hash of ``actions`` as this side computes it."""

    hash: str
    actions: tuple[ActionDescription, ...]

    @classmethod
    def of(cls, descriptions: Iterable[ActionDescription]) -> Catalogue:
        """The catalogue of these descriptions (sorted by name by UTF-16 code units; reserved names left out)."""
        ordered = tuple(sorted((d for d in descriptions if not d.name.startswith("$")), key=lambda d: _utf16(d.name)))
        return cls(hash=canonical.catalogue_hash([d.to_json() for d in ordered]), actions=ordered)

    @classmethod
    def from_json(cls, value: Any) -> Catalogue:
        """A catalogue from a ``$describe`` result; ValueError when it is not one."""
        if not isinstance(value, dict):
            raise ValueError("a catalogue is an object")
        digest, actions = value.get("catalogue"), value.get("actions")
        if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
            raise ValueError('a catalogue\'s "catalogue" must be 64 lowercase hex digits')
        if not isinstance(actions, list):
            raise ValueError('a catalogue\'s "actions" must be an array')
        return cls(hash=digest, actions=tuple(ActionDescription.from_json(action) for action in actions))

    def to_json(self) -> dict[str, Any]:
        """``{"catalogue": hash, "actions": [...]}``, as ``$describe`` answers."""
        return {"catalogue": self.hash, "actions": [action.to_json() for action in self.actions]}

    def computed_hash(self) -> str:
        """The hash of ``actions`` computed here (equal to ``hash`` for a catalogue that is what it says)."""
        return canonical.catalogue_hash([action.to_json() for action in self.actions])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(action.name for action in self.actions)

    def get(self, name: str) -> ActionDescription | None:
        """The description of the action called ``name``, or None when the catalogue has none (``catalogue[name]``
        raises KeyError instead)."""
        for action in self.actions:
            if action.name == name:
                return action
        return None

    def __getitem__(self, name: str) -> ActionDescription:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[ActionDescription]:
        return iter(self.actions)

    def __len__(self) -> int:
        return len(self.actions)


def explicit_schema(value: Any, what: str) -> schema.Schema:
    """A schema given by hand: a JSON Schema (a dict, or a bool), or a type to derive one from."""
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        value = dict(value)
        try:
            values.check(value, what, depth=1)
        except values.UnsendableValue as error:
            raise ValueError(f"the {what} schema is not JSON: {error.message}") from None
        return value
    return schema.schema_of(value)  # a type (an annotation)


def describe_handler(
    name: str,
    function: Any,
    *,
    context_class: type,
    doc: str | None = None,
    payload: Any = UNSET,
    result: Any = UNSET,
    progress: Any = UNSET,
) -> ActionDescription:
    """The description of the action ``name`` served by ``function``.

    ``doc`` defaults to the first line of the function's docstring. ``payload`` and ``result`` default to the
    schemas of the function's payload parameter and return annotations; ``progress`` to that of ``T`` when its
    second parameter is annotated ``context_class[T]``, else the action has none. Each may be given as a JSON Schema
    (a dict) or as a type to derive it from; ``progress=None`` says the action sends no progress."""
    hints = schema.handler_hints(function, context_class)
    if doc is None:
        doc = schema.first_line(function)
    elif not isinstance(doc, str):
        raise TypeError(f"doc for {name!r} must be a string")
    if "\n" in doc or "\r" in doc:
        doc = " ".join(doc.split())  # one line for people (SPEC 7.8)
    payload_schema = schema.schema_of(hints.payload) if payload is UNSET else explicit_schema(payload, "payload")
    result_schema = schema.schema_of(hints.result) if result is UNSET else explicit_schema(result, "result")
    if progress is UNSET:
        progress_schema = None if hints.progress is None else schema.schema_of(hints.progress)
    else:
        progress_schema = None if progress is None else explicit_schema(progress, "progress")
    return ActionDescription(name, doc, payload_schema, result_schema, progress_schema)


__all__ = ["ActionDescription", "Catalogue", "UNSET", "describe_handler", "explicit_schema"]
