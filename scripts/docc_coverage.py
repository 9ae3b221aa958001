"""Fails when a DocC build documents a public Swift symbol without a summary.

    python3 scripts/docc_coverage.py .build/docs/ZeroBridge [...]   # folders built with --experimental-documentation-coverage

Reads docc's own `documentation-coverage.json`, so what counts as public and as documented is what the built site
shows: a symbol's summary is its doc comment's first paragraph, or the one it inherits (the build passes
--enable-inherited-docs, so `hash(into:)` shows Hashable's; --experimental-skip-synthesized-symbols leaves out the
members the compiler writes, such as `!=`). The pages DocC makes for another module's types a module extends
("Extended Class ZeroBridge/BridgeHost" in ZeroBridgeJobs) are containers, not symbols of the module: their members
are checked, the containers are not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def undocumented(archive: Path) -> list[str]:
    """The symbols of one built archive that have no summary, as `Kind path` lines."""
    entries = json.loads((archive / "documentation-coverage.json").read_text())
    return sorted(
        f"{entry['kind']['name']} {entry['referencePath'].removeprefix('doc://')}"
        for entry in entries
        if entry["kind"]["isSymbol"] and not entry["hasAbstract"] and not entry["kind"]["name"].startswith("Extended ")
    )


def main(archives: list[str]) -> int:
    if not archives:
        print(__doc__, file=sys.stderr)
        return 2
    missing = [line for archive in archives for line in undocumented(Path(archive))]
    for line in missing:
        print(f"no documentation: {line}", file=sys.stderr)
    if missing:
        print(f"{len(missing)} public symbols have no doc comment: say what each does and why you would use it",
              file=sys.stderr)
        return 1
    print(f"every public symbol is documented ({', '.join(archives)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
