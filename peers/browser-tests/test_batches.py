"""Batches on the page's WebSocket (SPEC 2.2, 3.2, since 1.9, decision 51): the browser peer offers
zerobridge.1.batch before zerobridge.1; the real host selects it and 64 calls at once succeed, and a 1.8 host (a
websockets server here that knows only zerobridge.1) gets plain 3.2 payloads and its plain answers are read.
Since 1.11 (decision 55) the page and the host also put what they have ready together under one frame 0 (SPEC 3.3),
once each has said it reads such batches; a host that has not said so is sent none."""

from __future__ import annotations

import json
import queue
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page
from websockets.sync.server import Server, ServerConnection, serve

from conftest import Host

CALLS_AT_ONCE = """async () => {
    const { connect } = await import('/_zerobridge/browser.js');
    const peer = await connect();
    // Counts the WebSocket messages the page writes while the calls go out.
    let writes = 0;
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function counted(data) { writes += 1; return send.call(this, data); };
    const sums = await Promise.all(Array.from({ length: 64 }, (_, i) => peer.call('add', { a: i, b: 1 })));
    WebSocket.prototype.send = send;
    const subprotocol = peer.dealer.subprotocol;
    const batches = peer.batches;
    await peer.close();
    return { subprotocol, sums, writes, batches };
}"""


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "unkeyed"])
def test_the_page_negotiates_batches_and_64_calls_at_once_succeed(keyed: bool, request: pytest.FixtureRequest, page: Page) -> None:
    host: Host = request.getfixturevalue("keyed_host" if keyed else "unkeyed_host")
    page.goto(host.url("/index.html"))
    outcome = page.evaluate(CALLS_AT_ONCE)
    assert outcome["subprotocol"] == "zerobridge.1.batch"
    assert outcome["sums"] == [i + 1 for i in range(64)]
    # The 64 requests were sent in one task: one batch (a pong the host's heartbeat asked for could add one more).
    assert 1 <= outcome["writes"] <= 2, f"{outcome['writes']} WebSocket messages for 64 calls made in one task"
    # In that message, batches under one frame 0 (SPEC 3.3) of 16 calls each; the answers came in at least one.
    assert outcome["batches"]["sent"] == 4, outcome["batches"]
    assert outcome["batches"]["read"] >= 1, outcome["batches"]
    assert page.problems == []  # type: ignore[attr-defined]


def frames_of(payload: bytes) -> list[bytes]:
    """A 3.2 payload's frames (SPEC 3.2), checking its lengths: what a 1.8 host reads."""
    frames, at = [], 0
    while at < len(payload):
        assert len(payload) - at >= 4, "a length cut short"
        (length,) = struct.unpack_from(">I", payload, at)
        assert length <= len(payload) - at - 4, "a length past the end"
        frames.append(payload[at + 4:at + 4 + length])
        at += 4 + length
    return frames


def payload_of(**body: Any) -> bytes:
    encoded = json.dumps({"v": 1, **body}).encode()
    return struct.pack(">I", 0) + struct.pack(">I", len(encoded)) + encoded


class OldHost:
    """A 1.8 host's WebSocket end, enough for one peer: it knows only zerobridge.1, welcomes the hello it reads and
    answers a request for `greet`; what it read and how it was asked are kept for the test."""

    def __init__(self) -> None:
        self.read: queue.Queue[Any] = queue.Queue()  # each payload read, or the exception that ended the handler
        self.offered: str | None = None
        self.selected: str | None = None
        self.server: Server = serve(self.handle, "127.0.0.1", 0, subprotocols=["zerobridge.1"])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}/zerobridge"

    def handle(self, connection: ServerConnection) -> None:
        self.offered = connection.request.headers.get("Sec-WebSocket-Protocol") if connection.request else None
        self.selected = connection.subprotocol
        try:
            for payload in connection:
                assert isinstance(payload, bytes), "a peer sends binary messages"
                self.read.put(payload)
                body = json.loads(frames_of(payload)[1])
                if body["type"] == "hello":
                    connection.send(payload_of(type="welcome", host="a-1.8-host", session="s1", actions=["greet"], heartbeat_ms=60000,
                                               limits={"max_message_bytes": 1048576, "max_in_flight": 256}))
                elif body["type"] == "request" and body["action"] == "greet":
                    connection.send(payload_of(type="response", id=body["id"], ok=True, result=f"hello {body['payload']['name']}"))
                elif body["type"] == "ping":
                    connection.send(payload_of(type="pong"))
        except Exception as error:  # noqa: BLE001 - handed to the test, which fails with it
            self.read.put(error)

    def next_body(self) -> dict[str, Any]:
        payload = self.read.get(timeout=10)
        if isinstance(payload, Exception):
            raise payload
        frames = frames_of(payload)
        assert len(frames) == 2 and frames[0] == b"", f"a plain unkeyed 3.2 payload (signature, body): {frames!r}"
        return json.loads(frames[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)


@pytest.fixture()
def old_host() -> Iterator[OldHost]:
    host = OldHost()
    yield host
    host.stop()


def test_a_18_host_gets_plain_messages_and_its_plain_answers_are_read(old_host: OldHost, unkeyed_host: Host, page: Page) -> None:
    page.goto(unkeyed_host.url("/index.html"))  # any page on loopback: the peer is told where the old host is
    outcome = page.evaluate("""async (endpoint) => {
        const { connect } = await import('/_zerobridge/browser.js');
        const peer = await connect(endpoint, { name: 'page-to-1.8' });
        const answers = await Promise.all([peer.call('greet', { name: 'one' }), peer.call('greet', { name: 'two' })]);
        const subprotocol = peer.dealer.subprotocol;
        const batches = peer.batches;
        await peer.close();
        return { host: peer.host, subprotocol, answers, batches };
    }""", old_host.endpoint)
    assert old_host.offered == "zerobridge.1.batch, zerobridge.1"
    assert old_host.selected == "zerobridge.1"
    # Its welcome does not say it reads batches under one frame 0 (SPEC 3.3): the page sends it none.
    assert outcome == {"host": "a-1.8-host", "subprotocol": "zerobridge.1", "answers": ["hello one", "hello two"],
                       "batches": {"read": 0, "sent": 0}}
    hello = old_host.next_body()
    assert hello["type"] == "hello" and hello["peer"] == "page-to-1.8" and hello["features"] == ["batch"], hello
    # Two calls made in one task still went out one WebSocket message each.
    assert [old_host.next_body()["payload"]["name"] for _ in range(2)] == ["one", "two"]
