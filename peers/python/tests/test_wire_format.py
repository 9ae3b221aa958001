"""The wire module: frames <-> messages and the validation rules of protocol v1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerobridge import BridgeTimeout, PeerLost, errors, wire


def frames_of(body: Any, *attachments: bytes, signature: bytes = b"") -> list[bytes]:
    text = body if isinstance(body, bytes) else json.dumps(body).encode()
    return [signature, text, *attachments]


def rejected(frames: list[bytes]) -> wire.WireError:
    with pytest.raises(wire.WireError) as caught:
        wire.decode(frames)
    return caught.value


ROUND_TRIPS = [
    wire.Request("r1", "add", {"a": 1, "b": 2}, timeout_ms=250, progress=True),
    wire.Request("r2", "echo", None),
    wire.Request("r3", "echo", 1, timeout_ms=30000, deadline=1795430400000),
    wire.Request("r4", "echo", deadline=0),
    wire.Response.success("r1", 3),
    wire.Response.success("r3", None),
    wire.Response.failure("r1", errors.BridgeError("invalid_payload", "need a and b", {"got": [1]})),
    wire.Progress("r1", 2, {"i": 2, "n": 5}),
    wire.Progress("r1", 3, {"i": 900, "n": 1000}, skipped=893),
    wire.Event("log", ["line"]),
    wire.Cancel("r1"),
    wire.Hello("etl", ("render",), ("evaluate",), session="s1", heartbeat_ms=100),
    wire.Hello("anon"),
    wire.Hello("etl", session="s1", resume_token="9f" * 32),
    wire.Welcome("conformance", "s1", ("echo",), 5000, wire.Limits(1 << 20, 256)),
    wire.Welcome("conformance", "s1", ("echo",), 5000, wire.Limits(1 << 20, 256), resume_token="0a" * 32),
    wire.Ping(),
    wire.Pong(),
    wire.Bye(),
]


@pytest.mark.parametrize("message", ROUND_TRIPS, ids=lambda m: type(m).__name__)
def test_every_message_type_round_trips(message: wire.Message) -> None:
    decoded = wire.decode(wire.encode(message))
    if isinstance(message, wire.Response) and not message.ok:
        assert isinstance(decoded, wire.Response) and decoded.error is not None
        assert (decoded.id, decoded.ok, decoded.error.code, decoded.error.message, decoded.error.data) == (
            "r1", False, "invalid_payload", "need a and b", {"got": [1]},
        )
    else:
        assert decoded == message


def test_encoded_request_has_exactly_the_protocol_fields() -> None:
    signature, body = wire.encode(wire.Request("7", "add", {"a": 1}, timeout_ms=5))
    assert signature == b""
    assert json.loads(body) == {"v": 1, "type": "request", "id": "7", "action": "add", "payload": {"a": 1}, "timeout_ms": 5}


def test_integers_stay_integers() -> None:
    _, body = wire.encode(wire.Response.success("1", 3))
    assert json.loads(body)["result"] == 3 and b'"result":3' in body
    decoded = wire.decode(frames_of({"v": 1, "type": "response", "id": "1", "ok": True, "result": 3}))
    assert isinstance(decoded, wire.Response) and type(decoded.result) is int


def test_missing_optional_fields_take_their_defaults() -> None:
    assert wire.decode(frames_of({"v": 1, "type": "request", "id": "1", "action": "a"})) == wire.Request("1", "a")
    assert wire.decode(frames_of({"v": 1, "type": "response", "id": "1", "ok": True})) == wire.Response("1", True)
    assert wire.decode(frames_of({"v": 1, "type": "hello", "peer": "p"})) == wire.Hello("p")


def test_unknown_extra_fields_are_ignored() -> None:
    decoded = wire.decode(frames_of({"v": 1, "type": "cancel", "id": "x", "future": {"field": 1}}))
    assert decoded == wire.Cancel("x")


def test_error_codes_map_to_their_classes() -> None:
    decoded = wire.decode(frames_of({"v": 1, "type": "response", "id": "1", "ok": False, "error": {"code": "timeout", "message": "late"}}))
    assert isinstance(decoded, wire.Response)
    assert isinstance(decoded.error, BridgeTimeout) and isinstance(decoded.error, TimeoutError)
    assert decoded.error.code == "timeout" and decoded.error.message == "late"
    assert isinstance(errors.error_from_code("peer_lost"), PeerLost)
    other = errors.error_from_code("overloaded", "busy")
    assert type(other) is errors.BridgeError and other.code == "overloaded"


BAD = [
    ("one frame", [b"{}"], "bad_message", None),
    ("not UTF-8", [b"", b"\xff\xfe{"], "bad_message", None),
    ("not JSON", [b"", b"{nope"], "bad_message", None),
    ("NaN is not JSON", [b"", b'{"v":1,"type":"event","action":"a","payload":NaN}'], "bad_message", None),
    ("not an object", frames_of([1, 2]), "bad_message", None),
    ("v missing", frames_of({"type": "ping", "id": "k"}), "bad_message", "k"),
    ("v is a string", frames_of({"v": "1", "type": "ping"}), "bad_message", None),
    ("v is a boolean", frames_of({"v": True, "type": "ping"}), "bad_message", None),
    ("v is 2", frames_of({"v": 2, "type": "request", "id": "q", "action": "a"}), "unsupported_version", "q"),
    ("unknown type", frames_of({"v": 1, "type": "shout", "id": "q"}), "bad_message", "q"),
    ("type missing", frames_of({"v": 1, "id": "q"}), "bad_message", "q"),
    ("request without id", frames_of({"v": 1, "type": "request", "action": "a"}), "bad_message", None),
    ("request id too long", frames_of({"v": 1, "type": "request", "id": "x" * 129, "action": "a"}), "bad_message", None),
    ("request id empty", frames_of({"v": 1, "type": "request", "id": "", "action": "a"}), "bad_message", None),
    ("request id a number", frames_of({"v": 1, "type": "request", "id": 5, "action": "a"}), "bad_message", None),
    ("request without action", frames_of({"v": 1, "type": "request", "id": "q"}), "bad_message", "q"),
    ("timeout_ms zero", frames_of({"v": 1, "type": "request", "id": "q", "action": "a", "timeout_ms": 0}), "bad_message", "q"),
    ("timeout_ms float", frames_of({"v": 1, "type": "request", "id": "q", "action": "a", "timeout_ms": 1.5}), "bad_message", "q"),
    ("progress not bool", frames_of({"v": 1, "type": "request", "id": "q", "action": "a", "progress": 1}), "bad_message", "q"),
    ("response without ok", frames_of({"v": 1, "type": "response", "id": "q"}), "bad_message", "q"),
    ("failed response without error", frames_of({"v": 1, "type": "response", "id": "q", "ok": False}), "bad_message", "q"),
    ("error without code", frames_of({"v": 1, "type": "response", "id": "q", "ok": False, "error": {"message": "m"}}), "bad_message", "q"),
    ("progress seq 0", frames_of({"v": 1, "type": "progress", "id": "q", "seq": 0}), "bad_message", "q"),
    ("event without action", frames_of({"v": 1, "type": "event", "payload": 1}), "bad_message", None),
    ("hello without peer", frames_of({"v": 1, "type": "hello"}), "bad_message", None),
    ("hello actions not strings", frames_of({"v": 1, "type": "hello", "peer": "p", "actions": [1]}), "bad_message", None),
    ("welcome without limits", frames_of({"v": 1, "type": "welcome", "host": "h", "session": "s", "actions": [], "heartbeat_ms": 5}), "bad_message", None),
    ("nested 65 deep", frames_of({"v": 1, "type": "event", "action": "a", "payload": json.loads("[" * 64 + "]" * 64)}), "bad_message", None),
    ("nested far too deep", [b"", b'{"v":1,"type":"event","action":"a","payload":' + b"[" * 100000 + b"]" * 100000 + b"}"], "bad_message", None),
]


@pytest.mark.parametrize(("frames", "code", "id"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_rejected_with_its_code_and_readable_id(frames: list[bytes], code: str, id: str | None) -> None:
    error = rejected(frames)
    assert (error.code, error.id) == (code, id)


def test_nesting_of_64_is_accepted() -> None:
    payload = json.loads("[" * 63 + "]" * 63)  # the body object is level 1, the arrays 2..64
    decoded = wire.decode(frames_of({"v": 1, "type": "event", "action": "a", "payload": payload}))
    assert isinstance(decoded, wire.Event)


def test_bytes_travel_as_attachments_and_come_back_as_bytes() -> None:
    message = wire.Request("1", "store", {"name": "x", "blobs": [b"\x00\x01", bytearray(b"two")]})
    frames = wire.encode(message)
    assert len(frames) == 4 and frames[2:] == [b"\x00\x01", b"two"]
    assert json.loads(frames[1])["payload"] == {"name": "x", "blobs": [{"$attachment": 0}, {"$attachment": 1}]}
    assert wire.decode(frames) == wire.Request("1", "store", {"name": "x", "blobs": [b"\x00\x01", b"two"]})


def test_attachment_reference_without_its_frame_is_bad_message() -> None:
    frames = frames_of({"v": 1, "type": "request", "id": "r", "action": "a", "payload": {"$attachment": 3}}, b"only one")
    assert (rejected(frames).code, rejected(frames).id) == ("bad_message", "r")
    # Not a reference (two members): plain data.
    other = {"$attachment": 0, "name": "x"}
    assert wire.decode(frames_of({"v": 1, "type": "event", "action": "a", "payload": other})) == wire.Event("a", other)
    # A lone "$attachment" member is always a reference: an index that is not a non-negative integer is bad_message.
    for index in (-1, "0", 1.5, None):
        frames = frames_of({"v": 1, "type": "request", "id": "n", "action": "a", "payload": [{"$attachment": index}]})
        assert (rejected(frames).code, rejected(frames).id) == ("bad_message", "n")


def test_signature_is_ignored_without_a_key() -> None:
    assert wire.decode(frames_of({"v": 1, "type": "ping"}, signature=b"whatever")) == wire.Ping()


def test_payloads_that_are_not_json_are_refused_when_encoding() -> None:
    with pytest.raises(TypeError, match="JSON"):
        wire.encode(wire.Request("1", "a", {"when": object()}))
    with pytest.raises(TypeError, match="JSON"):
        wire.encode(wire.Request("1", "a", float("nan")))


def test_deadline_and_skipped_are_encoded_only_when_set() -> None:
    _, body = wire.encode(wire.Request("7", "add", None, timeout_ms=5, deadline=1795430400000))
    assert json.loads(body) == {"v": 1, "type": "request", "id": "7", "action": "add", "payload": None,
                                "timeout_ms": 5, "deadline": 1795430400000}
    assert "deadline" not in json.loads(wire.encode(wire.Request("7", "add"))[1])
    _, body = wire.encode(wire.Progress("7", 4, "p", skipped=2))
    assert json.loads(body) == {"v": 1, "type": "progress", "id": "7", "seq": 4, "payload": "p", "skipped": 2}
    assert "skipped" not in json.loads(wire.encode(wire.Progress("7", 4, "p"))[1])


@pytest.mark.parametrize("deadline", [-1, 1.5, 1795430400000.5, "1795430400000", None, True])
def test_a_deadline_that_is_not_an_integer_from_0_is_bad_message(deadline: Any) -> None:
    error = rejected(frames_of({"v": 1, "type": "request", "id": "d", "action": "echo", "deadline": deadline}))
    assert (error.code, error.id) == ("bad_message", "d")


@pytest.mark.parametrize("skipped", [0, -3, 2.5, "3", None, False])
def test_skipped_that_is_not_an_integer_from_1_is_bad_message(skipped: Any) -> None:
    error = rejected(frames_of({"v": 1, "type": "progress", "id": "c", "seq": 2, "skipped": skipped}))
    assert (error.code, error.id) == ("bad_message", "c")


TOKEN = "0123456789abcdef" * 4


@pytest.mark.parametrize("token", [None, 12, "", TOKEN[:-1], TOKEN + "0", TOKEN.upper(), TOKEN[:-1] + "g", TOKEN + "\n"])
def test_a_resume_token_that_is_not_64_lowercase_hex_digits_is_bad_message(token: Any) -> None:
    hello = {"v": 1, "type": "hello", "peer": "p", "session": "s1", "resume_token": token}
    welcome = {"v": 1, "type": "welcome", "host": "h", "session": "s1", "resume_token": token, "actions": [],
               "heartbeat_ms": 5000, "limits": {"max_message_bytes": 1024, "max_in_flight": 1}}
    for body in (hello, welcome):
        error = rejected(frames_of(body))
        assert error.code == "bad_message" and "resume_token" in error.message
        if isinstance(token, str) and token:
            assert token.strip() not in error.message  # a secret, even a malformed one, is never echoed


def test_the_resume_token_is_encoded_when_set_and_kept_out_of_reprs() -> None:
    hello = wire.Hello("p", session="s1", resume_token=TOKEN)
    welcome = wire.Welcome("h", "s1", (), 5000, wire.Limits(1024, 1), resume_token=TOKEN)
    assert json.loads(wire.encode(hello)[1])["resume_token"] == TOKEN
    assert json.loads(wire.encode(welcome)[1])["resume_token"] == TOKEN
    assert "resume_token" not in json.loads(wire.encode(wire.Hello("p", session="s1"))[1])
    assert TOKEN not in repr(hello) and TOKEN not in str(welcome) and "session='s1'" in repr(hello)
