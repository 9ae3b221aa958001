#!/usr/bin/env python3
"""atheris (libFuzzer for Python) target for the Python peer's decoder, zerobridge.wire.decode.

Run by `make fuzz` (fuzz/run.py), or by hand with libFuzzer's flags::

    .venv/bin/python fuzz/python/fuzz_wire.py -max_total_time=60 fuzz/corpus/python-decoder

The input is a body; two attachment frames ride along. decode must return a message or raise WireError (with a
protocol code), nothing else; and what it accepts must survive a round trip: encoded and decoded again, it is the
same message (compared as frames: errors are exceptions, which compare by identity).
peers/python/tests/test_fuzz_corpus.py replays the corpus through test_one_input on every test run.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # fuzzing: the peer's modules are imported instrumented, for atheris's coverage feedback
    import atheris

    with atheris.instrument_imports(include=["zerobridge"]):
        from zerobridge import wire
        from zerobridge.errors import BAD_MESSAGE, UNSUPPORTED_VERSION
else:  # the test suite replays the corpus through test_one_input, without atheris
    from zerobridge import wire
    from zerobridge.errors import BAD_MESSAGE, UNSUPPORTED_VERSION

ATTACHMENTS = [b"first attachment", b"\x00\xff\x7b"]


def test_one_input(data: bytes) -> None:
    try:
        message = wire.decode([b"", data, *ATTACHMENTS])
    except wire.WireError as error:
        if error.code not in (BAD_MESSAGE, UNSUPPORTED_VERSION):
            raise AssertionError(f"decode refused with code {error.code!r}") from error
        return
    frames = wire.encode(message)
    again = wire.decode(frames)
    if wire.encode(again) != frames:
        raise AssertionError(f"a decoded message, encoded and decoded again, is another message: {message!r} != {again!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
