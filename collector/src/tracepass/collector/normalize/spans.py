"""Map the spans of every supported instrumentation convention to `SpanRecord`s.

`normalize_request` is on the ingest hot path: each span's attributes are converted to
one dict once, the convention is picked by walking the table in `table.py` (a dict
lookup per attribute key: end marker → `openinference.span.kind` →
`traceloop.span.kind` → `gen_ai.operation.name` → legacy `gen_ai.prompt.*` →
`gen_ai.tool.name`), GenAI span events fill what attributes did not give, and the
framework adapters of the span's instrumentation scope correct the result. Only the
spans that matter (turns, tools, model calls) have their JSON payloads decoded. See
docs/conventions.md for the mapping tables and how to add a convention or adapter.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracepass.collector.normalize import genai_events, tracepass_conv
from tracepass.collector.normalize.anyvalue import any_value, attributes_to_dict
from tracepass.collector.normalize.conversation_ids import (
    CONVERSATION_ID_KEYS,
)
from tracepass.collector.normalize.custom import CustomConventions
from tracepass.collector.normalize.extract import as_str, first_str
from tracepass.collector.normalize.handoff_tools import read_handoff_tool
from tracepass.collector.normalize.ids import span_id_hex, trace_id_hex
from tracepass.collector.normalize.logs import normalize_logs_request
from tracepass.collector.normalize.registry import (
    ADAPTERS_ATTR,
    CONVENTION_ATTR,
    SOURCE_SPAN_EVENT,
)
from tracepass.collector.normalize.shape_fill import fill_by_shape
from tracepass.collector.normalize.stats import NONE, ReadTally
from tracepass.collector.normalize.table import BY_KEY, BY_SPAN_NAME, adapters_for_scope
from tracepass.collector.normalize.usage import MAX_SPAN_DURATION_NS, read_usage
from tracepass.collector.records import (
    RAW_KEY,
    RecordKind,
    Rejection,
    SpanRecord,
    stored_tool_arguments,
    stored_tool_result,
)
from tracepass.instrumentation import semconv as sc

__all__ = ["OtlpRequest", "normalize_any", "normalize_request"]

# What OTLP files and receivers hand over: trace or logs export requests.
OtlpRequest = ExportTraceServiceRequest | ExportLogsServiceRequest

_STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.STATUS_CODE_ERROR

# Attributes copied verbatim into `SpanRecord.attributes` when present: small, useful
# downstream (truncation flag, model, user); the rest is not kept. (The END record's
# turn count is set, validated, by the tracepass convention.)
_KEPT_ATTRIBUTES = (
    tracepass_conv.TRUNCATED,
    sc.OPERATION_NAME,
    sc.REQUEST_MODEL,
    sc.RESPONSE_MODEL,
    "llm.model_name",
    "user.id",
    sc.ERROR_TYPE,
)


# The field order `normalize_request` builds records in (positionally, for speed).
_HOT_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "kind",
    "name",
    "start_ns",
    "end_ns",
    "conversation_id",
    "reference_id",
    "agent_name",
    "agent_version",
    "service_name",
    "input_text",
    "output_text",
    "tool_name",
    "tool_call_id",
    "tool_arguments",
    "tool_result",
    "error",
    "requested_tool_calls",
    "final_answer_uses_tools",
    "attributes",
    "tool_definitions",
    "usage",
)
if tuple(f.name for f in dataclasses.fields(SpanRecord)) != _HOT_FIELDS:  # pragma: no cover
    raise ImportError("SpanRecord's fields changed: update _HOT_FIELDS and normalize_request")


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
_NONE = NONE
_OTHER = RecordKind.OTHER
_TOOL = RecordKind.TOOL
_TURN = RecordKind.TURN
_MODEL = RecordKind.MODEL
_GENAI_CONVERSATION = CONVERSATION_ID_KEYS[0]
_MAX_SPAN_NS = MAX_SPAN_DURATION_NS
_AGENT_NAME = sc.AGENT_NAME
_AGENT_VERSION = sc.AGENT_VERSION
_ERROR_TYPE = sc.ERROR_TYPE
_TRACEPASS_AGENT_VERSION = tracepass_conv.AGENT_VERSION
_REFERENCE_ID = tracepass_conv.REFERENCE_ID
intern = sys.intern
stored_args = stored_tool_arguments
stored_result = stored_tool_result

# `SpanRecord.attributes` dicts whose values are all strings, shared by every record
# that kept the same items in the same order: the kept attributes repeat across spans
# (convention, operation, model), and records are never changed in place after
# normalization (assembly copies a record to change it, see assembly/event_join.py). Only
# strings are entered, so a hit is all strings too (items equal across types, 1 == True,
# must not share; no str equals a non-str). Bounded, so
# high-cardinality values (`user.id`) stop adding entries instead of growing it.
_SHARED_KEPT: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
_MAX_SHARED_KEPT = 4096
shared_kept = _SHARED_KEPT
shared_get = _SHARED_KEPT.get


def normalize_request(
    request: ExportTraceServiceRequest,
    *,
    conversation_id_keys: Sequence[str] = (),
    tally: ReadTally | None = None,
    custom: CustomConventions | None = None,
) -> tuple[list[SpanRecord], list[Rejection]]:
    """Records for the usable spans of one export request, rejections for the others.

    One loop, written for the ingest hot path (one pass per span, few calls): resource
    values are read once per `ResourceSpans` and the scope's adapters once per
    `ScopeSpans`; per span the ids are checked and hexed, the attributes read once into
    a dict, the record built with the common fields and kind OTHER, and then the first
    convention of the table that claims the span fills kind and content, decoding only
    the JSON that span's kind needs. `tally`, when given, counts how each span was read
    (`stats.py`: the live collector's `/metrics`). `custom`, the user's mappings
    (`custom.py`), claims spans before the built-in table does.
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
    by_key = BY_KEY
    by_span_name = BY_SPAN_NAME
    read = tally.read if tally is not None else {}
    # Spans read without an adapter, by convention: one tuple label per request and
    # convention instead of one per span (added to `read` at the end).
    plain: dict[str | None, int] = {}
    for resource_spans in request.resource_spans:
        resource = attributes_to_dict(resource_spans.resource.attributes)
        service_name = as_str(resource.get("service.name"))
        service_version = as_str(resource.get("service.version"))
        resource_conversation = first_str(resource, extra_keys)
        for scope_spans in resource_spans.scope_spans:
            adapters = adapters_for_scope(scope_spans.scope.name)
            # The user's mappings that can apply to this scope (None, the common case:
            # no per-span cost at all).
            scope_custom = custom.for_scope(scope_spans.scope.name) if custom else None
            custom_by_name = scope_custom.by_name if scope_custom is not None else None
            unrecognized = 0  # spans of this scope nothing claimed (counted when tallying)
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
                # `attributes_to_dict`, inlined (one call less per span). `or` rather
                # than a named `text`: one local store and load less per attribute,
                # ~10 % of this loop (`any_value` of an empty string is "" again).
                attrs: dict[str, Any] = {}
                for kv in span.attributes:
                    any_v = kv.value
                    attrs[kv.key] = any_v.string_value or any_value(any_v)
                get = attrs.get
                name = intern(span.name)

                conversation = get(_GENAI_CONVERSATION)
                if conversation.__class__ is not str or not conversation:
                    conversation = _conversation_id(attrs, id_keys, resource_conversation)
                if conversation is not None:
                    conversation = intern(conversation)
                # Absent (None) is the common case for tool spans: tested before any
                # call to `as_str` (of None, which is None again).
                agent_name = get(_AGENT_NAME)
                if agent_name is not None and (agent_name.__class__ is not str or not agent_name):
                    agent_name = as_str(agent_name)
                agent_version = get(_AGENT_VERSION)
                if agent_version.__class__ is not str or not agent_version:
                    if agent_version is not None:
                        agent_version = as_str(agent_version)
                    if agent_version is None:
                        fallback = get(_TRACEPASS_AGENT_VERSION)
                        agent_version = (
                            as_str(fallback) if fallback is not None else None
                        ) or service_version
                reference = get(_REFERENCE_ID)
                if reference is not None:
                    reference = as_str(reference)
                error: str | None = None
                # `HasField` first: most spans carry no status, and reading the absent
                # message builds an empty one just to compare its code with 0.
                if span.HasField("status") and (status := span.status).code == _STATUS_ERROR:
                    error = status.message or as_str(get(_ERROR_TYPE))
                    if not error:
                        # No message (pydantic-ai tool errors): the exception event's.
                        error = (
                            genai_events.exception_message(span) if span.events else None
                        ) or "error"
                kept: dict[str, Any] = {}
                # Positional, in `_HOT_FIELDS` order (checked at import): keyword
                # binding cost ~0.5 us per span here, 6 % of normalization.
                rec = SpanRecord(
                    trace_hex,  # trace_id
                    span_hex,  # span_id
                    parent,  # parent_span_id
                    _OTHER,  # kind: set by the convention that claims the span
                    name,  # name
                    span.start_time_unix_nano,  # start_ns
                    span.end_time_unix_nano,  # end_ns
                    conversation,  # conversation_id
                    reference,  # reference_id
                    agent_name,  # agent_name
                    agent_version,  # agent_version
                    service_name,  # service_name
                    None,  # input_text
                    None,  # output_text
                    None,  # tool_name
                    None,  # tool_call_id
                    None,  # tool_arguments
                    None,  # tool_result
                    error,  # error
                    (),  # requested_tool_calls
                    None,  # final_answer_uses_tools
                    kept,  # attributes
                    None,  # tool_definitions
                    None,  # usage: model calls only, read below
                )
                # Dispatch (table.py, docs/conventions.md): first claim wins.
                convention: str | None = None
                span_adapters = adapters
                if custom_by_name is not None:
                    candidates = custom_by_name.get(name)
                    if candidates is None:
                        candidates = scope_custom.candidates(name)  # type: ignore[union-attr]
                    if candidates:
                        convention = scope_custom.claim(  # type: ignore[union-attr]
                            candidates, rec, attrs, span, tally
                        )
                        if convention is not None:  # the user's mapping is the whole reading
                            span_adapters = ()
                if convention is None:
                    claimer = by_span_name.get(name)
                    if claimer is not None:
                        convention = claimer.fill(rec, attrs, name, span)
                if convention is None:
                    for key, claimer in by_key:
                        marker = get(key)
                        if marker is not None:
                            convention = claimer.fill(rec, attrs, marker, span)
                            if convention is not None:
                                break
                # Span events only for records their attributes left incomplete: reading
                # `span.events` costs as much as a dict of attributes, and complete
                # records (the common case) would gain nothing from it.
                kind = rec.kind
                # (What the slots hold, not decoded: deferred text is a non-empty mapping
                # and a result that is not None once decoded, see records.py.)
                if (
                    (kind is _TOOL and (not stored_args(rec) or stored_result(rec) is None))
                    or (
                        (kind is _TURN or kind is _MODEL)
                        and (rec.input_text is None or rec.output_text is None)
                    )
                ) and span.events:
                    events = genai_events.span_events(span)
                    if events:
                        genai_events.apply_events(rec, events, SOURCE_SPAN_EVENT)
                applied: list[str] | None = None
                if span_adapters:
                    applied = [a.name for a in span_adapters if a.adapt(rec, attrs, span)]
                    if applied:
                        kept[ADAPTERS_ATTR] = applied
                # What no convention or adapter read, by shape (shape_fill.py): only
                # for records still missing content, and for tool results whose
                # failure is a flag inside their JSON.
                kind = rec.kind
                if (
                    (kind is _OTHER and convention is None and attrs)
                    or (
                        (kind is _TURN or kind is _MODEL)
                        and (rec.input_text is None or rec.output_text is None)
                    )
                    or (kind is _TOOL and rec.error is None)
                ):
                    fill_by_shape(rec, attrs, convention is None)
                # A framework's built-in hand-off tool (`transfer_to_<agent>`) is a
                # hand-off step, not a call of the trajectory (handoff_tools.py).
                if rec.kind is _TOOL:
                    read_handoff_tool(rec)
                if rec.kind is _MODEL:
                    usage = read_usage(attrs)
                    if usage is not None:
                        rec.usage = usage
                        if usage.problem is not None and tally is not None:
                            tally.count_unreadable("token_count")
                if tally is not None and (
                    rec.end_ns < rec.start_ns or rec.end_ns - rec.start_ns > _MAX_SPAN_NS
                ):
                    tally.count_unreadable("span_time")
                if rec.agent_name is None:
                    rec.agent_name = service_name
                elif rec.agent_name.__class__ is str:
                    rec.agent_name = intern(rec.agent_name)
                if rec.agent_version.__class__ is str:
                    rec.agent_version = intern(rec.agent_version)
                if rec.tool_name.__class__ is str:
                    rec.tool_name = intern(rec.tool_name)
                if tally is not None:
                    if applied:
                        label = (convention or _NONE, applied[0])
                        read[label] = read.get(label, 0) + 1
                    else:  # the common case: counted per convention, labelled below
                        plain[convention] = plain.get(convention, 0) + 1
                        if convention is None:
                            unrecognized += 1
                    if rec.kind is _TOOL:
                        if not rec.tool_name:
                            tally.count_unreadable("tool_name")
                        # Deferred text never decodes to one with `"_raw"`.
                        args = stored_args(rec)
                        if args and args.__class__ is dict and RAW_KEY in args:
                            tally.count_unreadable("tool_arguments")

                if convention:
                    kept[CONVENTION_ATTR] = convention
                for key in kept_keys:
                    value = get(key)
                    if value is not None:
                        kept[key] = intern(value) if value.__class__ is str else value
                # One shared dict per distinct set of kept string attributes (see
                # `_SHARED_KEPT`); a dict is ~180 bytes per buffered span otherwise.
                signature = tuple(kept.items())
                try:
                    shared = shared_get(signature)
                except TypeError:  # an unhashable value (a list, a dict): not shared
                    shared = kept
                if shared is None:
                    if len(shared_kept) < _MAX_SHARED_KEPT and all(
                        v.__class__ is str for v in kept.values()
                    ):
                        shared_kept[signature] = kept
                elif shared is not kept:
                    rec.attributes = shared
                append(rec)
            if unrecognized and tally is not None:
                tally.count_unrecognized(scope_spans.scope.name, unrecognized)
    for convention, count in plain.items():
        label = (convention or _NONE, _NONE)
        read[label] = read.get(label, 0) + count
    return records, rejections


def normalize_any(
    request: OtlpRequest,
    *,
    conversation_id_keys: Sequence[str] = (),
    custom: CustomConventions | None = None,
    tally: ReadTally | None = None,
) -> tuple[list[SpanRecord], list[Rejection]]:
    """`normalize_request` for traces, `normalize_logs_request` for logs (GenAI events)."""
    if isinstance(request, ExportLogsServiceRequest):
        return normalize_logs_request(request, conversation_id_keys=conversation_id_keys)
    return normalize_request(
        request, conversation_id_keys=conversation_id_keys, custom=custom, tally=tally
    )


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
