"""Seeds for the fuzzers, from the protocol's fixtures: `python fuzz/seed.py OUT` writes OUT/<fuzzer>/<n> files.

The committed corpora under fuzz/corpus/ were made from these seeds and minimized (`make fuzz-corpus`: each
fuzzer keeps only the seeds that add coverage); rerun it when the fixtures grow.

- swift-json: every text of fixtures/json-texts.json, and every body below.
- swift-message, python-decoder: every message body of fixtures/messages (valid or not), and every body the
  conversations and peer conversations send or expect (matchers such as {"$any": "string"} left as they are).
- node-zmtp: what a libzmq ROUTER sends a DEALER (greeting, READY, then messages of those bodies as frames), with
  the variants a stream can take: long frames, multi-frame messages, PING/PONG/ERROR commands, CURVE's greeting.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any, Iterator

FIXTURES = Path(__file__).resolve().parent.parent / "protocol" / "fixtures"


def json_texts() -> Iterator[bytes]:
    for case in json.loads((FIXTURES / "json-texts.json").read_text()):
        yield bytes.fromhex(case["hex"])


def bodies() -> Iterator[bytes]:
    for path in sorted((FIXTURES / "messages").glob("*.json")):
        for group in json.loads(path.read_text()):
            for test in group["tests"]:
                yield json.dumps(test["data"], ensure_ascii=False).encode()
    for folder in ("conversations", "peer-conversations"):
        for path in sorted((FIXTURES / folder).glob("*.json")):
            yield from _sent_bodies(json.loads(path.read_text()))


def _sent_bodies(node: Any) -> Iterator[bytes]:
    """Every message a conversation sends or expects: objects with "v" and "type", and raw text frames."""
    if isinstance(node, dict):
        if "v" in node and "type" in node:
            yield json.dumps(node, ensure_ascii=False).encode()
            return
        if "text" in node and isinstance(node["text"], str) and len(node) == 1:
            yield node["text"].encode()
            return
        for value in node.values():
            yield from _sent_bodies(value)
    elif isinstance(node, list):
        for value in node:
            yield from _sent_bodies(value)


# --- ZMTP 3.1 streams (RFC 23/37), as a ROUTER writes them --------------------------------------------------------


def greeting(mechanism: bytes = b"NULL", minor: int = 1) -> bytes:
    return b"\xff" + bytes(8) + b"\x7f" + bytes([3, minor]) + mechanism.ljust(20, b"\0") + b"\0" + bytes(31)


def frame(body: bytes, more: bool = False, command: bool = False, long: bool | None = None) -> bytes:
    flags = (1 if more else 0) | (4 if command else 0)
    if long or (long is None and len(body) > 255):
        return bytes([flags | 2]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def command(name: bytes, data: bytes = b"") -> bytes:
    return frame(bytes([len(name)]) + name + data, command=True)


def ready(socket_type: bytes = b"ROUTER", identity: bytes | None = None) -> bytes:
    properties = b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    if identity is not None:
        properties += b"\x08Identity" + struct.pack(">I", len(identity)) + identity
    return command(b"READY", properties)


def message(*frames: bytes) -> bytes:
    return b"".join(frame(f, more=i < len(frames) - 1) for i, f in enumerate(frames))


def zmtp_streams(sample: list[bytes]) -> Iterator[bytes]:
    opening = greeting() + ready()
    yield greeting()
    yield opening
    yield greeting(minor=0) + ready(identity=b"")
    yield greeting() + ready(b"DEALER", identity=b"\0abcd")
    yield greeting(b"CURVE")
    yield greeting(b"PLAIN")
    yield greeting() + command(b"ERROR", b"\x0dAccess denied")
    yield opening + command(b"PING", b"\x00\x0aping-ctx") + command(b"PONG", b"ctx")
    yield opening + command(b"READY", b"")
    yield opening + command(b"SUBSCRIBE", b"topic")
    yield opening + message(b"", b"x" * 300, b"\x00\x01")
    yield opening + frame(b"", more=True) + frame(b"short", long=True)
    for body in sample:
        yield opening + message(b"", body)
        yield opening + message(b"", body, b"attachment") + command(b"PING", b"\x00\x01")


def write(folder: Path, inputs: Iterator[bytes]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    seen = set()
    for data in inputs:
        name = hashlib.sha1(data).hexdigest()
        if name not in seen:
            seen.add(name)
            (folder / name).write_bytes(data)
    return len(seen)


def main() -> None:
    out = Path(sys.argv[1])
    every_body = list(bodies())
    counts = {
        "swift-json": write(out / "swift-json", iter([*json_texts(), *every_body])),
        "swift-message": write(out / "swift-message", iter(every_body)),
        "python-decoder": write(out / "python-decoder", iter(every_body)),
        "node-zmtp": write(out / "node-zmtp", zmtp_streams(every_body[::7])),
    }
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
