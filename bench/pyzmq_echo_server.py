"""The baseline: the JSON echo service a user would hand-write with pyzmq, no framework.

    python bench/pyzmq_echo_server.py ENDPOINT     (prints `ready <endpoint>`, serves until killed)

It answers ZeroBridge-shaped requests (``[signature, body]`` with a JSON body carrying ``id``,
``action``, ``payload``) with ZeroBridge-shaped responses, so the same client can drive it and the
ZeroBridge host.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import zmq

HANDLERS = {"echo": lambda payload: payload}


def main() -> None:
    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.RCVHWM, 0)
    socket.bind(sys.argv[1])
    print("ready", socket.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
    while True:
        routing_id, _signature, body = socket.recv_multipart()
        request = json.loads(body)
        handler = HANDLERS.get(request.get("action"))
        reply: dict[str, Any]
        if handler is None:
            reply = {"v": 1, "type": "response", "id": request.get("id"), "ok": False,
                     "error": {"code": "unknown_action", "message": "no such action"}}
        else:
            reply = {"v": 1, "type": "response", "id": request["id"], "ok": True, "result": handler(request["payload"])}
        socket.send_multipart([routing_id, b"", json.dumps(reply).encode()])


if __name__ == "__main__":
    main()
