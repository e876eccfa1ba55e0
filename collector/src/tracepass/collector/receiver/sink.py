"""The seam between the OTLP receivers and everything behind them.

Receivers (gRPC, HTTP, file readers) only decode bytes into export requests (traces, or
logs carrying GenAI events) and translate the sink's answer into protocol responses;
they know nothing of conversations. The pipeline behind implements `SpanSink`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass(frozen=True, slots=True)
class IngestResult:
    """How many items (spans, or log records) of one export request were accepted;
    `rejected` > 0 becomes an OTLP partial-success response carrying `message`."""

    accepted: int
    rejected: int = 0
    message: str = ""


class Overloaded(Exception):
    """Raised by a sink that cannot take more now. Receivers answer 429/503 with
    Retry-After (HTTP) or RESOURCE_EXHAUSTED/UNAVAILABLE with RetryInfo (gRPC), so the
    standard exporters retry instead of dropping."""

    def __init__(self, reason: str, retry_after_s: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


class SpanSink(Protocol):
    async def ingest(self, request: ExportTraceServiceRequest) -> IngestResult:
        """Accept the spans of one request; return only once they are as durable as the
        configured durability mode promises (the client is acknowledged after this)."""
        ...

    async def ingest_logs(self, request: ExportLogsServiceRequest) -> IngestResult:
        """Accept the log records of one request, with the same durability promise. Log
        records that are not GenAI events are accepted and ignored (logs pipelines
        carry everything); `rejected` counts the log records refused."""
        ...

    def ready(self) -> bool:
        """False while state is being recovered or the pipeline is shutting down."""
        ...
