"""The README's five-line example runs and prints what it says (against the conformance host)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MAIN_README = Path(__file__).resolve().parents[3] / "README.md"


@pytest.mark.parametrize("readme", [README, MAIN_README], ids=["peers/python/README.md", "README.md"])
def test_the_five_line_example_prints_3(host: Any, readme: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    example = next(block for block in blocks if "asyncio.run(main())" in block)
    assert len(example.strip().splitlines()) == 5
    script = example.replace("tcp://127.0.0.1:5555", host.endpoint)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3\n"
