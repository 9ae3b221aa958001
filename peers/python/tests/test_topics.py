"""Broadcast and topics (SPEC 7.15) and welcome.info (SPEC 5, 1.3): the wire fields, the peer's API
(connect(topics=...), subscribe/unsubscribe/topics, host_info, EventContext.topic) against a scripted host, and
the conformance host's `broadcast` action against the real Swift host."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

import zerobridge
from zerobridge import EventContext, wire

LONG = 10.0


async def eventually(condition: Callable[[], bool], what: str) -> None:
    for _ in range(int(LONG / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within {LONG} s: {what}")


def frames_of(body: Any) -> list[bytes]:
    return [b"", json.dumps(body).encode()]


def refused(body: Any) -> wire.WireError:
    with pytest.raises(wire.WireError) as caught:
        wire.decode(frames_of(body))
    return caught.value


WELCOME = {"v": 1, "type": "welcome", "host": "h", "session": "s1", "actions": [], "heartbeat_ms": 5000,
           "limits": {"max_message_bytes": 1024, "max_in_flight": 1}}


# --- the wire ----------------------------------------------------------------------------------------------------


def test_hello_topics_round_trip_and_default_to_none_subscribed() -> None:
    hello = wire.Hello("p", ("a",), topics=("news", "théme"))
    assert json.loads(wire.encode(hello)[1])["topics"] == ["news", "théme"]
    assert wire.decode(wire.encode(hello)) == hello
    assert wire.decode(frames_of({"v": 1, "type": "hello", "peer": "p"})).topics == ()  # type: ignore[union-attr]
    # Every hello says its whole set, an empty one too (as actions and features): each hello replaces the set.
    assert json.loads(wire.encode(wire.Hello("p"))[1])["topics"] == []


@pytest.mark.parametrize("topics", ["news", None, {"news": 1}, [1], [""], ["x" * 129], ["ok", None], [["nested"]]])
def test_hello_topics_that_are_not_a_list_of_names_are_bad_message(topics: Any) -> None:
    error = refused({"v": 1, "type": "hello", "peer": "p", "topics": topics, "id": "h1"})
    assert (error.code, error.id) == ("bad_message", "h1") and "topics" in error.message


def test_a_topic_of_128_code_points_is_a_name() -> None:
    topic = "\U0001F600" * 128  # code points, not UTF-16 units or bytes (SPEC 1)
    assert wire.decode(frames_of({"v": 1, "type": "hello", "peer": "p", "topics": [topic]})).topics == (topic,)  # type: ignore[union-attr]
    assert wire.decode(frames_of({"v": 1, "type": "event", "action": "a", "topic": topic})).topic == topic  # type: ignore[union-attr]


def test_welcome_info_is_an_object_when_present() -> None:
    info = {"protocol_revision": "1.3", "platform": {"os": "macOS", "features": ["a"]}}
    decoded = wire.decode(frames_of({**WELCOME, "info": info}))
    assert isinstance(decoded, wire.Welcome) and decoded.info == info
    assert wire.decode(wire.encode(decoded)) == decoded
    assert json.loads(wire.encode(decoded)[1])["info"] == info
    assert wire.decode(frames_of({**WELCOME, "info": {}})).info == {}  # type: ignore[union-attr]
    absent = wire.decode(frames_of(WELCOME))
    assert isinstance(absent, wire.Welcome) and absent.info is None
    assert "info" not in json.loads(wire.encode(absent)[1])


@pytest.mark.parametrize("info", [None, [], ["protocol_revision", "1.3"], "1.3", 13, True])
def test_welcome_info_that_is_not_an_object_is_bad_message(info: Any) -> None:
    error = refused({**WELCOME, "info": info})
    assert error.code == "bad_message" and "info" in error.message


def test_event_topic_round_trips_and_is_absent_by_default() -> None:
    event = wire.Event("theme", {"dark": True}, topic="ui")
    assert json.loads(wire.encode(event)[1]) == {"v": 1, "type": "event", "action": "theme", "payload": {"dark": True}, "topic": "ui"}
    assert wire.decode(wire.encode(event)) == event
    plain = wire.decode(frames_of({"v": 1, "type": "event", "action": "theme"}))
    assert plain == wire.Event("theme") and plain.topic is None  # type: ignore[union-attr]
    assert "topic" not in json.loads(wire.encode(wire.Event("theme"))[1])


@pytest.mark.parametrize("topic", [None, "", "x" * 129, 7, ["ui"], {"name": "ui"}])
def test_an_event_topic_that_is_not_a_name_is_bad_message(topic: Any) -> None:
    error = refused({"v": 1, "type": "event", "action": "theme", "topic": topic})
    assert (error.code, error.id) == ("bad_message", None) and "topic" in error.message


# --- the peer against a scripted host -----------------------------------------------------------------------------


async def test_hello_carries_the_topics_given_to_connect(fake_host: Any) -> None:
    async with fake_host() as host:
        async with zerobridge.connect(host.endpoint, name="p", topics=["sports", "news", "sports"]) as peer:
            assert (await host.next("hello"))["topics"] == ["news", "sports"]  # a set, sorted
            assert peer.topics == ("news", "sports")
        async with zerobridge.connect(host.endpoint, name="q") as plain:
            assert (await host.next("hello", peer="q"))["topics"] == []
            assert plain.topics == ()


def test_bad_topics_are_refused_before_connecting() -> None:
    for topics, error in (("news", TypeError), ([""], ValueError), (["x" * 129], ValueError), ([3], ValueError),
                          (["lone \ud800"], ValueError)):
        with pytest.raises(error):
            zerobridge.connect("tcp://127.0.0.1:1", name="p", topics=topics)


async def test_subscribe_and_unsubscribe_say_hello_again_with_the_whole_set(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p", topics=["news"]) as peer:
        first = await host.next("hello")
        assert first["topics"] == ["news"] and "session" not in first
        peer.subscribe("weather", "alerts")
        peer.subscribe("sports")  # the same loop turn: one hello for both, as when handlers change
        again = await host.next("hello")
        assert again["topics"] == ["alerts", "news", "sports", "weather"]
        assert again["session"] == "session-1" and again["resume_token"] == host.tokens["session-1"]
        assert again["actions"] == [] and again["catalogue"] == peer.catalogue.hash  # the rest is said again too
        assert peer.topics == ("alerts", "news", "sports", "weather")
        peer.unsubscribe("news", "never-subscribed")
        assert (await host.next("hello"))["topics"] == ["alerts", "sports", "weather"]
        peer.unsubscribe("alerts", "sports", "weather")
        assert (await host.next("hello"))["topics"] == []
        assert peer.topics == ()
        # Changes that change nothing send nothing; a bad name changes nothing and raises.
        peer.unsubscribe("news")
        peer.subscribe()
        with pytest.raises(ValueError):
            peer.subscribe("ok", "")
        with pytest.raises(ValueError):
            peer.unsubscribe("x" * 129)
        with pytest.raises(ValueError):
            peer.subscribe("fine", "\udc00 has no UTF-8 form")
        assert peer.topics == ()
        await asyncio.sleep(0.2)
        assert len(host.bodies("hello")) == 4
        # Handlers and topics share the one path: a handler added later keeps the topics in its hello.
        peer.subscribe("news")
        peer.add_handler("render", lambda payload: payload)
        last = await host.next("hello")
        assert (last["topics"], last["actions"]) == (["news"], ["render"])
        assert len(host.bodies("hello")) == 5
        assert peer.session == "session-1" and peer.connected


async def test_subscribing_before_start_goes_in_the_first_hello(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", topics=["a"])
        peer.subscribe("b")
        peer.unsubscribe("a")
        async with peer:
            assert (await host.next("hello"))["topics"] == ["b"]
            await asyncio.sleep(0.2)
            assert len(host.bodies("hello")) == 1


async def test_topics_survive_a_lost_host_in_the_fresh_hello(fake_host: Any) -> None:
    async with fake_host() as host, zerobridge.connect(host.endpoint, name="p", topics=["news"]) as peer:
        await host.next("hello")
        peer.subscribe("ui")
        assert (await host.next("hello"))["topics"] == ["news", "ui"]
        host.send(None, {"v": 1, "type": "bye"})  # lost: a fresh socket, a fresh session, the same topics
        fresh = await host.next("hello", timeout=LONG)
        assert "session" not in fresh and fresh["topics"] == ["news", "ui"]
        await peer.wait_connected(LONG)
        assert peer.session == "session-2" and peer.topics == ("news", "ui")


async def test_topics_survive_a_dropped_connection_in_the_resuming_hello(fake_host: Any, ipc_dir: Path) -> None:
    endpoint = f"ipc://{ipc_dir}/fake.sock"
    async with fake_host(endpoint=endpoint) as host:
        peer = await zerobridge.connect(endpoint, name="p", topics=["news"])
        try:
            await host.next("hello")
            peer.subscribe("ui")
            assert (await host.next("hello"))["topics"] == ["news", "ui"]
        except BaseException:
            await peer.close()
            raise
        known = dict(host.tokens or {})
    try:
        async with fake_host(endpoint=endpoint) as back:  # the same host as far as the peer can tell
            back.sessions, back.known_sessions, back.tokens = 1, {"session-1"}, known
            hello = await back.next("hello", timeout=LONG)
            assert hello["session"] == "session-1" and hello["topics"] == ["news", "ui"]
            await peer.wait_connected(LONG)
            assert peer.session == "session-1"
    finally:
        await peer.close()


async def test_a_subscription_made_while_a_hello_awaits_its_welcome_follows_the_welcome(fake_host: Any) -> None:
    async with fake_host() as host:
        host.silent = True  # the first hello is not answered yet
        peer = zerobridge.connect(host.endpoint, name="p", topics=["a"])
        starting = asyncio.ensure_future(peer.start())
        try:
            routing, hello = await host.next_with_routing("hello", timeout=LONG)
            assert hello["topics"] == ["a"]
            peer.subscribe("b")  # that hello is on its way without b
            host.silent = False
            host.sessions, host.known_sessions = 1, {"session-1"}
            host.tokens["session-1"] = secrets.token_hex(32)
            host.send(routing, host.welcome("session-1"))
            await asyncio.wait_for(starting, LONG)
            again = await host.next("hello", timeout=LONG)
            assert again["topics"] == ["a", "b"] and again["session"] == "session-1"
        finally:
            await peer.close()


async def test_host_info_is_the_latest_welcomes_info(fake_host: Any) -> None:
    async with fake_host(info={"protocol_revision": "1.3", "platform": "test"}) as host:
        async with zerobridge.connect(host.endpoint, name="p") as peer:
            assert peer.host_info == {"protocol_revision": "1.3", "platform": "test"}
            host.info = {"protocol_revision": "1.4"}  # a later welcome (answering a new hello) says otherwise
            peer.subscribe("x")
            await host.next("hello")
            await host.next("hello")
            await eventually(lambda: peer.host_info == {"protocol_revision": "1.4"}, "the second welcome's info")
            host.info = None  # a welcome without info: None, not the old one
            peer.subscribe("y")
            await host.next("hello")
            await eventually(lambda: peer.host_info is None, "no info from the third welcome")
    async with fake_host() as older, zerobridge.connect(older.endpoint, name="p") as peer:
        assert peer.host_info is None  # a host before 1.3


async def test_a_welcome_whose_info_is_not_an_object_is_answered_bad_message(fake_host: Any) -> None:
    async with fake_host(info={"protocol_revision": "1.3"}) as host, zerobridge.connect(host.endpoint, name="p") as peer:
        for info in ([], "1.3", None):
            welcome = {**host.welcome(peer.session or "session-1"), "info": info}
            host.send(None, welcome)
            answer = await host.next("response", timeout=LONG)
            assert answer["id"] is None and answer["error"]["code"] == "bad_message" and "info" in answer["error"]["message"]
        assert peer.connected and peer.host_info == {"protocol_revision": "1.3"}  # the bad welcomes changed nothing


async def test_the_topic_reaches_event_handlers_through_their_context(fake_host: Any) -> None:
    async with fake_host() as host:
        peer = zerobridge.connect(host.endpoint, name="p", topics=["ui"])
        seen: asyncio.Queue[Any] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        @peer.on_event("theme")
        async def theme(payload: Any, context: EventContext) -> None:
            seen.put_nowait(("async", payload, context.action, context.topic))

        @peer.on_event("sync_theme")
        def sync_theme(payload: Any, context: EventContext) -> None:  # a worker thread
            loop.call_soon_threadsafe(seen.put_nowait, ("sync", payload, context.action, context.topic))

        @peer.on_event("payload_only")
        async def payload_only(payload: Any) -> None:  # a handler without the context still works
            seen.put_nowait(("payload only", payload))

        async with peer:
            await host.next("hello")
            host.send(None, {"v": 1, "type": "event", "action": "theme", "payload": "dark", "topic": "ui"})
            host.send(None, {"v": 1, "type": "event", "action": "theme", "payload": "light"})  # sent to this peer alone
            host.send(None, {"v": 1, "type": "event", "action": "sync_theme", "payload": 1, "topic": "ui"})
            host.send(None, {"v": 1, "type": "event", "action": "sync_theme", "payload": 2})
            host.send(None, {"v": 1, "type": "event", "action": "payload_only", "payload": 3, "topic": "ui"})
            got = [await asyncio.wait_for(seen.get(), LONG) for _ in range(5)]
            assert got == [
                ("async", "dark", "theme", "ui"),
                ("async", "light", "theme", None),
                ("sync", 1, "sync_theme", "ui"),
                ("sync", 2, "sync_theme", None),
                ("payload only", 3),
            ]
            # An event whose topic is not a name is a bad message: answered, and no handler runs.
            host.send(None, {"v": 1, "type": "event", "action": "theme", "payload": "bad", "topic": ""})
            answer = await host.next("response", timeout=LONG)
            assert answer["id"] is None and answer["error"]["code"] == "bad_message" and "topic" in answer["error"]["message"]
            await asyncio.sleep(0.2)
            assert seen.empty()
            # Events are never answered, with a topic or without (the only response above was to the bad one).
            assert len(host.bodies("response")) == 1


def test_the_blocking_twin_subscribes_and_shows_host_info(fake_host: Any) -> None:
    async def scenario() -> None:
        async with fake_host(info={"protocol_revision": "1.3"}) as host:
            got: list[Any] = []
            arrived = threading.Event()
            loop = asyncio.get_running_loop()
            event = {"v": 1, "type": "event", "action": "note", "payload": 1, "topic": "c"}

            def blocking() -> tuple[Any, ...]:
                with zerobridge.connect_sync(host.endpoint, name="twin", topics=["b", "a"]) as peer:
                    @peer.on_event("note")
                    def note(payload: Any, context: EventContext) -> None:
                        got.append((payload, context.topic))
                        arrived.set()

                    before = peer.topics
                    peer.subscribe("c")
                    peer.unsubscribe("a")
                    after = peer.topics
                    loop.call_soon_threadsafe(host.send, None, event)  # the host's socket is the loop's
                    assert arrived.wait(LONG)
                    return before, after, peer.host_info

            before, after, info = await asyncio.to_thread(blocking)
            assert before == ("a", "b") and after == ("b", "c") and info == {"protocol_revision": "1.3"}
            assert got == [(1, "c")]
            assert [(await host.next("hello"))["topics"] for _ in range(3)] == [["a", "b"], ["a", "b", "c"], ["b", "c"]]

    asyncio.run(asyncio.wait_for(scenario(), 30))


# --- the real conformance host: the broadcast action (SPEC 11) -----------------------------------------------------


class Inbox:
    """The events one peer's handlers got: (action, payload, topic) in arrival order."""

    def __init__(self, peer: zerobridge.Peer) -> None:
        self.events: list[tuple[str, Any, str | None]] = []
        self.done = asyncio.Event()

        @peer.on_event("note")
        async def note(payload: Any, context: EventContext) -> None:
            self.events.append((context.action, payload, context.topic))

        @peer.on_event("done")
        async def done(payload: Any, context: EventContext) -> None:
            self.events.append((context.action, payload, context.topic))
            self.done.set()


