"""The keyed channel's HMAC-SHA256 (signing._ChannelMAC, RFC 2104 over hashlib's SHA-256) against the standard
library's ``hmac`` over the same input, the MAC input of SPEC 3.1: keys shorter than, as long as and longer than a
SHA-256 block (a longer key is hashed first), messages of no, one or several frames, up to and past the size fed in
one piece."""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import Callable

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


def test_the_paths_every_message_takes_sign_and_check_as_the_rules_do() -> None:
    """sign_in_place (frame 0 of the whole message replaced) and accepts_next (the next counter, frame 0 compared
    whole) against the reference MAC; what accepts_next leaves, refusal decides by the rules."""
    key, nonce = bytes(range(32)), "cd" * 16
    channel = signing.PeerChannel(key, nonce=nonce)
    request = [b"", b'{"v":1,"type":"request","id":"1","action":"echo","payload":null}']
    assert not channel.sign_in_place(request, lambda: 1)  # nothing but a hello opens the channel
    assert request[0] == b""
    hello = [b"", b'{"v":1,"type":"hello","peer":"p"}']
    assert channel.sign_in_place(hello, lambda: 1_700_000_000_000)
    assert hello[0] == b"h.%s.%d.%s" % (nonce.encode(), 1_700_000_000_000,
                                        reference(key, signing.HELLO, nonce, 1_700_000_000_000, hello[1:]))
    for counter, frames in ((1, [b"", b"{}"]), (2, [b"", b"a", b"b" * 20_000])):
        assert channel.sign_in_place(frames, lambda: 0)
        assert frames[0] == b"m.%d.%s" % (counter, reference(key, signing.P2H, nonce, counter, frames[1:]))

    def answer(counter: int, body: bytes, form: bytes = b"m", kind: str = signing.H2P) -> list[bytes]:
        return [b"%b.%d.%s" % (form, counter, reference(key, kind, nonce, counter, [body])), body]

    assert channel.accepts_next(answer(1, b"one"))
    assert not channel.accepts_next(answer(1, b"one"))  # replayed
    assert channel.refusal(*split(answer(1, b"one"))) is not None
    gap = answer(3, b"three")  # the host skipped a counter: not the next one, accepted by the rules
    assert not channel.accepts_next(gap)
    assert channel.refusal(*split(gap)) is None
    batch = answer(4, b"batch", b"b", signing.H2P_BATCH)
    assert not channel.accepts_next(batch)
    assert channel.refusal(*split(batch)) is None
    forged = answer(5, b"five")
    forged[1] = b"FIVE"
    assert not channel.accepts_next(forged)
    assert channel.refusal(*split(forged)) == "wrong signature"
    assert not channel.accepts_next([answer(5, b"")[0]])  # frame 0 alone


def split(message: list[bytes]) -> tuple[bytes, list[bytes]]:
    return message[0], message[1:]


def strict_refusal(received: int, frame0: bytes, mac_of: Callable[[bytes, int], bytes]) -> str | None:
    """The verdict by the strict pattern alone, as PeerChannel.refusal said it before it took a well-formed frame 0
    apart by hand: the reference for the fast path. `mac_of(form, counter)`: the MAC of a message (form `m`) or a
    batch (`b`, SPEC 3.3) at that counter."""
    match = signing._SIGNED.fullmatch(frame0)
    counter = int(match[2]) if match is not None else 0
    if not 1 <= counter <= signing.MAX_COUNTER:
        signature = signing.parse(frame0)
        if signature is None:
            return "no signature" if len(frame0) == 0 else "not a signature"
        return "an opening signature (only a peer opens a channel)"
    if counter <= received:
        return f"counter {counter} replayed or out of order (last accepted {received})"
    assert match is not None
    return None if match[3] == mac_of(match[1], counter) else "wrong signature"


def test_every_frame_0_gets_the_strict_patterns_verdict() -> None:
    """Well-formed, replayed, wrongly signed and garbled frames 0 of messages and batches (upper case, signs, leading
    zeros, spaces, underscores, a missing or extra dot, one digit too many or too few, counters past 2^63 - 1,
    openings, a message's MAC under a batch's form and the other way round): the channel refuses or accepts each
    exactly as the strict pattern does, and says the same reason."""
    key = bytes(range(32))
    body = [b'{"v":1,"type":"response","id":"1","result":null}']
    channel = signing.PeerChannel(key, nonce="cd" * 16)

    def mac_of(form: bytes, counter: int) -> bytes:
        return reference(key, signing.H2P_BATCH if form == b"b" else signing.H2P, "cd" * 16, counter, body)

    rng = random.Random(26)
    garble = [
        lambda f: f.upper(), lambda f: f[:2] + b"+" + f[2:], lambda f: f[:2] + b"0" + f[2:],
        lambda f: f[:2] + b" " + f[2:], lambda f: f[:2] + b"1_" + f[2:], lambda f: f.replace(b".", b"", 1),
        lambda f: f + b".", lambda f: f[:-1], lambda f: f + b"a", lambda f: b"h" + f[1:],
        lambda f: f[:2] + b"%d.%s" % (2**63, f.rsplit(b".", 1)[1]), lambda f: f[:2] + b"%d.%s" % (10**19, f.rsplit(b".", 1)[1]),
        lambda f: f[:2] + b".%s" % f.rsplit(b".", 1)[1], lambda f: b"", lambda f: f[:2] + b"1" * 200,
        lambda f: b"h.%s.5.%s" % (b"cd" * 16, f.rsplit(b".", 1)[1]), lambda f: f[:-1] + b"g",
        lambda f: f[:2] + b"\xd9\xa1" + f[2:],  # an Arabic-Indic digit one: not an ASCII digit
        lambda f: (b"b" if f[:1] == b"m" else b"m") + f[1:],  # the other form: a message's MAC as a batch's, or back
    ]
    received = 0
    for step in range(900):
        counter = rng.choice([received, received + 1, received + rng.randrange(1, 1000), max(1, received - 1)])
        form = rng.choice([b"m", b"b"])
        frame0 = b"%b.%d.%s" % (form, counter, mac_of(form, counter))
        if step % 3 == 0:
            frame0 = rng.choice(garble)(frame0)
        elif step % 3 == 1 and rng.random() < 0.5:
            frame0 = b"%b.%d.%s" % (form, counter, mac_of(form, counter + 1))  # signed for another place
        expected = strict_refusal(received, frame0, mac_of)
        assert channel.refusal(frame0, body) == expected, frame0
        if expected is None:
            received = int(frame0.split(b".")[1])
