"""The OTLP signals tracepass receives — traces, and logs (GenAI events sent as log
records) — described as data.

Why a table and not a second receiver: both signals must behave exactly alike on the
wire (size caps, compression, auth, TLS, error codes, retry hints, partial success,
counters). The receivers (`grpc_server`, `http_server`) and `core.ReceiverCore` are
written once against a `Signal`; what differs per signal — message types, endpoint,
how to count items, which sink method takes the request — is only this description.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from google.protobuf.message import Message
from opentelemetry.metrics import Counter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.receiver.decode import count_log_records, count_spans
from tracepass.collector.receiver.otlp_json import decode_json_bytes
from tracepass.collector.receiver.otlp_json_logs import decode_logs_json_bytes
from tracepass.collector.receiver.sink import IngestResult, SpanSink

__all__ = ["LOGS", "SIGNALS", "TRACES", "Req", "Signal", "SignalName"]

SignalName = Literal["traces", "logs"]
Req = TypeVar("Req", ExportTraceServiceRequest, ExportLogsServiceRequest)


@dataclass(frozen=True, slots=True, eq=False)
class Signal(Generic[Req]):
    name: SignalName  # the `signal` label of tracepass_export_requests
    http_path: str
    grpc_service: str  # fully qualified; the method is always `Export`
    request_type: type[Req]
    response_type: type[Message]
    items: str  # what the request carries, for messages ("spans", "log records")
    rejected_field: str  # the partial_success field counting refused items
    count: Callable[[Req], int]
    decode_json: Callable[[bytes], Req]
    deliver: Callable[[SpanSink, Req], Awaitable[IngestResult]]
    received: Callable[[CollectorInstruments], Counter]  # {protocol}
    rejected: Callable[[CollectorInstruments], Counter]  # {reason}

    def response(self, result: IngestResult) -> Message:
        """The Export response: empty, or a partial success naming the refused items."""
        response = self.response_type()
        if result.rejected:
            partial: Any = response.partial_success  # type: ignore[attr-defined]
            setattr(partial, self.rejected_field, result.rejected)
            partial.error_message = result.message
        return response


TRACES: Final = Signal(
    name="traces",
    http_path="/v1/traces",
    grpc_service="opentelemetry.proto.collector.trace.v1.TraceService",
    request_type=ExportTraceServiceRequest,
    response_type=ExportTraceServiceResponse,
    items="spans",
    rejected_field="rejected_spans",
    count=count_spans,
    decode_json=decode_json_bytes,
    deliver=lambda sink, request: sink.ingest(request),
    received=lambda i: i.spans_received,
    rejected=lambda i: i.spans_rejected,
)

LOGS: Final = Signal(
    name="logs",
    http_path="/v1/logs",
    grpc_service="opentelemetry.proto.collector.logs.v1.LogsService",
    request_type=ExportLogsServiceRequest,
    response_type=ExportLogsServiceResponse,
    items="log records",
    rejected_field="rejected_log_records",
    count=count_log_records,
    decode_json=decode_logs_json_bytes,
    deliver=lambda sink, request: sink.ingest_logs(request),
    received=lambda i: i.log_records_received,
    rejected=lambda i: i.log_records_rejected,
)

SIGNALS: Final[tuple[Signal[Any], ...]] = (TRACES, LOGS)
