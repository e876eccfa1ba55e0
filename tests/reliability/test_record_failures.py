"""Issue 21 item 8: `serve --record` on a full disk, and recordings without bounds.

Before: on a full disk the requests were stored and evaluated but answered 500 (OTLP
clients do not retry a 500: the data was gone for them), a torn frame made the whole
recording unreadable by `tracepass conversations`, and a recording grew without limit.
Now: a retryable 503, frames written whole or truncated back, and
`receiver.record_max_bytes` / `record_max_age_s` delete the oldest files."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from _serve import TRACEPASS, Serve, write_config
from _tmpfs import small_filesystem
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _request(spans: int, conversation: str) -> bytes:
    request = ExportTraceServiceRequest()
    out = request.resource_spans.add().scope_spans.add().spans
    trace_id = os.urandom(16)
    padding = os.urandom(200).hex()
    for i in range(spans):
        span = out.add()
        span.trace_id = trace_id
        span.span_id = os.urandom(8)
        span.name = f"step {i}"
        span.end_time_unix_nano = 1
        for key, value in (("gen_ai.conversation.id", conversation), ("payload", padding)):
            attr = span.attributes.add()
            attr.key = key
            attr.value.string_value = value
    return request.SerializeToString()


def _recorded_conversations(files: list[Path]) -> set[str]:
    """Every frame parsed (whole frames only, up to the last byte of each file): the
    conversation ids the recording holds."""
    ids: set[str] = set()
    for path in files:
        data = path.read_bytes()
        at = 0
        while at < len(data):
            size = int.from_bytes(data[at : at + 4], "big")
            assert at + 4 + size <= len(data), f"torn frame at byte {at} of {path}"
            request = ExportTraceServiceRequest.FromString(data[at + 4 : at + 4 + size])
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        for attr in span.attributes:
                            if attr.key == "gen_ai.conversation.id":
                                ids.add(attr.value.string_value)
            at += 4 + size
    return ids


def _readable(files: list[Path]) -> subprocess.CompletedProcess[str]:
    """`tracepass conversations` reads the files without an error."""
    return subprocess.run(
        [str(TRACEPASS), "conversations", "--format", "json", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_full_disk_answers_503_and_the_recording_stays_readable(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small", size="2m") as small:
        record = small / "recorded"
        serve = Serve(write_config(tmp_path, tmp_path / "state.sqlite"), "--record", str(record))
        statuses: list[int] = []
        try:
            # ~90 KB a request: the 2 MB filesystem fills within ~25 of them.
            for n in range(60):
                status, _ = serve.request("POST", "/v1/traces", _request(400, f"c{n}"))
                statuses.append(status)
            assert 500 not in statuses, statuses
            assert 503 in statuses, statuses  # the disk filled up: retryable refusals
            assert statuses[0] == 200
            assert serve.request("GET", "/healthz")[0] == 200
        finally:
            serve.stop()
        files = sorted(record.glob("traces-*.binpb"))
        done = _readable(files)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "c0" in _recorded_conversations(files)


def test_record_max_bytes_deletes_the_oldest_files(tmp_path: Path) -> None:
    record = tmp_path / "recorded"
    config = write_config(
        tmp_path,
        tmp_path / "state.sqlite",
        receiver={"record_max_file_bytes": 100_000, "record_max_bytes": 300_000},
    )
    serve = Serve(config, "--record", str(record))
    try:
        for n in range(40):  # ~45 KB each: 1.8 MB offered to a 300 KB recording
            assert serve.request("POST", "/v1/traces", _request(200, f"c{n}"))[0] == 200
    finally:
        serve.stop()
    files = sorted(record.glob("traces-*.binpb"))
    total = sum(f.stat().st_size for f in files)
    assert total <= 300_000, (total, files)
    assert files[-1].name != "traces-000001.binpb"  # rotated, oldest deleted
    done = _readable(files)
    assert done.returncode == 0, done.stderr[-2000:]
    ids = _recorded_conversations(files)
    assert "c39" in ids
    assert "c0" not in ids


def test_record_max_age_s_deletes_old_files(tmp_path: Path) -> None:
    record = tmp_path / "recorded"
    record.mkdir()
    stale = record / "traces-000001.binpb"
    stale.write_bytes(b"")
    day_ago = time.time() - 86400
    os.utime(stale, (day_ago, day_ago))
    config = write_config(tmp_path, tmp_path / "state.sqlite", receiver={"record_max_age_s": 3600})
    serve = Serve(config, "--record", str(record))
    try:
        assert serve.request("POST", "/v1/traces", _request(10, "fresh"))[0] == 200
    finally:
        serve.stop()
    assert not stale.exists()
    assert [f.name for f in sorted(record.glob("traces-*.binpb"))] == ["traces-000002.binpb"]
