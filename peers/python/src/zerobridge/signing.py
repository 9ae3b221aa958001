"""Keyed connections (SPEC 3.1): frame 0 signs each message for one connection's channel.

The peer's first message on a connection is its ``hello``, signed ``h.<nonce>.<ms>.<mac>``: the
nonce (128 random bits, new for every connection) names the connection's channel. Everything after
it, both ways, is signed ``m.<counter>.<mac>`` with a counter each side increases per message. The
MAC is the lowercase hex HMAC-SHA256, keyed with the connection key, of
``zerobridge-1\\n<kind>\\n<channel>\\n<ms or counter>\\n`` and then, for each of frames 1..n, its
length (8 bytes big-endian) and its bytes; ``kind`` is ``hello``, ``p2h`` or ``h2p``.

A batch (SPEC 3.3, since 1.10: several messages in one frame, :func:`zerobridge.wire.join_batch`) is signed
``b.<counter>.<mac>`` with kind ``p2h-batch`` or ``h2p-batch``, its counter in the same sequence as ``m.``.

:class:`PeerChannel` is the peer's side of one connection. Nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

HELLO, P2H, H2P = "hello", "p2h", "h2p"
P2H_BATCH, H2P_BATCH = "p2h-batch", "h2p-batch"
MAX_COUNTER = 2**63 - 1
# Strict forms: fixed-length lowercase hex, decimals without sign or leading zeros. 19 digits at most, so nothing
# huge is ever turned into an int (the range check follows).
_OPENING = re.compile(rb"h\.([0-9a-f]{32})\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{64})")
_SIGNED = re.compile(rb"([mb])\.([1-9][0-9]{0,18})\.([0-9a-f]{64})")
_HELLO_BODY = b'{"v":1,"type":"hello"'  # how wire.encode starts a hello
_SIGNED_MAX = len(b"m.%d." % (2**63 - 1)) + 64  # the longest `m.<counter>.<mac>` (or `b.`)
_ZERO = ord("0")


def new_nonce() -> str:
    """A new channel's name: 128 bits from the OS's CSPRNG, as 32 lowercase hex digits."""
    return secrets.token_hex(16)


def mac(key: bytes, kind: str, channel: str, stamp: int, frames: Sequence[bytes]) -> bytes:
    """The MAC (lowercase hex, 64 digits) of ``frames`` (frames 1..n); ``stamp`` is the opening's ms or the counter.
    Each frame goes in after its length, so [ab, c] and [a, bc] sign differently."""
    return _ChannelMAC(key, kind, channel).hexdigest(stamp, frames)


# A message with one frame up to this size is fed to SHA-256 in one piece (one copy of it, one call); a larger one or
# several frames piece by piece, uncopied.
_ONE_PIECE = 16_384
_SHA256_BLOCK = 64


class _ChannelMAC:
    """HMAC-SHA256 (RFC 2104) of one direction of a channel, with the preamble's fixed start
    (``zerobridge-1\\n<kind>\\n<channel>\\n``) fed once: per message, hashlib's two SHA-256 states are copied and
    finished. The stdlib's ``hmac.HMAC`` does the same, but wraps its copy, each update and the digest in Python
    calls: 1.2 us for a ~200-byte message against 0.77 here. ``tests/test_signing_mac.py`` pins it to ``hmac``."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes, kind: str, channel: str) -> None:
        if len(key) > _SHA256_BLOCK:
            key = hashlib.sha256(key).digest()
        block = key.ljust(_SHA256_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in block))
        self._inner.update(f"zerobridge-1\n{kind}\n{channel}\n".encode())
        self._outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in block))

    def hexdigest(self, stamp: int, frames: Sequence[bytes], first: int = 0) -> bytes:
        """The MAC of a message's frames 1..n at ``stamp``, as 64 lowercase hex digits: ``frames[first:]``, read in
        place (a whole message with its frame 0 is passed with ``first`` 1, not sliced)."""
        inner = self._inner.copy()
        if len(frames) == first + 1 and len(frames[first]) <= _ONE_PIECE:
            frame = frames[first]
            inner.update(b"%d\n%b%b" % (stamp, len(frame).to_bytes(8, "big"), frame))
        else:
            inner.update(b"%d\n" % stamp)
            for index in range(first, len(frames)):
                frame = frames[index]
                inner.update(len(frame).to_bytes(8, "big"))
                inner.update(frame)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest().encode("ascii")


