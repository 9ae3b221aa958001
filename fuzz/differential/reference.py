"""Corpora for the differential tests, with the reference's answers: each language's hand-written code is run on the
same inputs and must agree byte for byte (canonical JSON) or verdict for verdict (schemas).

    python fuzz/differential/reference.py canonical [--seed 1] [--count 3000]
        one JSON line per value: {"text": the value as JSON text, "canonical": RFC 8785's form, by PyPI's rfc8785,
        "equivalent_names": whether an object in it has two names that differ only in Unicode normalization}
    python fuzz/differential/reference.py schemas [--seed 1] [--count 3000]
        one JSON line per pair: {"schema": ..., "instance": ..., "valid": the verdict of PyPI's jsonschema (2020-12)}

The values are random, from a seed (a test names its seed, so a failure replays): numbers at the edges of ECMAScript's
formatting (1e21, 1e-7, subnormals, integers up to 2^53), strings with every kind of escape and characters that sort
differently by code point and by UTF-16 code unit, nested arrays and objects. The schemas are those of the protocol's
catalogues (the conformance host's and the import service's) and random ones made of SPEC 7.8's keywords; the
instances are made to match them, then often broken in one place.

`contentEncoding` is left out of the schemas: JSON Schema makes it an annotation, while SPEC 7.8 gives it a meaning
(bytes, as an attachment or base64 text) that the Node validator checks on strings; that difference is intended.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import rfc8785

ROOT = Path(__file__).resolve().parent.parent.parent
CATALOGUES = [ROOT / "protocol/fixtures/catalogues/conformance-host.json", ROOT / "examples/import-service.catalogue.json"]
SAFE_INTEGER = 2**53 - 1

# Characters that JSON escapes, that sort apart by code point and UTF-16 (U+FB01 vs U+1F600), that need four UTF-8
# bytes, line separators JSON does not escape, combining marks (NFC and NFD of one text are different keys).
ALPHABET = ['a', 'b', 'z', 'A', '0', '9', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\x00', '\x1f', '\x7f',
            'é', 'e\u0301', '€', '\u2028', '\u2029', '\ufb01', '\U0001f600', '\U0010ffff', '\ufeff', '\u00a0', 'ß', '中']
NUMBERS = [0.0, -0.0, 0.1, 0.5, 1.5, 1e21, 1e20, 1e-6, 1e-7, 1.1e-7, 5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, 123456789012345680000.0, 4.35, 0.000001234, 9007199254740992.0, 333333333.33333329,
           1e23, 2**-1074 * 3, 100.0]


def random_string(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.choice([0, 1, 2, 3, 5, 8, 20])))


def random_number(rng: random.Random) -> int | float:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice([0, 1, -1, SAFE_INTEGER, -SAFE_INTEGER, 10**15, 2**31, -(2**31)])
    if kind == 1:
        return rng.randint(-SAFE_INTEGER, SAFE_INTEGER) >> rng.randrange(53)
    if kind == 2:
        return rng.choice(NUMBERS) * rng.choice([1, -1])
    if kind == 3:  # any finite double, from its bits
        while True:
            value = float.fromhex(f"{rng.choice('+-')}0x1.{rng.getrandbits(52):013x}p{rng.randint(-1074, 1023)}")
            if value == value and abs(value) != float("inf"):
                return value
    if kind == 4:  # a short decimal, as people write them
        return round(rng.uniform(-1000, 1000), rng.randrange(6))
    return rng.randint(-10**6, 10**6) * 10.0 ** rng.randint(-30, 30)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind in (1, 2):
        return random_number(rng)
    if kind in (3, 4):
        return random_string(rng)
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {random_string(rng): random_value(rng, depth + 1) for _ in range(rng.randrange(6))}


def has_equivalent_names(value: Any) -> bool:
    """Whether an object in `value` has two names that are canonically equivalent (equal once NFC-normalized)."""
    if isinstance(value, dict):
        if len({unicodedata.normalize("NFC", name) for name in value}) < len(value):
            return True
        return any(has_equivalent_names(item) for item in value.values())
    if isinstance(value, list):
        return any(has_equivalent_names(item) for item in value)
    return False


def canonical_cases(seed: int, count: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for _ in range(count):
        value = random_value(rng)
        yield {"text": json.dumps(value, ensure_ascii=rng.random() < 0.5), "canonical": rfc8785.dumps(value).decode(),
               "equivalent_names": has_equivalent_names(value)}


# --- schemas --------------------------------------------------------------------------------------------------------

TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


def catalogue_schemas() -> list[Any]:
    schemas = []
    for path in CATALOGUES:
        document = json.loads(path.read_text())
        for action in document["actions"] if isinstance(document, dict) else document:
            schemas.extend(action[part] for part in ("payload", "result", "progress") if part in action)
    return [without_content_encoding(schema) for schema in schemas]


def without_content_encoding(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: without_content_encoding(v) for k, v in schema.items() if k != "contentEncoding"}
    if isinstance(schema, list):
        return [without_content_encoding(v) for v in schema]
    return schema


def random_schema(rng: random.Random, depth: int = 0) -> Any:
    if rng.random() < 0.05:
        return rng.choice([True, False, {}])
    schema: dict[str, Any] = {}
    kind = rng.choice(TYPES + ["any", "anyOf", "enum", "const"])
    if kind == "anyOf" and depth < 3:
        schema["anyOf"] = [random_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    elif kind == "enum":
        schema["enum"] = [random_value(rng, 3) for _ in range(rng.randint(1, 4))]
    elif kind == "const":
        schema["const"] = random_value(rng, 3)
    elif kind in TYPES:
        schema["type"] = kind if rng.random() < 0.8 else rng.sample(TYPES, rng.randint(1, 3))
    names = schema.get("type") if isinstance(schema.get("type"), list) else [schema.get("type")]
    if "integer" in names or "number" in names:
        if rng.random() < 0.5:
            schema["minimum"] = random_number(rng) if rng.random() < 0.3 else rng.randint(-5, 5)
        if rng.random() < 0.5:
            schema["maximum"] = random_number(rng) if rng.random() < 0.3 else rng.randint(-5, 50)
    if "string" in names:
        if rng.random() < 0.5:
            schema["minLength"] = rng.randint(0, 4)
        if rng.random() < 0.5:
            schema["maxLength"] = rng.randint(0, 8)
        if rng.random() < 0.2:
            schema["format"] = rng.choice(["date-time", "uuid", "uri", "email"])  # an annotation: never fails
    if "array" in names and depth < 3:
        if rng.random() < 0.4:
            schema["prefixItems"] = [random_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.7:
            schema["items"] = random_schema(rng, depth + 1) if rng.random() < 0.85 else False
        for keyword in ("minItems", "maxItems"):
            if rng.random() < 0.3:
                schema[keyword] = rng.randint(0, 4)
        if rng.random() < 0.3:
            schema["uniqueItems"] = rng.random() < 0.8
    if "object" in names and depth < 3:
        names_ = list(dict.fromkeys(random_string(rng) or "k" for _ in range(rng.randint(0, 4))))
        schema["properties"] = {name: random_schema(rng, depth + 1) for name in names_}
        if names_ and rng.random() < 0.6:
            schema["required"] = rng.sample(names_, rng.randint(1, len(names_)))
        if rng.random() < 0.4:
            schema["additionalProperties"] = False if rng.random() < 0.6 else random_schema(rng, depth + 1)
    for annotation in ("title", "description", "$comment"):
        if rng.random() < 0.1:
            schema[annotation] = random_string(rng)
    return schema


def instance_of(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A value made to match `schema` (often it does; where constraints conflict, it may not: the verdict decides)."""
    if schema is True or schema == {} or not isinstance(schema, dict) or depth > 6:
        return random_value(rng, 3)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema:
        return copy.deepcopy(rng.choice(schema["enum"]))
    if "anyOf" in schema:
        return instance_of(rng.choice(schema["anyOf"]), rng, depth + 1)
    names = schema.get("type", rng.choice(TYPES))
    name = rng.choice(names) if isinstance(names, list) else names
    if name == "null":
        return None
    if name == "boolean":
        return rng.random() < 0.5
    if name in ("integer", "number"):
        low = schema.get("minimum", -100)
        high = schema.get("maximum", low + 100)
        value = rng.uniform(min(low, high), max(low, high)) if rng.random() < 0.5 else rng.choice([low, high])
        if name == "integer" or rng.random() < 0.3:
            value = int(value) if abs(value) < 2**62 else value
        return value
    if name == "string":
        length = rng.randint(schema.get("minLength", 0), max(schema.get("minLength", 0), schema.get("maxLength", 6)))
        return "".join(rng.choice(ALPHABET[:20] + ["é", "\U0001f600"]) for _ in range(length))
    if name == "array":
        prefix = schema.get("prefixItems", [])
        count = rng.randint(schema.get("minItems", 0), max(schema.get("minItems", 0), schema.get("maxItems", 4)))
        items = [instance_of(prefix[i], rng, depth + 1) if i < len(prefix) else instance_of(schema.get("items", True), rng, depth + 1)
                 for i in range(count)]
        return items
    if name == "object":
        properties = schema.get("properties", {})
        value = {key: instance_of(sub, rng, depth + 1) for key, sub in properties.items()
                 if key in schema.get("required", []) or rng.random() < 0.6}
        if schema.get("additionalProperties") is not False and rng.random() < 0.3:
            value[random_string(rng) or "extra"] = instance_of(schema.get("additionalProperties", True), rng, depth + 1)
        return value
    return random_value(rng, 3)


