"""The Python peer's API docs (pdoc): builds them, and fails on pdoc's warnings or an undocumented public name.

    python scripts/python_docs.py OUTPUT_DIR      # make docs: .build/docs/python; make test-docs: a scratch folder

Public is what pdoc shows: a module's ``__all__`` (else its names without a leading underscore), and in each class the
members it defines itself without a leading underscore. Every public class, function and method must have a docstring
(one inherited from the method it overrides counts: pdoc shows that one). Module constants are shown with their value;
pdoc reads no docstring for a constant re-exported from another module, so they are not required here.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.doc

# The modules a user imports (peers/python/README.md): the package (which re-exports the peer's API), the pytest
# helper, the fixture runner and the schema validator. The rest are the package's internals.
PUBLIC_MODULES = ("zerobridge", "zerobridge.testing", "zerobridge.fixtures", "zerobridge.validate")


def undocumented(module_names: tuple[str, ...] = PUBLIC_MODULES) -> list[str]:
    """The full names of the public classes, functions and methods of these modules that have no docstring."""
    missing: list[str] = []

    def walk(namespace: pdoc.doc.Namespace, members: list[pdoc.doc.Doc]) -> None:
        for member in members:
            if member.name.startswith("_") or not member.modulename.startswith(namespace.modulename.split(".")[0]):
                continue
            if isinstance(member, (pdoc.doc.Class, pdoc.doc.Function)) and not member.docstring.strip():
                missing.append(member.fullname)
            if isinstance(member, pdoc.doc.Class):
                walk(member, member.own_members)

    for name in module_names:
        module = pdoc.doc.Module(importlib.import_module(name))
        walk(module, list(module.members.values()))
    return missing


def build(output: Path, module_names: tuple[str, ...] = PUBLIC_MODULES) -> list[str]:
    """Writes the HTML docs into ``output``; returns the warnings pdoc gave (an unresolved link, an unreadable source)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*module_names, output_directory=output)
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    output = Path(sys.argv[1])
    problems = [f"pdoc warned: {text}" for text in build(output)]
    problems += [f"no docstring: {name}" for name in undocumented()]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"Python API docs: {output / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
