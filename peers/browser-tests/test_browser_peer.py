"""The browser peer (peers/node/src/browser.js) in Chromium against the real keyed host: the Node peer's API over a
WebSocket, signed with WebCrypto (SPEC 2.2, 3.1, 3.2)."""

from __future__ import annotations

import subprocess

from playwright.sync_api import Page

from conftest import WEBSOCKET, Host, connection_key

# Connects the page's peer once (window.peer), with the handlers the host reaches through its callback action.
CONNECT = """async (options) => {
    const { connect, BridgeError } = await import('/_zerobridge/browser.js');
    window.BridgeError = BridgeError;
    window.peer = await connect({
        ...options,
        actions: {
            greet: async (payload) => `hello ${payload.name}`,
            strict: async () => { throw new BridgeError('invalid_payload', 'strict wants more', { data: { field: 'x' } }); },
        },
    });
    return { name: window.peer.name, host: window.peer.host, actions: window.peer.hostActions };
}"""


def connected(page: Page, host: Host, **options: object) -> dict:
    page.goto(host.url("/index.html"))
    return page.evaluate(CONNECT, options)


def test_connect_uses_what_the_host_injected(keyed_host: Host, page: Page) -> None:
    welcome = connected(page, keyed_host)
    assert welcome["host"] == "conformance"
    assert welcome["name"].startswith("page-")
    injected = page.evaluate("() => ({ ...globalThis.__zerobridge, peer: undefined })")
    assert injected["endpoint"] == keyed_host.websocket
    assert injected["key"] == connection_key(keyed_host)
    assert page.evaluate("() => JSON.stringify(window.peer.hostInfo)") == page.evaluate("() => JSON.stringify(globalThis.__zerobridge.info)")
    assert injected["info"] is not None
    assert page.problems == []  # type: ignore[attr-defined]


def test_call_bytes_and_errors(keyed_host: Host, page: Page) -> None:
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        const sum = await peer.call('add', { a: 1, b: 2 });
        const bytes = new Uint8Array([0, 1, 2, 255]);
        const echoed = await peer.call('echo', { bytes, text: 'unicode ✓ 😀' });
        let failed = null;
        try { await peer.call('fail', { message: 'no good' }); } catch (error) { failed = [error.constructor.name, error.code, error.message]; }
        let refused = null;
        try { await peer.call('echo', { f: () => 1 }); } catch (error) { refused = [error.code, error.message]; }
        return { sum, bytes: [...echoed.bytes], isBytes: echoed.bytes instanceof Uint8Array, text: echoed.text, failed, refused };
    }""")
    assert outcome["sum"] == 3
    assert outcome["bytes"] == [0, 1, 2, 255] and outcome["isBytes"], "bytes travel as an attachment and come back as bytes"
    assert outcome["text"] == "unicode ✓ 😀"
    assert outcome["failed"][:2] == ["BridgeError", "handler_error"] and "no good" in outcome["failed"][2]
    assert outcome["refused"][0] == "invalid_payload" and "payload.f" in outcome["refused"][1]


def test_stream_with_for_await_and_abort(keyed_host: Host, page: Page) -> None:
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        const { progress, result } = peer.stream('count', { n: 5 });
        const seen = [];
        for await (const step of progress) seen.push(step.i);
        const controller = new AbortController();
        const sleeping = peer.call('sleep', { ms: 60000 }, { signal: controller.signal });
        controller.abort();
        let aborted = null;
        try { await sleeping; } catch (error) { aborted = error.code; }
        return { seen, result: await result, aborted };
    }""")
    assert outcome == {"seen": [1, 2, 3, 4, 5], "result": {"n": 5}, "aborted": "cancelled"}


