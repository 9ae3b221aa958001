"""A pyzmq ROUTER with CURVE_SERVER=1, driven over stdin/stdout, for the Node CURVE tests.

Usage: curve_router.py ENDPOINT SERVER_SECRET_KEY_Z85 [--echo] [--allow CLIENT_PUBLIC_KEY_Z85 ...]
                       [--heartbeat-ivl MS] [--heartbeat-timeout MS]

Same line protocol as router.py: prints {"event": "ready", "endpoint": ..., "public_key": ...} once bound,
{"event": "recv", "frames": [base64...], "user_id": ...} per message (frame 0 is the routing id; user_id is
the client key ZAP authenticated, or null), {"event": "echoed", "sizes": [...], ...} with --echo, and socket
monitor events: "accepted", "handshake", "disconnected", "handshake_failed_no_detail",
"handshake_failed_protocol" and "handshake_failed_auth" (with "value": the protocol error or ZAP status code).
With --allow, a ZAP handler (zmq.auth.thread.ThreadAuthenticator, configure_curve) admits only the listed
client keys. Reads {"send": [base64...]}, {"reply": [base64...]} and {"quit": true}, one per line.
"""
import argparse
import base64
import json
import os
import shutil
import sys
import tempfile

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("secret_key")
    parser.add_argument("--echo", action="store_true")
    parser.add_argument("--allow", action="append", default=[])
    parser.add_argument("--heartbeat-ivl", type=int, default=0)
    parser.add_argument("--heartbeat-timeout", type=int, default=0)
    args = parser.parse_args()

    ctx = zmq.Context()
    if args.allow:
        # configure_curve reads public certificates from a directory: one file per allowed client key.
        certificates = tempfile.mkdtemp(prefix="zb-curve-allow-")
        for i, key in enumerate(args.allow):
            with open(os.path.join(certificates, f"client{i}.key"), "w") as f:
                f.write(f'metadata\ncurve\n    public-key = "{key}"\n')
        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_curve(domain="*", location=certificates)  # reads the keys now
        shutil.rmtree(certificates)

    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_server = True
    sock.curve_secretkey = args.secret_key.encode()
    if args.heartbeat_ivl:
        sock.setsockopt(zmq.HEARTBEAT_IVL, args.heartbeat_ivl)
    if args.heartbeat_timeout:
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, args.heartbeat_timeout)
    names = {
        zmq.EVENT_ACCEPTED: "accepted",
        zmq.EVENT_HANDSHAKE_SUCCEEDED: "handshake",
        zmq.EVENT_DISCONNECTED: "disconnected",
        zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "handshake_failed_no_detail",
        zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "handshake_failed_protocol",
        zmq.EVENT_HANDSHAKE_FAILED_AUTH: "handshake_failed_auth",
    }
    mask = 0
    for event in names:
        mask |= event
    monitor = sock.get_monitor_socket(mask)
    sock.bind(args.endpoint)
    public_key = zmq.curve_public(args.secret_key.encode()).decode()
    emit({"event": "ready", "endpoint": sock.getsockopt_string(zmq.LAST_ENDPOINT), "public_key": public_key})

    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    poller.register(0, zmq.POLLIN)
    pending = b""
    last_sender = None
    while True:
        for item, _ in poller.poll():
            if item is sock:
                frames = sock.recv_multipart(copy=False)
                try:
                    user_id = frames[-1].get("User-Id")
                except zmq.ZMQError:
                    user_id = None
                data = [f.bytes for f in frames]
                last_sender = data[0]
                if args.echo:
                    sock.send_multipart(data)
                    emit({"event": "echoed", "routing_id": base64.b64encode(data[0]).decode(),
                          "sizes": [len(f) for f in data[1:]], "user_id": user_id})
                else:
                    emit({"event": "recv", "frames": [base64.b64encode(f).decode() for f in data],
                          "user_id": user_id})
            elif item is monitor:
                event = recv_monitor_message(monitor)
                emit({"event": names.get(event["event"], str(event["event"])), "value": event["value"]})
            else:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    command = json.loads(line)
                    if command.get("quit"):
                        if args.endpoint.startswith("ipc://") and not args.endpoint.startswith("ipc://@"):
                            try:
                                os.unlink(args.endpoint[len("ipc://"):])
                            except OSError:
                                pass
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
