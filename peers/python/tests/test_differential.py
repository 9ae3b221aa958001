"""The Python peer's hand-written code pinned to references from PyPI, on the random corpora of
fuzz/differential/reference.py (seeded, so a failure replays):

- canonical JSON (zerobridge.canonical, the catalogue hash of SPEC 7.8) against rfc8785, byte for byte;
- the schema validator of ``validate=True`` (zerobridge.validate) against jsonschema (draft 2020-12), verdict for
  verdict, on the catalogues' schemas and random ones of SPEC 7.8's keywords.

The Swift and Node suites run the same corpora (CanonicalJSONDifferentialTests, peers/node/test/differential.test.js).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from zerobridge.canonical import canonical_text
from zerobridge.validate import first_error

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("reference", ROOT / "fuzz" / "differential" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", [1, 2])
def test_canonical_text_is_rfc8785s(reference, seed: int) -> None:
    disagreements = []
    for case in reference.canonical_cases(seed, 3000):
        ours = canonical_text(json.loads(case["text"]))
        if ours != case["canonical"]:
            disagreements.append(f"{case['text']}: ours {ours}, rfc8785 {case['canonical']}")
    assert not disagreements, f"{len(disagreements)} of 3000 differ, first: {disagreements[:3]}"


@pytest.mark.parametrize("seed", [1, 2])
def test_validator_verdicts_are_jsonschemas(reference, seed: int) -> None:
    disagreements = []
    for case in reference.schema_cases(seed, 3000):
        error = first_error(case["instance"], case["schema"])
        if (error is None) != case["valid"]:
            disagreements.append(f"schema {json.dumps(case['schema'])} instance {json.dumps(case['instance'])}: "
                                 f"ours {error or 'valid'}, jsonschema {'valid' if case['valid'] else 'invalid'}")
    assert not disagreements, f"{len(disagreements)} of 3000 differ, first: {disagreements[:3]}"