def sign_opening(key: bytes, channel: str, ms: int, frames: Sequence[bytes]) -> bytes:
    """Frame 0 of a channel's opening hello."""
    return b"h.%s.%d.%s" % (channel.encode("ascii"), ms, mac(key, HELLO, channel, ms, frames))


def sign_message(key: bytes, kind: str, channel: str, counter: int, frames: Sequence[bytes]) -> bytes:
    """Frame 0 of any later message (``kind`` ``p2h`` or ``h2p``, ``counter`` 1..2^63-1), or of a batch (``kind``
    ``p2h-batch`` or ``h2p-batch``; ``frames`` is then the batch's one frame)."""
    form = b"b" if kind in (P2H_BATCH, H2P_BATCH) else b"m"
    return b"%b.%d.%s" % (form, counter, mac(key, kind, channel, counter, frames))


@dataclass(frozen=True, slots=True)
class Opening:
    nonce: str
    ms: int
    mac: bytes


@dataclass(frozen=True, slots=True)
class Signed:
    counter: int
    mac: bytes
    batch: bool = False  # `b.<counter>.<mac>`: a batch (SPEC 3.3)


def parse(frame0: bytes) -> Opening | Signed | None:
    """Frame 0 read by the rules; None for anything else (empty, garbled, upper case, out of range)."""
    frame0 = bytes(frame0)
    if (match := _SIGNED.fullmatch(frame0)) is not None:
        counter = int(match[2])
        return Signed(counter, match[3], match[1] == b"b") if counter <= MAX_COUNTER else None
    if (match := _OPENING.fullmatch(frame0)) is not None:
        ms = int(match[2])
        return Opening(match[1].decode("ascii"), ms, match[3]) if ms <= MAX_COUNTER else None
    return None


