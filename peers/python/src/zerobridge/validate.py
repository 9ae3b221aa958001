"""A validator for the JSON Schema keywords SPEC 7.8 lists, for ``validate=True`` (SPEC 7.14).

:func:`first_error` checks a Python value (as it would be sent: ``dict``, ``list``/``tuple``, ``str``, numbers,
``bool``, ``None``, ``bytes``) against a schema and returns a message naming the path of the first part that does
not match and what was expected there, or None::

    >>> first_error({"a": 1, "b": "2"}, {"type": "object", "properties": {"b": {"type": "number"}}})
    'payload.b: expected a number, got the string "2"'

Understood: ``type`` (a name or a list), ``properties``, ``required``, ``additionalProperties``, ``items``,
``prefixItems``, ``enum``, ``const``, ``anyOf``, ``minimum``, ``maximum``, ``minLength``, ``maxLength`` (in code
points), ``minItems``, ``maxItems``, ``uniqueItems``; ``format``, ``title``, ``description``, ``$comment`` and
``contentEncoding`` are annotations and never fail. Any other keyword is ignored (a schema that needs it is taken as
"any value" there, as SPEC 7.8 tells generators to). Numbers compare by value (``1`` equals ``1.0``; ``true`` is not
``1``). ``bytes`` values match the bytes schema ``{"type": "string", "contentEncoding": "base64"}`` (they travel as
attachments), and any schema without a ``type``.
"""

from __future__ import annotations

import json
from typing import Any

from .values import item_path, member_path

_BINARY = (bytes, bytearray, memoryview)


def first_error(value: Any, schema: Any, path: str = "payload") -> str | None:
    """``"<path>: <what was expected>, got <what was there>"`` for the first mismatch, or None when ``value`` matches."""
    return _check(value, schema, path)


def _check(value: Any, schema: Any, path: str) -> str | None:
    if schema is False:
        return f"{path}: expected nothing here (the schema allows no value), got {_describe(value)}"
    if not isinstance(schema, dict) or not schema:
        return None  # true, {}, or not a schema at all: any value
    if "type" in schema:
        names = schema["type"]
        names = [names] if isinstance(names, str) else names
        if isinstance(names, list) and not any(_is_type(value, name, schema) for name in names):
            return f"{path}: expected {' or '.join(_type_words(name, schema) for name in names)}, got {_describe(value)}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{path}: expected {_json(schema['const'])}, got {_describe(value)}"
    if isinstance(schema.get("enum"), list) and not any(_equal(value, option) for option in schema["enum"]):
        options = ", ".join(_json(option) for option in schema["enum"][:10])
        more = ", ..." if len(schema["enum"]) > 10 else ""
        return f"{path}: expected one of {options}{more}, got {_describe(value)}"
    if isinstance(schema.get("anyOf"), list) and schema["anyOf"]:
        error = _any_of(value, schema["anyOf"], path)
        if error is not None:
            return error
    if _is_number(value):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if _is_number(minimum) and value < minimum:
            return f"{path}: expected a number >= {_json(minimum)}, got {_json(value)}"
        if _is_number(maximum) and value > maximum:
            return f"{path}: expected a number <= {_json(maximum)}, got {_json(value)}"
    elif isinstance(value, str):
        length = len(value)
        if _is_count(schema.get("minLength")) and length < schema["minLength"]:
            return f"{path}: expected a string of at least {schema['minLength']} characters, got {length}"
        if _is_count(schema.get("maxLength")) and length > schema["maxLength"]:
            return f"{path}: expected a string of at most {schema['maxLength']} characters, got {length}"
    elif isinstance(value, (list, tuple)):
        return _array(value, schema, path)
    elif isinstance(value, dict):
        return _object(value, schema, path)
    return None


def _any_of(value: Any, options: list[Any], path: str) -> str | None:
    errors = []
    for option in options:
        error = _check(value, option, path)
        if error is None:
            return None
        errors.append(error)
    # The alternatives whose type the value has say more than "expected A or B" (their failure is deeper inside).
    typed = [error for option, error in zip(options, errors) if not _type_mismatch(value, option)]
    if len(typed) == 1:
        return typed[0]
    wanted = " or ".join(_schema_words(option) for option in options)
    return f"{path}: expected {wanted}, got {_describe(value)}"


