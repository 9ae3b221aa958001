"""Every peer conversation (protocol/fixtures/peer-conversations, SPEC section 14.3) played against the conformance
peers of both libraries: the runner binds a ROUTER, starts the peer under test pointed at it and plays the host.
One test per conversation and peer, named by the conversation's description and the peer's language."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from zerobridge import fixtures

REPO = Path(__file__).resolve().parents[3]
CONVERSATIONS = fixtures.load_conversations([REPO / "protocol" / "fixtures" / "peer-conversations"], plays="host")
NODE = shutil.which("node") or "node"
PEERS = {
    "python": fixtures.PeerProgram("python", [sys.executable, "-m", "zerobridge.conformance_peer"]),
    "node": fixtures.PeerProgram("node", [NODE, str(REPO / "peers" / "node" / "bin" / "conformance-peer.js")]),
}


def test_the_peer_conversations_are_there() -> None:
    assert len(CONVERSATIONS) >= 12


@pytest.mark.parametrize(
    ("conversation", "language"),
    [pytest.param(c, language, id=f"{c.description} [{language} peer]") for c in CONVERSATIONS for language in PEERS],
)
def test_peer_conversation(conversation: fixtures.Conversation, language: str) -> None:
    fixtures.run_peer_conversation(conversation, PEERS[language])


def test_a_wrong_expectation_of_a_peer_fails_with_a_diff_naming_the_field() -> None:
    wrong = fixtures.Conversation(
        "the peer adds wrongly",
        ({"expect": {"v": 1, "type": "hello", "peer": "conformance-peer"}, "within_ms": 10000},
         {"send": {"v": 1, "type": "request", "id": "w", "action": "count", "payload": {"n": 2}, "progress": True}},
         {"expect": {"v": 1, "type": "progress", "id": "w", "seq": 1, "payload": {"i": 1, "n": 3}}}),
        file="wrong-peer.json", plays="host",
    )
    with pytest.raises(fixtures.FixtureFailure) as failure:
        fixtures.run_peer_conversation(wrong, PEERS["python"])
    assert "step 3 of 3" in str(failure.value)
    assert "$.payload.n: expected 3, received 2" in str(failure.value)


def test_a_peer_that_exits_fails_with_its_stderr() -> None:
    crashing = fixtures.PeerProgram("python", [sys.executable, "-c", "import sys; sys.exit('no host for me')"])
    waiting = fixtures.Conversation("waits for a hello", ({"expect": {"v": 1, "type": "hello"}, "within_ms": 10000},),
                                    plays="host")
    with pytest.raises(fixtures.FixtureFailure, match="(?s)exited with code 1.*no host for me"):
        fixtures.run_peer_conversation(waiting, crashing)


def test_per_language_values_need_one_for_the_peer_under_test() -> None:
    conversation = fixtures.Conversation("a script for python only", (
        {"expect": {"v": 1, "type": "hello", "peer": "conformance-peer"}, "within_ms": 10000},
        {"send": {"v": 1, "type": "request", "id": "s", "action": "$evaluate",
                  "payload": {"script": {"$per_language": {"python": "return 1"}}}}},
    ), file="one-language.json", plays="host")
    with pytest.raises(fixtures.FixtureFormatError, match=r"\$\.steps\[1\]\.send\.payload\.script: \$per_language has no value for 'node'"):
        fixtures.run_peer_conversation(conversation, PEERS["node"])
