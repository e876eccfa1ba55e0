"""OTLP receivers (gRPC and HTTP) in front of a `SpanSink`, and the OTLP/JSON decoder
shared with `tracepass.collector.receiver.otlpfile`. See docs/receiver.md."""

from tracepass.collector.receiver.otlp_json import (
    OtlpJsonError,
    decode_json_bytes,
    decode_json_object,
)
from tracepass.collector.receiver.servers import ReceiverServers

__all__ = ["OtlpJsonError", "ReceiverServers", "decode_json_bytes", "decode_json_object"]
