"""OpenLLMetry / Traceloop spans: `traceloop.span.kind` decides the record.

workflow / agent → turn (query and answer from `traceloop.entity.input`/`output`, which
wrap LangChain state as `{"inputs": …}` / `{"outputs": …}`, or decorator calls as
`{"args": […], "kwargs": {…}}`); tool → tool call (arguments from the entity input,
LangChain's `{"input_str": "<python repr>"}` parsed safely); task → other. Model spans
carry no span kind: they are plain GenAI semconv spans handled by `genai`.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize import genai
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import answer_from_state, query_from_state
from tracepass.collector.normalize.registry import Convention
from tracepass.collector.records import (
    NOT_JSON,
    RAW_KEY,
    RecordKind,
    SpanRecord,
    coerce_arguments,
    loads,
    stored_tool_arguments,
)

NAME = "traceloop"
SPAN_KIND = "traceloop.span.kind"
ASSOCIATION = "traceloop.association.properties."

ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"

_CALLBACK_KEYS = frozenset({"inputs", "outputs", "tags", "metadata", "kwargs", "output"})


def _unwrap(value: Any, key: str) -> Any:
    """`{"inputs": X, "tags": …}` → X; decorator `{"args": [...], "kwargs": {...}}` → the
    first positional string or the keyword mapping; anything else unchanged."""
    decoded = loads(value) if isinstance(value, str) else value
    if decoded is NOT_JSON:
        return value
    if isinstance(decoded, dict):
        if key in decoded and decoded.keys() <= _CALLBACK_KEYS:
            return decoded[key]
        if decoded.keys() <= {"args", "kwargs"} and "args" in decoded:
            args = decoded.get("args")
            kwargs = decoded.get("kwargs")
            if isinstance(args, list) and args:
                return args[0]
            return kwargs
    return decoded


def _decorator_arguments(value: Any) -> dict[str, Any] | None:
    """Arguments of a `@tool`-decorated function: keyword arguments, positional ones under
    `"_args"` (their parameter names are not recorded)."""
    decoded = loads(value) if isinstance(value, str) else value
    if (
        not isinstance(decoded, dict)
        or "args" not in decoded
        or not decoded.keys() <= {"args", "kwargs"}
    ):
        return None
    out: dict[str, Any] = dict(decoded.get("kwargs") or {})
    args = decoded.get("args")
    if isinstance(args, list) and args:
        out["_args"] = args
    return out


def _turn(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    raw_in = attrs.get(ENTITY_INPUT)
    raw_out = attrs.get(ENTITY_OUTPUT)
    rec.kind = RecordKind.TURN
    rec.input_text = None if raw_in is None else query_from_state(_unwrap(raw_in, "inputs"))
    rec.output_text = None if raw_out is None else answer_from_state(_unwrap(raw_out, "outputs"))
    if rec.agent_name is None:
        rec.agent_name = as_str(attrs.get(ENTITY_NAME))


def _tool(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    raw_in = attrs.get(ENTITY_INPUT)
    raw_out = attrs.get(ENTITY_OUTPUT)
    genai.fill_tool_from(
        rec,
        attrs,
        attrs.get(genai.TOOL_ARGUMENTS) if raw_in is None else raw_in,
        attrs.get(genai.TOOL_RESULT) if raw_out is None else raw_out,
    )
    decorated = _decorator_arguments(raw_in) if raw_in is not None else None
    if decorated is not None:
        rec.tool_arguments = decorated
    if rec.tool_name is None:
        rec.tool_name = as_str(attrs.get(ENTITY_NAME))
    args = stored_tool_arguments(rec)  # deferred text never decodes to one with "_raw"
    if isinstance(args, dict) and RAW_KEY in args:
        # The entity input was cut or unreadable; the semconv copy may be intact.
        alt = attrs.get(genai.TOOL_ARGUMENTS)
        if alt is not None and alt != raw_in:
            retry = coerce_arguments(alt)
            if RAW_KEY not in retry:
                rec.tool_arguments = retry


def fill(rec: SpanRecord, attrs: dict[str, Any], kind: Any, span: Span) -> str:
    """Fill `rec` (built as OTHER) per `traceloop.span.kind`; returns the convention
    (`genai` for the model spans that only carry semconv attributes)."""
    if kind == "workflow" or kind == "agent":
        _turn(rec, attrs)
    elif kind == "tool":
        _tool(rec, attrs)
    else:
        operation = attrs.get(genai.OPERATION)
        if operation is not None and kind != "task":
            return genai.fill(rec, attrs, operation, span)
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(SPAN_KIND,),
        fill=fill,
        doc="`traceloop.span.kind`: workflow/agent → TURN, tool → TOOL, task → OTHER",
    ),
)
