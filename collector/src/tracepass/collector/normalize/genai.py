"""OpenTelemetry GenAI semantic conventions (and tracepass's own spans, which follow them).

Dispatch is on `gen_ai.operation.name`: `invoke_agent` is a turn, `execute_tool` a tool
call, `chat`/`text_completion`/`generate_content` a model call whose output messages
may hold the tool calls of stacks that emit no tool spans. Messages are the JSON
`gen_ai.input.messages`/`gen_ai.output.messages`; the older flattened
`gen_ai.prompt.N.*`/`gen_ai.completion.N.*` attributes are read when those are absent.
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
    flattened_messages,
    last_text,
    last_text_in,
    output_text,
    parse_messages,
    requested_tool_calls,
)
from tracepass.collector.normalize.records import RecordKind

CONVENTION = "genai"

OPERATION = "gen_ai.operation.name"
TURN_OPERATIONS = frozenset({"invoke_agent"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"


def _turn(attrs: dict[str, Any]) -> Extract:
    outputs = parse_messages(attrs.get(OUTPUT_MESSAGES))
    return Extract(
        RecordKind.TURN,
        CONVENTION,
        input_text=last_text_in(attrs.get(INPUT_MESSAGES), USER),
        output_text=output_text(outputs),
    )


def tool_extract(
    attrs: dict[str, Any], convention: str, *, raw_args: Any = None, raw_result: Any = None
) -> Extract:
    args_value = attrs.get("gen_ai.tool.call.arguments") if raw_args is None else raw_args
    result_value = attrs.get("gen_ai.tool.call.result") if raw_result is None else raw_result
    call_id = as_str(attrs.get("gen_ai.tool.call.id")) or tool_call_id_from_result(result_value)
    return Extract(
        RecordKind.TOOL,
        convention,
        tool_name=as_str(attrs.get("gen_ai.tool.name")),
        tool_call_id=call_id,
        tool_arguments=coerce_arguments(args_value),
        tool_result=coerce_result(result_value),
    )


def model_extract(attrs: dict[str, Any], convention: str = CONVENTION) -> Extract:
    raw_in = attrs.get(INPUT_MESSAGES)
    raw_out = attrs.get(OUTPUT_MESSAGES)
    query = (
        last_text_in(raw_in, USER)
        if raw_in is not None
        else last_text(flattened_messages(attrs, "gen_ai.prompt", "legacy", with_calls=False), USER)
    )
    outputs = (
        parse_messages(raw_out)
        if raw_out is not None
        else flattened_messages(attrs, "gen_ai.completion", "legacy")
    )
    return Extract(
        RecordKind.MODEL,
        convention,
        input_text=query,
        output_text=output_text(outputs),
        requested_tool_calls=requested_tool_calls(outputs),
    )


def extract(operation: Any, attrs: dict[str, Any]) -> Extract:
    if operation in TURN_OPERATIONS:
        return _turn(attrs)
    if operation in TOOL_OPERATIONS:
        return tool_extract(attrs, CONVENTION)
    if operation in MODEL_OPERATIONS:
        return model_extract(attrs)
    return Extract(RecordKind.OTHER, CONVENTION)


def is_legacy_model(attrs: dict[str, Any]) -> bool:
    """Pre-`gen_ai.operation.name` OpenLLMetry model spans."""
    return "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs
