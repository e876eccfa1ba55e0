"""Haystack `Agent` + OpenInference (scope `openinference.instrumentation.haystack`).

Haystack's instrumentation records no tool spans: the calls are in the model spans'
output (read as requested tool calls), and their results only in the Agent's output,
as `repr()`s of `ChatMessage`s: `ToolCallResult(result='…', origin=ToolCall(…,
id='call_w1', …), error=False)`. Messages in the Agent's input/output are reprs too
(`ChatMessage(_role=<ChatRole.USER: 'user'>, _content=[TextContent(text='…')], …)`), so
the query is read from the last user message's text literal. Only string literals are
parsed out of the repr text (`ast.literal_eval` on the literal, nothing evaluated).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import decoded, literal_after
from tracepass.collector.normalize.registry import (
    SOURCE_ADAPTER,
    TOOL_RESPONSE_NAMES_ATTR,
    TOOL_RESPONSES_ATTR,
    Adapter,
    note_source,
)
from tracepass.collector.records import RecordKind, SpanRecord

_USER_MESSAGE = "ChatMessage(_role=<ChatRole.USER:"
_TEXT = "TextContent(text="
_RESULT = "ToolCallResult(result="


def _messages(value: Any) -> list[str]:
    state = decoded(value)
    messages = state.get("messages") if isinstance(state, dict) else None
    return [m for m in messages if isinstance(m, str)] if isinstance(messages, list) else []


def _query(messages: list[str]) -> str | None:
    for message in reversed(messages):
        if message.startswith(_USER_MESSAGE):
            found = literal_after(message, _TEXT)
            if found is not None:
                return found[0]
    return None


def _tool_results(messages: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """({call id: {"result": text} or {"error": text}}, {call id: tool name})."""
    out: dict[str, Any] = {}
    names: dict[str, str] = {}
    for message in messages:
        at = message.find(_RESULT)
        while at >= 0:
            result = literal_after(message, _RESULT, at)
            if result is None:
                break
            text, end = result
            origin = message.find("origin=ToolCall(", end)
            call = literal_after(message, ", id=", origin) if origin >= 0 else None
            name = literal_after(message, "tool_name=", origin) if origin >= 0 else None
            if call is not None:
                if name is not None:
                    names[call[0]] = name[0]
                failed = message.startswith("error=True", message.find("error=", call[1]))
                out[call[0]] = {"error": text} if failed else {"result": text}
            at = message.find(_RESULT, end)
    return out, names


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TURN:
        return False
    changed = False
    query = _query(_messages(attrs.get("input.value")))
    if query is not None:
        rec.input_text = query
        note_source(rec, "input_text", SOURCE_ADAPTER)
        changed = True
    results, names = _tool_results(_messages(attrs.get("output.value")))
    if results:
        rec.attributes[TOOL_RESPONSES_ATTR] = results
        rec.attributes[TOOL_RESPONSE_NAMES_ATTR] = names
        changed = True
    return changed


ADAPTER = Adapter(
    "haystack",
    scopes=("openinference.instrumentation.haystack",),
    adapt=adapt,
    doc="query from the Agent's ChatMessage reprs; tool results from its "
    "ToolCallResult reprs (no tool spans)",
)
