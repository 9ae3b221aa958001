"""The host's WebSocket listener (SPEC 2.2, 3.2, decisions 46-47) against the real `zerobridge serve` binary, from a
real WebSocket client (websockets): sessions as on ZeroMQ, and each way in that must be refused or bounded."""

from __future__ import annotations

import http.client
import pathlib
import select
import socket
import struct
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from conftest import WebSocketHost, start_host
from zerobridge import wire
from wsclient import BATCH, SUBPROTOCOL, Client, body, encode, encode_batch


def get(host: WebSocketHost, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", host.port, timeout=10)
    connection.request("GET", path, headers=headers or {})
    return connection.getresponse()


def refused_status(host: WebSocketHost, **kwargs: object) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(host.websocket, open_timeout=10, **kwargs)  # type: ignore[arg-type]
    return refused.value.response.status_code


# --- sessions, as on ZeroMQ ------------------------------------------------------------------------------------

def test_keyed_hello_welcome_and_calls_both_directions(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    welcome = client.hello("page", actions=["render"])
    assert welcome["host"] == "conformance" and welcome["limits"]["max_message_bytes"] == 65536
    client.send(type="request", id="r1", action="echo", payload={"text": "hé ✓"})
    assert client.next_of("response", id="r1")["result"] == {"text": "hé ✓"}
    # Progress, then the response (SPEC 7.2).
    client.send(type="request", id="r2", action="count", payload={"n": 3}, progress=True)
    seen = [client.next_of("progress", id="r2")["payload"]["i"] for _ in range(3)]
    assert seen == [1, 2, 3]
    assert client.next_of("response", id="r2")["result"] == {"n": 3}
    # The host calls the page (the evaluateJavaScript role), and the page answers.
    client.send(type="request", id="r3", action="callback", payload={"action": "render", "payload": {"x": 1}})
    call = client.next_of("request", action="render")
    assert call["payload"] == {"x": 1}
    client.send(type="response", id=call["id"], ok=True, result={"rendered": True})
    assert client.next_of("response", id="r3")["result"] == {"rendered": True}
    client.close()


def test_attachments_cross_as_raw_frames(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.hello("attachments")
    blob = bytes(range(256)) * 40
    client.send_frames([body(type="request", id="a1", action="echo", payload={"file": {"$attachment": 0}}), blob])
    while True:
        _, message, attachments = client.receive()
        if message.get("id") == "a1":
            break
    assert message["result"] == {"file": {"$attachment": 0}} and attachments == [blob]
    client.close()


def test_each_connection_is_its_own_session_and_names_are_shared_with_zeromq_rules(host: WebSocketHost) -> None:
    first, second = Client(host.websocket, host.key), Client(host.websocket, host.key)
    one, two = first.hello("tab"), second.hello("other-tab")
    assert one["session"] != two["session"]
    # The name is taken while its session lives (SPEC 6, Names), whatever the transport.
    third = Client(host.websocket, host.key)
    third.send(type="hello", peer="tab")
    refusal = third.next_of("response")
    assert refusal["id"] is None and refusal["error"]["code"] == "name_taken"
    for client in (first, second, third):
        client.close()


# --- a close frame is a leaving; a dropped connection is not (SPEC 2.2, decision 50) ---------------------------------

def test_a_close_frame_frees_the_name_at_once(host: WebSocketHost) -> None:
    leaving = Client(host.websocket, host.key)
    first = leaving.hello("reloading-page")
    leaving.ws.close(code=1001, reason="going away")  # what a browser sends when its page unloads
    # The reloaded page says hello under the same name at once: welcomed into a new session, not name_taken.
    again = Client(host.websocket, host.key)
    welcome = again.hello("reloading-page")
    assert welcome["session"] != first["session"]
    again.close()


def test_a_host_call_into_a_page_that_closes_fails_peer_lost_at_once(host: WebSocketHost) -> None:
    page, native = Client(host.websocket, host.key), Client(host.websocket, host.key)
    page.hello("page-mid-call", actions=["hang"])
    native.hello("native-caller")
    native.send(type="request", id="into-page", action="callPeer", payload={"peer": "page-mid-call", "action": "hang"})
    page.next_of("request", action="hang")  # the host's call is in the page, unanswered
    closed_at = time.monotonic()
    page.ws.close(code=1001, reason="going away")
    answer = native.next_of("response", id="into-page", timeout=25)
    assert answer["error"]["code"] == "peer_lost", answer
    # At once, not after the host's grace (30 s) that a connection lost without a close frame waits for.
    assert time.monotonic() - closed_at < 15
    native.close()


def test_a_connection_dropped_without_a_close_frame_can_resume_within_the_grace(host: WebSocketHost) -> None:
    dropped = Client(host.websocket, host.key)
    first = dropped.hello("dropped-page")
    dropped.ws.socket.shutdown(socket.SHUT_WR)  # the TCP connection ends (FIN); no close frame was sent
    with pytest.raises(ConnectionClosed):  # the host closes its side once it has read the end
        while True:
            dropped.ws.recv(timeout=10)
    # The session keeps its name for the grace: a hello without its token is refused ...
    impostor = Client(host.websocket, host.key)
    impostor.send(type="hello", peer="dropped-page")
    assert impostor.next_of("response")["error"]["code"] == "name_taken"
    impostor.close()
    # ... and the peer resumes it over a new connection with the token.
    back = Client(host.websocket, host.key)
    resumed = back.hello("dropped-page", session=first["session"], resume_token=first["resume_token"])
    assert resumed["session"] == first["session"]
    back.close()


# --- refused before the upgrade ---------------------------------------------------------------------------------

def test_a_foreign_origin_is_refused_403(host: WebSocketHost) -> None:
    assert refused_status(host, subprotocols=[SUBPROTOCOL], origin="http://evil.example") == 403
    assert refused_status(host, subprotocols=[SUBPROTOCOL], origin=f"http://127.0.0.1:{host.port + 1}") == 403


def test_own_and_allowed_origins_and_no_origin_are_let_in(host: WebSocketHost) -> None:
    for index, origin in enumerate((f"http://127.0.0.1:{host.port}", f"http://localhost:{host.port}", "http://localhost:5173", None)):
        client = Client(host.websocket, host.key, origin=origin)
        assert client.hello(f"origin-{index}")["type"] == "welcome"
        client.close()


def test_an_upgrade_without_the_subprotocol_is_refused_400(host: WebSocketHost) -> None:
    assert refused_status(host) == 400
    assert refused_status(host, subprotocols=["zerobridge.2"]) == 400
    # The batched subprotocol is offered beside zerobridge.1, never alone (SPEC 2.2, since 1.9).
    assert refused_status(host, subprotocols=[BATCH]) == 400


# --- batches (SPEC 3.2, since 1.9) -------------------------------------------------------------------------------

def test_a_client_offering_only_zerobridge_1_gets_one_message_per_websocket_message(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    assert client.ws.subprotocol == SUBPROTOCOL and not client.batched
    client.hello("plain")
    for index in range(20):
        client.send(type="request", id=f"p{index}", action="echo", payload={"i": index})
    assert [client.next_of("response", id=f"p{index}")["result"] for index in range(20)] == [{"i": i} for i in range(20)]
    assert set(client.batches_received) == {1}
    client.close()


def test_a_batched_connection_reads_every_message_of_a_batch_in_order(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key, batched=True)
    assert client.ws.subprotocol == BATCH
    client.send_batch([[body(type="hello", peer="batched")]])
    assert client.next_of("welcome")["type"] == "welcome"
    client.send_batch([[body(type="request", id=f"b{index}", action="echo", payload={"i": index})] for index in range(200)])
    assert client.results(200) == {f"b{index}": {"i": index} for index in range(200)}
    # Every WebSocket message the host sent was a batch within SPEC 3.2's bounds (wsclient.decode_batch checks).
    assert sum(client.batches_received) >= 201
    client.close()


def test_the_host_starts_a_new_batch_before_64_kib(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key, batched=True)
    client.hello("large-batches")
    text = "x" * 20_000  # eight of them in one batch stay under the WebSocket bound (64 KiB + 128 KiB)
    client.send_batch([[body(type="request", id=f"l{index}", action="echo", payload={"text": text})] for index in range(8)])
    for index in range(8):
        assert client.next_of("response", id=f"l{index}")["result"] == {"text": text}
    # Eight answers of ~20 KB each: no batch may hold four (decode_batch asserts the 64 KiB bound on every one).
    assert sum(client.batches_received) >= 8 and max(client.batches_received) <= 3
    client.close()


@pytest.mark.parametrize("tail", [
    pytest.param(b"\x00\x00", id="length-cut-short"),
    pytest.param(struct.pack(">I", 999) + b"{}", id="length-past-the-end"),
])
def test_a_batch_with_broken_lengths_is_one_bad_message_and_none_of_it_is_read(host: WebSocketHost, tail: bytes) -> None:
    client = Client(host.websocket, host.key, batched=True)
    client.hello(f"broken-batch-{len(tail)}")
    request = client.payload([body(type="request", id="never", action="echo", payload={})])
    client.ws.send(encode_batch([request]) + tail)
    refusal = client.next_of("response")
    assert refusal["id"] is None and refusal["error"]["code"] == "bad_message" and "batch" in refusal["error"]["message"]
    # The request before the break was not read, and the connection is kept: the next call is answered first.
    client.send(type="request", id="after", action="echo", payload={"ok": True})
    assert client.next_of("response")["id"] == "after"
    client.close()


def test_more_than_1000_messages_in_a_batch_are_refused_whole(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key, batched=True)
    client.hello("huge-batch")
    pings = [client.payload([body(type="event", action="noop", payload={})]) for _ in range(1001)]
    client.ws.send(encode_batch(pings))
    refusal = client.next_of("response")
    assert refusal["id"] is None and refusal["error"]["code"] == "bad_message" and "1000" in refusal["error"]["message"]
    client.close()


def test_a_bad_message_in_a_batch_costs_only_itself(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key, batched=True)
    client.hello("one-bad-entry")
    first = client.payload([body(type="request", id="first", action="echo", payload={"n": 1})])
    last = client.payload([body(type="request", id="last", action="echo", payload={"n": 2})])
    client.ws.send(encode_batch([first, encode([b"only-one-frame"]), last]))
    seen = {message["id"]: message for message in (client.next_of("response") for _ in range(3))}
    assert seen["first"]["result"] == {"n": 1} and seen["last"]["result"] == {"n": 2}
    assert seen[None]["error"]["code"] == "bad_message"
    client.close()


# --- batches under one frame 0 (SPEC 3.3, on WebSocket connections since 1.11) ------------------------------

@pytest.mark.parametrize("batched", [True, False], ids=["zerobridge.1.batch", "zerobridge.1"])
def test_a_peer_that_reads_batches_gets_the_answers_to_one_batch_under_one_signature(host: WebSocketHost, batched: bool) -> None:
    client = Client(host.websocket, host.key, batched=batched)
    assert client.batched == batched
    assert client.hello(f"signed-batches-{batched}", features=["batch"])["batch"] is True
    client.send_signed_batch([[body(type="request", id=f"s{index}", action="echo", payload={"i": index})] for index in range(50)])
    assert client.results(50) == {f"s{index}": {"i": index} for index in range(50)}
    # The host answered what one read brought under one signature (wsclient checked each batch's MAC and counter):
    # 50 answers in at most a few batches, never one signature each.
    assert sum(client.signed_batches_received) == 50 and len(client.signed_batches_received) <= 5, client.signed_batches_received
    # A message on its own after a batch: its counter follows the batch's.
    client.send(type="request", id="alone", action="echo", payload={"after": True})
    assert client.next_of("response", id="alone")["result"] == {"after": True}
    client.close()


def test_a_peer_that_does_not_say_it_reads_batches_is_sent_none(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key, batched=True)
    # The host reads them (it says so), but sends them only to a peer whose hello lists "batch".
    assert client.hello("no-signed-batches")["batch"] is True
    client.send_signed_batch([[body(type="request", id=f"n{index}", action="echo", payload={"i": index})] for index in range(50)])
    assert client.results(50) == {f"n{index}": {"i": index} for index in range(50)}
    assert client.signed_batches_received == []  # wsclient fails on any batch under one frame 0 it did not ask for
    client.close()


def test_a_signed_batch_with_a_wrong_mac_is_refused_whole(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.hello("forged-batch", features=["batch"])
    batch = wire.join_batch([[b"", body(type="request", id="forged", action="echo", payload={})]])
    frame0 = client.channel.sign_batch(batch)  # type: ignore[union-attr]
    client.ws.send(encode([frame0[:-1] + (b"0" if frame0[-1:] != b"0" else b"1"), batch]))
    refusal = client.next_of("response")
    assert refusal["id"] is None and refusal["error"]["code"] == "unauthorized"
    client.close()


def test_a_foreign_host_header_is_refused_421(host: WebSocketHost) -> None:
    # DNS rebinding: a name the attacker controls, resolving to 127.0.0.1, must not read the page (it holds the key).
    assert get(host, "/", {"Host": f"rebind.evil.example:{host.port}"}).status == 421
    assert refused_status(host, subprotocols=[SUBPROTOCOL], additional_headers={"Host": f"evil.example:{host.port}"}) == 421


# --- keys --------------------------------------------------------------------------------------------------------

def test_no_key_is_refused_unsigned_and_opens_no_session(host: WebSocketHost) -> None:
    client = Client(host.websocket, None)
    client.send(type="hello", peer="no-key")
    frame0, refusal, _ = client.receive()
    assert frame0 == b"" and refusal["id"] is None and refusal["error"]["code"] == "unauthorized"
    client.send(type="request", id="x", action="echo", payload=1)
    assert client.receive()[1]["error"]["code"] == "unauthorized"
    client.close()


def test_a_wrong_key_is_refused(host: WebSocketHost) -> None:
    client = Client(host.websocket, "00" * 32)
    client.send(type="hello", peer="wrong-key")
    frame0, refusal, _ = client.receive()
    assert frame0 == b"" and refusal["error"]["code"] == "unauthorized"
    client.close()


def test_unkeyed_websocket_needs_an_explicit_choice(tmp_path: pathlib.Path) -> None:
    import subprocess

    from conftest import ZEROBRIDGE_BIN

    refused = subprocess.run([ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", "tcp://127.0.0.1:*",
                              "--ws", "127.0.0.1:0", "--no-key"], capture_output=True, timeout=60)
    assert refused.returncode != 0 and b"key" in refused.stderr
    unkeyed = start_host(tmp_path, keyed=False)
    try:
        client = Client(unkeyed.websocket, None)
        assert client.hello("dev")["type"] == "welcome"
        client.close()
    finally:
        unkeyed.stop()


# --- bad input: answered, the connection kept (SPEC 3.2) --------------------------------------------------------

@pytest.mark.parametrize("payload", [
    pytest.param(b"", id="empty"),
    pytest.param(encode([b'{"v":1,"type":"ping"}']), id="one-frame"),
    pytest.param(b"\x00\x00\x00", id="length-cut-short"),
    pytest.param(encode([b""]) + struct.pack(">I", 99) + b"{}", id="length-past-the-end"),
    pytest.param(encode([b""] * 16_387), id="too-many-frames"),
])
def test_undecodable_payloads_are_bad_message_and_the_connection_is_kept(host: WebSocketHost, payload: bytes) -> None:
    client = Client(host.websocket, host.key)
    client.ws.send(payload)
    frame0, refusal, _ = client.receive()
    assert frame0 == b"" and refusal["id"] is None and refusal["error"]["code"] == "bad_message"
    assert client.hello(f"after-bad-input-{len(payload)}")["type"] == "welcome"
    # With the channel open, the answer is signed (Client.receive checks the signature).
    client.ws.send(b"\x00")
    frame0, refusal, _ = client.receive()
    assert frame0.startswith(b"m.") and refusal["error"]["code"] == "bad_message"
    client.close()


def test_a_text_message_is_bad_message_saying_to_send_binary(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.ws.send('{"v":1,"type":"ping"}')
    refusal = client.receive()[1]
    assert refusal["error"]["code"] == "bad_message" and "binary" in refusal["error"]["message"]
    client.close()


def test_too_large_within_the_slack_is_answered_and_the_connection_kept(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.hello("large")
    client.send_frames([body(type="request", id="big", action="echo", payload="x" * 70_000)])
    # Keyed: refused by its size before its MAC, so its id is not read (SPEC 3.1).
    answer = client.next_of("response")
    assert answer["id"] is None and answer["error"]["code"] == "too_large"
    client.send(type="request", id="small", action="echo", payload=1)
    assert client.next_of("response", id="small")["result"] == 1
    client.close()


def test_a_message_past_the_websocket_bound_closes_1009_unread(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.hello("oversized")
    client.ws.send(b"\x00" * (65_536 + 131_072 + 1))
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            client.ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    # Fragmented, the same bound holds for the reassembled message.
    fragmented = Client(host.websocket, host.key)
    fragmented.ws.send([b"\x00" * 65_536] * 4)
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            fragmented.ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


# --- the session's limits hold as on ZeroMQ ---------------------------------------------------------------------

def test_requests_past_max_in_flight_are_overloaded_and_a_cancel_ends_one(host: WebSocketHost) -> None:
    client = Client(host.websocket, host.key)
    client.hello("busy")
    for i in range(260):  # the conformance host runs 256 at once per session (SPEC 7.11)
        client.send(type="request", id=f"s{i}", action="sleep", payload={"ms": 60_000})
    overloaded = [client.next_of("response")["error"]["code"] for _ in range(4)]
    assert overloaded == ["overloaded"] * 4
    client.send(type="cancel", id="s0")
    assert client.next_of("response", id="s0")["error"]["code"] == "cancelled"
    client.close()


# --- a slow reader is bounded; the others are served ------------------------------------------------------------

def test_a_stalled_reader_has_its_progress_coalesced_and_others_are_served(host: WebSocketHost) -> None:
    # A small receive buffer (no autotuning), so the host's queues fill long before the kernel's would.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: the window stays small
    sock.connect(("127.0.0.1", host.port))
    stalled = Client(host.websocket, host.key, sock=sock)
    stalled.hello("stalled", heartbeat_ms=120_000)  # flow control under test here, not heartbeats
    n = 100_000
    stalled.send(type="request", id="flood", action="count", payload={"n": n}, progress=True)
    # While it reads nothing, another page is served promptly (a bound that holds on a loaded machine).
    other = Client(host.websocket, host.key)
    other.hello("responsive")
    # The scenario is a reader that takes nothing for longer than the second after which progress is coalesced (SPEC
    # 7.13), counted from when the host's queues are full (a few seconds of a debug build's flood): 5 s in all; the
    # other page is served meanwhile.
    stall_until, i = time.monotonic() + 5, 0
    while time.monotonic() < stall_until:
        i += 1
        started = time.monotonic()
        other.send(type="request", id=f"e{i}", action="echo", payload=i)
        assert other.next_of("response", id=f"e{i}")["result"] == i
        assert time.monotonic() - started < 5
    assert host.rss_bytes() < 200 << 20
    # Reading again (with room to read fast): every progress message is there in order or counted as skipped, the last is the newest.
    sent, skipped, last = 0, 0, 0
    while True:
        message = stalled.next_of("progress", timeout=60) if last < n else stalled.next_of("response", id="flood", timeout=60)
        if message["type"] == "response":
            break
        sent += 1
        skipped += message.get("skipped", 0)
        assert message["payload"]["i"] > last
        last = message["payload"]["i"]
    assert message["result"] == {"n": n} and last == n
    assert skipped > 0 and sent + skipped == n
    assert host.rss_bytes() < 200 << 20
    other.close()
    stalled.close()


# --- connections past the bound are shed (SPEC 7.17) ------------------------------------------------------------

def test_connections_past_the_bound_are_shed_and_kept_ones_stay(tmp_path: pathlib.Path) -> None:
    bounded = start_host(tmp_path, "--max-connections", "3")
    try:
        kept = [Client(bounded.websocket, bounded.key) for _ in range(3)]
        for index, client in enumerate(kept):
            client.hello(f"kept-{index}")
        with pytest.raises((InvalidHandshake, ConnectionClosed, OSError, TimeoutError)):
            Client(bounded.websocket, bounded.key).hello("shed")
        kept[0].send(type="request", id="still", action="echo", payload=1)
        assert kept[0].next_of("response", id="still")["result"] == 1
        kept.pop().close()
        deadline = time.monotonic() + 30
        while True:  # the closed connection's place is free once the listener has seen it close
            try:
                assert Client(bounded.websocket, bounded.key).hello("later")["type"] == "welcome"
                break
            except (InvalidHandshake, ConnectionClosed, OSError, TimeoutError):
                assert time.monotonic() < deadline, "no connection admitted after one closed"
                time.sleep(0.05)
        for client in kept:
            client.close()
    finally:
        bounded.stop()


# --- connections not yet upgraded: an idle timeout and a bound (SPEC 2.2, decision 50) -----------------------------

def closed_by_host(connection: socket.socket, timeout: float = 30) -> bool:
    """Waits until the host closes the connection (EOF or reset), at most `timeout` seconds; whether it did."""
    connection.settimeout(timeout)
    try:
        while connection.recv(4096):
            pass  # a response the host wrote first
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def raw_connection(host: WebSocketHost) -> socket.socket:
    return socket.create_connection(("127.0.0.1", host.port), timeout=10)


def kept_alive_connection(host: WebSocketHost) -> http.client.HTTPConnection:
    """A connection that completed a request and stays open (keep-alive), holding a place among those not upgraded."""
    connection = http.client.HTTPConnection("127.0.0.1", host.port, timeout=10)
    connection.request("GET", "/assets/logo.svg")
    response = connection.getresponse()
    assert response.status == 200 and response.read() and response.headers["Connection"] == "keep-alive"
    return connection


def test_connections_that_never_upgrade_are_closed_after_the_idle_timeout(tmp_path: pathlib.Path, web_root: pathlib.Path) -> None:
    idle_host = start_host(tmp_path, "--web-root", str(web_root), "--ws-idle-timeout-ms", "1000")
    try:
        silent = raw_connection(idle_host)  # connects and sends nothing
        half = raw_connection(idle_host)
        half.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{idle_host.port}\r\n".encode())  # the blank line never comes
        started = time.monotonic()
        assert closed_by_host(silent) and closed_by_host(half)
        assert time.monotonic() - started < 25
        # A request trickled a byte at a time is cut off too: the timeout runs from the last response, not the last byte.
        trickle = raw_connection(idle_host)
        request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{idle_host.port}\r\nX-Pad: {'a' * 4000}\r\n\r\n".encode()
        cut_off = False
        for byte in request:
            try:
                trickle.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut_off = True
                break
            if select.select([trickle], [], [], 0.05)[0]:
                cut_off = closed_by_host(trickle)
                break
        assert cut_off, "a trickled request kept its connection for the whole request"
        # A connection that upgrades is no longer timed: its session outlives the timeout many times over.
        client = Client(idle_host.websocket, idle_host.key)
        client.hello("outlives-the-timeout")
        client.send(type="request", id="later", action="sleep", payload={"ms": 3000})
        assert client.next_of("response", id="later")["result"] == {"slept_ms": 3000}
        client.close()
    finally:
        idle_host.stop()


def test_connections_past_the_not_upgraded_bound_are_closed_and_sessions_keep_working(tmp_path: pathlib.Path, web_root: pathlib.Path) -> None:
    bounded = start_host(tmp_path, "--web-root", str(web_root), "--ws-max-pending", "2", "--ws-idle-timeout-ms", "120000")
    try:
        # Upgraded connections give their place back: three sessions with a bound of two.
        sessions = [Client(bounded.websocket, bounded.key) for _ in range(3)]
        for index, client in enumerate(sessions):
            client.hello(f"upgraded-{index}")
        held = [kept_alive_connection(bounded), kept_alive_connection(bounded)]
        refused = raw_connection(bounded)
        assert closed_by_host(refused), "a connection past the bound was kept"
        with pytest.raises((InvalidHandshake, ConnectionClosed, OSError, TimeoutError)):
            Client(bounded.websocket, bounded.key)
        for index, client in enumerate(sessions):
            client.send(type="request", id=f"still-{index}", action="echo", payload=index)
            assert client.next_of("response", id=f"still-{index}")["result"] == index
        held.pop().close()
        deadline = time.monotonic() + 30
        while True:  # the closed connection's place is free once the listener has seen it close
            try:
                late = Client(bounded.websocket, bounded.key)
                break
            except (InvalidHandshake, ConnectionClosed, OSError, TimeoutError):
                assert time.monotonic() < deadline, "no connection admitted after a held one closed"
                time.sleep(0.05)
        assert late.hello("late")["type"] == "welcome"
        for client in [*sessions, late]:
            client.close()
        held[0].close()
    finally:
        bounded.stop()


# --- the page -----------------------------------------------------------------------------------------------------

def test_the_page_is_served_with_the_configuration_injected_first(host: WebSocketHost) -> None:
    assert host.page == f"http://127.0.0.1:{host.port}/"
    response = get(host, "/")
    page = response.read().decode()
    assert response.status == 200 and response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-store" and response.headers["X-Content-Type-Options"] == "nosniff"
    head = page.index("<head>") + len("<head>")
    injected = f'<script>globalThis.__zerobridge = {{"endpoint":"{host.websocket}","info":'
    assert page[head:].startswith(injected)
    assert f'"key":"{host.key}"' in page
    # Before the page's own scripts, the WebKit layer as a classic script.
    assert page.index('<script src="/_zerobridge/webkit.js"></script>') < page.index('src="/assets/index-abc123.js"')


def test_assets_get_their_content_types(host: WebSocketHost) -> None:
    for path, kind in [("/assets/index-abc123.js", "text/javascript; charset=utf-8"),
                       ("/assets/index-abc123.css", "text/css; charset=utf-8"), ("/assets/logo.svg", "image/svg+xml")]:
        response = get(host, path)
        assert response.status == 200 and response.headers["Content-Type"] == kind, path
        assert b"__zerobridge" not in response.read()


@pytest.mark.parametrize("path", ["/../secret.txt", "/%2e%2e/secret.txt", "/assets/..%2f..%2fsecret.txt",
                                  "/leak.txt", "/up/secret.txt", "/.env", "/_zerobridge/..%2fpeer.js"])
def test_nothing_outside_the_web_root_is_served(host: WebSocketHost, path: str) -> None:
    response = get(host, path)
    assert response.status in (403, 404), path
    assert b"outside the web root" not in response.read()


def test_the_browser_peer_modules_are_served(host: WebSocketHost) -> None:
    response = get(host, "/_zerobridge/peer.js")
    assert response.status == 200 and response.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert get(host, "/_zerobridge/no-such-module.js").status == 404


def test_the_bridge_path_says_why_without_an_upgrade(host: WebSocketHost) -> None:
    assert get(host, "/zerobridge").status == 400
    assert get(host, "/missing.html").status == 404


def test_shutdown_says_bye_then_closes_1001(tmp_path: pathlib.Path) -> None:
    stopping = start_host(tmp_path)
    client = Client(stopping.websocket, stopping.key)
    client.hello("told")
    threading.Thread(target=stopping.stop).start()
    assert client.next_of("bye", timeout=30)["type"] == "bye"
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            client.ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
