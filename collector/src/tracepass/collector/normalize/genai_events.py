"""GenAI message content carried by events: span events, and OTLP log records (events API).

Several instrumentations put messages not in span attributes but in events, each named
per the GenAI semantic conventions:

* the per-message events `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message`, `gen_ai.system.message` and `gen_ai.choice` (Strands Agents'
  default tracing writes them as span events with JSON text attributes `content` /
  `message`; the OTel contrib instrumentations emit them as log records whose *body*
  holds `content`, `tool_calls`, `message`…);
* `gen_ai.client.inference.operation.details`, whose attributes are
  `gen_ai.input.messages` / `gen_ai.output.messages` as on a span (Strands with
  `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`).

An event means different things on different spans: on a tool span (Strands)
`gen_ai.tool.message` holds the call's *input* and `gen_ai.choice` its *result*; on a
model span they are history and output. So events are read against the record a
convention already filled (its kind), and only fill what is still missing: attributes
win over events. The same reader serves span events (normalization) and log records
(joined to their span in assembly, whichever arrived first), which is why it takes plain
`(name, fields)` pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.anyvalue import attributes_to_dict
from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.messages import (
    USER,
    last_text_in,
    make_tool_call,
    output_text,
    output_text_in,
    parse_messages,
    requested_tool_calls,
    tool_responses,
)
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, note_source
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    coerce_arguments,
    coerce_result,
    loads,
)
from tracepass.evaluator.models import ToolCall
from tracepass.instrumentation import semconv as sc

NAME: Final = "genai_events"

USER_MESSAGE: Final = sc.EVENT_USER_MESSAGE
ASSISTANT_MESSAGE: Final = sc.EVENT_ASSISTANT_MESSAGE
TOOL_MESSAGE: Final = sc.EVENT_TOOL_MESSAGE
SYSTEM_MESSAGE: Final = sc.EVENT_SYSTEM_MESSAGE
CHOICE: Final = sc.EVENT_CHOICE
OPERATION_DETAILS: Final = sc.EVENT_OPERATION_DETAILS
EVENT_NAMES: Final = frozenset(
    {USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE, SYSTEM_MESSAGE, CHOICE, OPERATION_DETAILS}
)
EXCEPTION_EVENT: Final = "exception"

Event = tuple[str, dict[str, Any]]


def span_events(span: Span) -> list[Event]:
    """The span's GenAI events as (name, attributes) pairs, in recorded order."""
    return [
        (ev.name, attributes_to_dict(ev.attributes)) for ev in span.events if ev.name in EVENT_NAMES
    ]


def exception_message(span: Span) -> str | None:
    """`exception.message` (else `exception.type`) of the span's last `exception` event:
    the error text of spans whose status carries none (pydantic-ai tool errors)."""
    for ev in reversed(span.events):
        if ev.name == EXCEPTION_EVENT:
            attrs = attributes_to_dict(ev.attributes)
            text = as_str(attrs.get("exception.message")) or as_str(attrs.get("exception.type"))
            if text:
                return text
    return None


# ------------------------------------------------------------------ message values


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        parsed = loads(value)
        return value if parsed is NOT_JSON else parsed
    return value