class RawDealer:
    """An anonymous peer: a plain DEALER that never says hello."""

    def __init__(self, endpoint: str) -> None:
        self.context = zmq.asyncio.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)
        self.received: list[dict[str, Any]] = []

    async def call(self, rid: str, action: str, payload: Any) -> dict[str, Any]:
        await self.socket.send_multipart(frames_of({"v": 1, "type": "request", "id": rid, "action": action, "payload": payload}))
        while True:
            body = await self._receive(LONG)
            assert body is not None, f"no response to {rid}"
            if body.get("type") == "response" and body.get("id") == rid:
                return body

    async def _receive(self, timeout: float) -> dict[str, Any] | None:
        if not await self.socket.poll(int(timeout * 1000)):
            return None
        frames = await self.socket.recv_multipart()
        body = json.loads(frames[1])
        self.received.append(body)
        return body

    async def drain(self, seconds: float) -> None:
        while await self._receive(seconds) is not None:
            pass

    def close(self) -> None:
        self.socket.close(0)
        self.context.term()


async def test_broadcast_reaches_every_named_peer_or_a_topics_subscribers(start_host: Callable[..., Any]) -> None:
    """Two Python peers (one subscribed to "news") and an anonymous DEALER on a host of their own, so that the
    delivered counts are exact."""
    host = start_host()
    subscriber = zerobridge.connect(host.endpoint, name="py-subscriber", topics=["news"])
    other = zerobridge.connect(host.endpoint, name="py-other")
    a, b = Inbox(subscriber), Inbox(other)
    anonymous = RawDealer(host.endpoint)
    try:
        async with subscriber, other:
            assert (await anonymous.call("r0", "echo", "anonymous session"))["result"] == "anonymous session"

            # To every named session: both peers (the requester included), not the anonymous one.
            assert await subscriber.call("broadcast", {"action": "note", "payload": 1}) == {"delivered": 2, "skipped": 0}
            # To a topic: its subscriber only, whoever asks.
            assert await subscriber.call("broadcast", {"action": "note", "payload": 2, "topic": "news"}) == {"delivered": 1, "skipped": 0}
            assert await other.call("broadcast", {"action": "note", "payload": 3, "topic": "news"}) == {"delivered": 1, "skipped": 0}
            assert await other.call("broadcast", {"action": "note", "payload": "nobody", "topic": "sports"}) == {"delivered": 0, "skipped": 0}
            answer = await anonymous.call("r1", "broadcast", {"action": "note", "payload": 4, "topic": "news"})
            assert answer["ok"] and answer["result"] == {"delivered": 1, "skipped": 0}  # an anonymous requester gets none

            # Subscribing says hello again; what the peer sends next reaches the host after it.
            other.subscribe("news")
            assert await other.call("echo", "after subscribing") == "after subscribing"
            assert await subscriber.call("broadcast", {"action": "note", "payload": 5, "topic": "news"}) == {"delivered": 2, "skipped": 0}
            subscriber.unsubscribe("news")
            assert await subscriber.call("echo", "after unsubscribing") == "after unsubscribing"
            assert await subscriber.call("broadcast", {"action": "note", "payload": 6, "topic": "news"}) == {"delivered": 1, "skipped": 0}
            assert await subscriber.call("broadcast", {"action": "note", "payload": 7}) == {"delivered": 2, "skipped": 0}

            # The copies to one session keep the order of the broadcasts: once "done" is in, everything before it is.
            assert await other.call("broadcast", {"action": "done"}) == {"delivered": 2, "skipped": 0}
            await asyncio.wait_for(asyncio.gather(a.done.wait(), b.done.wait()), LONG)
            assert a.events == [
                ("note", 1, None), ("note", 2, "news"), ("note", 3, "news"), ("note", 4, "news"), ("note", 5, "news"),
                ("note", 7, None), ("done", None, None),
            ]
            assert b.events == [("note", 1, None), ("note", 5, "news"), ("note", 6, "news"), ("note", 7, None), ("done", None, None)]
            await anonymous.drain(0.3)
            assert [m["type"] for m in anonymous.received] == ["response", "response"]  # its answers, never an event
    finally:
        anonymous.close()


