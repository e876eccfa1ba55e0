"""OTLP/JSON → `ExportLogsServiceRequest`, by hand for the same reasons as traces.

GenAI instrumentations that use the events API send message content as log records
(`event_name` `gen_ai.user.message`, `gen_ai.choice`…) tied to their span by trace and
span id, which OTLP/JSON writes in hex (see `otlp_json` for why `json_format` cannot be
used). Only the log record is read here: the envelope, resources, scopes, values and
limits are `otlp_json`'s one decoder (`decode_signal_object` with `LOGS`), so the
leniency and the error paths (`resourceLogs[0].scopeLogs[1].logRecords[7].spanId: …`)
are the same as for traces.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, SeverityNumber

from tracepass.collector.receiver.otlp_json import (
    JsonSignal,
    OtlpJsonError,
    _any_value,
    _attributes,
    _enum,
    _hex_id,
    _normalized,
    _obj,
    _str,
    _u32,
    _u64,
    decode_signal_object,
    parse_json,
)

__all__ = [
    "LOGS",
    "decode_logs_json_bytes",
    "decode_logs_json_object",
    "encode_logs_json",
    "is_logs_document",
]

_LR_KEYS = frozenset(
    {
        "timeUnixNano",
        "observedTimeUnixNano",
        "severityNumber",
        "severityText",
        "body",
        "attributes",
        "droppedAttributesCount",
        "flags",
        "traceId",
        "spanId",
        "eventName",
    }
)


def is_logs_document(obj: Any) -> bool:
    """An `ExportLogsServiceRequest` / `LogsData` document (has `resourceLogs`)."""
    return type(obj) is dict and ("resourceLogs" in obj or "resource_logs" in obj)


def encode_logs_json(request: ExportLogsServiceRequest) -> bytes:
    """OTLP/JSON of a logs request, ids in hex as the spec says (protobuf's JSON writer
    would write them in base64): what `serve --record` writes for logs requests."""
    doc = json_format.MessageToDict(request)
    for rl in doc.get("resourceLogs", ()):
        for sl in rl.get("scopeLogs", ()):
            for lr in sl.get("logRecords", ()):
                for key in ("traceId", "spanId"):
                    if key in lr:
                        lr[key] = base64.b64decode(lr[key]).hex()
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def decode_logs_json_bytes(data: bytes | str) -> ExportLogsServiceRequest:
    """Parse one OTLP/JSON `ExportLogsServiceRequest` (or `LogsData`) document (the body
    of `POST /v1/logs`)."""
    return decode_logs_json_object(parse_json(data))


def decode_logs_json_object(obj: Any) -> ExportLogsServiceRequest:
    """Build the logs request from an already parsed JSON value."""
    request = ExportLogsServiceRequest()
    decode_signal_object(obj, LOGS, request)
    return request


def _severity(name: str) -> int:
    return int(SeverityNumber.Value(name))


def _log_record(lr: Any, msg: LogRecord) -> None:
    lr = _normalized(_obj(lr, ""), _LR_KEYS)
    if (v := lr.get("timeUnixNano")) is not None:
        msg.time_unix_nano = _u64(v, "timeUnixNano")
    if (v := lr.get("observedTimeUnixNano")) is not None:
        msg.observed_time_unix_nano = _u64(v, "observedTimeUnixNano")
    if (v := lr.get("severityNumber")) is not None:
        msg.severity_number = _enum(v, "severityNumber", _severity)  # type: ignore[assignment]
    if (v := lr.get("severityText")) is not None:
        msg.severity_text = _str(v, "severityText")
    if (v := lr.get("body")) is not None:
        try:
            _any_value(v, msg.body)
        except OtlpJsonError as exc:
            raise exc.prepend("body") from None
    if (v := lr.get("attributes")) is not None:
        _attributes(v, msg.attributes, "attributes")
    if (v := lr.get("droppedAttributesCount")) is not None:
        msg.dropped_attributes_count = _u32(v, "droppedAttributesCount")
    if (v := lr.get("flags")) is not None:
        msg.flags = _u32(v, "flags")
    if (v := lr.get("traceId")) is not None:
        msg.trace_id = _hex_id(v, "traceId", 16)
    if (v := lr.get("spanId")) is not None:
        msg.span_id = _hex_id(v, "spanId", 8)
    if (v := lr.get("eventName")) is not None:
        msg.event_name = _str(v, "eventName")


LOGS = JsonSignal("logs", "resourceLogs", "scopeLogs", "logRecords", _log_record)
