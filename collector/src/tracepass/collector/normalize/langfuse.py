"""Langfuse's OpenTelemetry-based SDKs (Python v3+, JS `@langfuse/tracing`): observations
are spans typed by `langfuse.observation.type`, their input and output JSON in
`langfuse.observation.input` / `.output`.

| type | record | fields |
|---|---|---|
| `agent` | TURN | query: the input (text, or the last user message of a message list / chain state); answer: the output, read likewise |
| `generation` | MODEL | input: last user message of the input messages; output: the assistant message's text and its `tool_calls` (OpenAI chat shape, or any shape `messages` reads) |
| `tool` | TOOL | name: the span name; arguments: the input; result: the output; a failing call: `level = ERROR` with `status_message` (status ERROR too) |
| `span`, `chain`, `event`, `retriever`, … | OTHER | |

Claimed by the attribute, whatever the scope. The session id is the standard `session.id`
(`propagate_attributes(session_id=…)`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    answer_from_state,
    last_text,
    output_text,
    parse_messages,
    query_from_state,
    requested_tool_calls,
)
from tracepass.collector.normalize.registry import Convention
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

NAME = "langfuse"
TYPE = "langfuse.observation.type"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
LEVEL = "langfuse.observation.level"
STATUS_MESSAGE = "langfuse.observation.status_message"


def _text(raw: Any, *, answer: bool) -> str | None:
    """A query / answer: plain text as it is, else read like chain state."""
    decoded = loads(raw)
    if decoded is NOT_JSON:
        return raw if isinstance(raw, str) and raw else None
    if isinstance(decoded, str):
        return decoded or None
    return answer_from_state(decoded) if answer else query_from_state(decoded)


def _fill(rec: SpanRecord, attrs: dict[str, Any], kind: Any, span: Span) -> str | None:
    get = attrs.get
    if kind == "agent":
        rec.kind = RecordKind.TURN
        rec.input_text = _text(get(INPUT), answer=False)
        rec.output_text = _text(get(OUTPUT), answer=True)
    elif kind == "generation":
        rec.kind = RecordKind.MODEL
        inputs = loads(get(INPUT))
        if isinstance(inputs, list):
            rec.input_text = last_text(parse_messages(inputs), USER)
        elif isinstance(inputs, str):
            rec.input_text = inputs
        outputs = loads(get(OUTPUT))
        if isinstance(outputs, dict | list):
            messages = parse_messages(outputs)
            rec.output_text = output_text(messages)
            rec.requested_tool_calls = requested_tool_calls(messages)
        elif isinstance(outputs, str):
            rec.output_text = outputs or None
    elif kind == "tool":
        rec.kind = RecordKind.TOOL
        rec.tool_name = rec.name
        store_tool_arguments(rec, deferred_arguments(get(INPUT)))
        store_tool_result(rec, deferred_result(get(OUTPUT)))
        if rec.error is None and get(LEVEL) == "ERROR":
            rec.error = as_str(get(STATUS_MESSAGE)) or "error"
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(TYPE,),
        fill=_fill,
        doc="Langfuse observations (`langfuse.observation.type`): agent → TURN, "
        "generation → MODEL, tool → TOOL",
    ),
)
