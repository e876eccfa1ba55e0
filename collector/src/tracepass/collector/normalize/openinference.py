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

from tracepass.collector.normalize.arguments import (
    coerce_arguments,
    coerce_result,
    tool_call_id_from_result,
)
from tracepass.collector.normalize.extract import Extract, as_str
from tracepass.collector.normalize.messages import (
    USER,
    answer_from_state,
    flattened_messages,
    last_text,
    output_text,
    query_from_state,
    requested_tool_calls,
)
from tracepass.collector.normalize.records import RecordKind

CONVENTION = "openinference"
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


def _turn(attrs: dict[str, Any]) -> Extract:
    query = _io_text(attrs, "input", answer=False)
    if query is None:
        query = last_text(flattened_messages(attrs, "llm.input_messages", "oi"), USER)
    return Extract(
        RecordKind.TURN,
        CONVENTION,
        input_text=query,
        output_text=_io_text(attrs, "output", answer=True),
        agent_name=as_str(attrs.get("agent.name")),
    )


def _tool(attrs: dict[str, Any]) -> Extract:
    args = attrs.get("input.value")
    if args is None:
        args = attrs.get("tool_call.function.arguments")
    result = attrs.get("output.value")
    if attrs.get("output.mime_type") == _TEXT:
        parsed_result: Any = result
    else:
        parsed_result = coerce_result(result)
    call_id = as_str(attrs.get("tool_call.id")) or tool_call_id_from_result(result)
    return Extract(
        RecordKind.TOOL,
        CONVENTION,
        tool_name=as_str(attrs.get("tool.name")) or as_str(attrs.get("tool_call.function.name")),
        tool_call_id=call_id,
        tool_arguments=coerce_arguments(args),
        tool_result=parsed_result,
    )


def _model(attrs: dict[str, Any]) -> Extract:
    inputs = flattened_messages(attrs, "llm.input_messages", "oi", with_calls=False)
    outputs = flattened_messages(attrs, "llm.output_messages", "oi")
    return Extract(
        RecordKind.MODEL,
        CONVENTION,
        input_text=last_text(inputs, USER),
        output_text=output_text(outputs),
        requested_tool_calls=requested_tool_calls(outputs),
    )


def extract(kind: Any, attrs: dict[str, Any], *, is_root: bool) -> Extract:
    if kind == "AGENT":
        return _turn(attrs)
    if kind == "CHAIN":
        if is_root or _is_graph_root(attrs):
            return _turn(attrs)
        return Extract(RecordKind.OTHER, CONVENTION)
    if kind == "TOOL":
        return _tool(attrs)
    if kind == "LLM":
        return _model(attrs)
    return Extract(RecordKind.OTHER, CONVENTION)
