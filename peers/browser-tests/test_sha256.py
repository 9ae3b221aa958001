"""The browser peer's synchronous SHA-256 and HMAC-SHA256 (peers/node/src/sha256.js, issue 24) in the real browser:
pinned to the page's own WebCrypto over seeded random keys and messages, and a page that has no WebCrypto at all
(plain http from a name other than loopback's, which the test's Chromium resolves to 127.0.0.1: not a secure
context) signs for a keyed host."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from conftest import CHROMIUM, Host, start_host

# Seeded cases (mulberry32, the generator of peers/node/test/sha256.test.js): keys of 0-200 bytes (past the 64-byte
# block they are hashed first), messages of 0-20 KiB (every length 0-130 first), each split into random parts.
AGAINST_WEBCRYPTO = """async ({ seed, count }) => {
    const { hmacSha256, prepareHmacKey, sha256 } = await import('/_zerobridge/sha256.js');
    let s = seed >>> 0;
    const random = () => {
        s = (s + 0x6d2b79f5) >>> 0;
        let t = s;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 0x100000000;
    };
    const bytes = (length) => Uint8Array.from({ length }, () => Math.floor(random() * 256));
    const hex = (data) => Array.from(new Uint8Array(data), (b) => b.toString(16).padStart(2, '0')).join('');
    const mismatches = [];
    for (let i = 0; i < count; i += 1) {
        const key = bytes(Math.floor(random() * 201));
        const data = bytes(i <= 130 ? i : Math.floor(random() * 20481));
        const cuts = Array.from({ length: Math.floor(random() * 6) }, () => Math.floor(random() * (data.length + 1))).sort((a, b) => a - b);
        const parts = [];
        let from = 0;
        for (const cut of [...cuts, data.length]) { parts.push(data.subarray(from, cut)); from = cut; }
        // WebCrypto refuses an empty HMAC key; 64 zero bytes are the same key once padded to the block (RFC 2104).
        const cryptoKey = await crypto.subtle.importKey('raw', key.length === 0 ? new Uint8Array(64) : key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
        const expectedMac = hex(await crypto.subtle.sign('HMAC', cryptoKey, data));
        const expectedDigest = hex(await crypto.subtle.digest('SHA-256', data));
        const mac = hex(hmacSha256(prepareHmacKey(key), parts));
        const digest = hex(sha256(data));
        if (mac !== expectedMac || digest !== expectedDigest) {
            mismatches.push({ case: i, key: key.length, message: data.length, parts: parts.length, mac, expectedMac, digest, expectedDigest });
        }
    }
    return { compared: count, mismatches };
}"""


@pytest.mark.parametrize("seed", [11, 12])
def test_sha256_and_hmac_are_webcryptos_in_the_page(keyed_host: Host, page: Page, seed: int) -> None:
    page.goto(keyed_host.url("/index.html"))
    outcome = page.evaluate(AGAINST_WEBCRYPTO, {"seed": seed, "count": 200})
    assert outcome == {"compared": 200, "mismatches": []}
    assert page.problems == []  # type: ignore[attr-defined]


# A name that is not loopback's, which the test's own Chromium resolves to 127.0.0.1 (--host-resolver-rules): a page
# from it is not a secure context, yet nothing leaves loopback.
INSECURE_NAME = "zerobridge-insecure.test"


@pytest.fixture(scope="module")
def insecure_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, str]]:
    """The keyed host on loopback, also answering to INSECURE_NAME (an allowed origin, so its Host header is let in),
    and the page's address under that name."""
    with socket.socket() as probe:  # a free port, for the origin to name before the host binds it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    origin = f"http://{INSECURE_NAME}:{port}"
    running = start_host(tmp_path_factory.mktemp("insecure"), "--ws", f"127.0.0.1:{port}", "--allow-origin", origin)
    yield running, origin
    running.stop()


@pytest.fixture()
def insecure_page(browser: Browser) -> Iterator[Page]:
    """A page in a Chromium of its own that resolves INSECURE_NAME to 127.0.0.1."""
    resolving = browser.browser_type.launch(executable_path=CHROMIUM, headless=True,
                                            args=[f"--host-resolver-rules=MAP {INSECURE_NAME} 127.0.0.1"])
    try:
        page = resolving.new_context().new_page()
        problems: list[str] = []
        page.on("console", lambda message: problems.append(message.text)
                if message.type in ("warning", "error") and not message.location.get("url", "").endswith("/favicon.ico") else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.problems = problems  # type: ignore[attr-defined]
        yield page
    finally:
        resolving.close()


CONNECT_AND_CALL = """async () => {
    const { connect } = await import('/_zerobridge/browser.js');
    const context = { secure: window.isSecureContext, subtle: typeof globalThis.crypto?.subtle };
    const peer = await connect();
    const sum = await peer.call('add', { a: 40, b: 2 });
    await peer.close();
    return { ...context, sum };
}"""


def test_a_page_without_a_secure_context_signs_for_a_keyed_host(insecure_site: tuple[Host, str], insecure_page: Page) -> None:
    # Plain http from a name that is not loopback's: no secure context, so no crypto.subtle (it could not sign before).
    _, origin = insecure_site
    insecure_page.goto(f"{origin}/index.html")
    outcome = insecure_page.evaluate(CONNECT_AND_CALL)
    assert outcome == {"secure": False, "subtle": "undefined", "sum": 42}
    assert insecure_page.problems == []  # type: ignore[attr-defined]
