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


def plays_batches(conversation: dict) -> bool:
    """A conversation whose host says `"batch": true` in its welcome (SPEC 3.3: on WebSocket connections since 1.11)."""
    return any(isinstance(step.get("expect"), dict) and step["expect"].get("batch") is True for step in conversation["steps"])


BATCH_CONVERSATIONS = [file for file in CONVERSATIONS if plays_batches(json.loads(file.read_text()))]


def replay(page: Page, host: Host, file: pathlib.Path, batches: bool) -> dict:
    conversation = json.loads(file.read_text())
    if restarts_host(conversation):
        pytest.skip("restart_host kills the host mid-conversation: its own runners (Swift, Python, Node) play it on a host of its own")
    page.goto(host.url("/index.html"))
    outcome: dict = page.evaluate(
        """async ([value, file, endpoint, batches]) => {
            const { replay } = await import('/conversations.js');
            return replay(value, file, endpoint, batches);
        }""",
        [conversation, f"protocol/fixtures/conversations/{file.name}", host.websocket, batches],
    )
    assert outcome["failure"] is None, outcome["failure"]
    return outcome


@pytest.mark.parametrize("file", CONVERSATIONS, ids=[file.stem for file in CONVERSATIONS])
def test_conversation_replays_from_the_page(file: pathlib.Path, unkeyed_host: Host, page: Page) -> None:
    outcome = replay(page, unkeyed_host, file, batches=True)
    assert set(outcome["subprotocols"].values()) == {"zerobridge.1.batch"}, "the host selects batches when offered"


def test_some_conversations_play_batches() -> None:
    assert BATCH_CONVERSATIONS, "protocol/fixtures/conversations has a conversation that plays SPEC 3.3's batches"


@pytest.mark.parametrize("file", BATCH_CONVERSATIONS, ids=[file.stem for file in BATCH_CONVERSATIONS])
def test_batch_conversation_replays_without_websocket_batches(file: pathlib.Path, unkeyed_host: Host, page: Page) -> None:
    """SPEC 3.3's batches on a WebSocket connection under zerobridge.1, one message in each WebSocket message."""
    outcome = replay(page, unkeyed_host, file, batches=False)
    assert set(outcome["subprotocols"].values()) == {"zerobridge.1"}


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
