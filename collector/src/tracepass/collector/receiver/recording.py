"""`RecordingSink`: every accepted export request also goes to size-rotated files.

Why at the receiver: `tracepass serve --record DIR` is how a team captures production
traffic for `tracepass evaluate` and CI gates without running a second collector. The
files are length-prefixed protobuf (`traces-000001.binpb`, …: each message preceded by
its size as 4 big-endian bytes), the OpenTelemetry Collector file exporter's `proto`
format, which `evaluate` and `conversations` read. Logs requests (GenAI events as log
records) go in the same files, as frames holding their OTLP/JSON (a protobuf frame does
not say which signal it is; a JSON one does, by `resourceLogs`), so one recording
replays spans and their events together. A request is recorded exactly as it was
received, and only once the sink behind accepted it (a refused request is retried by the
client and would otherwise be recorded twice). A file is closed and the next one started
when it would exceed `max_file_bytes`; writes happen off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import BinaryIO

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.receiver.otlp_json_logs import encode_logs_json
from tracepass.collector.receiver.sink import IngestResult, SpanSink

__all__ = ["RecordingSink"]

log = logging.getLogger(__name__)


class RecordingSink:
    """A `SpanSink` that records what `inner` accepts."""

    def __init__(self, inner: SpanSink, directory: Path, *, max_file_bytes: int) -> None:
        self.inner = inner
        self.directory = directory
        self.max_file_bytes = max_file_bytes
        directory.mkdir(parents=True, exist_ok=True)
        existing = sorted(directory.glob("traces-*.binpb"))
        # Continue after the files of an earlier run: never overwrite a recording.
        self._index = int(existing[-1].stem.split("-")[-1]) if existing else 0
        self._file: BinaryIO | None = None
        self._size = 0
        self._lock = threading.Lock()
        self.recorded_requests = 0

    def ready(self) -> bool:
        return self.inner.ready()

    def readiness_notes(self) -> list[str]:
        notes = getattr(self.inner, "readiness_notes", None)
        return list(notes()) if callable(notes) else []

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        body = request.SerializeToString()  # as received: before the sink may trim it
        result = await self.inner.ingest(request)
        await asyncio.to_thread(self._append, body)
        return result

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        body = encode_logs_json(request)
        result = await self.inner.ingest_logs(request)
        await asyncio.to_thread(self._append, body)
        return result

    def _append(self, body: bytes) -> None:
        frame = len(body).to_bytes(4, "big") + body
        with self._lock:
            if self._file is None or (self._size and self._size + len(frame) > self.max_file_bytes):
                self._rotate()
            assert self._file is not None
            self._file.write(frame)
            self._file.flush()
            self._size += len(frame)
            self.recorded_requests += 1

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        self._index += 1
        path = self.directory / f"traces-{self._index:06d}.binpb"
        self._file = path.open("ab")
        self._size = path.stat().st_size
        log.info("recording accepted export requests to %s", path)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
