"""GenAI events received as OTLP log records → EVENT records for the span they belong to.

Instrumentations built on the OTel events API (the contrib GenAI instrumentations with
content capture, for one) send message content as log records named
`gen_ai.user.message`, `gen_ai.choice`, … whose trace and span ids say which span they
belong to. Logs and traces travel separately, so either may arrive first. Each event
therefore becomes its own record, kind EVENT, whose `parent_span_id` is the span it
belongs to: the assembler routes it like any span of the trace (a trace-only buffer
joins its conversation when a span names one, whichever came first), and
`assembly.build` merges it into that span's record with the same reader as span events
(`genai_events.apply_events`). Its own `span_id` is derived from the log record's
content, so an exporter's retry is a duplicate, not a second event.

Behind the project's Collector gateway (deploy/otelcol), a record's trace id is the
routing digest of its conversation, and its own trace id is in the attribute
`tracepass.original_trace_id` (the loadbalancing exporter routes logs by trace id only);
`record_trace_id` reads that one back.

Log records without a trace and span id cannot be placed and are rejected (counted as
any rejection); records that are not GenAI events are skipped (not an error: logs
pipelines carry everything).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from tracepass.collector.normalize import genai_events
from tracepass.collector.normalize.anyvalue import any_value, attributes_to_dict
from tracepass.collector.normalize.conversation_ids import resolve_conversation_id
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.stats import LOG_EVENTS, NONE, ReadTally
from tracepass.collector.records import RecordKind, Rejection, SpanRecord

NAME: Final = LOG_EVENTS
# `SpanRecord.attributes` key of an EVENT record: {"name": event name, "fields": {...}}.
EVENT_ATTR: Final = "tracepass.event"
# Before `LogRecord.event_name` existed, the events API put the name in this attribute.
EVENT_NAME_ATTR: Final = "event.name"

# Where the gateway's conversationid processor keeps a log record's own trace id.
ORIGINAL_TRACE_ID_ATTR: Final = "tracepass.original_trace_id"

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)


def record_trace_id(record: LogRecord, attrs: dict[str, Any]) -> bytes:
    """The record's own trace id: the gateway's `tracepass.original_trace_id` (32 hex
    digits, removed from `attrs` so it is not an event field) when present and well
    formed, else the record's trace id."""
    original = attrs.pop(ORIGINAL_TRACE_ID_ATTR, None)
    if isinstance(original, str) and len(original) == 32:
        try:
            return bytes.fromhex(original)
        except ValueError:
            pass
    return record.trace_id


def event_name(record: LogRecord, attrs: dict[str, Any]) -> str | None:
    return record.event_name or as_str(attrs.get(EVENT_NAME_ATTR))


def event_fields(record: LogRecord, attrs: dict[str, Any]) -> dict[str, Any]:
    """The event's content: the body's fields (a kvlist) over the attributes; a body that
    is not a map is its `content`."""
    fields = dict(attrs)
    body = any_value(record.body) if record.HasField("body") else None
    if isinstance(body, dict):
        fields.update(body)
    elif body is not None:
        fields.setdefault("content", body)
    return fields


def _event_span_id(record: LogRecord, name: str) -> str:
    digest = hashlib.blake2b(record.SerializeToString(deterministic=True), digest_size=8)
    digest.update(name.encode())
    raw = digest.digest()
    return (raw if raw != _ZERO_SPAN else b"\x00" * 7 + b"\x01").hex()


def normalize_logs_request(
    request: ExportLogsServiceRequest,
    *,
    conversation_id_keys: Sequence[str] = (),
    tally: ReadTally | None = None,
) -> tuple[list[SpanRecord], list[Rejection]]:
    """EVENT records for the GenAI events of one logs export request (counted in
    `tally` under the convention `genai_log_events`)."""
    records: list[SpanRecord] = []
    rejections: list[Rejection] = []
    for resource_logs in request.resource_logs:
        resource = attributes_to_dict(resource_logs.resource.attributes)
        service_name = as_str(resource.get("service.name"))
        for scope_logs in resource_logs.scope_logs:
            for log_record in scope_logs.log_records:
                attrs = attributes_to_dict(log_record.attributes)
                name = event_name(log_record, attrs)
                if name is None or name not in genai_events.EVENT_NAMES:
                    continue
                trace, span = record_trace_id(log_record, attrs), log_record.span_id
                if len(trace) != 16 or trace == _ZERO_TRACE or len(span) != 8 or span == _ZERO_SPAN:
                    rejections.append(
                        Rejection(
                            trace_id=trace.hex(),
                            span_id=span.hex(),
                            reason="event_without_span",
                            message=f"log event {name}: needs the trace and span id of its "
                            f"span (got {len(trace)}-byte trace id, {len(span)}-byte span id)",
                        )
                    )
                    continue
                time_ns = log_record.time_unix_nano or log_record.observed_time_unix_nano
                records.append(
                    SpanRecord(
                        trace_id=trace.hex(),
                        span_id=_event_span_id(log_record, name),
                        parent_span_id=span.hex(),
                        kind=RecordKind.EVENT,
                        name=name,
                        start_ns=time_ns,
                        end_ns=time_ns,
                        conversation_id=resolve_conversation_id(attrs, conversation_id_keys),
                        service_name=service_name,
                        attributes={
                            EVENT_ATTR: {"name": name, "fields": event_fields(log_record, attrs)}
                        },
                    )
                )
    if tally is not None and records:
        key = (LOG_EVENTS, NONE)
        tally.read[key] = tally.read.get(key, 0) + len(records)
    return records, rejections


def event_of(rec: SpanRecord) -> genai_events.Event | None:
    """The (name, fields) an EVENT record carries."""
    raw = rec.attributes.get(EVENT_ATTR)
    if isinstance(raw, dict):
        name, fields = raw.get("name"), raw.get("fields")
        if isinstance(name, str) and isinstance(fields, dict):
            return name, fields
    return None
