"""OTLP/JSON → `ExportLogsServiceRequest`, by hand for the same reasons as traces.

GenAI instrumentations that use the events API send message content as log records
(`event_name` `gen_ai.user.message`, `gen_ai.choice`…) tied to their span by trace and
span id, which OTLP/JSON writes in hex (see `otlp_json` for why `json_format` cannot be
used). Shares the value, attribute, resource and scope readers of `otlp_json`, so the
leniency and the error paths (`resourceLogs[0].scopeLogs[1].logRecords[7].spanId: …`)
are the same.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from tracepass.collector.receiver.otlp_json import (
    OtlpJsonError,
    _any_value,
    _attributes,
    _enum,
    _hex_id,
    _kind,
    _list,
    _normalized,
    _obj,
    _resource,
    _scope,
    _str,
    _u32,
    _u64,
    check_signal,
    parse_json,
)

__all__ = [
    "decode_logs_json_bytes",
    "decode_logs_json_object",
    "encode_logs_json",
    "is_logs_document",
]

_RL_KEYS = frozenset({"resource", "scopeLogs", "schemaUrl"})
_SL_KEYS = frozenset({"scope", "logRecords", "schemaUrl"})
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
    if type(obj) is not dict:
        raise OtlpJsonError(f"expected a JSON object at top level, got {_kind(obj)}")
    request = ExportLogsServiceRequest()
    items = obj.get("resourceLogs")
    if items is None:
        items = obj.get("resource_logs")
    if items is None:
        check_signal(obj, "logs")
        return request
    if type(items) is not list:
        raise OtlpJsonError(f"expected an array, got {_kind(items)}", "resourceLogs")
    out = request.resource_logs
    for i, rl in enumerate(items):
        try:
            _resource_logs(rl, out.add())
        except OtlpJsonError as exc:
            raise exc.prepend(f"[{i}]").prepend("resourceLogs") from None
    return request


def _resource_logs(rl: Any, msg: ResourceLogs) -> None:
    rl = _normalized(_obj(rl, ""), _RL_KEYS)
    if (res := rl.get("resource")) is not None:
        _resource(_obj(res, "resource"), msg.resource)
    if (url := rl.get("schemaUrl")) is not None:
        msg.schema_url = _str(url, "schemaUrl")
    scopes = rl.get("scopeLogs")
    if scopes is None:
        return
    out = msg.scope_logs
    for i, sl in enumerate(_list(scopes, "scopeLogs")):
        try:
            _scope_logs(sl, out.add())
        except OtlpJsonError as exc:
            raise exc.prepend(f"[{i}]").prepend("scopeLogs") from None


def _scope_logs(sl: Any, msg: ScopeLogs) -> None:
    sl = _normalized(_obj(sl, ""), _SL_KEYS)
    if (scope := sl.get("scope")) is not None:
        _scope(_obj(scope, "scope"), msg.scope)
    if (url := sl.get("schemaUrl")) is not None:
        msg.schema_url = _str(url, "schemaUrl")
    records = sl.get("logRecords")
    if records is None:
        return
    out = msg.log_records
    for i, lr in enumerate(_list(records, "logRecords")):
        try:
            _log_record(lr, out.add())
        except OtlpJsonError as exc:
            raise exc.prepend(f"[{i}]").prepend("logRecords") from None


def _severity(name: str) -> int:
    from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

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
