"""Issue 21 item 5: GenAI log events whose spans never come ("orphans").

Before: one 8 MB `/v1/logs` of 100k such events was answered 200 (the same volume of
traces got 503), stalled `/healthz` for 5.7–8.3 s, pushed open conversations to twice
the cap and evicted all 30 legitimate open conversations as incomplete; ordinary
1,000-event requests of orphans held conversation slots for `retention_s`. Now logs take
the traces' path (admission, large-batch thread, eviction check) and orphans have a
budget of their own (`assembly.max_orphan_events`): never made room for by evicting a
conversation, the oldest given up beyond it (counted), and a request holding more than
the whole budget is refused with a retryable 503.

Scaled down: a budget of BUDGET events and a cap of CAP conversations (the defaults are
10,000 each); the attack request holds 10 × BUDGET orphans, then 20 requests of
BUDGET / 2 orphans each go over both the budget and the conversation cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _serve import Serve, write_config
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

BUDGET = 1_000
CAP = 200
LEGIT = 30
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _orphans(n: int) -> bytes:
    """`n` GenAI user-message events, each in a trace whose spans never come."""
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for i in range(n):
        record = records.add()
        record.trace_id = os.urandom(16)
        record.span_id = os.urandom(8)
        record.event_name = "gen_ai.user.message"
        field = record.body.kvlist_value.values.add()
        field.key = "content"
        field.value.string_value = f"orphan question {i} " + "x" * 40
    return request.SerializeToString()


def _conversation(cid: str) -> bytes:
    """One span of a conversation that stays open (no end, long idle timeout)."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = os.urandom(16)
    span.span_id = os.urandom(8)
    span.name = "invoke_agent travel"
    span.start_time_unix_nano = 1
    span.end_time_unix_nano = 2
    for key, value in (
        ("gen_ai.conversation.id", cid),
        ("gen_ai.operation.name", "invoke_agent"),
    ):
        attr = span.attributes.add()
        attr.key = key
        attr.value.string_value = value
    return request.SerializeToString()


def _post(serve: Serve, path: str, body: bytes) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/x-protobuf"})
        return conn.getresponse().status
    finally:
        conn.close()


def _sum(samples: dict[tuple[str, str], float], name: str, fragment: str = "") -> float:
    return sum(v for (n, labels), v in samples.items() if n == name and fragment in labels)


def test_orphan_events_never_evict_conversations(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        tmp_path / "state.sqlite",
        assembly={
            "idle_timeout_s": 3600.0,
            "max_open_conversations": CAP,
            "max_orphan_events": BUDGET,
        },
    )
    serve = Serve(config)
    try:
        for n in range(LEGIT):
            assert _post(serve, "/v1/traces", _conversation(f"legit-{n}")) == 200
        # The attack: more orphans in one request than the whole budget → 503, retryable.
        assert _post(serve, "/v1/logs", _orphans(10 * BUDGET)) == 503
        # Ordinary requests of orphans: accepted, the oldest given up on their budget.
        for _ in range(20):
            assert _post(serve, "/v1/logs", _orphans(BUDGET // 2)) == 200
        assert serve.request("GET", "/healthz")[0] == 200
        samples = serve.samples()
        assert _sum(samples, "tracepass_conversations_evicted_total") == 0
        assert _sum(samples, "tracepass_log_events_dropped_total", 'reason="orphan_budget"') > 0
        assert _sum(samples, "tracepass_export_requests_total", 'outcome="unavailable"') >= 1
        # The legitimate conversations are all still open, none evaluated as incomplete.
        completed = _sum(samples, "tracepass_conversations_completed_total")
        assert completed == 0, completed
    finally:
        serve.stop()
