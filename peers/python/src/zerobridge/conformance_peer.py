"""The conformance peer (protocol/SPEC.md section 14.3): a peer that serves a fixed set of actions, so that peer
conversations can check this library against the same files as every other peer library.

    python -m zerobridge.conformance_peer ENDPOINT [--evaluate]

It connects as ``conformance-peer``, serves the actions below, answers the ``relay`` event with a ``relayed`` event
carrying the same payload, and runs until SIGTERM or SIGINT (then says ``bye``). Its ``$describe`` (SPEC 7.8) is
derived from the handlers' type hints below (TypedDicts; ``RequestContext[CountProgress]`` gives ``count`` its
progress schema). ``--evaluate`` turns ``$evaluate`` on:
only ever point it at a host you trust.

| action     | payload                                              | behaviour                                        |
| ---------- | ---------------------------------------------------- | ------------------------------------------------ |
| `echo`     | any                                                  | result = payload                                 |
| `add`      | `{"a": number, "b": number}`                         | result = a + b; anything else: invalid_payload   |
| `fail`     | `{"message": string}`                                | raises RuntimeError(message): handler_error      |
| `sleep`    | `{"ms": int >= 0}`                                   | waits, result `{"slept_ms": ms}`                 |
| `count`    | `{"n": int >= 0, "delay_ms"?: int >= 0}`             | progress `{"i": k, "n": n}`, result `{"n": n}`   |
| `emit`     | `{"action": string, "payload"?: any}`                | posts that event to the host, result null        |
| `callback` | `{"action": string, "payload"?: any, "timeout_ms"?}` | calls the host's action; its result or its code  |
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Annotated, Any, NoReturn, NotRequired, TypeGuard, TypedDict

from . import errors
from .errors import BridgeError
from .link import RequestContext
from .peer import Peer, connect

PEER_NAME = "conformance-peer"

# The payloads and results of the actions, as type hints: $describe derives its schemas from them. The handlers still
# check what arrives (a payload is plain JSON, whatever its annotation says).
Count = Annotated[int, {"minimum": 0}]


class AddPayload(TypedDict):
    a: float
    b: float


class FailPayload(TypedDict):
    message: str


class SleepPayload(TypedDict):
    ms: Count


class SleepResult(TypedDict):
    slept_ms: int


class CountPayload(TypedDict):
    n: Count
    delay_ms: NotRequired[Count]


class CountProgress(TypedDict):
    i: int
    n: int


class CountResult(TypedDict):
    n: int


class EmitPayload(TypedDict):
    action: str
    payload: NotRequired[Any]


class CallbackPayload(TypedDict):
    action: str
    payload: NotRequired[Any]
    timeout_ms: NotRequired[Annotated[int, {"minimum": 1}]]


def _is_int(value: Any) -> TypeGuard[int]:
    return type(value) is int


def _is_number(value: Any) -> TypeGuard[int | float]:
    return type(value) in (int, float)


def _invalid(expected: str) -> BridgeError:
    return BridgeError(errors.INVALID_PAYLOAD, f"expected {expected}")


def _object(payload: Any, expected: str) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise _invalid(expected)
    return payload


def handlers_for(peer_ref: list[Peer]) -> dict[str, Any]:
    """The conformance actions; ``emit`` and ``callback`` use the peer in ``peer_ref[0]``."""

    async def echo(payload: Any) -> Any:
        """Answers with its payload (null when absent)."""
        return payload

    async def add(payload: AddPayload) -> float:
        """Adds a and b (an integer when both are)."""
        body = _object(payload, '{"a": number, "b": number}')
        a, b = body.get("a"), body.get("b")
        if not (_is_number(a) and _is_number(b)):
            raise _invalid('{"a": number, "b": number}')
        return a + b

    async def fail(payload: FailPayload) -> NoReturn:
        """Fails with handler_error whose message is the given one."""
        body = _object(payload, '{"message": string}')
        if not isinstance(body.get("message"), str):
            raise _invalid('{"message": string}')
        raise RuntimeError(body["message"])  # an ordinary exception: the library makes it handler_error

    async def sleep(payload: SleepPayload) -> SleepResult:
        """Waits ms milliseconds (honours cancel and timeout_ms)."""
        body = _object(payload, '{"ms": integer >= 0}')
        ms = body.get("ms")
        if not (_is_int(ms) and ms >= 0):
            raise _invalid('{"ms": integer >= 0}')
        await asyncio.sleep(ms / 1000)  # cancelled (cancel, timeout_ms) like any awaiting task
        return {"slept_ms": ms}

    async def count(payload: CountPayload, request: RequestContext[CountProgress]) -> CountResult:
        """Counts to n, reporting each step as progress, delay_ms apart."""
        body = _object(payload, '{"n": integer >= 0, "delay_ms"?: integer >= 0}')
        n, delay_ms = body.get("n"), body.get("delay_ms", 0)
        if not (_is_int(n) and n >= 0 and _is_int(delay_ms) and delay_ms >= 0):
            raise _invalid('{"n": integer >= 0, "delay_ms"?: integer >= 0}')
        for i in range(1, n + 1):
            await asyncio.sleep(delay_ms / 1000)
            request.progress({"i": i, "n": n})
        return {"n": n}

    async def emit(payload: EmitPayload) -> None:
        """Posts the event {action, payload} to the host."""
        body = _object(payload, '{"action": string, "payload"?: any}')
        if not isinstance(body.get("action"), str) or not body["action"]:
            raise _invalid('{"action": string, "payload"?: any}')
        await peer_ref[0].post(body["action"], body.get("payload"))
        return None

    async def callback(payload: CallbackPayload) -> Any:
        """Calls action on the host with payload (and timeout_ms); its result, or its error code passed on."""
        expected = '{"action": string, "payload"?: any, "timeout_ms"?: integer >= 1}'
        body = _object(payload, expected)
        timeout_ms = body.get("timeout_ms")
        if not isinstance(body.get("action"), str) or not body["action"]:
            raise _invalid(expected)
        if timeout_ms is not None and not (_is_int(timeout_ms) and timeout_ms >= 1):
            raise _invalid(expected)
        timeout = None if timeout_ms is None else timeout_ms / 1000
        return await peer_ref[0].call(body["action"], body.get("payload"), timeout=timeout)  # its error passes on

    return {"echo": echo, "add": add, "fail": fail, "sleep": sleep, "count": count, "emit": emit, "callback": callback}


async def serve(endpoint: str, *, evaluate: bool = False) -> None:
    """Serve the conformance actions at ``endpoint`` until SIGTERM or SIGINT."""
    peer_ref: list[Peer] = []
    peer = connect(endpoint, name=PEER_NAME, handlers=handlers_for(peer_ref), evaluate=evaluate)
    peer_ref.append(peer)

    @peer.on_event("relay")
    async def relay(payload: Any) -> None:
        await peer.post("relayed", payload)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with peer:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zerobridge.conformance_peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("endpoint", help="the host's endpoint (tcp://..., ipc://...) or a connection file")
    parser.add_argument("--evaluate", action="store_true", help="run $evaluate scripts (trusted hosts only)")
    arguments = parser.parse_args(argv)
    try:
        asyncio.run(serve(arguments.endpoint, evaluate=arguments.evaluate))
    except BridgeError as error:
        print(f"conformance peer: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
