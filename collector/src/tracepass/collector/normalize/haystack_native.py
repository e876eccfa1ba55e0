"""Haystack's own OpenTelemetry tracing (`haystack.tracing`, content with
`HAYSTACK_CONTENT_TRACING_ENABLED=true`): its spans and attributes, not a GenAI
convention.

| span | record | fields |
|---|---|---|
| `haystack.agent.run` | TURN | query: last user message of `haystack.agent.input`; answer: last assistant message of `haystack.agent.output` |
| `haystack.agent.step.llm` | MODEL | `haystack.agent.step.llm.input` / `.output` (`{"replies": [...]}`) |
| `haystack.agent.step.tool` | TOOL | `haystack.tool.name`, `haystack.agent.step.tool.input` / `.output`; `haystack.tool.error = true` with output `{"error": text}` → the error |

Messages are Haystack `ChatMessage.to_dict()`s: `{"role", "content": [{"text": …} |
{"tool_call": {"tool_name", "arguments", "id"}} | {"tool_call_result": …}]}`.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    Message,
    answer_from_state,
    last_text,
    make_tool_call,
    output_text,
    parse_message,
    query_from_state,
)
from tracepass.collector.normalize.registry import Convention
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    coerce_arguments,
    coerce_result,
    loads,
)

NAME: Final = "haystack"

RUN_SPAN: Final = "haystack.agent.run"
LLM_SPAN: Final = "haystack.agent.step.llm"
TOOL_SPAN: Final = "haystack.agent.step.tool"
AGENT_INPUT: Final = "haystack.agent.input"
AGENT_OUTPUT: Final = "haystack.agent.output"
LLM_INPUT: Final = "haystack.agent.step.llm.input"
LLM_OUTPUT: Final = "haystack.agent.step.llm.output"
TOOL_NAME: Final = "haystack.tool.name"
TOOL_INPUT: Final = "haystack.agent.step.tool.input"
TOOL_OUTPUT: Final = "haystack.agent.step.tool.output"
TOOL_ERROR: Final = "haystack.tool.error"


def _messages(value: Any, key: str) -> list[Message]:
    state = loads(value) if isinstance(value, str) else value
    if state is NOT_JSON or not isinstance(state, dict):
        return []
    raw = state.get(key)
    if not isinstance(raw, list):
        return []
    out: list[Message] = []
    for item in raw:
        message = parse_message(item)
        if message is None:
            continue
        calls = tuple(
            make_tool_call(call.get("tool_name", ""), call.get("arguments"), call.get("id"))
            for block in item.get("content") or ()
            if isinstance(block, dict) and isinstance(call := block.get("tool_call"), dict)
        )
        out.append(Message(message.role, message.text, calls or message.tool_calls))
    return out


def fill(rec: SpanRecord, attrs: dict[str, Any], marker: Any, span: Span) -> str | None:
    name = span.name
    if name == RUN_SPAN:
        rec.kind = RecordKind.TURN
        rec.input_text = query_from_state(attrs.get(AGENT_INPUT))
        rec.output_text = answer_from_state(attrs.get(AGENT_OUTPUT))
    elif name == LLM_SPAN:
        rec.kind = RecordKind.MODEL
        rec.input_text = last_text(_messages(attrs.get(LLM_INPUT), "messages"), USER)
        outputs = _messages(attrs.get(LLM_OUTPUT), "replies")
        rec.output_text = output_text(outputs)
        rec.requested_tool_calls = tuple(c for m in outputs for c in m.tool_calls)
    elif name == TOOL_SPAN:
        rec.kind = RecordKind.TOOL
        rec.tool_name = as_str(attrs.get(TOOL_NAME))
        rec.tool_arguments = coerce_arguments(attrs.get(TOOL_INPUT))
        result = coerce_result(attrs.get(TOOL_OUTPUT))
        if attrs.get(TOOL_ERROR) is True or attrs.get(TOOL_ERROR) == "true":
            text = result.get("error") if isinstance(result, dict) else result
            rec.error = text if isinstance(text, str) and text else (rec.error or "error")
            result = None
        rec.tool_result = result
    else:
        return None
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        # By span name only: a key would cost every other span one more lookup.
        keys=(),
        span_names=frozenset({RUN_SPAN, LLM_SPAN, TOOL_SPAN}),
        fill=fill,
        doc="Haystack's own tracing: agent run → TURN, step.llm → MODEL, step.tool → TOOL",
    ),
)
