"""The Python decoder's fuzz corpus (fuzz/corpus/python-decoder, SECURITY.md) replayed on every test run, with the
fuzz target's own checks (fuzz/python/fuzz_wire.py): decode returns a message or raises WireError with a protocol
code, and what it accepts survives a round trip. What the fuzzer once found stays fixed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _fuzz_target():
    spec = importlib.util.spec_from_file_location("fuzz_wire", ROOT / "fuzz" / "python" / "fuzz_wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_corpus_input_is_decoded_or_refused_and_round_trips() -> None:
    target = _fuzz_target()
    inputs = sorted((ROOT / "fuzz" / "corpus" / "python-decoder").iterdir())
    assert len(inputs) > 50, "the corpus is missing: fuzz/corpus/python-decoder"
    for path in inputs:
        try:
            target.test_one_input(path.read_bytes())
        except Exception as error:
            raise AssertionError(f"fuzz/corpus/python-decoder/{path.name}: {error!r}") from error
