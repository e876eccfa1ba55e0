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

A request that cannot be recorded (disk full) is answered with a retryable 503, never a
500 (OTLP clients give a 500 up), and the frame is written whole or truncated back, so
the file stays readable. `max_bytes` / `max_age_s` bound the whole recording
(`record_retention.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.receiver.otlp_json_logs import encode_logs_json
from tracepass.collector.receiver.record_retention import enforce_retention, recorded_files
from tracepass.collector.receiver.sink import IngestResult, Overloaded, SpanSink
from tracepass.evaluator.ratelimited_log import RateLimitedLog

__all__ = ["RecordingSink"]

log = logging.getLogger(__name__)
_rate_limited = RateLimitedLog(log)
_RETRY_AFTER_S = 5.0
_RETENTION_INTERVAL_S = 60.0


class RecordingSink:
    """A `SpanSink` that records what `inner` accepts."""

    def __init__(
        self,
        inner: SpanSink,
        directory: Path,
        *,
        max_file_bytes: int,
        max_bytes: int | None = None,
        max_age_s: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.directory = directory
        self.max_file_bytes = (
            max_file_bytes if max_bytes is None else min(max_file_bytes, max_bytes)
        )
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._clock = clock
        directory.mkdir(parents=True, exist_ok=True)
        existing = recorded_files(directory)
        # Continue after the files of an earlier run: never overwrite a recording.
        self._index = int(existing[-1].stem.split("-")[-1]) if existing else 0
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._opened_at = 0.0
        self._retained_at = -1e18
        self._total = 0  # bytes of the whole recording, re-read at each retention pass
        self._lock = threading.Lock()
        self.recorded_requests = 0
        self.failed_requests = 0  # accepted but not recorded (answered 503)

    def ready(self) -> bool:
        return self.inner.ready()

    def readiness_notes(self) -> list[str]:
        notes = getattr(self.inner, "readiness_notes", None)
        return list(notes()) if callable(notes) else []

    def unready_reason(self) -> str | None:
        reason = getattr(self.inner, "unready_reason", None)
        return reason() if callable(reason) else None

    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        body = request.SerializeToString()  # as received: before the sink may trim it
        result = await self.inner.ingest(request)
        await self._record(body)
        return result

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        body = encode_logs_json(request)
        result = await self.inner.ingest_logs(request)
        await self._record(body)
        return result

    async def _record(self, body: bytes) -> None:
        """Append one frame, or answer a retryable 503: the client keeps the request
        and sends it again (the pipeline drops the spans it already holds), where a
        500 would make it give the data up."""
        try:
            await asyncio.to_thread(self._append, body)
        except OSError as exc:
            self.failed_requests += 1
            _rate_limited.error(
                "record_failed",
                "recording to %s failed (%s): export answered 503 (%d so far)",
                self.directory,
                exc.strerror or exc,
                self.failed_requests,
            )
            raise Overloaded(
                f"cannot record the request to {self.directory}: {exc.strerror or exc}",
                retry_after_s=_RETRY_AFTER_S,
            ) from None

    def _append(self, body: bytes) -> None:
        frame = len(body).to_bytes(4, "big") + body
        with self._lock:
            now = self._clock()
            if self._fd is None or (
                self._size
                and (
                    self._size + len(frame) > self.max_file_bytes
                    or (self.max_age_s is not None and now - self._opened_at > self.max_age_s)
                )
            ):
                self._rotate(now)
            if now - self._retained_at >= _RETENTION_INTERVAL_S or (
                self.max_bytes is not None and self._total + len(frame) > self.max_bytes
            ):
                self._retain(now, len(frame))
            assert self._fd is not None
            self._write_whole(self._fd, frame)
            self._size += len(frame)
            self._total += len(frame)
            self.recorded_requests += 1

    def _write_whole(self, fd: int, frame: bytes) -> None:
        """Write `frame` entirely or not at all: on any failure (ENOSPC after part of
        it) the file is truncated back, so it stays a sequence of whole frames that
        `tracepass conversations` can read."""
        view = memoryview(frame)
        written = 0
        try:
            while written < len(frame):
                written += os.write(fd, view[written:])
        except OSError:
            if written:
                try:
                    os.ftruncate(fd, self._size)
                except OSError as exc:  # pragma: no cover - truncation needs no space
                    log.error("cannot truncate the torn frame in %s: %s", self._path, exc)
            raise

    def _retain(self, now: float, incoming: int) -> None:
        if self.max_bytes is None and self.max_age_s is None:
            return
        self._retained_at = now
        self._total = -incoming + enforce_retention(
            self.directory,
            self._path,
            max_bytes=self.max_bytes,
            max_age_s=self.max_age_s,
            incoming=incoming,
            now=now,
        )

    def _rotate(self, now: float) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._index += 1
        path = self.directory / f"traces-{self._index:06d}.binpb"
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._path = path
        self._size = os.fstat(self._fd).st_size
        self._opened_at = now
        log.info("recording accepted export requests to %s", path)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
