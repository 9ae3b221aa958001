"""JSON Schemas derived from Python type hints, for ``$describe`` (SPEC 7.8).

:func:`schema_of` turns an annotation into a JSON Schema (draft 2020-12) of the JSON value it stands for, using only
the keywords SPEC 7.8 lists (``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``prefixItems``, ``enum``, ``const``, ``anyOf``, ``minimum``, ... ``title``, ``$comment``)::

    >>> schema_of(list[int] | None)
    {'anyOf': [{'type': 'array', 'items': {'type': 'integer'}}, {'type': 'null'}]}

| annotation                                        | schema                                                     |
| ------------------------------------------------- | ---------------------------------------------------------- |
| ``int`` / ``float`` / ``str`` / ``bool`` / ``None`` | ``integer`` / ``number`` (ints accepted) / ``string`` / ``boolean`` / ``null`` |
| ``bytes``, ``bytearray``, ``memoryview``          | ``{"type": "string", "contentEncoding": "base64"}``        |
| ``list[X]``, ``Sequence[X]``, ``tuple[X, ...]``   | ``{"type": "array", "items": X}``                          |
| ``tuple[X, Y]``                                   | ``prefixItems`` [X, Y], ``items: false``, min/maxItems 2  |
| ``set[X]``, ``frozenset[X]``                      | an array with ``uniqueItems`` (send a list: sets are refused, SPEC 7.14) |
| ``dict[str, X]``, ``Mapping[str, X]``             | ``{"type": "object", "additionalProperties": X}``          |
| ``X | None``, ``Optional[X]``, ``Union[X, Y]``    | ``{"anyOf": [X, Y]}``                                      |
| ``Literal["a", "b"]`` / ``Literal["a"]``          | ``{"enum": ["a", "b"]}`` / ``{"const": "a"}``              |
| an ``Enum`` subclass                              | ``{"enum": [its members' values]}``                        |
| a ``TypedDict``, a dataclass                      | ``{"type": "object", "title": Name, "properties": ..., "required": [...]}`` |
| ``Annotated[X, {"minimum": 0}]``                  | X's schema with those keywords added                       |
| ``NewType``, a ``TypeVar`` with a bound           | the underlying type's                                      |
| ``Any``, ``object``, no annotation                | ``{}`` (any value)                                         |

A ``TypedDict``'s required members follow ``total=False``, ``Required[...]`` and ``NotRequired[...]``; a dataclass's
are its fields without a default. A type met again inside itself, and a class that is none of the above, are
described as any value with a ``$comment`` saying why. The schema describes JSON: a handler whose payload is
annotated with a TypedDict, a dataclass or an Enum still receives plain JSON data (a ``dict``, a ``str``), and must
return plain data too (a dataclass instance is refused, SPEC 7.14: return ``dataclasses.asdict(...)``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import types
import typing
from typing import Any

Schema = dict[str, Any] | bool

BYTES_SCHEMA: dict[str, Any] = {"type": "string", "contentEncoding": "base64"}

# The keywords SPEC 7.8 allows in a schema (with contentEncoding, which the bytes schema uses).
KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const", "anyOf",
        "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "format", "title",
        "description", "$comment", "contentEncoding",
    }
)

_ARRAYS = {
    list, tuple, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
    collections.abc.Collection, collections.deque,
}
_SETS = {set, frozenset, collections.abc.Set, collections.abc.MutableSet}
_OBJECTS = {dict, collections.abc.Mapping, collections.abc.MutableMapping, collections.OrderedDict, collections.defaultdict}
_WRAPPERS = {typing.Required, typing.NotRequired, typing.ClassVar, typing.Final}
_NONE_TYPE = type(None)


def schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of the JSON values ``annotation`` stands for (see the module docstring). Never raises: what
    cannot be followed is described as any value with a ``$comment`` saying why."""
    try:
        return _Deriver().schema(annotation)
    except Exception as error:  # an annotation too strange to follow must not stop a handler from being served
        return _not_derivable(annotation, f"{type(error).__name__}: {error}")


