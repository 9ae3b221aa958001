"""One version for every ZeroBridge library: the repository's VERSION file, and each place that repeats it.

Run by `make test-install` with the repository's virtual environment (its editable zerobridge install).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess

import zerobridge

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


def test_version_is_semantic():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION


def test_swift_library_says_the_same():
    source = (ROOT / "Sources/ZeroBridge/Version.swift").read_text()
    assert re.search(r'public let zeroBridgeVersion = "([^"]*)"', source).group(1) == VERSION


def test_the_cli_says_the_same():
    printed = subprocess.run([os.environ["ZEROBRIDGE_BIN"], "--version"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    assert printed.strip() == VERSION


def test_python_package_says_the_same():
    assert zerobridge.__version__ == VERSION
    assert pathlib.Path(zerobridge.__file__).resolve().is_relative_to(ROOT / "peers/python/src")


def test_node_package_says_the_same():
    assert json.loads((ROOT / "peers/node/package.json").read_text())["version"] == VERSION
    exported = subprocess.run(
        ["node", "--input-type=module", "-e", "import { version } from './index.js'; console.log(version)"],
        cwd=ROOT / "peers/node", capture_output=True, text=True, check=True, timeout=60).stdout
    assert exported.strip() == VERSION


def test_changelog_and_readme_name_it():
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert f'from: "{VERSION}"' in readme
    assert f"zerobridge-{VERSION}-py3-none-any.whl" in readme
    assert f"zerobridge-{VERSION}.tgz" in readme
    assert f"zerobridge-{VERSION}.tgz" in (ROOT / "peers/node/README.md").read_text()


def test_each_package_ships_the_license():
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License")
    # Copies, not links: npm pack leaves links out.
    for package in ("peers/python", "peers/node"):
        assert (ROOT / package / "LICENSE").read_text() == licence, package
