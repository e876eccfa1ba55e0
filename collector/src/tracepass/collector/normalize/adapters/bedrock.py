"""Amazon Bedrock under OpenInference (`openinference.instrumentation.bedrock`), the
`converse` API.

The flattened input messages (`llm.input_messages.N.message.*`) carry each `toolResult`
block's text and call id but not its `status`, so a failed tool call (`"status":
"error"`, the way a Bedrock loop tells the model a tool failed) reads as a successful
one whose result is the error text. `input.value` keeps the request's messages as sent;
the results whose status is `error` are taken from there as errors.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.messages import content_text
from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, Adapter
from tracepass.collector.records import RecordKind, SpanRecord, loads

INPUT = "input.value"


def _failed_results(raw: str) -> dict[str, Any]:
    """`{toolUseId: {"error": text}}` for every `toolResult` block with status error."""
    messages = loads(raw)
    out: dict[str, Any] = {}
    if not isinstance(messages, list):
        return out
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            result = block.get("toolResult") if isinstance(block, dict) else None
            if not isinstance(result, dict) or result.get("status") != "error":
                continue
            call_id = result.get("toolUseId")
            if isinstance(call_id, str) and call_id:
                out[call_id] = {"error": content_text(result.get("content")) or "error"}
    return out


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.MODEL:
        return False
    raw = attrs.get(INPUT)
    if not isinstance(raw, str) or '"toolResult"' not in raw or '"error"' not in raw:
        return False
    failed = _failed_results(raw)
    if not failed:
        return False
    known = rec.attributes.get(TOOL_RESPONSES_ATTR)
    rec.attributes[TOOL_RESPONSES_ATTR] = {**known, **failed} if known else failed
    return True


ADAPTER = Adapter(
    "bedrock",
    scopes=("openinference.instrumentation.bedrock",),
    adapt=adapt,
    doc="`toolResult` blocks with `status: error` in `input.value` → the call's error (the "
    "flattened input messages drop the status)",
)
