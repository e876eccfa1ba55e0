"""OpenTelemetry GenAI semantic conventions (and tracepass's own spans, which follow them).

Dispatch is on `gen_ai.operation.name`: `invoke_agent` is a turn, `execute_tool` a tool
call, `chat`/`text_completion`/`generate_content` a model call whose output messages
may hold the tool calls of stacks that emit no tool spans. Messages are the JSON
`gen_ai.input.messages`/`gen_ai.output.messages`; the older flattened
`gen_ai.prompt.N.*`/`gen_ai.completion.N.*` attributes are read when those are absent.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    Message,
    answer_text_in,
    flattened_messages,
    flattened_tool_responses,
    last_text,
    last_text_in,
    output_text,
    parse_messages,
    requested_tool_calls,
    tool_responses,
)
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, Convention
from tracepass.collector.normalize.tooldefs import (
    GENAI_DEFINITIONS,
    TOOL_JSON_SCHEMA,
    TRACEPASS_PARAMETERS_SCHEMA,
    genai_definitions,
    model_definitions,
    tracepass_tool_definition,
)
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    deferred_arguments,
    deferred_result,
    store_tool_arguments,
    store_tool_result,
    tool_call_id_from_result,
)
from tracepass.instrumentation import semconv as sc

NAME = "genai"

OPERATION = sc.OPERATION_NAME
TURN_OPERATIONS = frozenset({sc.OP_INVOKE_AGENT, sc.OP_INVOKE_WORKFLOW})
MODEL_OPERATIONS = frozenset({sc.OP_CHAT, sc.OP_TEXT_COMPLETION, sc.OP_GENERATE_CONTENT})

INPUT_MESSAGES = sc.INPUT_MESSAGES
OUTPUT_MESSAGES = sc.OUTPUT_MESSAGES
TOOL_NAME = sc.TOOL_NAME
TOOL_CALL_ID = sc.TOOL_CALL_ID
TOOL_ARGUMENTS = sc.TOOL_CALL_ARGUMENTS
TOOL_RESULT = sc.TOOL_CALL_RESULT
LEGACY_PROMPT_ROLE = "gen_ai.prompt.0.role"
LEGACY_COMPLETION_ROLE = "gen_ai.completion.0.role"

_EXECUTE_TOOL = sc.OP_EXECUTE_TOOL
_INVOKE_AGENT = sc.OP_INVOKE_AGENT
# A workflow (LangGraph's graph run under the OTel GenAI instrumentation) is the turn;
# the `invoke_agent` spans of its nodes are agent steps inside it.
_INVOKE_WORKFLOW = sc.OP_INVOKE_WORKFLOW

_TURN = RecordKind.TURN
_TOOL = RecordKind.TOOL
_MODEL = RecordKind.MODEL


def fill_turn(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    rec.kind = _TURN
    get = attrs.get
    rec.input_text = last_text_in(get(INPUT_MESSAGES), USER)
    rec.output_text = answer_text_in(get(OUTPUT_MESSAGES))
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
    # Kept as text when decoding can wait for the rebuild (records.py: the memory of a
    # buffered span).
    store_tool_arguments(rec, deferred_arguments(get(TOOL_ARGUMENTS)))
    store_tool_result(rec, deferred_result(result))
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
    store_tool_arguments(rec, deferred_arguments(args))
    store_tool_result(rec, deferred_result(result))


def fill_model(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    raw_in = attrs.get(INPUT_MESSAGES)
    raw_out = attrs.get(OUTPUT_MESSAGES)
    rec.kind = _MODEL
    prompt: list[Message] = []
    if raw_in is not None:
        rec.input_text = last_text_in(raw_in, USER)
    else:
        prompt = flattened_messages(attrs, "gen_ai.prompt", "legacy", with_calls=False)
        rec.input_text = last_text(prompt, USER)
    outputs = (
        parse_messages(raw_out)
        if raw_out is not None
        else flattened_messages(attrs, "gen_ai.completion", "legacy")
    )
    rec.output_text = output_text(outputs)
    rec.requested_tool_calls = requested_tool_calls(outputs)
    rec.tool_definitions = model_definitions(attrs)
    if raw_in is None:
        responses = flattened_tool_responses(attrs, "gen_ai.prompt", "legacy", prompt)
        if responses:
            rec.attributes[TOOL_RESPONSES_ATTR] = responses
    elif raw_in.__class__ is not str or _RESPONSE_PART in raw_in:
        note_tool_responses(rec, raw_in)


_RESPONSE_PART = '"tool_call_response"'


def note_tool_responses(rec: SpanRecord, raw_in: Any) -> None:
    """Keep the tool results the model's input carries (see `messages.tool_responses`)."""
    responses = tool_responses(raw_in)
    if responses:
        known = rec.attributes.get(TOOL_RESPONSES_ATTR)
        rec.attributes[TOOL_RESPONSES_ATTR] = {**known, **responses} if known else responses


def fill(rec: SpanRecord, attrs: dict[str, Any], operation: Any, span: Span) -> str:
    """Fill `rec` (built as OTHER by `normalize_request`) per `gen_ai.operation.name`;
    returns the convention name. The convention's own `fill` (its signature), so the
    most common spans reach it with no frame in between."""
    if operation == _EXECUTE_TOOL:
        fill_tool(rec, attrs)
    elif operation in (_INVOKE_AGENT, _INVOKE_WORKFLOW):
        fill_turn(rec, attrs)
    elif operation.__class__ is str and operation in MODEL_OPERATIONS:
        fill_model(rec, attrs)
    return NAME


def _fill_legacy(rec: SpanRecord, attrs: dict[str, Any], marker: Any, span: Span) -> str:
    fill_model(rec, attrs)
    return NAME


def _fill_bare_tool(rec: SpanRecord, attrs: dict[str, Any], marker: Any, span: Span) -> str:
    fill_tool(rec, attrs)
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(OPERATION,),
        fill=fill,
        doc="`gen_ai.operation.name`: invoke_agent → TURN, execute_tool → TOOL, "
        "chat/text_completion/generate_content → MODEL",
    ),
    Convention(
        NAME,
        keys=(LEGACY_PROMPT_ROLE, LEGACY_COMPLETION_ROLE),
        fill=_fill_legacy,
        doc="flattened `gen_ai.prompt.N.*`/`gen_ai.completion.N.*` (older OpenLLMetry) → MODEL",
    ),
    Convention(
        NAME,
        keys=(TOOL_NAME,),
        fill=_fill_bare_tool,
        doc="`gen_ai.tool.name` without an operation (hand-rolled tool spans) → TOOL",
    ),
)
