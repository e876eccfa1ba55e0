"""Vercel AI SDK 7's `OpenTelemetry` integration (`@ai-sdk/otel`, scope `gen_ai` by default;
`ai` when the application hands it the SDK's usual tracer).

Its spans follow the GenAI semconv (`invoke_agent`, `chat`, `execute_tool`), which the
GenAI convention reads; what it adds is where the conversation id is: the SDK has none,
and applications pass one in the runtime context (`ai.settings.context.<key>`, with
`includeRuntimeContext` and `OpenTelemetry({runtimeContext: true})`). The keys are the
ones the `vercel_ai` convention reads for the older `ai.*` spans.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.normalize.vercel_ai import conversation_id
from tracepass.collector.records import SpanRecord


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.conversation_id is None:
        found = conversation_id(attrs)
        if found is not None:
            rec.conversation_id = found
            return True
    return False


ADAPTER = Adapter(
    "vercel_ai",
    scopes=("gen_ai", "ai"),
    adapt=adapt,
    doc="conversation id from the runtime context (`ai.settings.context.conversationId`, …)",
)
