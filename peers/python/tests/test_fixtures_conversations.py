"""Every conversation fixture (protocol/fixtures/conversations) against the real conformance host, one test each,
named by its description; and the runner's failure report: a wrong expectation fails with a diff naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import HostProcess, JournaledHost
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
            hosts[key] = HostProcess("tcp://127.0.0.1:*", *limit_flags(limits))
        return hosts[key]

    yield start
    for host in hosts.values():
        host.stop()


def test_the_conversations_are_there() -> None:
    assert len(CONVERSATIONS) >= 38, f"only {len(CONVERSATIONS)} conversations under {PROTOCOL}/fixtures/conversations"


@pytest.mark.parametrize("conversation", [pytest.param(c, id=c.description) for c in CONVERSATIONS])
def test_conversation(
    conversation: fixtures.Conversation,
    host_with: Callable[[dict[str, int]], HostProcess],
    journaled_host: Callable[..., JournaledHost],
) -> None:
    if not conversation.restarts_host:
        fixtures.run_conversation(conversation, host_with(conversation.limits).endpoint)
        return
    # SPEC 14.2: a host of its own, on a new journal, that the runner kills and starts again on the same endpoint.
    host = journaled_host(*limit_flags(conversation.limits))
    fixtures.run_conversation(conversation, host.endpoint, restart_host=host.restart)
    assert host.starts >= 2, "the conversation restarts the host, but the runner never did"


def limit_flags(limits: dict[str, int]) -> list[str]:
    return [item for name, value in sorted(limits.items()) for item in (LIMIT_FLAGS[name], str(value))]


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
    (folder / "restart.json").write_text((PROTOCOL / "fixtures" / "conversations" / "job-restart.json").read_text())
    test_file = tmp_path / "test_service.py"
    test_file.write_text(textwrap.dedent(f"""
        from zerobridge.testing import fixture_tests
        test_service = fixture_tests({str(folder)!r}, endpoint={host_with({}).endpoint!r})
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed, 1 skipped" in run.stdout, run.stdout
    # A conversation that restarts the host cannot pass against a service started elsewhere: not run, and why (SPEC 14.2).
    assert "not run: it restarts the host (restart_host)" in run.stdout, run.stdout
    assert "test_service[add gives four]" in run.stdout
    assert "$.result: expected 4, received 3" in run.stdout


# --- restart_host (SPEC 14.2) ---------------------------------------------------------------------------------------


def test_a_conversation_that_restarts_the_host_is_not_run_without_a_way_to_restart_it(
    host_with: Callable[[dict[str, int]], HostProcess],
) -> None:
    conversation = fixtures.Conversation("restarts", (
        {"send": {"v": 1, "type": "ping"}},
        {"restart_host": "kill"},
    ), file="restarts.json")
    assert conversation.restarts_host
    with pytest.raises(fixtures.FixtureFailure, match=r"'restarts' \(restarts\.json\) was not run: it restarts the host.*restart_host="):
        fixtures.run_conversation(conversation, host_with({}).endpoint)


def test_restart_host_gives_every_client_a_fresh_socket_to_the_restarted_host(
    journaled_host: Callable[..., JournaledHost],
) -> None:
    host = journaled_host()
    processes = []

    def restart() -> str:
        assert host.process is not None
        processes.append(host.process.process.pid)
        endpoint = host.restart()
        assert host.process is not None
        processes.append(host.process.process.pid)
        return endpoint

    conversation = fixtures.Conversation("the host is killed and started again between two clients' calls", (
        {"send": {"v": 1, "type": "request", "id": "a1", "action": "sleep", "payload": {"ms": 300}}, "client": "a"},
        {"send": {"v": 1, "type": "request", "id": "b1", "action": "echo", "payload": "unread"}, "client": "b"},
        {"restart_host": "kill"},
        {"expect_nothing_ms": 600, "client": "a", "note": "the killed host's sleep never answers a fresh socket"},
        {"expect_nothing_ms": 100, "client": "b", "note": "what b received before the restart was dropped with its socket"},
        {"send": {"v": 1, "type": "request", "id": "a2", "action": "echo", "payload": "after"}, "client": "a"},
        {"expect": {"v": 1, "type": "response", "id": "a2", "ok": True, "result": "after"}, "client": "a"},
        {"send": {"v": 1, "type": "request", "id": "b2", "action": "add", "payload": {"a": 1, "b": 2}}, "client": "b"},
        {"expect": {"v": 1, "type": "response", "id": "b2", "ok": True, "result": 3}, "client": "b"},
    ), clients=("a", "b"))
    fixtures.run_conversation(conversation, host.endpoint, restart_host=restart)
    assert len(processes) == 2 and processes[0] != processes[1] and host.starts == 2


def test_restart_host_is_checked_as_a_step(tmp_path: Path) -> None:
    path = tmp_path / "restart.json"
    path.write_text(json.dumps({"format": 1, "description": "d", "clients": ["peer"], "steps": [{"restart_host": "soft"}]}))
    with pytest.raises(fixtures.FixtureFormatError, match=r'\$\.steps\[0\]\.restart_host: must be "kill"'):
        fixtures.load_conversation(path)
    path.write_text(json.dumps({"format": 1, "description": "d", "clients": ["peer"],
                                "steps": [{"restart_host": "kill", "client": "peer"}]}))
    with pytest.raises(fixtures.FixtureFormatError, match=r"\$\.steps\[0\]\.client: is not a field here"):
        fixtures.load_conversation(path)
    path.write_text(json.dumps({"format": 1, "description": "d", "plays": "host", "steps": [{"restart_host": "kill"}]}))
    with pytest.raises(fixtures.FixtureFormatError, match="not of peer conversations"):
        fixtures.load_conversation(path)
