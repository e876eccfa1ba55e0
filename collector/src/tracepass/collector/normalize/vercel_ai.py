"""Vercel AI SDK's own `ai.*` spans (TypeScript): `ai@6`'s `experimental_telemetry`, and
`ai@7`'s `LegacyOpenTelemetry` integration, which keeps that shape.

Claimed by `ai.operationId` (every such span carries it, whatever tracer scope the
application passed):

* `ai.generateText` / `ai.streamText` (and `ai.generateObject` / `ai.streamObject`) are
  the call the application made: a turn. Query: the last user message of `ai.prompt`
  (`{"system", "prompt": text}` or `{"system", "messages": [...]}`); answer:
  `ai.response.text` (or `ai.response.object`).
* `ai.generateText.doGenerate` / `ai.streamText.doStream` are the model calls of its
  steps: input `ai.prompt.messages`, output `ai.response.text`, requested calls
  `ai.response.toolCalls` (`[{toolCallId, toolName, input}]`; ai@4 wrote `args` as
  text), offered tools `ai.prompt.tools` (one JSON text per tool).
* `ai.toolCall`: one tool execution (`ai.toolCall.name/.id/.args/.result`; a failing
  tool has status ERROR with the exception's message).

The agent is `ai.telemetry.functionId` when no `gen_ai.agent.name` says otherwise. The
SDK has no conversation id of its own: applications put one in
`experimental_telemetry.metadata` (`ai.telemetry.metadata.<key>`, ai@6) or the runtime
context (`ai.settings.context.<key>`, ai@7); the keys in `CONVERSATION_KEYS` are read
there (`adapters/vercel_ai.py` does the same for ai@7's GenAI-shaped spans).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str, first_str
from tracepass.collector.normalize.messages import (
    USER,
    content_text,
    last_text,
    make_tool_call,
    parse_messages,
)
from tracepass.collector.normalize.registry import Convention
from tracepass.collector.normalize.tooldefs import definitions_from_items
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    deferred_arguments,
    deferred_result,
    loads,
    store_tool_arguments,
    store_tool_result,
)
from tracepass.evaluator.models import ToolCall

NAME = "vercel_ai"
OPERATION_ID = "ai.operationId"
FUNCTION_ID = "ai.telemetry.functionId"

TURN_OPERATIONS = frozenset(
    {"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"}
)
MODEL_OPERATIONS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
TOOL_OPERATION = "ai.toolCall"

# Where applications put a conversation id: telemetry metadata (ai@6) and the runtime
# context (ai@7), under the usual key spellings; first present wins.
_ID_NAMES = (
    "conversationId",
    "conversation_id",
    "sessionId",
    "session_id",
    "threadId",
    "thread_id",
    "chatId",
    "chat_id",
)
CONVERSATION_KEYS: tuple[str, ...] = tuple(
    prefix + name
    for prefix in ("ai.telemetry.metadata.", "ai.settings.context.")
    for name in _ID_NAMES
)


def conversation_id(attrs: dict[str, Any]) -> str | None:
    """The conversation id an application put in the SDK's metadata or runtime context."""
    return first_str(attrs, CONVERSATION_KEYS)


def _prompt_query(raw: Any) -> str | None:
    """The last user message of `ai.prompt` (`{"prompt"}` text or `{"messages"}`)."""
    prompt = loads(raw)
    if prompt is NOT_JSON:
        return raw if isinstance(raw, str) and raw else None
    if isinstance(prompt, dict):
        messages = prompt.get("messages")
        if isinstance(messages, list):
            return last_text(parse_messages(messages), USER)
        text = prompt.get("prompt")
        if isinstance(text, str):
            return text
        if isinstance(text, list):  # `prompt` given as a message list
            return last_text(parse_messages(text), USER)
    return None


def _answer(attrs: dict[str, Any]) -> str | None:
    text = attrs.get("ai.response.text")
    if isinstance(text, str) and text:
        return text
    obj = attrs.get("ai.response.object")
    return obj if isinstance(obj, str) and obj else None


def _requested_calls(raw: Any) -> tuple[ToolCall, ...]:
    decoded = loads(raw)
    if not isinstance(decoded, list):
        return ()
    calls: list[ToolCall] = []
    for item in decoded:
        if isinstance(item, dict) and item.get("toolName"):
            arguments = item.get("input", item.get("args"))
            calls.append(make_tool_call(item["toolName"], arguments, item.get("toolCallId")))
    return tuple(calls)


def _model_input(raw: Any) -> str | None:
    decoded = loads(raw)
    if not isinstance(decoded, list):
        return None
    for item in reversed(decoded):
        if isinstance(item, dict) and item.get("role") == USER:
            return content_text(item.get("content"))
    return None


def _fill(rec: SpanRecord, attrs: dict[str, Any], operation: Any, span: Span) -> str | None:
    get = attrs.get
    if operation == TOOL_OPERATION:
        rec.kind = RecordKind.TOOL
        rec.tool_name = as_str(get("ai.toolCall.name"))
        rec.tool_call_id = as_str(get("ai.toolCall.id"))
        store_tool_arguments(rec, deferred_arguments(get("ai.toolCall.args")))
        store_tool_result(rec, deferred_result(get("ai.toolCall.result")))
    elif operation in MODEL_OPERATIONS:
        rec.kind = RecordKind.MODEL
        rec.input_text = _model_input(get("ai.prompt.messages"))
        rec.output_text = _answer(attrs)
        rec.requested_tool_calls = _requested_calls(get("ai.response.toolCalls"))
        tools = get("ai.prompt.tools")
        if isinstance(tools, list | tuple):
            rec.tool_definitions = definitions_from_items(tools)
    elif operation in TURN_OPERATIONS:
        rec.kind = RecordKind.TURN
        rec.input_text = _prompt_query(get("ai.prompt"))
        rec.output_text = _answer(attrs)
    else:
        return NAME  # embed, rerank, speech…: kept for the tree (OTHER)
    if rec.conversation_id is None:
        rec.conversation_id = conversation_id(attrs)
    if get("gen_ai.agent.name") is None:
        function_id = as_str(get(FUNCTION_ID))
        if function_id is not None:
            rec.agent_name = function_id
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(OPERATION_ID,),
        fill=_fill,
        doc="Vercel AI SDK `ai.*` spans (`ai.operationId`): ai.generateText/streamText → "
        "TURN, .doGenerate/.doStream → MODEL, ai.toolCall → TOOL",
    ),
)
