"""LiteLLM's own OpenTelemetry callback (`litellm.callbacks = ["otel"]`, scope `litellm`).

Its `litellm_request` spans are GenAI model calls (`gen_ai.operation.name = chat`,
`gen_ai.input.messages` / `gen_ai.output.messages`), but the tool calls are not where
the convention puts them:

* the calls the model requested are not parts of the output message (its `parts` is
  empty); they are flattened beside it, without ids, as
  `gen_ai.completion.{i}.function_call.name` / `.arguments`;
* the input history keeps OpenAI's shape for tool traffic inside the semconv messages:
  an assistant message's `tool_calls` (`{"id", "function": {"name", "arguments"}}`) and a
  `tool` message's `tool_call_id` beside its text `parts`, instead of `tool_call` /
  `tool_call_response` parts.

The requested calls are read from the flattened attributes, and the results (with each
id's tool name, so calls without an id take the results of their tool in order) from the
history.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.messages import content_text, make_tool_call
from tracepass.collector.normalize.registry import (
    TOOL_RESPONSE_NAMES_ATTR,
    TOOL_RESPONSES_ATTR,
    Adapter,
)
from tracepass.collector.records import RecordKind, SpanRecord, loads
from tracepass.instrumentation.semconv import INPUT_MESSAGES

_COMPLETION = "gen_ai.completion."
_NAME = ".function_call.name"
_ARGUMENTS = ".function_call.arguments"


def _requested(attrs: dict[str, Any]) -> list[Any]:
    calls = []
    index = 0
    while (name := attrs.get(f"{_COMPLETION}{index}{_NAME}")) is not None:
        calls.append(make_tool_call(name, attrs.get(f"{_COMPLETION}{index}{_ARGUMENTS}"), None))
        index += 1
    return calls


def _history_results(raw: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Tool results by call id and each id's tool name, from OpenAI-shaped tool traffic
    inside the semconv input messages."""
    history = loads(raw) if isinstance(raw, str) else raw
    results: dict[str, Any] = {}
    names: dict[str, str] = {}
    if not isinstance(history, list):
        return results, names
    for message in history:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    names[call["id"]] = function["name"]
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str) and call_id:
            parts = message.get("parts")
            text = content_text(
                [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else None
            )
            results[call_id] = text if text is not None else message.get("content")
    return results, names


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.MODEL:
        return False
    changed = False
    if not rec.requested_tool_calls:
        requested = _requested(attrs)
        if requested:
            rec.requested_tool_calls = tuple(requested)
            changed = True
    raw = attrs.get(INPUT_MESSAGES)
    if isinstance(raw, str) and '"tool_call_id"' in raw:
        results, names = _history_results(raw)
        if results:
            known = rec.attributes.get(TOOL_RESPONSES_ATTR)
            rec.attributes[TOOL_RESPONSES_ATTR] = {**results, **known} if known else results
            rec.attributes[TOOL_RESPONSE_NAMES_ATTR] = names
            changed = True
    return changed


ADAPTER = Adapter(
    "litellm",
    scopes=("litellm",),
    adapt=adapt,
    doc="requested calls from the flattened `gen_ai.completion.{i}.function_call.*` (no "
    "ids); results from the OpenAI-shaped `tool_calls` / `tool_call_id` in the input history",
)
