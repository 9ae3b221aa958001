"""Keyed connections (SPEC 3.1): every case of protocol/fixtures/signatures.json, the peer against a keyed fake host
(conftest.FakeHost with a key, whose rules are conftest.HostChannels), and the peer against the real host, which puts
a new key in the connection file it writes unless told `--no-key`."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import zerobridge
import zerobridge.peer as peer_module
from conftest import UNAUTHORIZED_ANSWER, FakeHost, HostChannels
from zerobridge import BridgeTimeout, NameTaken, read_connection_file, signing

FIXTURE = json.loads((Path(__file__).resolve().parents[3] / "protocol" / "fixtures" / "signatures.json").read_text())[0]
KEY = bytes.fromhex(FIXTURE["key"])
# Generous: a loaded 2-core machine may take seconds for what takes milliseconds here.
WAIT = 20.0
# How long a peer that must not be welcomed tries: its failure is the expected outcome, so this only costs time.
REFUSED_CONNECT_TIMEOUT = 2.0


def frames_of(case: dict[str, Any]) -> list[bytes]:
    return [bytes.fromhex(f["hex"]) if isinstance(f, dict) else f.encode() for f in case["frames"]]


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.02)


# --- protocol/fixtures/signatures.json ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", FIXTURE["sign"], ids=[c["description"] for c in FIXTURE["sign"]])
def test_sign_case(case: dict[str, Any]) -> None:
    frames = frames_of(case)
    if case["kind"] == "hello":
        assert signing.sign_opening(KEY, case["channel"], case["ms"], frames).decode() == case["frame0"]
        # The peer's channel opens with exactly that signature.
        assert signing.PeerChannel(KEY, case["channel"]).sign(frames, case["ms"]).decode() == case["frame0"]
    else:
        assert signing.sign_message(KEY, case["kind"], case["channel"], case["counter"], frames).decode() == case["frame0"]


def test_the_peer_channel_signs_its_hello_then_counts_from_1() -> None:
    hello, first = FIXTURE["sign"][0], FIXTURE["sign"][1]
    channel = signing.PeerChannel(KEY, hello["channel"])
    assert channel.sign(frames_of(first), 1) is None  # nothing before the opening hello
    assert channel.sign(frames_of(hello), hello["ms"]).decode() == hello["frame0"]
    assert channel.sign(frames_of(first), 2).decode() == first["frame0"]  # m.1, whatever the clock


@pytest.mark.parametrize("case", FIXTURE["verify"], ids=[c["description"] for c in FIXTURE["verify"]])
def test_verify_case(case: dict[str, Any]) -> None:
    if case["side"] == "peer":
        channel = signing.PeerChannel(KEY, case["channel"])

        def accepts(message: dict[str, Any]) -> bool:
            return channel.refusal(message["frame0"].encode(), frames_of(message)) is None
    else:
        host = HostChannels(KEY)

        def accepts(message: dict[str, Any]) -> bool:
            connection = message.get("connection", "a").encode()
            accepted = host.receive(connection, message["frame0"].encode(), frames_of(message), case["now_ms"]) is None
            assert host.clock_skew_ms == message.get("clock_skew_ms"), f"the clock skew of {message['frame0']}"
            return accepted

    for index, message in enumerate(case["messages"]):
        assert accepts(message) == message["accept"], f"message {index} ({message.get('note', message['frame0'])})"


def test_signatures_are_parsed_strictly() -> None:
    mac = "0" * 64
    assert signing.parse(f"m.{2**63 - 1}.{mac}".encode()) == signing.Signed(2**63 - 1, mac.encode())
    assert signing.parse(f"h.{'a' * 32}.0.{mac}".encode()) == signing.Opening("a" * 32, 0, mac.encode())
    for bad in [f"m.1.{mac}\n", f"m.1.{mac}.", f" m.1.{mac}", f"m.-1.{mac}", f"m.1e3.{mac}", f"m.{'9' * 20}.{mac}",
                f"h.{'a' * 32}.00.{mac}", f"h.{'a' * 32}.{2**63}.{mac}", f"x.1.{mac}", "m.1.", "h..1."]:
        assert signing.parse(bad.encode()) is None, bad


# --- against a keyed fake host ------------------------------------------------------------------------------------


def check_peer_messages(host: FakeHost, routing: bytes) -> str:
    """Verifies, independently of HostChannels, every message the peer sent on the connection `routing`: an opening
    hello first, with a fresh clock, then p2h counters 1, 2, 3, ...; returns the channel's nonce."""
    messages = [frames for r, frames in host.raw if r == routing]
    assert messages, "the peer sent nothing on that connection"
    opening = re.fullmatch(rb"h\.([0-9a-f]{32})\.([0-9]+)\.([0-9a-f]{64})", messages[0][0])
    assert opening is not None, messages[0][0]
    nonce, ms = opening[1].decode(), int(opening[2])
    assert json.loads(messages[0][1])["type"] == "hello"
    assert abs(ms - time.time() * 1000) < 60_000
    assert hmac.compare_digest(opening[3], signing.mac(KEY, "hello", nonce, ms, messages[0][1:]))
    for counter, frames in enumerate(messages[1:], start=1):
        assert frames[0] == b"m.%d.%s" % (counter, signing.mac(KEY, "p2h", nonce, counter, frames[1:]))
    return nonce


