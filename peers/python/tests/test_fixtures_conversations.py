"""Every conversation fixture (protocol/fixtures/conversations) against the real conformance host, one test each,
named by its description; and the runner's failure report: a wrong expectation fails with a diff naming the field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import HostProcess
from zerobridge import fixtures

PROTOCOL = Path(__file__).resolve().parents[3] / "protocol"
CONVERSATIONS = fixtures.load_conversations([PROTOCOL / "fixtures" / "conversations"])
LIMIT_FLAGS = {"max_message_bytes": "--max-message-bytes", "max_in_flight": "--max-in-flight"}


@pytest.fixture(scope="module")
def host_with() -> Iterator[Callable[[dict[str, int]], HostProcess]]:
    """A conformance host per set of limits a conversation names (started on first use, stopped at the end)."""
    hosts: dict[tuple[tuple[str, int], ...], HostProcess] = {}

    def start(limits: dict[str, int]) -> HostProcess:
        key = tuple(sorted(limits.items()))
        if key not in hosts:
            flags = [item for name, value in key for item in (LIMIT_FLAGS[name], str(value))]
            hosts[key] = HostProcess("tcp://127.0.0.1:*", *flags)
        return hosts[key]

    yield start
    for host in hosts.values():
        host.stop()


def test_the_conversations_are_there() -> None:
    assert len(CONVERSATIONS) >= 38, f"only {len(CONVERSATIONS)} conversations under {PROTOCOL}/fixtures/conversations"


@pytest.mark.parametrize("conversation", [pytest.param(c, id=c.description) for c in CONVERSATIONS])
def test_conversation(conversation: fixtures.Conversation, host_with: Callable[[dict[str, int]], HostProcess]) -> None:
    fixtures.run_conversation(conversation, host_with(conversation.limits).endpoint)


def broken(expectation: dict) -> fixtures.Conversation:
    return fixtures.Conversation(
        "a deliberately wrong expectation",
        ({"send": {"v": 1, "type": "request", "id": "w1", "action": "add", "payload": {"a": 1, "b": 2}}},
         {"expect": expectation}),
        file="wrong.json",
    )


def test_a_wrong_expectation_fails_with_a_diff_naming_the_field(host_with: Callable[[dict[str, int]], HostProcess]) -> None:
    endpoint = host_with({}).endpoint
    wrong = {"v": 1, "type": "response", "id": "w1", "ok": True, "result": 4}
    with pytest.raises(fixtures.FixtureFailure) as failure:
        fixtures.run_conversation(broken(wrong), endpoint)
    report = str(failure.value)
    assert "step 2 of 2" in report and "$.steps[1]" in report and "wrong.json" in report
    assert "$.result: expected 4, received 3" in report
    assert '"result": 3' in report  # the received body is shown whole

    nested = {"v": 1, "type": "response", "id": "w1", "ok": False,
              "error": {"code": "invalid_payload", "message": {"$any": "string"}}}
    with pytest.raises(fixtures.FixtureFailure, match=r"\$\.ok: expected false, received true"):
        fixtures.run_conversation(broken(nested), endpoint)


def test_silence_and_extra_messages_are_failures(host_with: Callable[[dict[str, int]], HostProcess]) -> None:
    endpoint = host_with({}).endpoint
    silent = fixtures.Conversation("waits for nothing", ({"expect": {"v": 1, "type": "pong"}, "within_ms": 200},))
    with pytest.raises(fixtures.FixtureFailure, match="nothing came within 200 ms"):
        fixtures.run_conversation(silent, endpoint)
    chatty = fixtures.Conversation("expects silence after a ping", (
        {"send": {"v": 1, "type": "ping"}}, {"expect_nothing_ms": 2000}))
    with pytest.raises(fixtures.FixtureFailure, match=r'expected nothing for 2000 ms, received: \{"v": 1, "type": "pong"\}'):
        fixtures.run_conversation(chatty, endpoint)


def test_fixture_tests_makes_one_pytest_test_per_conversation(
    tmp_path: Path, host_with: Callable[[dict[str, int]], HostProcess]
) -> None:
    """The user-facing helper, end to end: a separate pytest run over a folder with a passing and a failing file."""
    folder = tmp_path / "fixtures"
    folder.mkdir()
    (folder / "echo.json").write_text((PROTOCOL / "fixtures" / "conversations" / "echo.json").read_text())
    (folder / "wrong.json").write_text(
        '{"format": 1, "description": "add gives four", "clients": ["peer"], "steps": ['
        '{"send": {"v": 1, "type": "request", "id": "a", "action": "add", "payload": {"a": 1, "b": 2}}},'
        '{"expect": {"v": 1, "type": "response", "id": "a", "ok": true, "result": 4}}]}'
    )
    (folder / "cases.json").write_text('[{"description": "g", "tests": [{"description": "c", "data": 1, "valid": false}]}]')
    test_file = tmp_path / "test_service.py"
    test_file.write_text(textwrap.dedent(f"""
        from zerobridge.testing import fixture_tests
        test_service = fixture_tests({str(folder)!r}, endpoint={host_with({}).endpoint!r})
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout, run.stdout
    assert "test_service[add gives four]" in run.stdout
    assert "$.result: expected 4, received 3" in run.stdout
