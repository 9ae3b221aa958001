"""The browser peer's synchronous SHA-256 and HMAC-SHA256 (peers/node/src/sha256.js, issue 24) in the real browser:
pinned to the page's own WebCrypto over seeded random keys and messages, and a page that has no WebCrypto at all
(plain http from an address other than loopback: not a secure context) signs for a keyed host."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route

from conftest import Host, start_host

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
        const cryptoKey = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
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


# A name that is not loopback, so the page's origin is not a secure context; Playwright answers its requests from the
# host (no name resolution), and the host allows the origin for the WebSocket upgrade.
INSECURE_ORIGIN = "http://zerobridge-page.test"


@pytest.fixture(scope="module")
def host_allowing_insecure_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    tmp: pathlib.Path = tmp_path_factory.mktemp("insecure")
    running = start_host(tmp, "--allow-origin", INSECURE_ORIGIN)
    yield running
    running.stop()


CONNECT_AND_CALL = """async () => {
    const { connect } = await import('/_zerobridge/browser.js');
    const context = { secure: window.isSecureContext, subtle: typeof globalThis.crypto?.subtle };
    const peer = await connect();
    const sum = await peer.call('add', { a: 40, b: 2 });
    await peer.close();
    return { ...context, sum };
}"""


def test_a_page_without_a_secure_context_signs_for_a_keyed_host(host_allowing_insecure_origin: Host, page: Page) -> None:
    host = host_allowing_insecure_origin
    served = host.url("/").rstrip("/")

    def from_host(route: Route) -> None:
        route.fulfill(response=route.fetch(url=served + route.request.url[len(INSECURE_ORIGIN):]))

    page.route(f"{INSECURE_ORIGIN}/**", from_host)
    page.goto(f"{INSECURE_ORIGIN}/index.html")
    outcome = page.evaluate(CONNECT_AND_CALL)
    assert outcome == {"secure": False, "subtle": "undefined", "sum": 42}, "the page is not a secure context, and signs anyway"
    assert page.problems == []  # type: ignore[attr-defined]

