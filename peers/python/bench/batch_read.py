"""What reading costs the Python peer per message: 16 small messages signed one by one (SPEC 3.1) against the same 16
in one batch under one signature (SPEC 3.3), and the same 16 without a key, one by one and in one batch (frame 0 the
byte b).
No sockets: the signature check, the batch's split and each body's decoding, as the peer's reader does them.

    .venv/bin/python peers/python/bench/batch_read.py [--rounds 5] [--messages 16]
"""

from __future__ import annotations

import argparse
import time

from zerobridge import signing, wire

KEY = bytes(range(32))
NONCE = "0123456789abcdef" * 2


def bodies(count: int) -> list[bytes]:
    """Progress events as the conformance host's `count` action sends them."""
    return [b'{"v":1,"type":"progress","id":"7","seq":%d,"payload":{"i":%d,"n":100000}}' % (i, i)
            for i in range(1, count + 1)]


def per_message_us(read: object, groups: int, count: int, rounds: int) -> float:
    """The least time per message over `rounds` runs of `read()` (each reads `groups` groups of `count` messages)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        read()  # type: ignore[operator]
        best = min(best, (time.perf_counter_ns() - started) / (groups * count))
    return best / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=16, help="messages per batch")
    parser.add_argument("--groups", type=int, default=4000, help="batches (and groups of single messages) per round")
    args = parser.parse_args()
    count, groups = args.messages, args.groups
    group = bodies(count)
    batch = wire.join_batch([[b"", body] for body in group])
    singles = [signing.sign_message(KEY, signing.H2P, NONCE, i, [body]) for i, body in enumerate(group * groups, start=1)]
    batched = [signing.sign_message(KEY, signing.H2P_BATCH, NONCE, i, [batch]) for i in range(1, groups + 1)]

    def plain() -> None:
        decode = wire.decode
        for _ in range(groups):
            for body in group:
                decode([b"", body])

    def plain_batches() -> None:
        decode, split = wire.decode, wire.split_batch
        for _ in range(groups):
            for message in split(batch):
                decode(message)  # type: ignore[arg-type]

    def keyed_singles() -> None:
        refusal, decode = signing.PeerChannel(KEY, NONCE).refusal, wire.decode
        bodies_ = group * groups
        for frame0, body in zip(singles, bodies_):
            frames = [frame0, body]
            if refusal(frame0, frames[1:]) is None:
                decode(frames)

    def keyed_batches() -> None:
        refusal, decode, split = signing.PeerChannel(KEY, NONCE).refusal, wire.decode, wire.split_batch
        for frame0 in batched:
            frames = [frame0, batch]
            if refusal(frame0, frames[1:]) is None:
                for message in split(frames[1]):
                    decode(message)  # type: ignore[arg-type]

    plain_us = per_message_us(plain, groups, count, args.rounds)
    plain_batches_us = per_message_us(plain_batches, groups, count, args.rounds)
    singles_us = per_message_us(keyed_singles, groups, count, args.rounds)
    batches_us = per_message_us(keyed_batches, groups, count, args.rounds)
    print(f"reading {count} small messages, best of {args.rounds} rounds of {groups:,} groups, per message:")
    print(f"  plain (decode only)          {plain_us:6.3f} us")
    print(f"  plain, one batch of {count:<3}      {plain_batches_us:6.3f} us")
    print(f"  keyed, one signature each    {singles_us:6.3f} us   plain / keyed {plain_us / singles_us:.2f}")
    print(f"  keyed, one batch of {count:<3}      {batches_us:6.3f} us   plain / keyed {plain_us / batches_us:.2f}")


if __name__ == "__main__":
    main()
