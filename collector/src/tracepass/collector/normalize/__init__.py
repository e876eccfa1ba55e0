"""Map spans of every supported instrumentation convention to `SpanRecord`s.

`normalize_request` is on the ingest hot path: each span's attributes are converted to
one dict once, the convention is picked by a handful of key lookups
(end marker → `openinference.span.kind` → `traceloop.span.kind` →
`gen_ai.operation.name` → legacy `gen_ai.prompt.*`), and only the spans that matter
(turns, tools, model calls) have their JSON payloads decoded. See docs/conventions.md
for the mapping tables.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import genai, openinference, traceloop, tracepass_conv
from tracepass.collector.normalize.anyvalue import any_value, attributes_to_dict
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.ids import span_id_hex, trace_id_hex
from tracepass.collector.normalize.records import RecordKind, Rejection, SpanRecord

__all__ = [
    "CONVERSATION_ID_KEYS",
    "RecordKind",
    "Rejection",
    "SpanRecord",
    "normalize_request",
    "resolve_conversation_id",
]

# Resolution order of the conversation id (first non-empty wins); then the configured
# extra keys on the span, then the same extra keys on the resource.
CONVERSATION_ID_KEYS: tuple[str, ...] = (
    "gen_ai.conversation.id",
    "session.id",
    traceloop.ASSOCIATION + "session_id",
    traceloop.ASSOCIATION + "conversation_id",
    traceloop.ASSOCIATION + "thread_id",
)

_STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR

# Attributes copied verbatim into `SpanRecord.attributes` when present: small, useful
# downstream (END turn count, truncation flag, model, user); the rest is not kept.
_KEPT_ATTRIBUTES = (
    tracepass_conv.TURNS_ATTR,
    tracepass_conv.TRUNCATED,
    genai.OPERATION,
    "gen_ai.request.model",
    "gen_ai.response.model",
    "llm.model_name",
    "user.id",
    "error.type",
)

CONVENTION_ATTR = "tracepass.convention"


def resolve_conversation_id(
    attrs: dict[str, Any], extra_keys: Sequence[str] = (), resource_fallback: str | None = None
) -> str | None:
    """The conversation id of one span (see `CONVERSATION_ID_KEYS`); None means the
    collector treats the trace as the conversation."""
    for key in CONVERSATION_ID_KEYS:
        value = attrs.get(key)
        if value is not None:
            text = as_str(value)
            if text is not None:
                return text
    for key in extra_keys:
        value = attrs.get(key)
        if value is not None:
            text = as_str(value)
            if text is not None:
                return text
    return resource_fallback


def _conversation_id(
    attrs: dict[str, Any], id_keys: tuple[str, ...], fallback: str | None
) -> str | None:
    """The general resolution (the hot path tries `gen_ai.conversation.id` inline)."""
    get = attrs.get
    for key in id_keys:
        value = get(key)
        if value is not None:
            text = value if value.__class__ is str else as_str(value)
            if text:
                return text
    return fallback


_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_END = RecordKind.END
_OTHER = RecordKind.OTHER
_GENAI_CONVERSATION = CONVERSATION_ID_KEYS[0]
_AGENT_NAME = "gen_ai.agent.name"
_AGENT_VERSION = "gen_ai.agent.version"
_ERROR_TYPE = "error.type"
_END_SPAN_NAME = tracepass_conv.END_SPAN_NAME
_END_ATTR = tracepass_conv.END_ATTR
_OI_KIND = openinference.SPAN_KIND
_TL_KIND = traceloop.SPAN_KIND
_OPERATION = genai.OPERATION
_TOOL_NAME = "gen_ai.tool.name"
intern = sys.intern


def normalize_request(
    request: ExportTraceServiceRequest, *, conversation_id_keys: Sequence[str] = ()
) -> tuple[list[SpanRecord], list[Rejection]]:
    """Records for the usable spans of one export request, rejections for the others.

    One loop, written for the ingest hot path (one pass per span, few calls): resource
    values are read once per `ResourceSpans`; per span the ids are checked and hexed,
    the attributes read once into a dict, the record built with the common fields and
    kind OTHER, and then the convention's `fill` sets kind and content, decoding only
    the JSON that span's kind needs.
    """
    records: list[SpanRecord] = []
    rejections: list[Rejection] = []
    append = records.append
    # One str per distinct id within the request: a trace's spans share their trace id
    # and children share their parent's span id (buffered spans are the collector's
    # memory; a hex id is ~80 bytes). Same idea for names and conversation ids below,
    # through sys.intern (low cardinality, or shared by every span of a conversation).
    hexes: dict[bytes, str] = {}
    hexed = hexes.get
    extra_keys = tuple(conversation_id_keys)
    id_keys = CONVERSATION_ID_KEYS + extra_keys
    kept_keys = _KEPT_ATTRIBUTES
    for resource_spans in request.resource_spans:
        resource = attributes_to_dict(resource_spans.resource.attributes)
        service_name = as_str(resource.get("service.name"))
        service_version = as_str(resource.get("service.version"))
        resource_conversation: str | None = None
        for key in extra_keys:
            resource_conversation = as_str(resource.get(key))
            if resource_conversation is not None:
                break
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                raw_trace = span.trace_id
                raw_span = span.span_id
                raw_parent = span.parent_span_id
                if (
                    len(raw_trace) != 16
                    or len(raw_span) != 8
                    or raw_trace == _ZERO_TRACE
                    or raw_span == _ZERO_SPAN
                    or (raw_parent and len(raw_parent) != 8)
                ):
                    rejections.append(_rejection(raw_trace, raw_span, raw_parent))
                    continue
                parent = None
                if raw_parent and raw_parent != _ZERO_SPAN:
                    parent = hexed(raw_parent)
                    if parent is None:
                        parent = hexes[raw_parent] = raw_parent.hex()
                trace_hex = hexed(raw_trace)
                if trace_hex is None:
                    trace_hex = hexes[raw_trace] = raw_trace.hex()
                span_hex = hexed(raw_span)
                if span_hex is None:
                    span_hex = hexes[raw_span] = raw_span.hex()
                # `attributes_to_dict`, inlined (one call less per span).
                attrs: dict[str, Any] = {}
                for kv in span.attributes:
                    any_v = kv.value
                    text = any_v.string_value
                    attrs[kv.key] = text if text else any_value(any_v)
                get = attrs.get
                name = intern(span.name)

                conversation = get(_GENAI_CONVERSATION)
                if conversation.__class__ is not str or not conversation:
                    conversation = _conversation_id(attrs, id_keys, resource_conversation)
                if conversation is not None:
                    conversation = intern(conversation)
                agent_name = get(_AGENT_NAME)
                if agent_name.__class__ is not str or not agent_name:
                    agent_name = as_str(agent_name)
                agent_version = get(_AGENT_VERSION)
                if agent_version.__class__ is not str or not agent_version:
                    agent_version = (
                        as_str(agent_version)
                        or as_str(get(tracepass_conv.AGENT_VERSION))
                        or service_version
                    )
                reference = get(tracepass_conv.REFERENCE_ID)
                if reference is not None:
                    reference = as_str(reference)
                status = span.status
                error = (
                    (status.message or as_str(get(_ERROR_TYPE)) or "error")
                    if status.code == _STATUS_ERROR
                    else None
                )
                rec = SpanRecord(
                    trace_hex,
                    span_hex,
                    parent,
                    _OTHER,
                    name,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                    conversation,
                    reference,
                    agent_name,
                    agent_version,
                    service_name,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    error,
                    (),
                    None,
                    None,  # type: ignore[arg-type]  # set below
                )
                # Dispatch (docs/conventions.md): first match wins.
                if name == _END_SPAN_NAME or get(_END_ATTR) is True:
                    rec.kind = _END
                    convention = "tracepass"
                elif (kind := get(_OI_KIND)) is not None:
                    convention = openinference.fill(kind, rec, attrs, is_root=parent is None)
                elif (kind := get(_TL_KIND)) is not None:
                    convention = traceloop.fill(kind, rec, attrs)
                elif (operation := get(_OPERATION)) is not None:
                    # genai.fill, with its two common cases first and inline.
                    if operation == "execute_tool":
                        genai.fill_tool(rec, attrs)
                        convention = genai.CONVENTION
                    elif operation == "invoke_agent":
                        genai.fill_turn(rec, attrs)
                        convention = genai.CONVENTION
                    else:
                        convention = genai.fill(operation, rec, attrs)
                elif genai.is_legacy_model(attrs):
                    genai.fill_model(rec, attrs)
                    convention = genai.CONVENTION
                elif get(_TOOL_NAME) is not None:
                    # Older or hand-rolled GenAI tool spans without gen_ai.operation.name.
                    genai.fill_tool(rec, attrs)
                    convention = genai.CONVENTION
                else:
                    convention = ""
                if rec.agent_name is None:
                    rec.agent_name = service_name
                elif rec.agent_name.__class__ is str:
                    rec.agent_name = intern(rec.agent_name)
                if rec.agent_version.__class__ is str:
                    rec.agent_version = intern(rec.agent_version)
                if rec.tool_name.__class__ is str:
                    rec.tool_name = intern(rec.tool_name)

                kept: dict[str, Any] = {CONVENTION_ATTR: convention} if convention else {}
                for key in kept_keys:
                    value = get(key)
                    if value is not None:
                        kept[key] = intern(value) if value.__class__ is str else value
                if rec.kind is _END:
                    turns = tracepass_conv.turn_count(attrs)
                    if turns is None:
                        kept.pop(tracepass_conv.TURNS_ATTR, None)
                    else:
                        kept[tracepass_conv.TURNS_ATTR] = turns
                rec.attributes = kept
                append(rec)
    return records, rejections


def _rejection(raw_trace: bytes, raw_span: bytes, raw_parent: bytes) -> Rejection:
    if trace_id_hex(raw_trace) is None:
        reason = "invalid_trace_id"
        what = f"trace id must be 16 bytes and not all zero (got {len(raw_trace)} bytes"
        what += ", all zero)" if raw_trace and not any(raw_trace) else ")"
    elif span_id_hex(raw_span) is None:
        reason = "invalid_span_id"
        what = f"span id must be 8 bytes and not all zero (got {len(raw_span)} bytes"
        what += ", all zero)" if raw_span and not any(raw_span) else ")"
    else:
        reason = "invalid_parent_span_id"
        what = f"parent span id must be empty or 8 bytes (got {len(raw_parent)} bytes)"
    return Rejection(
        trace_id=raw_trace.hex(),
        span_id=raw_span.hex(),
        reason=reason,
        message=f"span {raw_span.hex() or '(empty)'} of trace {raw_trace.hex() or '(empty)'}: {what}",
    )