async def test_a_keyed_peer_signs_its_hello_and_everything_after_it(fake_host: Any, tmp_path: Path) -> None:
    async with fake_host(key=KEY) as host:
        path = tmp_path / "connection.json"
        path.write_text(json.dumps({"protocol": 1, "endpoint": host.endpoint, "host": "fake",
                                    "signature_scheme": "hmac-sha256", "key": KEY.hex()}))
        async with zerobridge.connect(path, name="p", handlers={"twice": lambda p: p * 2}, connect_timeout=WAIT) as peer:
            assert peer.info.key == KEY
            calling = asyncio.ensure_future(peer.call("echo", "hi"))
            routing, request = await host.next_with_routing("request", action="echo")
            host.send(routing, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": "hi"})
            assert await calling == "hi"
            await peer.post("note", b"\x00\xff")  # an attachment is signed too
            await host.next("event", action="note")
            host.send(routing, {"v": 1, "type": "request", "id": "h1", "action": "twice", "payload": 21})
            assert (await host.next("response", id="h1"))["result"] == 42
            assert peer.refused_messages == 0 and host.refused == []
        await host.next("bye")
        check_peer_messages(host, routing)
        assert len([r for r, _ in host.raw if r == routing]) >= 5  # hello, request, event, response, bye


async def test_after_a_loss_the_new_connection_opens_a_new_channel(fake_host: Any) -> None:
    async with fake_host(key=KEY) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=KEY.hex(), connect_timeout=WAIT) as peer:
            first, _ = await host.next_with_routing("hello")
            host.send(first, {"v": 1, "type": "bye"})  # a loss: a new socket, a new channel
            second, _ = await host.next_with_routing("hello", timeout=WAIT)
            await peer.wait_connected(WAIT)
            assert second != first and check_peer_messages(host, second) != check_peer_messages(host, first)
            assert peer.session == "session-2" and host.refused == [] and peer.refused_messages == 0
            # What the host signed for the old channel is refused on the new one, its counter notwithstanding.
            stale_welcome = next(frames for r, frames in host.sent if r == first)
            host.send_frames(second, stale_welcome, sign=False)
            await wait_for(lambda: peer.refused_messages == 1, "the old channel's welcome refused")
            assert peer.connected


async def test_a_broken_connection_is_a_loss_and_the_next_one_opens_a_new_channel(fake_host: Any, ipc_dir: Path) -> None:
    endpoint = f"ipc://{ipc_dir}/keyed.sock"
    # Heartbeats too slow to notice anything within the test: the broken connection itself must be the loss.
    async with fake_host(key=KEY, endpoint=endpoint, heartbeat_ms=600_000) as first_host:
        peer = await zerobridge.connect(endpoint, name="p", key=KEY, connect_timeout=WAIT)
        routing, _ = await first_host.next_with_routing("hello")
        nonce = check_peer_messages(first_host, routing)
    try:  # the first host closed its socket: the connection broke
        await wait_for(lambda: not peer.connected, "the peer noticed the broken connection")
        async with fake_host(key=KEY, endpoint=endpoint, heartbeat_ms=600_000) as second_host:
            routing, _ = await second_host.next_with_routing("hello", timeout=WAIT)
            await peer.wait_connected(WAIT)
            assert check_peer_messages(second_host, routing) != nonce
            assert second_host.refused == [] and peer.refused_messages == 0
    finally:
        await peer.close()


