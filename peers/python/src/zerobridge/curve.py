"""CURVE (SPEC 2.1): the host's public key, which it must prove in the handshake, and this peer's key pair.

Keys are Z85 text (ZeroMQ RFC 32), 40 characters each. The secret key stays in this module's objects: it is
kept out of reprs and never logged; only the public key is meant to be shown (for the host's allow-list).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import stat
import struct
from dataclasses import dataclass, field
from typing import Any

import zmq
from zmq.utils import z85

log = logging.getLogger("zerobridge")

# 40 characters of the Z85 alphabet, as the connection-file schema says.
Z85_KEY = re.compile(r"[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}")

KeyText = str | bytes


def is_key(text: object) -> bool:
    """True for 40 characters of the Z85 alphabet (what a connection file may hold)."""
    return isinstance(text, str) and Z85_KEY.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """What a peer's DEALER needs for CURVE: the host's public key and this peer's key pair."""

    server_key: str
    public_key: str
    secret_key: str = field(repr=False)

    def apply(self, socket: zmq.Socket[Any]) -> None:
        """Make ``socket`` a CURVE client of the host (before it connects)."""
        socket.curve_serverkey = self.server_key.encode("ascii")
        socket.curve_publickey = self.public_key.encode("ascii")
        socket.curve_secretkey = self.secret_key.encode("ascii")


def configure(
    server_key: KeyText | None,
    key_pair: tuple[KeyText, KeyText] | None = None,
    secret_key_file: str | os.PathLike[str] | None = None,
) -> CurveKeys | None:
    """The CURVE setup of one peer, or None without a server key (no CURVE).

    The peer's key pair is ``key_pair`` (public, secret: as ``zmq.curve_keypair()`` returns them), or the
    one whose secret key is in ``secret_key_file`` (created, mode 0600, when missing), or a new one.
    """
    if server_key is None:
        if key_pair is not None or secret_key_file is not None:
            raise ValueError("a CURVE key pair needs the host's public key: curve_server_key, or a connection file with one")
        return None
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE")
    server = _key(server_key, "curve_server_key")
    if key_pair is not None and secret_key_file is not None:
        raise ValueError("give curve_key_pair or curve_secret_key_file, not both")
    if secret_key_file is not None:
        public, secret = load_secret_key_file(secret_key_file)
    elif key_pair is not None:
        if not (isinstance(key_pair, (tuple, list)) and len(key_pair) == 2):
            raise ValueError("curve_key_pair must be (public key, secret key), as zmq.curve_keypair() returns them")
        public = _key(key_pair[0], "the public key of curve_key_pair")
        secret = _text(key_pair[1])
        if _public_of(secret) != public:  # also catches a pair given in the wrong order
            raise ValueError("curve_key_pair: the secret key is not a Z85 CURVE key whose public key is the one given")
    else:
        public_bytes, secret_bytes = zmq.curve_keypair()
        public, secret = public_bytes.decode("ascii"), secret_bytes.decode("ascii")
    return CurveKeys(server_key=server, public_key=public, secret_key=secret)


def load_secret_key_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(public, secret) from a file holding a Z85 secret key (as ``zerobridge serve --curve-secret-key-file``
    writes one); a missing file is created with a new key, readable by its owner only from its first byte. A file
    that its group or others may read or write is refused, as OpenSSH refuses such a private key."""
    where = os.fspath(path)
    try:
        descriptor = os.open(where, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        public_bytes, secret_bytes = zmq.curve_keypair()
        try:
            _write_secret_file(where, secret_bytes + b"\n")
        except OSError as error:
            raise ValueError(f"cannot create the CURVE secret key file {where!r}: {error}") from None
        log.info("created the CURVE secret key file %s (public key %s)", where, public_bytes.decode("ascii"))
        return public_bytes.decode("ascii"), secret_bytes.decode("ascii")
    except OSError as error:
        raise ValueError(f"cannot read the CURVE secret key file {where!r}: {error}") from None
    try:
        access = stat.S_IMODE(os.fstat(descriptor).st_mode)
        if access & 0o077:
            raise ValueError(
                f"permissions {access:04o} for {where!r} are too open: the CURVE secret key file must be readable by"
                f" its owner only, so others cannot take it; run chmod 600 {where}"
            )
        text = os.read(descriptor, 65_536).decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the CURVE secret key file {where!r}: {error}") from None
    finally:
        os.close(descriptor)
    public = _public_of(text)  # the file's text is never echoed: it is a secret
    if public is None:
        raise ValueError(f"{where!r} does not hold a CURVE secret key (40 characters of Z85)")
    return public, text


def _write_secret_file(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``, readable by its owner only from the first byte: a new file beside it created
    mode 0600 (never following a link, never reusing a file), flushed, renamed over ``path``, and the folder
    flushed; the temporary file is removed on failure. (As ZeroBridge's Swift ``SecretFile.write``.)"""
    temporary = f"{path}.tmp-{secrets.token_hex(8)}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.rename(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    # The rename is durable once the folder is flushed; a file system that cannot flush a folder loses nothing else.
    with contextlib.suppress(OSError):
        folder = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def _key(value: KeyText, what: str) -> str:
    """A public key as text, checked: 40 Z85 characters that decode to 32 bytes."""
    text = _text(value)
    try:
        valid = is_key(text) and len(z85.decode(text)) == 32
    except (struct.error, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"{what} must be a CURVE public key (40 characters of Z85)")  # not echoed: it may be a secret
    return text


def _public_of(secret: str) -> str | None:
    if not is_key(secret):
        return None
    try:
        return zmq.curve_public(secret.encode("ascii")).decode("ascii")
    except zmq.ZMQError:
        return None


def _text(value: KeyText) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return ""
    return value if isinstance(value, str) else ""


__all__ = ["CurveKeys", "Z85_KEY", "configure", "is_key", "load_secret_key_file"]
