"""The tutorial's fixture test: every conversation in ../fixtures against the calculator host, one test each.

ZEROBRIDGE_ENDPOINT says where the host is (`make test-install` starts `calculator-host` and sets it).
"""

from pathlib import Path

from zerobridge.testing import fixture_tests

test_calculator = fixture_tests(Path(__file__).parent.parent / "fixtures")
