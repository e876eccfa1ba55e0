"""OTLP receivers (gRPC and HTTP) in front of a `SpanSink`, and the OTLP/JSON decoder
shared with `tracepass.collector.receiver.otlpfile`. See docs/receiver.md."""

from tracepass.collector.receiver.binding import BindError, reason_of
from tracepass.collector.receiver.decode import count_log_records
from tracepass.collector.receiver.http_server import GetRoute
from tracepass.collector.receiver.memory import MemoryGuard
from tracepass.collector.receiver.otlp_json import (
    OtlpJsonError,
    decode_json_bytes,
    decode_json_object,
)
from tracepass.collector.receiver.otlpfile import EXPECTED_FORMATS, OtlpFileRequest, read_otlp_file
from tracepass.collector.receiver.recording import RecordingSink
from tracepass.collector.receiver.servers import ReceiverServers
from tracepass.collector.receiver.sink import IngestResult, Overloaded, SpanSink

__all__ = [
    "EXPECTED_FORMATS",
    "BindError",
    "GetRoute",
    "IngestResult",
    "MemoryGuard",
    "OtlpFileRequest",
    "OtlpJsonError",
    "Overloaded",
    "ReceiverServers",
    "RecordingSink",
    "SpanSink",
    "count_log_records",
    "decode_json_bytes",
    "decode_json_object",
    "read_otlp_file",
    "reason_of",
]
