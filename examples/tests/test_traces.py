"""One trace across three languages (issue 27, SPEC 7.18): a Python front-end starts a span (OpenTelemetry SDK, in-memory
exporter) and calls the import host's importFolder; the host (--record-spans: swift-distributed-tracing's in-memory
tracer, speaking W3C trace context) runs it as a job whose handler calls the Node ETL peer, which records the
traceparent each importFile came with (--trace-log). All of it must be one trace, each span the child of the one
that called it, and the host's log lines for the request must name the trace."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import pytest
import zmq
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import zerobridge
from conftest import ImportHost


def spans_named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name]


def test_one_trace_from_a_python_front_end_through_the_host_into_the_node_etl_peer(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.csv").write_text("name,count\napples,3\npears,5\n")
    (folder / "b.json").write_text('[{"name": "plums", "count": 2}]')
    trace_log = tmp_path / "etl-traces.jsonl"
    host = ImportHost(tmp_path, folder, "--record-spans", "--log-level", "debug")
    try:
        host.start_etl("--trace-log", str(trace_log))

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))

        async def front_end() -> tuple[Any, list[dict[str, Any]]]:
            async with zerobridge.connect(str(host.connection_file), name="traced-front-end") as peer:
                with provider.get_tracer("front-end").start_as_current_span("import clicked"):
                    result = await peer.call("importFolder", {"path": str(folder)}, timeout=60)
                # Outside the span: this call starts no trace of the front-end's.
                return result, await peer.call("recordedSpans", timeout=10)

        result, host_spans = asyncio.run(front_end())
        assert result["filesImported"] == 2

        (front,) = exporter.get_finished_spans()
        trace_id = f"{front.context.trace_id:032x}"
        front_span_id = f"{front.context.span_id:016x}"

        # The host: the request's span continues the front-end's; the job's span is its child.
        (request_span,) = [span for span in spans_named(host_spans, "importFolder") if span["trace_id"] == trace_id]
        assert request_span["kind"] == "server"
        assert request_span["parent_span_id"] == front_span_id
        (job_span,) = spans_named(host_spans, "job importFolder")
        assert job_span["trace_id"] == trace_id
        assert job_span["parent_span_id"] == request_span["span_id"]
        # Only what the trace caused is in it: the call for the spans came without one, so it started its own.
        assert all(span["trace_id"] != trace_id for span in spans_named(host_spans, "recordedSpans"))

        # The Node ETL peer: each file came in the same trace, from the job's span.
        seen = [json.loads(line) for line in trace_log.read_text().splitlines()]
        assert sorted(entry["file"] for entry in seen) == ["a.csv", "b.json"]
        for entry in seen:
            assert entry["traceparent"] == f"00-{trace_id}-{job_span['span_id']}-01", entry
            assert entry["tracestate"] is None
    finally:
        host.stop()

    # Logs and traces join: the host logged the request with its trace id.
    started = [line for line in host.process.stderr_text.splitlines() if "request started" in line and "importFolder" in line]
    assert started and all(f"trace_id={trace_id}" in line for line in started), started


@pytest.mark.parametrize("traceparent", ["00-" + "0" * 32 + "-00f067aa0ba902b7-01", "not a traceparent", 42])
def test_a_malformed_traceparent_is_ignored_and_the_work_done(tmp_path: pathlib.Path, traceparent: Any) -> None:
    """SPEC 7.18: a bad trace never costs the work. The host starts a trace of its own instead, and passes that on."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.csv").write_text("name,count\napples,3\n")
    trace_log = tmp_path / "etl-traces.jsonl"
    host = ImportHost(tmp_path, folder, "--record-spans", signed=False)
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    try:
        host.start_etl("--trace-log", str(trace_log))
        # A raw DEALER: the peer libraries never send a malformed traceparent.
        dealer.connect(host.endpoint)
        dealer.setsockopt(zmq.RCVTIMEO, 60_000)
        for body in ({"v": 1, "type": "hello", "peer": "raw-front-end"},
                     {"v": 1, "type": "request", "id": "1", "action": "importFolder", "payload": {"path": str(folder)},
                      "traceparent": traceparent, "tracestate": "rojo=1"}):
            dealer.send_multipart([b"", json.dumps(body).encode()])
        answers = [json.loads(dealer.recv_multipart()[1]) for _ in range(2)]
        assert answers[0]["type"] == "welcome"
        assert answers[1]["type"] == "response" and answers[1]["ok"] is True, answers[1]
        assert answers[1]["result"]["filesImported"] == 1

        (request_span,) = spans_named(host.call_ok("recordedSpans"), "importFolder")
        assert "parent_span_id" not in request_span  # a root: the malformed context was not continued
        (entry,) = [json.loads(line) for line in trace_log.read_text().splitlines()]
        assert entry["traceparent"].split("-")[1] == request_span["trace_id"]
    finally:
        dealer.close(linger=0)
        context.term()
        host.stop()


