"""Every conversation fixture that applies to peers (protocol/fixtures/conversations), replayed from a page in
Chromium over WebSockets against the real host (SPEC 14.2 over 3.2), over batches (since 1.9); and every case of
protocol/fixtures/websocket-frames.json through the page's codec (SPEC 14.1c)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from conftest import ROOT, Host

CONVERSATIONS = sorted((ROOT / "protocol" / "fixtures" / "conversations").glob("*.json"))


def restarts_host(conversation: dict) -> bool:
    return any("restart_host" in step for step in conversation["steps"])


def plays_zeromq_batches(conversation: dict) -> bool:
    """A conversation whose host says `"batch": true` in its welcome: only on ZeroMQ connections (SPEC 3.3)."""
    return any(isinstance(step.get("expect"), dict) and step["expect"].get("batch") is True for step in conversation["steps"])


@pytest.mark.parametrize("file", CONVERSATIONS, ids=[file.stem for file in CONVERSATIONS])
def test_conversation_replays_from_the_page(file: pathlib.Path, unkeyed_host: Host, page: Page) -> None:
    conversation = json.loads(file.read_text())
    if restarts_host(conversation):
        pytest.skip("restart_host kills the host mid-conversation: its own runners (Swift, Python, Node) play it on a host of its own")
    if plays_zeromq_batches(conversation):
        pytest.skip("SPEC 3.3's batches are for ZeroMQ connections (frame 0 `b`): a WebSocket connection has SPEC 3.2's, "
                    "and the Swift, Python and Node runners play this one over ZeroMQ")
    page.goto(unkeyed_host.url("/index.html"))
    outcome = page.evaluate(
        """async ([value, file, endpoint]) => {
            const { replay } = await import('/conversations.js');
            return replay(value, file, endpoint);
        }""",
        [conversation, f"protocol/fixtures/conversations/{file.name}", unkeyed_host.websocket],
    )
    assert outcome["failure"] is None, outcome["failure"]
    assert set(outcome["subprotocols"].values()) == {"zerobridge.1.batch"}, "the host selects batches when offered"


FRAME_CASES = json.loads((ROOT / "protocol" / "fixtures" / "websocket-frames.json").read_text())


@pytest.fixture(scope="module")
def frame_verdicts(unkeyed_host: Host, browser: Browser) -> Iterator[dict[str, str | None]]:
    """Every websocket-frames.json case run once in one page: its failure message by name, or None."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(unkeyed_host.url("/index.html"))
    yield page.evaluate(
        """async (cases) => (await import('/conversations.js')).checkWebSocketFrames(cases)""", FRAME_CASES)
    context.close()


@pytest.mark.parametrize("case", FRAME_CASES, ids=[case["name"] for case in FRAME_CASES])
def test_websocket_frames_case_in_the_page(case: dict, frame_verdicts: dict[str, str | None]) -> None:
    assert case["name"] in frame_verdicts, "the page ran every case"
    assert frame_verdicts[case["name"]] is None, frame_verdicts[case["name"]]