async def test_broadcast_refuses_payloads_that_are_not_its_own(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-broadcast-bad") as peer:
        for payload in (None, "note", {"payload": 1}, {"action": 7}, {"action": "note", "topic": 7}):
            with pytest.raises(zerobridge.InvalidPayload):
                await peer.call("broadcast", payload)


async def test_the_conformance_hosts_welcome_info(host: Any) -> None:
    async with zerobridge.connect(host.endpoint, name="py-info") as peer:
        assert peer.host_info == {"protocol_revision": "1.6"}
    with zerobridge.connect_sync(host.endpoint, name="py-info-sync") as twin:
        assert twin.host_info == {"protocol_revision": "1.6"}


def test_the_blocking_twin_gets_broadcasts_on_its_topics(start_host: Callable[..., Any]) -> None:
    host = start_host()
    got: list[tuple[Any, str | None]] = []
    arrived = threading.Event()
    with zerobridge.connect_sync(host.endpoint, name="py-twin-topics", topics=["ui"]) as peer:

        @peer.on_event("theme")
        def theme(payload: Any, context: EventContext) -> None:
            got.append((payload, context.topic))
            if len(got) == 2:
                arrived.set()

        assert peer.call("broadcast", {"action": "theme", "payload": "dark", "topic": "ui"}) == {"delivered": 1, "skipped": 0}
        peer.unsubscribe("ui")
        assert peer.call("broadcast", {"action": "theme", "payload": "none", "topic": "ui"}) == {"delivered": 0, "skipped": 0}
        assert peer.call("broadcast", {"action": "theme", "payload": "all"}) == {"delivered": 1, "skipped": 0}
        assert arrived.wait(LONG)
        assert got == [("dark", "ui"), ("all", None)]


async def test_the_conformance_hosts_library_version(host: Any) -> None:
    # SPEC 5, decision 44: the host's welcome names its ZeroBridge version, the same as this package's.
    async with zerobridge.connect(host.endpoint, name="py-library-version") as peer:
        assert peer.host_library_version == zerobridge.__version__
    with zerobridge.connect_sync(host.endpoint, name="py-library-version-sync") as twin:
        assert twin.host_library_version == zerobridge.__version__
