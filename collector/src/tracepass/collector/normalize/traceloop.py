"""OpenLLMetry / Traceloop spans: `traceloop.span.kind` decides the record.

workflow / agent → turn (query and answer from `traceloop.entity.input`/`output`, which
wrap LangChain state as `{"inputs": …}` / `{"outputs": …}`, or decorator calls as
`{"args": […], "kwargs": {…}}`); tool → tool call (arguments from the entity input,
LangChain's `{"input_str": "<python repr>"}` parsed safely); task → other. Model spans
carry no span kind: they are plain GenAI semconv spans handled by `genai`.
"""

from __future__ import annotations

from typing import Any

from tracepass.collector.normalize import genai
from tracepass.collector.normalize.arguments import RAW_KEY
from tracepass.collector.normalize.extract import Extract, as_str
from tracepass.collector.normalize.jsonvalue import NOT_JSON, loads
from tracepass.collector.normalize.messages import answer_from_state, query_from_state
from tracepass.collector.normalize.records import RecordKind

CONVENTION = "traceloop"
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


def _turn(attrs: dict[str, Any]) -> Extract:
    raw_in = attrs.get(ENTITY_INPUT)
    raw_out = attrs.get(ENTITY_OUTPUT)
    return Extract(
        RecordKind.TURN,
        CONVENTION,
        input_text=None if raw_in is None else query_from_state(_unwrap(raw_in, "inputs")),
        output_text=None if raw_out is None else answer_from_state(_unwrap(raw_out, "outputs")),
        agent_name=as_str(attrs.get(ENTITY_NAME)),
    )


def _tool(attrs: dict[str, Any]) -> Extract:
    raw_in = attrs.get(ENTITY_INPUT)
    raw_out = attrs.get(ENTITY_OUTPUT)
    out = genai.tool_extract(attrs, CONVENTION, raw_args=raw_in, raw_result=raw_out)
    decorated = _decorator_arguments(raw_in) if raw_in is not None else None
    if decorated is not None:
        out.tool_arguments = decorated
    if out.tool_name is None:
        out.tool_name = as_str(attrs.get(ENTITY_NAME))
    if out.tool_arguments is not None and RAW_KEY in out.tool_arguments:
        # The entity input was cut or unreadable; the semconv copy may be intact.
        alt = attrs.get("gen_ai.tool.call.arguments")
        if alt is not None and alt != raw_in:
            retry = genai.tool_extract(attrs, CONVENTION)
            if retry.tool_arguments is not None and RAW_KEY not in retry.tool_arguments:
                out.tool_arguments = retry.tool_arguments
    return out


def extract(kind: Any, attrs: dict[str, Any]) -> Extract:
    if kind == "workflow" or kind == "agent":
        return _turn(attrs)
    if kind == "tool":
        return _tool(attrs)
    operation = attrs.get(genai.OPERATION)
    if operation is not None and kind != "task":
        return genai.extract(operation, attrs)
    return Extract(RecordKind.OTHER, CONVENTION)
