"""The keyed channel's HMAC-SHA256 (signing._ChannelMAC, RFC 2104 over hashlib's SHA-256) against the standard
library's ``hmac`` over the same input, the MAC input of SPEC 3.1: keys shorter than, as long as and longer than a
SHA-256 block (a longer key is hashed first), messages of no, one or several frames, up to and past the size fed in
one piece."""

from __future__ import annotations

import hashlib
import hmac
import random

import pytest

from zerobridge import signing


def reference(key: bytes, kind: str, channel: str, stamp: int, frames: list[bytes]) -> bytes:
    digest = hmac.new(key, f"zerobridge-1\n{kind}\n{channel}\n{stamp}\n".encode(), hashlib.sha256)
    for frame in frames:
        digest.update(len(frame).to_bytes(8, "big") + frame)
    return digest.hexdigest().encode("ascii")


SIZES = [0, 1, 55, 56, 63, 64, 65, 200, 16_383, 16_384, 16_385, 70_000]


@pytest.mark.parametrize("key_length", [1, 16, 32, 63, 64, 65, 100, 128, 200])
def test_the_mac_is_hmacs_for_every_key_length(key_length: int) -> None:
    rng = random.Random(key_length)
    key = rng.randbytes(key_length)
    for _ in range(60):
        frames = [rng.randbytes(rng.choice(SIZES)) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
        kind = rng.choice([signing.HELLO, signing.P2H, signing.H2P])
        channel = rng.randbytes(16).hex()
        stamp = rng.choice([1, 2**63 - 1, rng.randrange(1, 2**63)])
        assert signing.mac(key, kind, channel, stamp, frames) == reference(key, kind, channel, stamp, frames)


def test_frames_given_as_memoryviews_sign_as_bytes() -> None:
    key = b"k" * 32
    frames = [b'{"v":1,"type":"event","action":"a"}', b"\x00" * 300]
    views = [memoryview(frame) for frame in frames]
    assert signing.mac(key, signing.P2H, "c" * 32, 7, views) == reference(key, signing.P2H, "c" * 32, 7, frames)
    assert signing.mac(key, signing.P2H, "c" * 32, 7, views[:1]) == reference(key, signing.P2H, "c" * 32, 7, frames[:1])


def test_a_channel_signs_and_checks_with_the_same_mac() -> None:
    key = bytes(range(32))
    channel = signing.PeerChannel(key, nonce="ab" * 16)
    hello = [b'{"v":1,"type":"hello","peer":"p"}']
    assert channel.sign(hello, now_ms=1_700_000_000_000) == b"h.%s.%d.%s" % (
        b"ab" * 16, 1_700_000_000_000, reference(key, signing.HELLO, "ab" * 16, 1_700_000_000_000, hello))
    body = [b'{"v":1,"type":"request","id":"1","action":"echo","payload":null}']
    assert channel.sign(body, now_ms=0) == b"m.1.%s" % reference(key, signing.P2H, "ab" * 16, 1, body)
    answer = [b'{"v":1,"type":"response","id":"1","result":null}']
    assert channel.refusal(b"m.1.%s" % reference(key, signing.H2P, "ab" * 16, 1, answer), answer) is None
    assert channel.refusal(b"m.2.%s" % reference(key, signing.P2H, "ab" * 16, 2, answer), answer) == "wrong signature"
