"""tracepass's own instrumentation: the parts not covered by the OTel GenAI semconv.

Turn and tool spans of `tracepass.instrumentation` are plain GenAI semconv spans
(`invoke_agent {name}`, `execute_tool {name}`) and go through `genai`. What is specific
to tracepass is the explicit end-of-conversation marker and a few attributes, whose
names come from `tracepass.instrumentation.semconv` (spelled once, for both sides).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Convention
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.instrumentation import semconv as sc

NAME = "tracepass"

END_SPAN_NAME = sc.CONVERSATION_END_SPAN
END_ATTR = sc.CONVERSATION_END
TURNS_ATTR = sc.CONVERSATION_TURNS
REFERENCE_ID = sc.REFERENCE_ID
AGENT_VERSION = sc.TRACEPASS_AGENT_VERSION
TRUNCATED = sc.CONTENT_TRUNCATED


def turn_count(attrs: dict[str, Any]) -> int | None:
    """`tracepass.conversation.turns` as a non-negative int (strings of digits accepted)."""
    raw = attrs.get(TURNS_ATTR)
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    if isinstance(raw, float) and raw.is_integer() and raw >= 0:
        return int(raw)
    return None


def fill_end(rec: SpanRecord, attrs: dict[str, Any], marker: Any, span: Span) -> str | None:
    """The end marker (claimed by name, or by `tracepass.conversation.end`, which must be
    true: a false flag declines and lets the other conventions read the span)."""
    if marker is not True and marker != END_SPAN_NAME:
        return None
    rec.kind = RecordKind.END
    turns = turn_count(attrs)
    if turns is not None:
        rec.attributes[TURNS_ATTR] = turns
    return NAME


CONVENTIONS = (
    Convention(
        NAME,
        keys=(END_ATTR,),
        span_names=frozenset({END_SPAN_NAME}),
        fill=fill_end,
        doc="end-of-conversation marker (span name or flag) → END",
    ),
)
