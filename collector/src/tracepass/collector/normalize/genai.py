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
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    flattened_messages,
    last_text,
    last_text_in,
    output_text,
    output_text_in,
    parse_messages,
    requested_tool_calls,
)
from tracepass.collector.normalize.records import RecordKind, SpanRecord
from tracepass.collector.normalize.tooldefs import (
    GENAI_DEFINITIONS,
    TOOL_JSON_SCHEMA,
    TRACEPASS_PARAMETERS_SCHEMA,
    genai_definitions,
    model_definitions,
    tracepass_tool_definition,
)

CONVENTION = "genai"

OPERATION = "gen_ai.operation.name"
TURN_OPERATIONS = frozenset({"invoke_agent"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"

_TURN = RecordKind.TURN
_TOOL = RecordKind.TOOL
_MODEL = RecordKind.MODEL


def fill_turn(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    rec.kind = _TURN
    get = attrs.get
    rec.input_text = last_text_in(get(INPUT_MESSAGES), USER)
    rec.output_text = output_text_in(get(OUTPUT_MESSAGES))
    if GENAI_DEFINITIONS in attrs:
        rec.tool_definitions = genai_definitions(attrs)


def fill_tool(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    """A tool record from the semconv attributes (`fill_tool_from`, inlined: the most
    common span kind)."""
    rec.kind = _TOOL
    get = attrs.get
    result = get(TOOL_RESULT)
    call_id = get(TOOL_CALL_ID)
    if call_id.__class__ is not str or not call_id:
        call_id = as_str(call_id) or tool_call_id_from_result(result)
    rec.tool_call_id = call_id
    name = get(TOOL_NAME)
    rec.tool_name = name if name.__class__ is str and name else as_str(name)
    rec.tool_arguments = coerce_arguments(get(TOOL_ARGUMENTS))
    rec.tool_result = coerce_result(result)
    if TRACEPASS_PARAMETERS_SCHEMA in attrs or TOOL_JSON_SCHEMA in attrs:
        rec.tool_definitions = tracepass_tool_definition(rec.tool_name, attrs)


def fill_tool_from(rec: SpanRecord, attrs: dict[str, Any], args: Any, result: Any) -> None:
    """A tool record whose raw arguments/result are `args`/`result` (another convention
    may carry them elsewhere); name and call id from the semconv attributes."""
    rec.kind = _TOOL
    get = attrs.get
    call_id = get(TOOL_CALL_ID)
    if call_id.__class__ is not str or not call_id:
        call_id = as_str(call_id) or tool_call_id_from_result(result)
    rec.tool_call_id = call_id
    name = get(TOOL_NAME)
    rec.tool_name = name if name.__class__ is str and name else as_str(name)
    rec.tool_arguments = coerce_arguments(args)
    rec.tool_result = coerce_result(result)


def fill_model(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    raw_in = attrs.get(INPUT_MESSAGES)
    raw_out = attrs.get(OUTPUT_MESSAGES)
    rec.kind = _MODEL
    rec.input_text = (
        last_text_in(raw_in, USER)
        if raw_in is not None
        else last_text(flattened_messages(attrs, "gen_ai.prompt", "legacy", with_calls=False), USER)
    )
    outputs = (
        parse_messages(raw_out)
        if raw_out is not None
        else flattened_messages(attrs, "gen_ai.completion", "legacy")
    )
    rec.output_text = output_text(outputs)
    rec.requested_tool_calls = requested_tool_calls(outputs)
    rec.tool_definitions = model_definitions(attrs)


def fill(operation: Any, rec: SpanRecord, attrs: dict[str, Any]) -> str:
    """Fill `rec` (built as OTHER by `normalize_request`) per `gen_ai.operation.name`;
    returns the convention name."""
    if operation == "execute_tool":
        fill_tool(rec, attrs)
    elif operation == "invoke_agent":
        fill_turn(rec, attrs)
    elif operation.__class__ is str and operation in MODEL_OPERATIONS:
        fill_model(rec, attrs)
    return CONVENTION


def is_legacy_model(attrs: dict[str, Any]) -> bool:
    """Pre-`gen_ai.operation.name` OpenLLMetry model spans."""
    return "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs
