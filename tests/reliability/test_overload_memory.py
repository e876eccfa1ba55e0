"""Issue 13 #7: under sustained overload the collector's RSS stays under
`limits.max_memory_mb`: above the soft limit export requests are refused with a
retryable 503 (counted), so memory stops growing instead of tracking the backlog.
Every request the load generator sent is in `tracepass_export_requests_total`."""

from __future__ import annotations

import http.client
import os
import threading
import time
from pathlib import Path

import pytest
from _serve import Serve, write_config
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

SENDERS = 8
SECONDS = float(os.environ.get("TRACEPASS_OVERLOAD_S", "12"))  # `make reliability`: 600

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180 + 2 * SECONDS)]
HEADROOM_MB = 80


def _request(spans: int = 400, traces: int = 20) -> bytes:
    """Distinct ids every time (nothing deduplicates), a 600-byte attribute per span:
    held in memory until the (long) idle timeout."""
    request = ExportTraceServiceRequest()
    out = request.resource_spans.add().scope_spans.add().spans
    padding = os.urandom(300).hex()
    for _ in range(traces):
        trace_id = os.urandom(16)
        for i in range(spans // traces):
            span = out.add()
            span.trace_id = trace_id
            span.span_id = os.urandom(8)
            span.name = f"step {i}"
            span.end_time_unix_nano = 1
            attr = span.attributes.add()
            attr.key = "payload"
            attr.value.string_value = padding
    return request.SerializeToString()


def _load(serve: Serve, stop: threading.Event, statuses: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    while not stop.is_set():
        body = _request()
        try:
            conn.request(
                "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            resp = conn.getresponse()
            resp.read()
            statuses.append(resp.status)
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
        except OSError:
            statuses.append(-1)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=60)
    conn.close()


def test_rss_stays_under_the_memory_cap_at_overload(tmp_path: Path) -> None:
    slow_completion = {"idle_timeout_s": 600.0, "trace_grace_s": 600.0}
    probe = Serve(write_config(tmp_path, tmp_path / "probe.sqlite", assembly=slow_completion))
    time.sleep(1.0)
    baseline = probe.rss_mb()
    probe.stop()
    cap = baseline + HEADROOM_MB
    config = write_config(
        tmp_path,
        tmp_path / "state.sqlite",
        assembly=slow_completion,
        limits={"max_memory_mb": cap},
    )
    serve = Serve(config)
    stop = threading.Event()
    statuses: list[list[int]] = [[] for _ in range(SENDERS)]
    senders = [threading.Thread(target=_load, args=(serve, stop, s)) for s in statuses]
    peak = 0.0
    try:
        for t in senders:
            t.start()
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            peak = max(peak, serve.rss_mb())
            time.sleep(0.02)
        stop.set()
        for t in senders:
            t.join(timeout=60)
        peak = max(peak, serve.rss_mb())
        answered = [code for s in statuses for code in s]
        counted = serve.samples("tracepass_export_requests_total")
        total = sum(counted.values())
        refused = sum(v for (_, labels), v in counted.items() if 'outcome="unavailable"' in labels)
    finally:
        serve.stop()
    accepted = answered.count(200)
    print(
        f"baseline {baseline:.0f} MB, cap {cap:.0f} MB, peak {peak:.0f} MB "
        f"({peak / cap:.2f} of the cap); {len(answered)} requests: {accepted} accepted, "
        f"{answered.count(503)} refused 503"
    )
    assert peak < cap
    assert answered.count(503) > 0, "the load never reached the soft limit"
    assert -1 not in answered
    assert set(answered) <= {200, 503}
    assert total == len(answered)
    assert refused == answered.count(503)