class PeerChannel:
    """The peer's side of one keyed connection: a fresh channel, opened by the hello it signs first; then ``p2h``
    counters 1, 2, ... out, and in only the host's ``h2p`` messages on this channel with increasing counters (the
    answer to the hello included, be it a welcome or a ``name_taken``). Batches (SPEC 3.3) share the counters both
    ways, under their own kinds."""

    __slots__ = ("_key", "nonce", "_opened", "_sent", "_received", "_sending", "_receiving", "_sending_batch",
                 "_receiving_batch")

    def __init__(self, key: bytes, nonce: str | None = None) -> None:
        self._key = key
        self.nonce = nonce or new_nonce()
        self._sending = _ChannelMAC(key, P2H, self.nonce)
        self._receiving = _ChannelMAC(key, H2P, self.nonce)
        self._sending_batch = _ChannelMAC(key, P2H_BATCH, self.nonce)
        self._receiving_batch = _ChannelMAC(key, H2P_BATCH, self.nonce)
        self._opened = False
        self._sent = 0  # the counter of the last message or batch signed after the opening
        self._received = 0  # the greatest counter accepted from the host

    def __repr__(self) -> str:  # the key is a secret: never in a log line
        return f"PeerChannel(nonce={self.nonce!r}, sent={self._sent}, received={self._received})"

    @property
    def opened(self) -> bool:
        """Whether the opening hello is signed: only it is stamped with the wall clock."""
        return self._opened

    def sign(self, frames: Sequence[bytes], now_ms: int) -> bytes | None:
        """Frame 0 for the next message (``frames`` are its frames 1..n); None for anything but a hello before the
        opening, which must be the connection's first message. ``now_ms`` stamps the opening (ignored after it)."""
        if not self._opened:
            if bytes(frames[0][: len(_HELLO_BODY)]) != _HELLO_BODY:
                return None
            self._opened = True
            return sign_opening(self._key, self.nonce, now_ms, frames)
        self._sent += 1
        return b"m.%d.%s" % (self._sent, self._sending.hexdigest(self._sent, frames))

    def sign_in_place(self, message: list[bytes], now_ms: Callable[[], int]) -> bool:
        """Put the signature in frame 0 of ``message`` (a whole message as it goes to the socket), as :meth:`sign`
        makes it; False, and ``message`` untouched, for anything but a hello before the opening. ``now_ms`` is read for
        the opening only. Every message sent takes this path, so the usual case makes no slice and no second list."""
        if self._opened:
            counter = self._sent = self._sent + 1
            message[0] = b"m.%d.%b" % (counter, self._sending.hexdigest(counter, message, 1))
            return True
        signature = self.sign(message[1:], now_ms())
        if signature is None:
            return False
        message[0] = signature
        return True

    def sign_batch(self, batch: bytes) -> bytes:
        """Frame 0 for a batch (its one frame ``batch``), after the opening: the opening hello is never in one."""
        if not self._opened:
            raise RuntimeError("a batch is never sent before the channel's opening hello")
        self._sent += 1
        return b"b.%d.%s" % (self._sent, self._sending_batch.hexdigest(self._sent, (batch,)))

    def unsent(self) -> None:
        """The message just signed did not go out. An opening is made again; a counter may skip (receivers allow
        gaps), so nothing else is undone."""
        if self._sent == 0:
            self._opened = False

    def accepts_next(self, message: list[bytes]) -> bool:
        """Whether ``message`` (a whole message from the host) is the next one, ``m.<received + 1>.<mac>``: its frame 0
        compared whole with the one expected (and its counter recorded). The host's counters go up by one but for a
        message it signed and could not send, so this is every message but a batch: those, gaps and anything refused
        go to :meth:`refusal`, which reads frame 0 by the rules."""
        if len(message) < 2 or message[0][:2] != b"m.":
            return False
        counter = self._received + 1
        if hmac.compare_digest(message[0], b"m.%d.%b" % (counter, self._receiving.hexdigest(counter, message, 1))):
            self._received = counter
            return True
        return False

    def refusal(self, frame0: bytes, frames: Sequence[bytes]) -> str | None:
        """Why a message (or a batch: frame 0 ``b.``) from the host is refused, or None when it is accepted (and its
        counter recorded)."""
        # This runs for every message or batch received, so a well-formed `m.<counter>.<mac>` or `b.<counter>.<mac>`
        # is taken apart by hand: our MAC is lowercase hex, so only a strictly formed signature can match it. A
        # refused message goes through the strict pattern, to say why.
        form = frame0[:2]
        if (form == b"m." or form == b"b.") and len(frame0) <= _SIGNED_MAX and (dot := frame0.find(b".", 2)) > 2:
            digits = frame0[2:dot]
            if len(digits) <= 19 and digits.isdigit() and digits[0] != _ZERO:
                counter = int(digits)
                channel_mac = self._receiving if form == b"m." else self._receiving_batch
                if self._received < counter <= MAX_COUNTER and hmac.compare_digest(
                    frame0[dot + 1 :], channel_mac.hexdigest(counter, frames)
                ):
                    self._received = counter
                    return None
        match = _SIGNED.fullmatch(frame0)
        counter = int(match[2]) if match is not None else 0
        if not 1 <= counter <= MAX_COUNTER:
            signature = parse(frame0)
            if signature is None:
                return "no signature" if len(frame0) == 0 else "not a signature"
            return "an opening signature (only a peer opens a channel)"
        if counter <= self._received:
            return f"counter {counter} replayed or out of order (last accepted {self._received})"
        return "wrong signature"


CLOCK_WINDOW_MS = 300_000  # how far an opening's ms may be from the host's clock


def clock_skew_diagnosis(data: object) -> str | None:
    """What to tell the user about an ``unauthorized`` answer whose ``error.data`` carries ``clock_skew_ms`` (the
    opening's clock minus the host's, SPEC 3.1): the clocks differ, not the key. None for any other answer."""
    skew = data.get("clock_skew_ms") if isinstance(data, dict) else None
    if not isinstance(skew, int) or isinstance(skew, bool):
        return None
    window = data.get("window_ms") if isinstance(data, dict) else None
    if not isinstance(window, int) or isinstance(window, bool):
        window = CLOCK_WINDOW_MS
    return (
        f"the host's clock and this peer's differ by {_skew_amount(skew)} (this peer's is"
        f" {'ahead' if skew > 0 else 'behind'}), more than the {window // 1000} s window for an opening hello:"
        " set both clocks right (NTP)"
    )


def _skew_amount(skew: int) -> str:
    """Whole seconds, or milliseconds when whole seconds would hide that it is past the window."""
    seconds = (abs(skew) + 500) // 1000
    return f"{abs(skew)} ms" if seconds * 1000 <= CLOCK_WINDOW_MS else f"{seconds} s"


__all__ = [
    "CLOCK_WINDOW_MS",
    "H2P",
    "HELLO",
    "MAX_COUNTER",
    "P2H",
    "P2H_BATCH",
    "H2P_BATCH",
    "Opening",
    "PeerChannel",
    "Signed",
    "clock_skew_diagnosis",
    "mac",
    "new_nonce",
    "parse",
    "sign_message",
    "sign_opening",
]
