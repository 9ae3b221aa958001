"""A minimal keyed WebSocket client of the bridge (SPEC 2.2, 3.2) for the host's tests: websockets (PyPI) for the
transport, the Python peer's own signing for frame 0. Not a peer library: it sends what a test says and reads what
comes back, so tests can also send what a peer never would."""

from __future__ import annotations

import collections
import json
import socket
import struct
import time
from typing import Any

from websockets.sync.client import ClientConnection, connect

from zerobridge import signing, wire

SUBPROTOCOL = "zerobridge.1"
BATCH = "zerobridge.1.batch"  # SPEC 3.2, since 1.9


def encode(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(frame)) + frame for frame in frames)


def decode(payload: bytes) -> list[bytes]:
    frames, at = [], 0
    while at < len(payload):
        (length,) = struct.unpack_from(">I", payload, at)
        frames.append(payload[at + 4:at + 4 + length])
        at += 4 + length
    return frames


def encode_batch(payloads: list[bytes]) -> bytes:
    """A batch (SPEC 3.2, since 1.9): each message's payload behind one more 4-byte length."""
    return encode(payloads)


def decode_batch(payload: bytes) -> list[bytes]:
    """The payloads of a batch the host sent, checked against SPEC 3.2's bounds for a sender."""
    entries = decode(payload)
    assert 1 <= len(entries) <= 1000, len(entries)
    assert len(entries) == 1 or len(payload) <= 65536, f"a batch of {len(entries)} messages in {len(payload)} bytes"
    return entries


def body(**fields: Any) -> bytes:
    return json.dumps({"v": 1, **fields}, separators=(",", ":")).encode()


class Client:
    """One WebSocket connection; keyed when given the key (hex)."""

    def __init__(self, endpoint: str, key: str | None, *, origin: str | None = None, max_size: int | None = 2**26,
                 batched: bool = False, sock: socket.socket | None = None) -> None:
        headers = {"Origin": origin} if origin else None
        # Entered by hand: a connection outlives the call that opens it (websockets warns when connect() is not
        # used as a context manager, and says to enter it).
        self.ws: ClientConnection = connect(endpoint, subprotocols=[BATCH, SUBPROTOCOL] if batched else [SUBPROTOCOL],
                                            origin=None, additional_headers=headers, max_size=max_size, sock=sock,
                                            open_timeout=10,
                                            ping_interval=None).__enter__()  # tests read when they choose (a stalled reader too)
        self.batched = self.ws.subprotocol == BATCH
        self.channel = signing.PeerChannel(bytes.fromhex(key)) if key else None
        self.inbox: collections.deque[bytes] = collections.deque()  # messages of a batch not yet read
        self.batches_received: list[int] = []  # how many messages each WebSocket message held
        # SPEC 3.3 (on WebSocket since 1.11): whether this client said `"batch"` in its hello, and how many messages
        # each batch under one frame 0 that it read held.
        self.reads_signed_batches = False
        self.signed_batches_received: list[int] = []
        self.unread: collections.deque[list[bytes]] = collections.deque()  # messages of such a batch not yet read

    def payload(self, frames: list[bytes]) -> bytes:
        """One message's payload (SPEC 3.2): frames 1..n, with frame 0 signed for the channel (empty without a key)."""
        frame0 = self.channel.sign(frames, int(time.time() * 1000)) if self.channel else b""
        assert frame0 is not None, "a keyed connection opens with hello"
        return encode([frame0, *frames])

    def send_batch(self, messages: list[list[bytes]]) -> None:
        """Messages (each its frames 1..n) in one WebSocket message: a batched connection's."""
        assert self.batched
        self.ws.send(encode_batch([self.payload(frames) for frames in messages]))

    def send_signed_batch(self, messages: list[list[bytes]]) -> None:
        """Messages (each its frames 1..n) as one SPEC 3.3 batch under one frame 0 (`b.<counter>.<mac>`, or `b`
        without a key), in one WebSocket message (an entry of a SPEC 3.2 batch on a batched connection)."""
        batch = wire.join_batch([[b"", *frames] for frames in messages])
        payload = encode([self.channel.sign_batch(batch) if self.channel else b"b", batch])
        self.ws.send(encode_batch([payload]) if self.batched else payload)

    def close(self) -> None:
        """Closes with a close frame: to the host, the peer is leaving (SPEC 2.2)."""
        self.ws.close()

    def drop(self) -> None:
        """Ends the TCP connection without a close frame, as a network that fails does: the session waits out the grace."""
        self.ws.close_socket()

    def send_frames(self, frames: list[bytes]) -> None:
        """Frames 1..n, signed for the channel (or with an empty frame 0 without a key)."""
        payload = self.payload(frames)
        self.ws.send(encode_batch([payload]) if self.batched else payload)

    def send(self, **fields: Any) -> None:
        self.send_frames([body(**fields)])

    def receive(self, timeout: float = 10) -> tuple[bytes, dict[str, Any], list[bytes]]:
        """The next message: frame 0, the body, the attachments. A signed one is checked against the channel; a
        batch under one frame 0 (SPEC 3.3) is checked as one and its messages come one by one (frame 0 empty)."""
        while not self.unread:
            if not self.inbox:
                received = self.ws.recv(timeout=timeout)
                assert isinstance(received, bytes), "the host sends binary messages"
                entries = decode_batch(received) if self.batched else [received]
                self.batches_received.append(len(entries))
                self.inbox.extend(entries)
            frames = decode(self.inbox.popleft())
            if self.channel and frames[0]:
                refusal = self.channel.refusal(frames[0], frames[1:])
                assert refusal is None, refusal
            if frames[0].startswith(b"b.") or (not self.channel and frames[0] == b"b"):
                assert self.reads_signed_batches, "a batch under one frame 0 for a client that did not say it reads them"
                assert len(frames) == 2, "a batch is frame 0 and frame 1"
                messages = wire.split_batch(frames[1])
                assert all(isinstance(m, list) and m[0] == b"" for m in messages), "each message of a batch: frame 0 empty"
                self.signed_batches_received.append(len(messages))
                self.unread.extend(messages)  # type: ignore[arg-type]
            else:
                self.unread.append(frames)
        frames = self.unread.popleft()
        return frames[0], json.loads(frames[1]), frames[2:]

    def next_of(self, kind: str, timeout: float = 10, **fields: Any) -> dict[str, Any]:
        """The next body of type `kind` with these fields, skipping others (pings answered)."""
        deadline = time.monotonic() + timeout
        while True:
            _, message, _ = self.receive(timeout=max(0.01, deadline - time.monotonic()))
            if message["type"] == "ping":
                self.send(type="pong")
                continue
            if message["type"] == kind and all(message.get(k) == v for k, v in fields.items()):
                return message

    def results(self, count: int) -> dict[str, Any]:
        """The results of the next `count` responses, by request id (in whatever order they come)."""
        results = {}
        while len(results) < count:
            message = self.next_of("response")
            results[message["id"]] = message["result"]
        return results

    def hello(self, name: str, **extra: Any) -> dict[str, Any]:
        self.reads_signed_batches = "batch" in extra.get("features", [])
        self.send(type="hello", peer=name, **extra)
        return self.next_of("welcome")