def broken(value: Any, rng: random.Random) -> Any:
    """`value` changed in one place: a member dropped or added, an item added, a leaf replaced by another value."""
    if isinstance(value, dict) and value and rng.random() < 0.5:
        key = rng.choice(list(value))
        if rng.random() < 0.4:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: broken(value[key], rng)}
    if isinstance(value, dict) and rng.random() < 0.3:
        return {**value, random_string(rng) or "extra": random_value(rng, 3)}
    if isinstance(value, list) and value and rng.random() < 0.6:
        index = rng.randrange(len(value))
        if rng.random() < 0.3:
            return value + [copy.deepcopy(value[index])]  # a repeat: uniqueItems
        return value[:index] + [broken(value[index], rng)] + value[index + 1:]
    return rng.choice([random_value(rng, 3), None, True, 1, 1.0, 1.5, -1, "", "x", [], {}, 2**53 - 1])


def schema_cases(seed: int, count: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    known = catalogue_schemas()
    for index in range(count):
        schema = known[index % len(known)] if index % 3 == 0 else random_schema(rng)
        instance = instance_of(schema, rng)
        if rng.random() < 0.5:
            instance = broken(instance, rng)
        valid = jsonschema.Draft202012Validator(schema).is_valid(instance)
        yield {"schema": schema, "instance": instance, "valid": valid}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", choices=["canonical", "schemas"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=3000)
    options = parser.parse_args()
    cases = canonical_cases if options.corpus == "canonical" else schema_cases
    for case in cases(options.seed, options.count):
        sys.stdout.write(json.dumps(case, ensure_ascii=False, allow_nan=False) + "\n")


if __name__ == "__main__":
    main()
