"""Google ADK (built-in tracing, scope `gcp.vertex.agent`).

* Parallel calls add an `execute_tool (merged)` span (`gen_ai.tool.name = "(merged
  tools)"`) for the merged response event: not a tool call, so it becomes OTHER.
* Function responses are `{"result": value}` for non-dict results and, from an
  `on_tool_error_callback`, `{"error": text}` (the span's own status only says
  `TOOL_ERROR`): unwrapped to the value, or to the error text.
* ADK's legacy schema (ADK 1.x, `ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`) puts a tool's
  arguments and response in `gcp.vertex.agent.tool_call_args` /
  `gcp.vertex.agent.tool_response` rather than the semconv attributes.
With content only in log records (the default when content capture is on), results are
joined from the next model call's input in assembly (see `assembly/request_arguments.py`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.adapters._shapes import decoded, set_arguments, set_result
from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import RecordKind, SpanRecord, coerce_arguments

MERGED_TOOL_NAME = "(merged tools)"
LEGACY_ARGUMENTS = "gcp.vertex.agent.tool_call_args"
LEGACY_RESPONSE = "gcp.vertex.agent.tool_response"


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TOOL:
        return False
    if rec.tool_name == MERGED_TOOL_NAME:
        rec.kind = RecordKind.OTHER
        return True
    changed = False
    if not rec.tool_arguments:
        legacy = decoded(attrs.get(LEGACY_ARGUMENTS))
        if isinstance(legacy, dict) and legacy:
            set_arguments(rec, coerce_arguments(legacy))
            changed = True
    result = decoded(rec.tool_result)
    if result is None:
        result = decoded(attrs.get(LEGACY_RESPONSE))
        if result is not None:
            set_result(rec, result)
            changed = True
    if isinstance(result, dict) and len(result) == 1:
        if "result" in result:
            set_result(rec, result["result"])
            changed = True
        elif isinstance(text := result.get("error"), str):
            rec.tool_result = None
            if not rec.error or text not in rec.error:
                rec.error = text
            changed = True
    return changed


ADAPTER = Adapter(
    "google_adk",
    scopes=("gcp.vertex.agent",),
    adapt=adapt,
    doc='`(merged tools)` spans dropped; `{"result"}` / `{"error"}` responses '
    "unwrapped; legacy `gcp.vertex.agent.tool_*` arguments and responses",
)
