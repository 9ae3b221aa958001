"""An OTLP/HTTP trace receiver for `make bench`: takes what swift-otel's exporter posts to /v1/traces, answers as a
collector does, and counts the spans, so the telemetry section knows the host recorded and exported what it claims.
It keeps counts only, nothing it receives."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The largest export accepted (a collector's default limit is in this range); a bigger one is refused with 413.
MAX_BODY = 32 * 1024 * 1024


def _fields(data: bytes):
    """(field number, wire type, value) of each field of one protobuf message; length-delimited values as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if i > len(data):
            raise ValueError("truncated message")
        yield number, wire, value


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def count_spans(body: bytes) -> int:
    """Spans in an ExportTraceServiceRequest: resource_spans (1) -> scope_spans (2) -> spans (2)."""
    return sum(1 for number, _, resource in _fields(body) if number == 1
               for scope_number, _, scope in _fields(resource) if scope_number == 2
               for span_number, _, _ in _fields(scope) if span_number == 2)


class OtlpSink:
    """Listens on 127.0.0.1 (a free port) in a thread until `close()`; `url` is where the exporter posts."""

    def __init__(self) -> None:
        self.spans = 0
        self.exports = 0
        self.refused = 0
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                if self.path != "/v1/traces" or not 0 <= length <= MAX_BODY:
                    sink._count(refused=1)
                    self.send_error(404 if self.path != "/v1/traces" else 413)
                    return
                body = self.rfile.read(length)
                try:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    spans = count_spans(body)
                except (ValueError, OSError, EOFError):
                    sink._count(refused=1)
                    self.send_error(400)
                    return
                sink._count(spans=spans, exports=1)
                # An empty ExportTraceServiceResponse: everything accepted.
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def _count(self, spans: int = 0, exports: int = 0, refused: int = 0) -> None:
        with self._lock:
            self.spans += spans
            self.exports += exports
            self.refused += refused

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
