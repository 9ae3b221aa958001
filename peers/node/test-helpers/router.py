"""A pyzmq ROUTER driven over stdin/stdout, for the Node peer's tests.

Usage: router.py ENDPOINT [--echo] [--heartbeat-ivl MS] [--heartbeat-timeout MS]

Prints one JSON object per line: {"event": "ready", "endpoint": ...} once bound, then
{"event": "recv", "frames": [base64...]} for every message (frame 0 is the routing id) and
{"event": "accepted" | "handshake" | "disconnected"} from the socket monitor.
With --echo every message is sent straight back and reported as {"event": "echoed", ...} with sizes only.
Reads one JSON command per line: {"send": [base64...]} (routing id first), {"reply": [base64...]}
(to the last sender), {"quit": true}.
"""
import argparse
import base64
import json
import os
import sys

import zmq
from zmq.utils.monitor import recv_monitor_message


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("--echo", action="store_true")
    parser.add_argument("--heartbeat-ivl", type=int, default=0)
    parser.add_argument("--heartbeat-timeout", type=int, default=0)
    args = parser.parse_args()

    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    if args.heartbeat_ivl:
        sock.setsockopt(zmq.HEARTBEAT_IVL, args.heartbeat_ivl)
    if args.heartbeat_timeout:
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, args.heartbeat_timeout)
    monitor = sock.get_monitor_socket(
        zmq.EVENT_ACCEPTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
    )
    sock.bind(args.endpoint)
    emit({"event": "ready", "endpoint": sock.getsockopt_string(zmq.LAST_ENDPOINT)})

    names = {
        zmq.EVENT_ACCEPTED: "accepted",
        zmq.EVENT_HANDSHAKE_SUCCEEDED: "handshake",
        zmq.EVENT_DISCONNECTED: "disconnected",
    }
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    pending = b""
    last_sender = None
    while True:
        for item, _ in poller.poll():
            if item is sock:
                frames = sock.recv_multipart()
                last_sender = frames[0]
                if args.echo:
                    sock.send_multipart(frames)
                    emit({"event": "echoed", "routing_id": base64.b64encode(frames[0]).decode(),
                          "sizes": [len(f) for f in frames[1:]]})
                else:
                    emit({"event": "recv", "frames": [base64.b64encode(f).decode() for f in frames]})
            elif item is monitor:
                event = recv_monitor_message(monitor)
                emit({"event": names.get(event["event"], str(event["event"]))})
            else:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    command = json.loads(line)
                    if command.get("quit"):
                        return
                    if "send" in command:
                        sock.send_multipart([base64.b64decode(f) for f in command["send"]])
                    elif "reply" in command and last_sender is not None:
                        sock.send_multipart([last_sender] + [base64.b64decode(f) for f in command["reply"]])


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
    os._exit(0)  # skip context termination: nothing in flight matters to a test fixture