def test_a_host_following_its_callers_sampling_records_only_sampled_traces_and_carries_the_rest(
    tmp_path: pathlib.Path,
) -> None:
    """--traced-requests sampled-by-caller (BridgeHost.Configuration.tracedRequests): a request whose caller did not
    sample its trace gets no span, nor does the job it starts, and the ETL peer receives the caller's traceparent
    unchanged; a sampled one is recorded as usual, its job's span passed on."""
    root = tmp_path / "data"
    for name in ("unsampled", "sampled"):
        (root / name).mkdir(parents=True)
        (root / name / f"{name}.csv").write_text("name,count\napples,3\n")
    trace_log = tmp_path / "etl-traces.jsonl"
    host = ImportHost(tmp_path, root, "--record-spans", "--traced-requests", "sampled-by-caller", signed=False)
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    unsampled, sampled = f"00-{trace_id}-00f067aa0ba902b7-00", f"00-{trace_id}-00f067aa0ba902b8-01"
    try:
        host.start_etl("--trace-log", str(trace_log))
        dealer.connect(host.endpoint)
        dealer.setsockopt(zmq.RCVTIMEO, 60_000)
        dealer.send_multipart([b"", json.dumps({"v": 1, "type": "hello", "peer": "sampling-front-end"}).encode()])
        assert json.loads(dealer.recv_multipart()[1])["type"] == "welcome"
        for number, (name, traceparent) in enumerate((("unsampled", unsampled), ("sampled", sampled)), 1):
            dealer.send_multipart([b"", json.dumps(
                {"v": 1, "type": "request", "id": str(number), "action": "importFolder",
                 "payload": {"path": str(root / name)}, "traceparent": traceparent, "tracestate": "rojo=1"}).encode()])
            answer = json.loads(dealer.recv_multipart()[1])
            assert answer["ok"] is True and answer["result"]["filesImported"] == 1, answer

        spans = host.call_ok("recordedSpans")  # this call came in no trace: it has no span either
        assert sorted(span["name"] for span in spans) == ["importFolder", "job importFolder"], spans
        (request_span,), (job_span,) = spans_named(spans, "importFolder"), spans_named(spans, "job importFolder")
        assert request_span["parent_span_id"] == "00f067aa0ba902b8" and request_span["trace_id"] == trace_id
        assert job_span["parent_span_id"] == request_span["span_id"]
        seen = {entry["file"]: entry for entry in map(json.loads, trace_log.read_text().splitlines())}
        assert seen["unsampled.csv"]["traceparent"] == unsampled  # carried through, not a span of the host's
        assert seen["unsampled.csv"]["tracestate"] == "rojo=1"
        assert seen["sampled.csv"]["traceparent"] == f"00-{trace_id}-{job_span['span_id']}-01"
    finally:
        dealer.close(linger=0)
        context.term()
        host.stop()
