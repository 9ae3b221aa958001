"""Every conversation fixture that applies to peers (protocol/fixtures/conversations), replayed from a page in
Chromium over WebSockets against the real host (SPEC 14.2 over 3.2)."""

from __future__ import annotations

import json
import pathlib

import pytest
from playwright.sync_api import Page

from conftest import ROOT, Host

CONVERSATIONS = sorted((ROOT / "protocol" / "fixtures" / "conversations").glob("*.json"))


def restarts_host(conversation: dict) -> bool:
    return any("restart_host" in step for step in conversation["steps"])


@pytest.mark.parametrize("file", CONVERSATIONS, ids=[file.stem for file in CONVERSATIONS])
def test_conversation_replays_from_the_page(file: pathlib.Path, unkeyed_host: Host, page: Page) -> None:
    conversation = json.loads(file.read_text())
    if restarts_host(conversation):
        pytest.skip("restart_host kills the host mid-conversation: its own runners (Swift, Python, Node) play it on a host of its own")
    page.goto(unkeyed_host.url("/index.html"))
    failure = page.evaluate(
        """async ([value, file, endpoint]) => {
            const { replay } = await import('/conversations.js');
            return replay(value, file, endpoint);
        }""",
        [conversation, f"protocol/fixtures/conversations/{file.name}", unkeyed_host.websocket],
    )
    assert failure is None, failure