def test_events_topics_and_the_host_calling_the_page(keyed_host: Host, page: Page) -> None:
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        const emitted = new Promise((resolve) => peer.on('ping-page', (payload) => resolve(payload)));
        await peer.call('emit', { action: 'ping-page', payload: { n: 1 } });
        peer.subscribe('theme');
        const themed = new Promise((resolve) => peer.on('themeChanged', (payload, context) => resolve([payload, context.topic])));
        // The subscription goes out in a hello; a broadcast after the next call is sure to find it.
        await peer.call('echo', null);
        const broadcast = await peer.call('broadcast', { action: 'themeChanged', payload: 'dark', topic: 'theme' });
        const greeted = await peer.call('callback', { action: 'greet', payload: { name: 'page' } });
        let strict = null;
        try { await peer.call('callback', { action: 'strict' }); } catch (error) { strict = [error.code, error.data]; }
        return { emitted: await emitted, themed: await themed, delivered: broadcast.delivered >= 1, greeted, strict };
    }""")
    assert outcome == {
        "emitted": {"n": 1}, "themed": ["dark", "theme"], "delivered": True, "greeted": "hello page",
        "strict": ["invalid_payload", {"field": "x"}],
    }


def test_the_page_serves_the_hosts_requests_without_a_timer_each(keyed_host: Host, page: Page) -> None:
    """A request from the host starts on a later turn (SPEC 7.3: a cancel read with it means it never starts), and
    in a page that turn is not a timer: a browser throttles timers in a background tab (Chromium: one a second),
    which would hold each of the host's requests that long. The deadlines of the calls and of the requests served
    share one timer, armed again only for an earlier one."""
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        await peer.call('callback', { action: 'greet', payload: { name: 'warm' } });
        const original = globalThis.setTimeout;
        let timers = 0;
        globalThis.setTimeout = (...args) => { timers += 1; return original(...args); };
        const answers = [];
        try {
            for (let i = 0; i < 100; i += 1) answers.push(await peer.call('callback', { action: 'greet', payload: { name: `p${i}` } }));
        } finally {
            globalThis.setTimeout = original;
        }
        return { timers, last: answers.at(-1), count: answers.length };
    }""")
    assert outcome["count"] == 100 and outcome["last"] == "hello p99"
    assert outcome["timers"] < 5, f"{outcome['timers']} timers for 100 calls that each served a request of the host's"


def test_jobs(keyed_host: Host, page: Page) -> None:
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        const job = await peer.startJob('countJob', { n: 3, delay_ms: 10 });
        const { progress, result } = peer.attachJob({ job: job.job });
        const seen = [];
        for await (const step of progress) seen.push(step.i);
        const listed = await peer.listJobs();
        return { state: job.state, seen, result: await result, listed: listed.some((record) => record.job === job.job) };
    }""")
    assert outcome["seen"] == [1, 2, 3] and outcome["result"] == {"n": 3} and outcome["listed"]


def test_a_wrong_key_is_refused(keyed_host: Host, page: Page) -> None:
    page.goto(keyed_host.url("/index.html"))
    code = page.evaluate("""async () => {
        const { connect } = await import('/_zerobridge/browser.js');
        try { await connect({ key: '00'.repeat(32), connectTimeout: 10000 }); return 'connected'; } catch (error) { return error.code; }
    }""")
    assert code == "unauthorized"


def test_a_generated_typed_client_runs_in_the_page(keyed_host: Host, page: Page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert keyed_host.connection_file is not None
    subprocess.run([WEBSOCKET.ZEROBRIDGE_BIN, "types", "--connection-file", str(keyed_host.connection_file), "--typescript",
                    str(tmp_path / "client")], check=True, capture_output=True, timeout=60)
    module = (tmp_path / "client.js").read_text()
    assert "import " not in module.replace("import type", ""), "the generated client imports nothing a page cannot load"
    connected(page, keyed_host)
    outcome = page.evaluate("""async (source) => {
        const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
        const generated = await import(url);
        const Client = Object.values(generated).find((value) => typeof value === 'function');
        const client = new Client(peer);
        return { sum: await client.add({ a: 20, b: 22 }), current: client.catalogueIsCurrent() };
    }""", module)
    assert outcome == {"sum": 42, "current": True}


def test_a_redial_resumes_the_session_its_earlier_socket_held(keyed_host: Host, page: Page) -> None:
    # A redial after a silence (SPEC 7.7) keeps the earlier socket open until the host welcomes the peer again: its
    # close frame would be a leaving, ending the very session the new connection resumes (SPEC 2.2, decision 50).
    connected(page, keyed_host)
    outcome = page.evaluate("""async () => {
        const first = peer.session;
        const welcomed = new Promise((resolve) => {
            const wait = () => (peer.state === 'ready' && peer.session !== null ? resolve() : setTimeout(wait, 10));
            setTimeout(wait, 10);
        });
        peer.hostLost('a silence, as the heartbeat would see it', true);
        await welcomed;
        return { first, again: peer.session, sum: await peer.call('add', { a: 2, b: 3 }) };
    }""")
    assert outcome["again"] == outcome["first"], "the session was resumed, not ended by the earlier socket's close"
    assert outcome["sum"] == 5
