"""An OTLP/HTTP trace receiver for `make bench`: takes what swift-otel's exporter posts to /v1/traces, answers as a
collector does, and counts the spans (read with opentelemetry-proto, the OTLP messages' own Python package), so the
telemetry section knows the host recorded and exported what it claims. It keeps counts only, nothing it receives."""

from __future__ import annotations

import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

# The largest export accepted, as sent and as unpacked (a collector's default limit is in this range); a bigger one
# is refused with 413, and a gzip body is never unpacked past it.
MAX_BODY = 32 * 1024 * 1024
_EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()  # everything accepted


def count_spans(body: bytes) -> int:
    """Spans in an ExportTraceServiceRequest; DecodeError for anything else."""
    request = ExportTraceServiceRequest.FromString(body)
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


def _gunzip(body: bytes) -> bytes | None:
    """The unpacked body, or None when it unpacks past MAX_BODY; zlib.error when it is not gzip."""
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    unpacked = unpacker.decompress(body, MAX_BODY)
    return None if unpacker.unconsumed_tail or len(unpacked) > MAX_BODY else unpacked


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
                try:
                    length = int(self.headers.get("Content-Length") or "")
                except ValueError:
                    length = -1
                if self.path != "/v1/traces" or not 0 <= length <= MAX_BODY:
                    sink._count(refused=1)
                    self.send_error(404 if self.path != "/v1/traces" else 411 if length < 0 else 413)
                    return
                sent = self.rfile.read(length)
                try:
                    body = _gunzip(sent) if self.headers.get("Content-Encoding") == "gzip" else sent
                    spans = count_spans(body) if body is not None else None
                except (DecodeError, zlib.error):
                    sink._count(refused=1)
                    self.send_error(400)
                    return
                if spans is None:
                    sink._count(refused=1)
                    self.send_error(413)
                    return
                sink._count(spans=spans, exports=1)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(_EMPTY_RESPONSE)))
                self.end_headers()
                self.wfile.write(_EMPTY_RESPONSE)

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
