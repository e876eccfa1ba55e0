"""CAMEL (`camel-ai`) traced through the OpenAI client it calls (OpenInference, OpenLLMetry
or the OTel contrib `openai-v2` instrumentation).

CAMEL's own tracing hooks export no OpenTelemetry with current SDKs, so its spans are the
model client's: tool calls are the model's requests and their results the `tool`
messages of the next request. CAMEL does not raise a failing tool's exception: it
catches it and sends the model the text `Tool execution failed: Error executing tool
'<name>': …` as that call's result. Such a result is taken as the call's error; any
other result is left alone.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, Adapter
from tracepass.collector.records import RecordKind, SpanRecord

#: What CAMEL's `ChatAgent` puts before a failed tool's error message (camel-ai 0.2).
FAILURE_PREFIX = "Tool execution failed: "


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.MODEL:
        return False
    responses = rec.attributes.get(TOOL_RESPONSES_ATTR)
    if not isinstance(responses, dict):
        return False
    failed = {
        call_id: {"error": text.removeprefix(FAILURE_PREFIX)}
        for call_id, text in responses.items()
        if isinstance(text, str) and text.startswith(FAILURE_PREFIX)
    }
    if not failed:
        return False
    rec.attributes[TOOL_RESPONSES_ATTR] = {**responses, **failed}
    return True


ADAPTER = Adapter(
    "camel",
    scopes=(
        "openinference.instrumentation.openai",
        "opentelemetry.instrumentation.openai",
    ),
    adapt=adapt,
    doc="a tool result CAMEL sent as `Tool execution failed: …` → that call's error (CAMEL "
    "catches a failing tool's exception and hands the model its text)",
)
