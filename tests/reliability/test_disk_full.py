"""Issue 13 #3: with the state directory's filesystem full, conversations evaluated
meanwhile (their spans were stored before the disk filled) still reach the pass@k
windows at once, and their results are stored once there is room again. Needs a small
filesystem of its own (a tmpfs mount, so root): skipped with the reason otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sqlite3
import uuid
from pathlib import Path

import pytest
from _receiver_support import export_with, make_spans
from _tmpfs import small_filesystem
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tracepass.collector.config import CollectorConfig
from tracepass.collector.service import CollectorService

pytestmark = pytest.mark.timeout(600)  # generous: the suite runs on loaded machines

CONVERSATIONS = 30
# Three expected turns: the two-turn conversations sent complete only at the idle
# timeout, after the test has filled the disk (a reference they satisfied would
# complete them at once).
REFERENCES = """\
name: disk-full
version: "1"
references:
  - id: three-questions
    turns:
      - {query: question 0, expected_answer: answer 0}
      - {query: question 1, expected_answer: answer 1}
      - {query: question 2, expected_answer: answer 2}
"""


def fill(directory: Path) -> Path:
    """Write a file until the filesystem refuses more (ENOSPC)."""
    filler = directory / f"filler-{uuid.uuid4().hex}"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return filler


def _n(service: CollectorService) -> float:
    return sum(w.n for ks in service.snapshot() for w in ks.windows if w.window == "1h")


async def test_evaluations_reach_the_windows_while_the_disk_is_full(tmp_path: Path) -> None:
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFERENCES, encoding="utf-8")
    with small_filesystem(tmp_path / "small") as small:
        config = CollectorConfig.model_validate(
            {
                "references": [str(refs)],
                "receiver": {"host": "127.0.0.1", "grpc_port": 0, "http_port": 0},
                "assembly": {"idle_timeout_s": 3.0, "trace_grace_s": 0.5, "tick_interval_s": 0.1},
                "state": {"path": str(small / "state.sqlite"), "durability": "batch"},
                "metrics": {
                    "prometheus_port": 0,
                    "windows": [{"name": "1h", "seconds": 3600}],
                    "min_conversations": 1,
                },
            }
        )
        service = CollectorService(config)
        await service.start()
        try:
            endpoint = f"{service.endpoint('http')}/v1/traces"
            spans = [s for i in range(CONVERSATIONS) for s in make_spans(2, f"full-{i}")]
            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
            assert await asyncio.to_thread(export_with, exporter, spans) == (
                SpanExportResult.SUCCESS
            )
            # Empty the WAL first: SQLite reuses WAL space it already has, so only a
            # write that must grow the file meets the full disk.
            with contextlib.closing(sqlite3.connect(small / "state.sqlite")) as conn:
                for _ in range(100):
                    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                    if not busy:
                        break
                    await asyncio.sleep(0.01)
                assert not busy, "the WAL could not be emptied"
            assert (small / "state.sqlite-wal").stat().st_size == 0
            assert _n(service) == 0
            filler = fill(small)  # before the idle timeout completes any of them
            deadline = asyncio.get_running_loop().time() + 30
            while _n(service) < CONVERSATIONS:
                assert asyncio.get_running_loop().time() < deadline, _n(service)
                await asyncio.sleep(0.1)
            assert service.pipeline is not None
            assert service.pipeline.unstored_results > 0  # the disk really was full
            # Not in the file yet, and still what the API shows.
            assert all(
                service.pipeline.latest_result(f"full-{i}") is not None
                for i in range(CONVERSATIONS)
            )
            filler.unlink()
            while service.pipeline.unstored_results:
                assert asyncio.get_running_loop().time() < deadline + 60
                await asyncio.sleep(0.2)
            store = service.pipeline.store
            assert store is not None
            assert all(
                store.results.get_result(f"full-{i}") is not None for i in range(CONVERSATIONS)
            )
            assert _n(service) == CONVERSATIONS
        finally:
            await service.stop()