def message_text(value: Any) -> str | None:
    """Text of an event's `content` / `message`: plain text, JSON text of content blocks
    (`[{"text": …}]`, `{"type": "text", "text"|"content"}`), a message object
    (`{"role", "content"}` or semconv `{"role", "parts"}`), joined by newlines."""
    value = _decoded(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        if "parts" in value:
            return output_text(parse_messages([value])) or last_text_in([value], USER)
        for key in ("content", "text", "message"):
            if key in value:
                return message_text(value[key])
        return None
    if isinstance(value, list):
        pieces: list[str] = []
        for block in value:
            if isinstance(block, str):
                pieces.append(block)
            elif isinstance(block, dict):
                kind = block.get("type", "text")
                text = block.get("text", block.get("content")) if kind == "text" else None
                if isinstance(text, str) and text:
                    pieces.append(text)
        return "\n".join(pieces) if pieces else None
    return None


def message_tool_calls(value: Any) -> tuple[ToolCall, ...]:
    """Tool calls an event's message requests: content blocks `{"toolUse": {"toolUseId",
    "name", "input"}}` (Strands / Bedrock), OpenAI-style `tool_calls` (log bodies) or
    semconv `tool_call` parts."""
    value = _decoded(value)
    if isinstance(value, dict):
        if "parts" in value:
            return requested_tool_calls(parse_messages([value]))
        calls = value.get("tool_calls")
        if isinstance(calls, list):
            return tuple(_openai_call(c) for c in calls if isinstance(c, dict))
        inner = value.get("message", value.get("content"))
        return message_tool_calls(inner) if inner is not None else ()
    if isinstance(value, list):
        out: list[ToolCall] = []
        for block in value:
            if not isinstance(block, dict):
                continue
            use = block.get("toolUse")
            if isinstance(use, dict):
                out.append(
                    make_tool_call(use.get("name", ""), use.get("input"), use.get("toolUseId"))
                )
            elif block.get("type") in ("tool_call", "function_call", "tool_use"):
                out.append(
                    make_tool_call(
                        block.get("name", ""),
                        block.get("arguments", block.get("input")),
                        block.get("id", block.get("call_id")),
                    )
                )
        return tuple(out)
    return ()


def _openai_call(call: dict[str, Any]) -> ToolCall:
    fn = call.get("function")
    if isinstance(fn, dict):
        return make_tool_call(fn.get("name", ""), fn.get("arguments"), call.get("id"))
    return make_tool_call(call.get("name", ""), call.get("arguments"), call.get("id"))


def _field(fields: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        value = fields.get(key)
        if value is not None:
            return value
    return None


# ------------------------------------------------------------------ applying events


def apply_events(rec: SpanRecord, events: Iterable[Event], source: str) -> bool:
    """Fill what `rec` still lacks from GenAI events (by its kind); notes `source` for
    every field filled. Returns whether anything was filled."""
    kind = rec.kind
    if kind is RecordKind.TOOL:
        return _apply_tool(rec, events, source)
    if kind is RecordKind.TURN or kind is RecordKind.MODEL:
        return _apply_exchange(rec, events, source)
    return False


def _apply_tool(rec: SpanRecord, events: Iterable[Event], source: str) -> bool:
    filled = False
    for name, fields in events:
        if name in (TOOL_MESSAGE, OPERATION_DETAILS):
            raw = _field(fields, "content", sc.TOOL_CALL_ARGUMENTS, "arguments", "input")
            if raw is not None and not rec.tool_arguments:
                rec.tool_arguments = coerce_arguments(_decoded(raw))
                note_source(rec, "tool_arguments", source)
                filled = True
            if rec.tool_call_id is None:
                rec.tool_call_id = as_str(_field(fields, "id", sc.TOOL_CALL_ID))
        if name in (CHOICE, OPERATION_DETAILS):
            raw = _field(fields, "message", sc.TOOL_CALL_RESULT, "result", "output")
            if raw is not None and rec.tool_result is None:
                rec.tool_result = coerce_result(raw)
                note_source(rec, "tool_result", source)
                filled = True
    return filled


def _apply_exchange(rec: SpanRecord, events: Iterable[Event], source: str) -> bool:
    """A turn or model span: the query is the last user message, the answer / output
    what `gen_ai.choice` (or the details event's output messages) says."""
    query: str | None = None
    answer: str | None = None
    calls: tuple[ToolCall, ...] = ()
    responses: dict[str, Any] = {}
    for name, fields in events:
        if name == USER_MESSAGE:
            text = message_text(_field(fields, "content", "message"))
            if text is not None:
                query = text
        elif name == CHOICE:
            message = _field(fields, "message", "content")
            text = message_text(message)
            if text is not None:
                answer = text
            calls += message_tool_calls(message)
        elif name == TOOL_MESSAGE and rec.kind is RecordKind.MODEL:
            call_id = as_str(fields.get("id"))
            if call_id is not None and "content" in fields:
                responses[call_id] = fields["content"]
        elif name == OPERATION_DETAILS:
            raw_in = fields.get(sc.INPUT_MESSAGES)
            raw_out = fields.get(sc.OUTPUT_MESSAGES)
            if raw_in is not None:
                text = last_text_in(raw_in, USER)
                if text is not None:
                    query = text
                if rec.kind is RecordKind.MODEL:
                    responses.update(tool_responses(raw_in))
            if raw_out is not None:
                text = output_text_in(raw_out)
                if text is not None:
                    answer = text
                calls += requested_tool_calls(parse_messages(raw_out))
    filled = False
    if query is not None and rec.input_text is None:
        rec.input_text = query
        note_source(rec, "input_text", source)
        filled = True
    if answer is not None and rec.output_text is None:
        rec.output_text = answer
        note_source(rec, "output_text", source)
        filled = True
    if calls and rec.kind is RecordKind.MODEL and not rec.requested_tool_calls:
        rec.requested_tool_calls = calls
        note_source(rec, "requested_tool_calls", source)
        filled = True
    if responses:
        known = rec.attributes.get(TOOL_RESPONSES_ATTR)
        rec.attributes[TOOL_RESPONSES_ATTR] = {**responses, **known} if known else responses
        filled = True
    return filled
