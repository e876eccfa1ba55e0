"""Normalized span records: the one shape every instrumentation convention maps to.

`tracepass.collector.normalize` turns OTLP spans from tracepass, OTel GenAI semconv,
OpenInference or OpenLLMetry into `SpanRecord`s; assembly only ever sees records, never
raw attributes, so supporting a new convention touches the normalize stage only. The
record lives here, in the foundation every stage may import, not inside the stage that
builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tracepass.collector.records.jsonvalue import SCAN_ERRORS, scan_once
from tracepass.collector.records.model_usage import ModelUsage
from tracepass.collector.records.tool_values import (
    DeferredResult,
    decode_deferred_arguments,
    decode_deferred_result,
)
from tracepass.evaluator.models import ToolCall, ToolDefinition


class RecordKind(StrEnum):
    TURN = "turn"  # an agent invocation (invoke_agent, AGENT/CHAIN root, workflow)
    TOOL = "tool"  # one tool execution
    MODEL = "model"  # one LLM call (chat/completion); may carry tool calls in its messages
    OTHER = "other"  # anything else; kept for tree structure (parent links)
    END = "end"  # tracepass's explicit end-of-conversation marker
    # A GenAI event received as an OTLP log record, for the span `parent_span_id`
    # (`attributes["tracepass.event"]` = {"name", "fields"}); assembly merges it into
    # that span's record, whichever of the two arrived first (see normalize/logs.py).
    EVENT = "event"


# Not frozen on purpose: a frozen dataclass's `__init__` assigns every field through
# `object.__setattr__`, which made building ~22-field records several times dearer than
# plain slot stores on the ingest hot path (one record per span). Records are still
# treated as immutable values: nothing assigns to a field after construction, and
# nothing hashes them (the `attributes` dict made them unhashable when frozen, too).
# Build records with keyword arguments (the ingest loop in `normalize_request` is the one
# positional call, its field order checked at import); add new fields at the end, with
# a default (the state store's codec lists them by position too).
@dataclass(slots=True)
class SpanRecord:
    trace_id: str  # 32 lowercase hex chars
    span_id: str  # 16 lowercase hex chars
    parent_span_id: str | None
    kind: RecordKind
    name: str
    start_ns: int
    end_ns: int
    conversation_id: str | None = None
    reference_id: str | None = None
    agent_name: str | None = None
    agent_version: str | None = None
    service_name: str | None = None
    # TURN: the user query and final answer. MODEL: last user message / output text.
    input_text: str | None = None
    output_text: str | None = None
    # TOOL only.
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: dict[str, Any] | None = None
    tool_result: Any = None
    # Set when the span's status is ERROR (message, or error.type when no message).
    error: str | None = None
    # MODEL only: tool calls the model requested, for stacks that emit no tool spans.
    requested_tool_calls: tuple[ToolCall, ...] = ()
    final_answer_uses_tools: bool | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    # MODEL: the tools offered to the model (None: the span did not say). TOOL: the
    # tool's own declared parameters, when the instrumentation records them (`@tool`).
    tool_definitions: tuple[ToolDefinition, ...] | None = None
    # MODEL only: token counts and provider (`records/model_usage.py`, read by `normalize/usage.py`); None when the span
    # carries neither (one slot per record; an object only for model calls with usage).
    usage: ModelUsage | None = None


# Deferred tool arguments and results. A buffered tool span's arguments and result, as
# decoded dicts, cost ~3x their JSON text (a dict is ~184 bytes before its keys and
# values); they are read only when the conversation is rebuilt. So `normalize` may store
# the attribute's text instead (`store_tool_arguments` / `store_tool_result`), and reading `tool_arguments` /
# `tool_result` decodes it then, with the very functions ingest would have applied
# (`coerce_arguments` / `coerce_result`, pure functions of the text; their fast paths
# for the text `tool_values.deferred_*` keeps): every reader sees
# the same values as if they had been decoded at ingest, decoded afresh per read (not
# cached: that would bring the memory back). Ingest decides what it needs without
# decoding: `tool_values.deferred_arguments` / `deferred_result` only defer text
# whose coerced value is known from the text alone to be a non-empty mapping without
# `"_raw"` / not None. Assigning a value stores it as is.
_arguments_slot = SpanRecord.__dict__["tool_arguments"]
_result_slot = SpanRecord.__dict__["tool_result"]
_get_arguments = _arguments_slot.__get__
_set_arguments = _arguments_slot.__set__
_get_result = _result_slot.__get__
_set_result = _result_slot.__set__


def _read_arguments(rec: SpanRecord) -> dict[str, Any] | None:
    value = _get_arguments(rec)
    if value.__class__ is str:  # deferred JSON text (a coerced value is a dict or None)
        # `decode_deferred_arguments`'s fast path, inlined (one frame less per read);
        # deferred text holds neither wrapper key (`deferred_arguments`).
        try:
            parsed, end = scan_once(value, 0)
        except SCAN_ERRORS:
            end = -1
        if end == len(value):
            return parsed  # type: ignore[no-any-return]
        return decode_deferred_arguments(value)
    return value  # type: ignore[no-any-return]


def _read_result(rec: SpanRecord) -> Any:
    value = _get_result(rec)
    if value.__class__ is DeferredResult:
        # `decode_deferred_result`'s fast path, inlined: text that is exactly one
        # document and opens an object is a dict without the `output`/`lc`/`type` keys
        # (`deferred_result` kept no text that spells them, nor any escape).
        text = value.text
        try:
            parsed, end = scan_once(text, 0)
        except SCAN_ERRORS:
            end = -1
        if end == len(text):
            return parsed
        return decode_deferred_result(text)
    return value


# The dataclass's generated `__init__`, `__eq__`, `__repr__`, `replace` and the codec
# all go through these properties, so they see decoded values.
setattr(SpanRecord, "tool_arguments", property(_read_arguments, _set_arguments))  # noqa: B010
setattr(SpanRecord, "tool_result", property(_read_result, _set_result))  # noqa: B010


# Store arguments (a coerced dict, None, or text from `deferred_arguments`) / a result
# (a coerced value or a `DeferredResult`) without decoding: the slot descriptors' own
# setters (no Python frame on the ingest path).
store_tool_arguments: Callable[[SpanRecord, dict[str, Any] | str | None], None] = _set_arguments
store_tool_result: Callable[[SpanRecord, Any], None] = _set_result


# What the slots hold, undecoded (the slot descriptors' own getters: no Python frame
# on the ingest path). Arguments: a dict, None, or deferred text (a non-empty mapping
# without `"_raw"` once decoded); result: the coerced value, or a `DeferredResult`
# (not None once decoded).
stored_tool_arguments: Callable[[SpanRecord], dict[str, Any] | str | None] = _get_arguments
stored_tool_result: Callable[[SpanRecord], Any] = _get_result


@dataclass(frozen=True, slots=True)
class Rejection:
    """A span that cannot be used (e.g. malformed ids); reported as OTLP partial success."""

    trace_id: str
    span_id: str
    reason: str  # short metric label, e.g. "invalid_trace_id"
    message: str
