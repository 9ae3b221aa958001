"""The Python API docs (scripts/python_docs.py, run by `make docs`): pdoc builds them without a warning and every
public class, function and method has a docstring; and the check does catch a name without one."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def python_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("python_docs", REPO / "scripts" / "python_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_build_without_warnings_and_every_public_name_has_a_docstring(
    python_docs: ModuleType, tmp_path: Path
) -> None:
    assert python_docs.build(tmp_path) == []
    assert python_docs.undocumented() == []
    for module in python_docs.PUBLIC_MODULES:
        page = tmp_path / (module.replace(".", "/") + ".html")
        assert page.is_file(), page
    assert "connect_sync" in (tmp_path / "zerobridge.html").read_text()


def test_a_name_without_a_docstring_is_found(
    python_docs: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "halfdocumented"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            '''
            """A package with gaps."""

            def documented():
                """Says what it does."""

            def bare():
                pass

            class Thing:
                """A thing."""

                def method(self):
                    pass

                def _private(self):
                    pass
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert python_docs.undocumented(("halfdocumented",)) == ["halfdocumented.bare", "halfdocumented.Thing.method"]
    finally:
        sys.modules.pop("halfdocumented", None)