async def test_forged_replayed_and_unsigned_host_messages_are_refused_counted_and_never_answered(
    fake_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="zerobridge")
    async with fake_host(key=KEY) as host:
        async with zerobridge.connect(host.endpoint, name="p", key=KEY, handlers={"run": lambda p: "ran"},
                                      connect_timeout=WAIT) as peer:
            routing, _ = await host.next_with_routing("hello")
            nonce = host.keyed.channels[routing][0]
            calling = asyncio.ensure_future(peer.call("echo", "real"))
            request = await host.next("request", action="echo")
            forged = json.dumps({"v": 1, "type": "response", "id": request["id"], "ok": True, "result": "forged"}).encode()
            run = json.dumps({"v": 1, "type": "request", "id": "x", "action": "run", "payload": None}).encode()
            next_counter = host.keyed.channels[routing][2] + 1
            attempts = [
                [b"", forged],  # unsigned
                [b"not-a-signature", forged],
                [b"m.%d.%s" % (next_counter, b"0" * 64), forged],  # a wrong MAC
                [signing.sign_message(KEY, "h2p", signing.new_nonce(), next_counter, [forged]), forged],  # another channel
                [signing.sign_message(KEY, "p2h", nonce, next_counter, [forged]), forged],  # signed as the peer's
                [signing.sign_opening(KEY, nonce, int(time.time() * 1000), [forged]), forged],  # only peers open
                [signing.sign_message(KEY, "h2p", nonce, next_counter, [forged]), forged, b"extra"],  # other frames
                next(frames for r, frames in host.sent if r == routing),  # the welcome again: a replay
                [b"", run],  # a request without a signature: never run, never answered
            ]
            for frames in attempts:
                host.send_frames(routing, frames, sign=False)
            await wait_for(lambda: peer.refused_messages == len(attempts), "every attempt refused")
            host.send_frames(routing, [b"", UNAUTHORIZED_ANSWER], sign=False)  # how a host refuses what we sent
            await wait_for(lambda: peer.refused_messages == len(attempts) + 1, "the unauthorized answer counted")
            assert not calling.done()
            host.send(routing, {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": "real"})
            assert await calling == "real" and peer.connected
            await peer.post("marker")
            await host.next("event", action="marker")
            assert [b for b in host.bodies("response")] == []  # the peer answered none of it
            assert host.refused == []
    refused = [r for r in caplog.records if "dropped a message from the host" in r.getMessage()]
    assert refused and refused[0].levelno == logging.WARNING  # the first warned, the flood after it at debug
    assert all(r.levelno == logging.DEBUG for r in refused[1:])
    unauthorized = [r for r in caplog.records if "as unauthorized" in r.getMessage()]
    assert len(unauthorized) == 1 and unauthorized[0].levelno == logging.WARNING
    assert KEY.hex() not in caplog.text


async def test_a_signed_name_taken_before_the_welcome_is_read_and_hello_said_again(
    fake_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zerobridge.peer, "HELLO_RETRY_INTERVAL", 0.2)
    async with fake_host(key=KEY) as host:
        host.refuse_names = True  # the answer to hello is name_taken, signed for the channel
        peer = zerobridge.connect(host.endpoint, name="p", key=KEY, connect_timeout=REFUSED_CONNECT_TIMEOUT, wait_for_name=True)
        with pytest.raises(NameTaken):
            await peer.start()
        peer = zerobridge.connect(host.endpoint, name="p", key=KEY, connect_timeout=WAIT, wait_for_name=True)
        starting = asyncio.ensure_future(peer.start())
        try:
            routing, _ = await host.next_with_routing("hello")
            await host.next("hello", timeout=WAIT)  # said again, on the same channel
            host.refuse_names = False
            await asyncio.wait_for(starting, WAIT)
            assert peer.connected and peer.refused_messages == 0 and host.refused == []
            check_peer_messages(host, routing)
        finally:
            await peer.close()


async def test_a_wrong_key_is_never_welcomed_and_the_host_s_answers_are_counted(
    fake_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    other = bytes(32)
    async with fake_host(key=KEY) as host:
        peer = zerobridge.connect(host.endpoint, name="p", key=other, connect_timeout=REFUSED_CONNECT_TIMEOUT)
        with pytest.raises(zerobridge.Unauthorized, match="unauthorized"):
            await peer.start()
        assert host.refused and host.bodies("hello") == []
        assert peer.refused_messages >= 1
    assert any(r.levelno == logging.WARNING and "as unauthorized" in r.getMessage() for r in caplog.records)
    assert other.hex() not in caplog.text and KEY.hex() not in caplog.text


async def test_a_keyed_peer_refuses_a_host_that_does_not_sign(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", key=KEY, connect_timeout=REFUSED_CONNECT_TIMEOUT)
        with pytest.raises(BridgeTimeout, match="no signature"):
            await peer.start()
        assert host.bodies("hello") and peer.refused_messages >= 1
        assert host.bodies("response") == []  # the unsigned welcome was not answered


def test_key_options_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text(json.dumps({"protocol": 1, "endpoint": "tcp://127.0.0.1:1", "host": "h",
                                "signature_scheme": "hmac-sha256", "key": "AB" * 32}))
    peer = zerobridge.connect(path, name="p")
    assert peer.info.key == b"\xab" * 32 and peer.refused_messages == 0
    for text in (repr(peer.info), repr(vars(peer)).lower()):  # the key is a secret
        assert "ab" * 32 not in text and repr(b"\xab" * 32)[2:-1] not in text
    with pytest.raises(ValueError, match="brings its own key"):
        zerobridge.connect(path, name="p", key=KEY)
    with pytest.raises(ValueError, match="key must be hex"):
        zerobridge.connect("tcp://127.0.0.1:1", name="p", key="xyz")
    assert zerobridge.connect("tcp://127.0.0.1:1", name="p", key="").info.key == b""  # no key: unsigned
    assert zerobridge.connect("tcp://127.0.0.1:1", name="p", key=KEY.hex().upper()).info.key == KEY


# --- against the real host ----------------------------------------------------------------------------------------


def keyed_host(start_host: Callable[..., Any], path: Path, transport: str, ipc_dir: Path, *extra: str) -> Any:
    endpoint = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{ipc_dir}/keyed.sock"
    return start_host("--connection-file", str(path), *extra, endpoint=endpoint)


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
async def test_through_the_host_s_connection_file_everything_is_signed(
    start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path, transport: str
) -> None:
    path = tmp_path / "host.json"
    host = keyed_host(start_host, path, transport, ipc_dir)
    written = json.loads(path.read_text())
    assert re.fullmatch("[0-9a-f]{64}", written["key"]) and path.stat().st_mode & 0o777 == 0o600
    async with zerobridge.connect(path, name="py-keyed", handlers={"twice": lambda p: p * 2}, connect_timeout=WAIT) as peer:
        assert peer.info.key.hex() == written["key"]
        assert await peer.call("echo", {"signed": True}) == {"signed": True}
        async with peer.stream("count", {"n": 5}) as call:
            assert [p async for p in call.progress] == [{"i": i, "n": 5} for i in range(1, 6)]
            assert await call.result == {"n": 5}
        assert await peer.call("callback", {"action": "twice", "payload": 21}) == 42  # host -> peer, signed too
        assert await peer.call("echo", b"\x00bytes") == b"\x00bytes"  # an attachment frame
        assert peer.refused_messages == 0
    assert "refused" not in host.stderr_text()


def test_the_blocking_twin_reads_a_keyed_connection_file(start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path) -> None:
    path = tmp_path / "host.json"
    keyed_host(start_host, path, "tcp", ipc_dir)
    with zerobridge.connect_sync(path, name="py-keyed-sync", connect_timeout=WAIT) as peer:
        assert peer.call("add", {"a": 1, "b": 2}) == 3
        with peer.stream("count", {"n": 2}) as call:
            assert list(call.progress) == [{"i": 1, "n": 2}, {"i": 2, "n": 2}]
        assert peer.refused_messages == 0


async def test_a_wrong_key_or_none_is_never_welcomed_by_a_keyed_host(
    start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path
) -> None:
    path = tmp_path / "host.json"
    host = keyed_host(start_host, path, "tcp", ipc_dir)
    wrong = zerobridge.connect(host.endpoint, name="py-wrong-key", key=bytes(32), connect_timeout=REFUSED_CONNECT_TIMEOUT)
    with pytest.raises(zerobridge.Unauthorized, match="unauthorized"):
        await wrong.start()
    assert wrong.refused_messages >= 1  # the host's unsigned unauthorized answers, counted and not answered
    await wait_for(lambda: "refused" in host.stderr_text(), "the host logs the refusal")
    unkeyed = zerobridge.connect(host.endpoint, name="py-no-key", connect_timeout=REFUSED_CONNECT_TIMEOUT)
    with pytest.raises(zerobridge.Unauthorized, match="requires a key"):
        await unkeyed.start()
    async with zerobridge.connect(path, name="py-right-key", connect_timeout=WAIT) as peer:  # the host is fine
        assert await peer.call("echo", 1) == 1


async def test_a_peer_400_s_off_the_host_s_clock_is_told_the_clocks_differ_not_that_the_key_is_wrong(
    start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "host.json"
    keyed_host(start_host, path, "tcp", ipc_dir)
    real_now_ms = peer_module.now_ms
    for offset, side in ((400_000, "ahead"), (-400_000, "behind")):
        monkeypatch.setattr(peer_module, "now_ms", lambda: real_now_ms() + offset)  # this peer's clock only
        peer = zerobridge.connect(path, name="py-skewed", connect_timeout=REFUSED_CONNECT_TIMEOUT)
        with pytest.raises(zerobridge.Unauthorized) as caught:
            await peer.start()
        message = str(caught.value)
        assert f"the host's clock and this peer's differ by 400 s (this peer's is {side}), more than the 300 s window" in message, message
        assert "is the key" not in message
        assert "400 s " + ("ahead of" if offset > 0 else "behind") + " the host's" in message  # the host's own words
    monkeypatch.setattr(peer_module, "now_ms", real_now_ms)
    async with zerobridge.connect(path, name="py-in-time", connect_timeout=WAIT) as peer:  # the host is fine
        assert await peer.call("echo", 1) == 1


def test_a_clock_skew_is_said_in_whole_seconds_unless_that_would_hide_the_window() -> None:
    assert signing.clock_skew_diagnosis({"clock_skew_ms": 300_001, "window_ms": 300_000}) == (
        "the host's clock and this peer's differ by 300001 ms (this peer's is ahead), more than the 300 s window for an"
        " opening hello: set both clocks right (NTP)")
    assert "differ by 400 s (this peer's is behind)" in str(signing.clock_skew_diagnosis({"clock_skew_ms": -400_499}))
    for data in (None, {}, {"clock_skew_ms": "400000"}, {"clock_skew_ms": True}, [400_000]):
        assert signing.clock_skew_diagnosis(data) is None


async def test_no_key_writes_an_empty_key_and_the_peer_connects_unsigned(
    start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path
) -> None:
    path = tmp_path / "host.json"
    keyed_host(start_host, path, "tcp", ipc_dir, "--no-key")
    assert json.loads(path.read_text())["key"] == ""
    async with zerobridge.connect(path, name="py-unkeyed", connect_timeout=WAIT) as peer:
        assert peer.info.key == b"" and await peer.call("echo", "plain") == "plain"


async def test_a_host_restarted_through_the_same_file_is_followed_to_its_new_key(
    start_host: Callable[..., Any], tmp_path: Path, ipc_dir: Path
) -> None:
    path = tmp_path / "host.json"
    first = keyed_host(start_host, path, "ipc", ipc_dir)
    async with zerobridge.connect(path, name="py-follow", connect_timeout=WAIT) as peer:
        old_key = peer.info.key
        first.stop()  # says bye, and removes the file
        await wait_for(lambda: not peer.connected, "the peer lost the host")
        keyed_host(start_host, path, "ipc", ipc_dir)  # the same endpoint, a new key
        await peer.wait_connected(WAIT)
        assert peer.info.key != old_key and peer.info.key == read_connection_file(path).key
        assert await peer.call("echo", "followed") == "followed"


def test_fixture_tests_refuse_a_keyed_connection_file_clearly(tmp_path: Path) -> None:
    """Conversations are raw frames, sent unsigned: a keyed host would refuse every one of them as unauthorized."""
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"protocol": 1, "endpoint": "tcp://127.0.0.1:1", "host": "h",
                                "signature_scheme": "hmac-sha256", "key": KEY.hex()}))
    conversation = Path(__file__).resolve().parents[3] / "protocol" / "fixtures" / "conversations" / "echo.json"
    test_file = tmp_path / "test_service.py"
    test_file.write_text("from zerobridge.testing import fixture_tests\n"
                         f"test_service = fixture_tests({str(conversation)!r}, endpoint={str(path)!r})\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 1 and "zerobridge serve --no-key" in run.stdout, run.stdout + run.stderr
    assert KEY.hex() not in run.stdout + run.stderr
