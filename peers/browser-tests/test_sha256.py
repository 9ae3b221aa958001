"""The browser peer's synchronous SHA-256 and HMAC-SHA256 (peers/node/src/sha256.js, issue 24) in the real browser:
pinned to the page's own WebCrypto over seeded random keys and messages, and a page that has no WebCrypto at all
(plain http from an address other than loopback: not a secure context) signs for a keyed host."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

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


def non_loopback_address() -> str | None:
    """This machine's IPv4 address on the route out (a UDP socket's connect sends nothing), or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback or address == "0.0.0.0" else address


@pytest.fixture(scope="module")
def host_off_loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """The keyed host with its WebSocket and pages on this machine's non-loopback address (an ephemeral port)."""
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no IPv4 address but loopback, and a page from loopback is a secure context")
    running = start_host(tmp_path_factory.mktemp("off-loopback"), "--ws", f"{address}:0")
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


def test_a_page_without_a_secure_context_signs_for_a_keyed_host(host_off_loopback: Host, page: Page) -> None:
    # Plain http from an address that is not loopback: no secure context, so no crypto.subtle (it could not sign before).
    page.goto(host_off_loopback.url("/index.html"))
    outcome = page.evaluate(CONNECT_AND_CALL)
    assert outcome == {"secure": False, "subtle": "undefined", "sum": 42}
    assert page.problems == []  # type: ignore[attr-defined]
