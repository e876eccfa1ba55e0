"""Strands Agents (native tracing, scope `strands.telemetry.tracer`).

Content is in GenAI span events (read by `genai_events`) or, with
`gen_ai_latest_experimental`, in the semconv attributes and the operation-details event.
What is Strands-specific: a tool's result is its `toolResult` content list,
`[{"text": "…"}]`, with dict and list results JSON-serialized into the text. The plain
result is that text, JSON-decoded when it is JSON. The agent span's answer ends with a
newline Strands appends to the model's text; it is removed.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import decoded, set_result, text_blocks
from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import RecordKind, SpanRecord


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is RecordKind.TURN:
        answer = rec.output_text
        if answer is not None and answer.endswith("\n"):
            rec.output_text = answer.rstrip("\n")
            return True
        return False
    if rec.kind is not RecordKind.TOOL or rec.tool_result is None:
        return False
    text = text_blocks(decoded(rec.tool_result))
    if text is None:
        return False
    set_result(rec, text)
    return True


ADAPTER = Adapter(
    "strands",
    scopes=("strands.telemetry",),
    adapt=adapt,
    doc="tool results `[{'text': …}]` → the text (JSON-decoded); no trailing answer newline",
)
