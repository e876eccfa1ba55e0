"""DSPy under OpenInference (`openinference.instrumentation.dspy`).

DSPy's `ReAct` ends every trajectory by calling its own `finish` tool (a real `Tool`
call, traced like the agent's tools: `finish.__call__`, no arguments, result
`"Completed."`). It marks the end of the loop, not a tool the agent chose for the user:
it is kept as OTHER (for the span tree), not a tool call. The answer is the module's
output, read from the turn span as before.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.registry import Adapter
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    store_tool_arguments,
    store_tool_result,
)

FINISH = "finish"


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TOOL or rec.tool_name != FINISH:
        return False
    rec.kind = RecordKind.OTHER
    rec.tool_name = None
    store_tool_arguments(rec, None)
    store_tool_result(rec, None)
    return True


ADAPTER = Adapter(
    "dspy",
    scopes=("openinference.instrumentation.dspy",),
    adapt=adapt,
    doc="ReAct's own `finish` tool → not a tool call (the end of the loop)",
)