class _Deriver:
    def __init__(self) -> None:
        self.expanding: list[type] = []  # TypedDicts and dataclasses being described, outermost first

    def schema(self, annotation: Any) -> dict[str, Any]:
        if annotation is inspect.Parameter.empty or annotation is Any or annotation is object:
            return {}
        if annotation is None or annotation is _NONE_TYPE:
            return {"type": "null"}
        if isinstance(annotation, (str, typing.ForwardRef)):
            name = annotation if isinstance(annotation, str) else annotation.__forward_arg__
            return {"$comment": f"not derivable from {name!r}: the name could not be resolved"}
        origin = typing.get_origin(annotation)
        arguments = typing.get_args(annotation)
        if origin is typing.Annotated:
            schema = self.schema(arguments[0])
            for extra in annotation.__metadata__:
                if isinstance(extra, dict):
                    schema = {**schema, **extra}
            return schema
        if origin in _WRAPPERS:
            return self.schema(arguments[0]) if arguments else {}
        if origin is typing.Union or origin is types.UnionType:
            return {"anyOf": [self.schema(argument) for argument in arguments]}
        if origin is typing.Literal:
            constants = [value.value if isinstance(value, enum.Enum) else value for value in arguments]
            return {"const": constants[0]} if len(constants) == 1 else {"enum": constants}
        if annotation is typing.NoReturn or annotation is getattr(typing, "Never", None):
            return {"$comment": "never returns: the action always fails"}
        if origin is not None:
            return self._generic(annotation, origin, arguments)
        if isinstance(annotation, typing.TypeVar):
            if annotation.__bound__ is not None:
                return self.schema(annotation.__bound__)
            if annotation.__constraints__:
                return {"anyOf": [self.schema(constraint) for constraint in annotation.__constraints__]}
            return {}
        supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
        if supertype is not None:
            return self.schema(supertype)
        if not isinstance(annotation, type):
            return _not_derivable(annotation, "it is not a type")
        return self._class(annotation)

    def _class(self, cls: type) -> dict[str, Any]:
        if issubclass(cls, enum.Enum):
            return self._enum(cls)
        if cls is bool:
            return {"type": "boolean"}
        if issubclass(cls, int) and cls is not bool:
            return {"type": "integer"}
        if issubclass(cls, float):
            return {"type": "number"}
        if issubclass(cls, str):
            return {"type": "string"}
        if issubclass(cls, (bytes, bytearray, memoryview)):
            return dict(BYTES_SCHEMA)
        if typing.is_typeddict(cls):
            return self._expand(cls, self._typed_dict)
        if dataclasses.is_dataclass(cls):
            return self._expand(cls, self._dataclass)
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a NamedTuple: JSON writes it as an array
            return self._expand_named_tuple(cls)
        if cls in _ARRAYS or issubclass(cls, (list, tuple)):
            return {"type": "array"}
        if cls in _SETS:
            return {"type": "array", "uniqueItems": True}
        if cls in _OBJECTS or issubclass(cls, dict):
            return {"type": "object"}
        return _not_derivable(cls, "a class that is not plain JSON data")

    def _generic(self, annotation: Any, origin: Any, arguments: tuple[Any, ...]) -> dict[str, Any]:
        if origin is tuple:
            if len(arguments) == 2 and arguments[1] is Ellipsis:
                return self._array(arguments[0])
            if not arguments:  # tuple[()]: the empty tuple
                return {"type": "array", "maxItems": 0}
            return {
                "type": "array",
                "prefixItems": [self.schema(argument) for argument in arguments],
                "items": False,
                "minItems": len(arguments),
                "maxItems": len(arguments),
            }
        if origin in _ARRAYS:
            return self._array(arguments[0] if arguments else Any)
        if origin in _SETS:
            return {**self._array(arguments[0] if arguments else Any), "uniqueItems": True}
        if origin in _OBJECTS:
            schema: dict[str, Any] = {"type": "object"}
            if len(arguments) == 2:
                values = self.schema(arguments[1])
                if values:
                    schema["additionalProperties"] = values
            return schema
        if isinstance(origin, type) and (typing.is_typeddict(origin) or dataclasses.is_dataclass(origin)):
            return self._class(origin)  # a generic TypedDict or dataclass: its parameters are not followed
        return _not_derivable(annotation, "a generic type that is not plain JSON data")

    def _array(self, item: Any) -> dict[str, Any]:
        items = self.schema(item)
        return {"type": "array", "items": items} if items else {"type": "array"}

    def _enum(self, cls: type[enum.Enum]) -> dict[str, Any]:
        values = [member.value for member in cls]
        if not all(value is None or isinstance(value, (bool, int, float, str)) for value in values):
            return _not_derivable(cls, "its values are not all JSON numbers, strings, booleans or null")
        return {"enum": values}

    def _expand(self, cls: type, describe: Any) -> dict[str, Any]:
        if cls in self.expanding:
            return {"$comment": f"{cls.__name__} contains itself: described as any value"}
        self.expanding.append(cls)
        try:
            properties, required = describe(cls)
        finally:
            self.expanding.pop()
        schema: dict[str, Any] = {"type": "object", "title": cls.__name__, "properties": properties}
        if required:
            schema["required"] = required
        return schema

    def _expand_named_tuple(self, cls: type) -> dict[str, Any]:
        if cls in self.expanding:
            return {"$comment": f"{cls.__name__} contains itself: described as any value"}
        self.expanding.append(cls)
        try:
            hints = _class_hints(cls)
            items = [self.schema(hints.get(name, Any)) for name in cls._fields]  # type: ignore[attr-defined]
        finally:
            self.expanding.pop()
        return {"type": "array", "title": cls.__name__, "prefixItems": items, "items": False,
                "minItems": len(items), "maxItems": len(items)}

    def _typed_dict(self, cls: type) -> tuple[dict[str, Any], list[str]]:
        hints = _class_hints(cls)
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, hint in hints.items():
            origin = typing.get_origin(_strip_annotated(hint))
            # Required/NotRequired win over totality (and are read here, since with `from __future__ import
            # annotations` Python 3.11 does not see them in __required_keys__).
            if origin is typing.Required or (origin is not typing.NotRequired and name in required_keys):
                required.append(name)
            properties[name] = self.schema(hint)
        return properties, required

    def _dataclass(self, cls: type) -> tuple[dict[str, Any], list[str]]:
        hints = _class_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in dataclasses.fields(cls):
            properties[field.name] = self.schema(hints.get(field.name, field.type))
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                required.append(field.name)
        return properties, required


