"""The WebKit compatibility layer (peers/node/src/webkit.js), injected by the real host into the pages it serves:
window.webkit.messageHandlers as WKScriptMessageHandler(WithReply), and the host's evaluateJavaScript /
callAsyncJavaScript ($evaluate) in a page that opted in; a page unloaded mid-call is peer_lost at the host."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import zerobridge
from playwright.sync_api import Page

from conftest import Host

PAGE_PEER = "() => globalThis.__zerobridge.peer.then((peer) => peer.name)"


def call_from_the_host_side(host: Host, action: str, payload: Any) -> Any:
    """What the native side does: a peer of the host (here Python, through the host's callPeer) calls into the page."""

    async def run() -> Any:
        assert host.connection_file is not None
        async with zerobridge.connect(str(host.connection_file), name="native") as native:
            return await native.call("callPeer", payload | {"action": action}, timeout=30)

    outcome: dict[str, Any] = {}

    def in_a_thread() -> None:  # Playwright's sync API keeps an event loop running in this one
        try:
            outcome["value"] = asyncio.run(run())
        except zerobridge.BridgeError as error:
            outcome["value"] = {"code": error.code, "message": str(error)}

    caller = threading.Thread(target=in_a_thread)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "the host-side call did not end within 60 s"
    return outcome["value"]


def test_posts_reply_reject_and_resolve_undefined(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/webkit.html"))
    outcome = page.evaluate("""async () => {
        const handlers = window.webkit.messageHandlers;
        const early = await window.early;  // posted from <head> before the connection was up
        const sum = await handlers.add.postMessage({ a: 2, b: 3 });
        let rejected = null;
        try { await handlers.fail.postMessage({ message: 'Unexpected message received' }); }
        catch (error) { rejected = [error instanceof Error, error.message]; }
        const withoutReply = handlers.somethingHappened.postMessage({ x: 1 });
        return { early, sum, rejected, isPromise: withoutReply instanceof Promise, resolved: await withoutReply === undefined,
                 same: handlers.add === handlers.add };
    }""")
    assert outcome["early"] == {"posted": "before the connection"}
    assert outcome["sum"] == 5
    assert outcome["rejected"][0] is True and "Unexpected message received" in outcome["rejected"][1]
    assert outcome["isPromise"] and outcome["resolved"] and outcome["same"]


def test_bodies_that_cannot_be_carried_are_refused(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/webkit.html"))
    refusals = page.evaluate("""async () => {
        const refusal = (body) => window.webkit.messageHandlers.echo.postMessage(body).then(() => null, (error) => error.message);
        return [await refusal({ f() {} }), await refusal(Symbol('s')), await refusal({ n: NaN }), await refusal(new Map())];
    }""")
    assert all(isinstance(message, str) for message in refusals), refusals
    assert "payload.f" in refusals[0]


def test_the_host_evaluates_in_a_page_that_opted_in(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/webkit.html"))
    name = page.evaluate(PAGE_PEER)
    # evaluateJavaScript: a script's value
    title = call_from_the_host_side(keyed_host, "$evaluate", {"peer": name, "payload": {"script": "return document.getElementById('status').textContent"}})
    assert title == "ready"
    # callAsyncJavaScript: a function body, named arguments, an awaited promise
    script = "await new Promise((resolve) => setTimeout(resolve, 20)); return { sum: x + y, list: items.map((i) => i * 2) };"
    result = call_from_the_host_side(keyed_host, "$evaluate", {"peer": name, "payload": {"script": script, "arguments": {"x": 2, "y": 40, "items": [1, 2]}}})
    assert result == {"sum": 42, "list": [2, 4]}
    rejected = call_from_the_host_side(keyed_host, "$evaluate", {"peer": name, "payload": {"script": "throw new Error('nope')"}})
    assert rejected["code"] == "handler_error" and "nope" in rejected["message"]


def test_a_page_that_did_not_opt_in_is_not_evaluated(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/webkit-closed.html"))
    name = page.evaluate(PAGE_PEER)
    refused = call_from_the_host_side(keyed_host, "$evaluate", {"peer": name, "payload": {"script": "return 1"}})
    assert refused["code"] == "not_allowed"


def test_a_page_unloaded_mid_call_is_peer_lost_at_the_host(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/index.html"))
    name = page.evaluate("""async () => {
        const { connect } = await import('/_zerobridge/browser.js');
        window.peer = await connect({ actions: { hang: () => { window.entered = true; return new Promise(() => {}); } } });
        return window.peer.name;
    }""")
    outcome: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: outcome.update(result=call_from_the_host_side(keyed_host, "hang", {"peer": name})))
    caller.start()
    page.wait_for_function("() => window.entered === true", timeout=30_000)
    unloaded_at = time.monotonic()
    page.goto("about:blank")  # the page unloads with the host's call in it; the browser sends a close frame
    caller.join(timeout=90)
    assert not caller.is_alive()
    assert outcome["result"]["code"] == "peer_lost", outcome
    # At once (SPEC 2.2, decision 50), not after the host's 30 s grace for connections lost without a close frame.
    assert time.monotonic() - unloaded_at < 15


def test_a_reloaded_page_gets_its_name_back_at_once(keyed_host: Host, page: Page) -> None:
    connect_named = """async () => {
        const { connect } = await import('/_zerobridge/browser.js');
        window.peer = await connect({ name: 'reloaded-page' });
        return window.peer.session;
    }"""
    page.goto(keyed_host.url("/index.html"))
    first = page.evaluate(connect_named)
    page.reload()
    # Without waitForName: a name still held would fail this connect with name_taken.
    assert page.evaluate(connect_named) != first
