"""OpenInference (Arize Phoenix) spans: `openinference.span.kind` decides the record.

AGENT → turn; CHAIN → turn only when it is the root of the trace or the root of a
LangGraph run (its `metadata` names the LangGraph integration but no graph node),
otherwise the many nested chain steps would each look like a turn; TOOL → tool call
(`tool.name`, arguments from `input.value`); LLM → model call (flattened
`llm.input_messages.N.message.*` / `llm.output_messages.N.message.*`). LangChain chain
input/output is JSON of the graph state, read by `messages.query_from_state` /
`answer_from_state`.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    answer_from_state,
    flattened_messages,
    flattened_tool_responses,
    last_text,
    output_text,
    query_from_state,
    requested_tool_calls,
)
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, Convention
from tracepass.collector.normalize.tooldefs import openinference_definitions
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    coerce_arguments,
    coerce_result,
    tool_call_id_from_result,
)

NAME = "openinference"
SPAN_KIND = "openinference.span.kind"

_TEXT = "text/plain"


def _is_graph_root(attrs: dict[str, Any]) -> bool:
    metadata = attrs.get("metadata")
    return (
        isinstance(metadata, str) and "langgraph" in metadata and "langgraph_node" not in metadata
    )


def _io_text(attrs: dict[str, Any], key: str, *, answer: bool) -> str | None:
    value = attrs.get(key + ".value")
    if value is None:
        return None
    if attrs.get(key + ".mime_type") == _TEXT and isinstance(value, str):
        return value
    return answer_from_state(value) if answer else query_from_state(value)


def _turn(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    rec.kind = RecordKind.TURN
    query = _io_text(attrs, "input", answer=False)
    if query is None:
        query = last_text(flattened_messages(attrs, "llm.input_messages", "oi"), USER)
    rec.input_text = query
    rec.output_text = _io_text(attrs, "output", answer=True)
    if rec.agent_name is None:
        rec.agent_name = as_str(attrs.get("agent.name"))


# Python instrumentations name spans `<object>.<method>`; a TOOL span without `tool.name`
# (DSPy: `get_weather.__call__`) is named by the object.
_CALL_METHOD_SUFFIXES = (".__call__", ".acall")


def _name_from_span(name: str) -> str | None:
    for suffix in _CALL_METHOD_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def _keyword_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The keywords of a Python call wrapper `{"kwargs": {...}}` (or with empty `"args"`),
    which OpenInference's Python instrumentations record as a tool's input (DSPy,
    LlamaIndex): the keywords are the arguments. Anything else is returned as it is."""
    kwargs = arguments.get("kwargs")
    if kwargs.__class__ is dict and (
        len(arguments) == 1 or (len(arguments) == 2 and arguments.get("args") == [])
    ):
        return dict(kwargs)
    return arguments


def _tool(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    rec.kind = RecordKind.TOOL
    args = attrs.get("input.value")
    if args is None:
        args = attrs.get("tool_call.function.arguments")
    result = attrs.get("output.value")
    if attrs.get("output.mime_type") == _TEXT:
        parsed_result: Any = result
    else:
        parsed_result = coerce_result(result)
    rec.tool_call_id = as_str(attrs.get("tool_call.id")) or tool_call_id_from_result(result)
    rec.tool_name = (
        as_str(attrs.get("tool.name"))
        or as_str(attrs.get("tool_call.function.name"))
        or _name_from_span(rec.name)
    )
    arguments = coerce_arguments(args)
    rec.tool_arguments = _keyword_arguments(arguments) if "kwargs" in arguments else arguments
    rec.tool_result = parsed_result


def _model(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    rec.kind = RecordKind.MODEL
    inputs = flattened_messages(attrs, "llm.input_messages", "oi", with_calls=False)
    outputs = flattened_messages(attrs, "llm.output_messages", "oi")
    rec.input_text = last_text(inputs, USER)
    rec.output_text = output_text(outputs)
    rec.requested_tool_calls = requested_tool_calls(outputs)
    rec.tool_definitions = openinference_definitions(attrs)
    responses = flattened_tool_responses(attrs, "llm.input_messages", "oi", inputs)
    if responses:
        rec.attributes[TOOL_RESPONSES_ATTR] = responses


def fill(rec: SpanRecord, attrs: dict[str, Any], kind: Any, span: Span) -> str:
    """Fill `rec` (built as OTHER) per `openinference.span.kind`; returns the convention."""
    if kind == "AGENT":
        _turn(rec, attrs)
    elif kind == "CHAIN":
        if rec.parent_span_id is None or _is_graph_root(attrs):
            _turn(rec, attrs)
    elif kind == "TOOL":
        _tool(rec, attrs)
    elif kind == "LLM":
        _model(rec, attrs)
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(SPAN_KIND,),
        fill=fill,
        doc="`openinference.span.kind`: AGENT / root CHAIN → TURN, TOOL → TOOL, LLM → MODEL",
    ),
)