def _strip_annotated(hint: Any) -> Any:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def _class_hints(cls: type) -> dict[str, Any]:
    """The annotations of a TypedDict or dataclass, resolved where they can be (Required/NotRequired kept)."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a name that cannot be resolved (a class local to a function): resolve one at a time
        pass
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        module = inspect.getmodule(klass)
        namespace = dict(vars(module)) if module is not None else {}
        for name, hint in klass.__dict__.get("__annotations__", {}).items():
            hints[name] = _resolve(hint, namespace)
    return hints


def _resolve(hint: Any, namespace: dict[str, Any]) -> Any:
    if isinstance(hint, str):
        try:
            return eval(hint, namespace)  # noqa: S307 - an annotation of the program's own code
        except Exception:
            return hint
    return hint


def _not_derivable(annotation: Any, why: str) -> dict[str, Any]:
    name = getattr(annotation, "__qualname__", None) or repr(annotation)
    return {"$comment": f"not derivable from {name}: {why}"}


# --- handlers --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class HandlerHints:
    """What a handler's signature says: its payload, result and progress annotations (``inspect.Parameter.empty``
    when there is none; ``progress`` is None when the handler declares no progress)."""

    payload: Any
    result: Any
    progress: Any


def handler_hints(function: Any, context_class: type) -> HandlerHints:
    """The annotations of ``function``'s payload parameter (its first positional one), of its return value, and the
    ``T`` of a second parameter annotated ``context_class[T]`` (the progress payload's type)."""
    empty = inspect.Parameter.empty
    try:
        signature = inspect.signature(function, eval_str=True)
    except ValueError:  # no signature to be had (some builtins)
        return HandlerHints(empty, empty, None)
    except Exception:  # an annotation that does not evaluate (a name local to a function): one at a time below
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            return HandlerHints(empty, empty, None)
    namespace = _namespace(function)
    positional = [
        parameter
        for parameter in signature.parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]
    payload = _resolve(positional[0].annotation, namespace) if positional else empty
    result = _unwrap_awaitable(_resolve(signature.return_annotation, namespace))
    progress = None
    if len(positional) >= 2:
        context = _strip_annotated(_resolve(positional[1].annotation, namespace))
        if typing.get_origin(context) is context_class:
            arguments = typing.get_args(context)
            progress = arguments[0] if arguments else Any
    return HandlerHints(payload, result, progress)


def _namespace(function: Any) -> dict[str, Any]:
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method
    target = inspect.unwrap(target) if callable(target) else target
    namespace = getattr(target, "__globals__", None)
    if namespace is None:
        namespace = getattr(getattr(type(target), "__call__", None), "__globals__", {})
    return dict(namespace)


def _unwrap_awaitable(annotation: Any) -> Any:
    """``Awaitable[T]`` and ``Coroutine[..., T]`` (what a sync function returning a coroutine declares) as ``T``."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (collections.abc.Awaitable, collections.abc.Coroutine) and arguments:
        return arguments[-1]
    return annotation


def first_line(function: Any) -> str:
    """The first line of ``function``'s docstring ("" without one)."""
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    doc = inspect.getdoc(target) if inspect.isroutine(target) or not callable(target) else _call_doc(target)
    if not doc:
        return ""
    return doc.strip().splitlines()[0].strip()


def _call_doc(target: Any) -> str | None:
    """The doc of a callable object: its own ``__call__``'s docstring, else its class's."""
    for klass in type(target).__mro__:
        if klass is object:
            break
        call = klass.__dict__.get("__call__")
        if call is not None:
            if getattr(call, "__doc__", None):
                return inspect.cleandoc(call.__doc__)
            break
    return inspect.getdoc(type(target))


def unknown_keywords(schema: Any) -> set[str]:
    """The keywords of ``schema`` (and of the schemas inside it) outside SPEC 7.8's list."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key not in KEYWORDS:
                found.add(key)
            if key == "properties" and isinstance(value, dict):
                for item in value.values():
                    found |= unknown_keywords(item)
            elif key in ("items", "additionalProperties"):
                found |= unknown_keywords(value)
            elif key in ("prefixItems", "anyOf") and isinstance(value, list):
                for item in value:
                    found |= unknown_keywords(item)
    return found


__all__ = ["BYTES_SCHEMA", "KEYWORDS", "HandlerHints", "Schema", "first_line", "handler_hints", "schema_of"]
