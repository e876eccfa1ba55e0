"""Issue 21 item 9: the state file deleted or replaced under a running collector.

Before: ingest kept answering 200 and `/readyz` 200 while SQLite wrote into the unlinked
inode; after a restart 0 of 20 results were there. Now the file's device and inode are
checked: `/readyz` answers 503 with the reason and exports are refused with a
retryable 503, so exporters keep (and retry) what could not be stored."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from _serve import Serve, write_config
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _request() -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = os.urandom(16)
    span.span_id = os.urandom(8)
    span.name = "step"
    span.end_time_unix_nano = 1
    return request.SerializeToString()


def _readyz_after(serve: Serve, seconds: float = 60) -> tuple[int, dict[str, str]]:
    """`/readyz` once it stops answering 200 (polled), or its last answer."""
    deadline = time.monotonic() + seconds
    while True:
        status, body = serve.request("GET", "/readyz")
        if status != 200 or time.monotonic() > deadline:
            return status, json.loads(body)
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_state_file_change_is_detected(tmp_path: Path, how: str) -> None:
    state = tmp_path / "state.sqlite"
    serve = Serve(write_config(tmp_path, state))
    try:
        assert serve.request("POST", "/v1/traces", _request())[0] == 200
        if how == "deleted":
            state.unlink()
        else:
            other = tmp_path / "other.sqlite"
            other.write_bytes(b"")
            os.replace(other, state)
        status, body = _readyz_after(serve)
        assert status == 503
        assert how in body.get("reason", ""), body
        conn_status, _ = serve.request("POST", "/v1/traces", _request())
        assert conn_status == 503
        # Still alive and saying so, and the refusal is counted as retryable.
        assert serve.request("GET", "/healthz")[0] == 200
        samples = serve.samples()
        assert any(
            name == "tracepass_export_requests_total" and 'outcome="unavailable"' in labels
            for name, labels in samples
        )
    finally:
        serve.stop()