def _type_mismatch(value: Any, schema: Any) -> bool:
    if not isinstance(schema, dict):
        return schema is False
    if "type" in schema:
        names = schema["type"]
        names = [names] if isinstance(names, str) else names
        if isinstance(names, list) and not any(_is_type(value, name, schema) for name in names):
            return True
    if "const" in schema and not _equal(value, schema["const"]):
        return True
    if isinstance(schema.get("enum"), list) and not any(_equal(value, option) for option in schema["enum"]):
        return True
    return False


def _array(value: list[Any] | tuple[Any, ...], schema: dict[str, Any], path: str) -> str | None:
    count = len(value)
    if _is_count(schema.get("minItems")) and count < schema["minItems"]:
        return f"{path}: expected an array of at least {schema['minItems']} items, got {count}"
    if _is_count(schema.get("maxItems")) and count > schema["maxItems"]:
        return f"{path}: expected an array of at most {schema['maxItems']} items, got {count}"
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    for index, item_schema in enumerate(prefix[:count]):
        error = _check(value[index], item_schema, item_path(path, index))
        if error is not None:
            return error
    if "items" in schema:
        items = schema["items"]
        for index in range(len(prefix), count):
            if items is False:
                return f"{item_path(path, index)}: expected no item here (at most {len(prefix)} items), got {_describe(value[index])}"
            error = _check(value[index], items, item_path(path, index))
            if error is not None:
                return error
    if schema.get("uniqueItems") is True:
        for later in range(1, count):
            for earlier in range(later):
                if _equal(value[earlier], value[later]):
                    return f"{item_path(path, later)}: expected unique items, got a repeat of item {earlier}"
    return None


def _object(value: dict[Any, Any], schema: dict[str, Any], path: str) -> str | None:
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in value:
                expected = ""
                properties = schema.get("properties")
                if isinstance(properties, dict) and name in properties:
                    expected = f" ({_schema_words(properties[name])})"
                return f"{path}: the required member {json.dumps(name)}{expected} is missing"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    additional = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = member_path(path, name) if isinstance(name, str) else f"{path}[{name!r}]"
        if name in properties:
            error = _check(item, properties[name], where)
        elif additional is False:
            return f"{where}: expected no member {json.dumps(name) if isinstance(name, str) else repr(name)} (the object allows only {', '.join(map(json.dumps, properties)) or 'none'})"
        else:
            error = _check(item, additional, where)
        if error is not None:
            return error
    return None


# --- types and words -------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_type(value: Any, name: Any, schema: dict[str, Any]) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return _is_number(value)
    if name == "string":
        return isinstance(value, str) or (isinstance(value, _BINARY) and schema.get("contentEncoding") == "base64")
    if name == "array":
        return isinstance(value, (list, tuple))
    if name == "object":
        return isinstance(value, dict)
    return True  # a type name this validator does not know: not its to refuse


def _type_words(name: Any, schema: dict[str, Any]) -> str:
    if name == "string" and schema.get("contentEncoding") == "base64":
        return "bytes (or base64 text)"
    return {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a number",
            "string": "a string", "array": "an array", "object": "an object"}.get(name, str(name))


def _schema_words(schema: Any) -> str:
    """A few words for what ``schema`` expects: ``an integer``, ``null``, ``one of "a", "b"``."""
    if not isinstance(schema, dict) or not schema:
        return "any value" if schema is not False else "nothing"
    if "const" in schema:
        return _json(schema["const"])
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(_json(option) for option in schema["enum"][:10])
    names = schema.get("type")
    if isinstance(names, str):
        names = [names]
    if isinstance(names, list) and names:
        return " or ".join(_type_words(name, schema) for name in names)
    if isinstance(schema.get("anyOf"), list):
        return " or ".join(_schema_words(option) for option in schema["anyOf"])
    return "a value matching its schema"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return _json(value)
    if isinstance(value, str):
        text = json.dumps(value if len(value) <= 40 else value[:37] + "...", ensure_ascii=False)
        return f"the string {text}"
    if isinstance(value, _BINARY):
        return f"{len(value)} bytes"
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, booleans apart from numbers, arrays item by item, objects member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[key], b[key]) for key in a)
    if isinstance(a, _BINARY) and isinstance(b, _BINARY):
        return bytes(a) == bytes(b)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        return False
    return bool(a == b)


__all__ = ["first_error"]
