"""OpenAI Agents SDK under OpenInference (`openinference.instrumentation.openai_agents`).

The SDK's hand-off is a span of its own, which OpenInference marks as a TOOL span named
`handoff to <agent>` (input: the agent handing off, output: the agent taking over) with no
tool name. It is not a tool the agent chose to call but a change of agent: it becomes a
hand-off record (`ROLE_HANDOFF`, the agent taken over in `agent_name`), which assembly
turns into an agent step (assembly/steps.py).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.records import (
    RecordKind,
    SpanRecord,
    store_tool_arguments,
    store_tool_result,
)
from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF, Adapter

HANDOFF_PREFIX = "handoff to "


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is not RecordKind.TOOL or attrs.get("tool.name") is not None:
        return False
    if not rec.name.startswith(HANDOFF_PREFIX):
        return False
    rec.kind = RecordKind.OTHER
    rec.agent_name = as_str(attrs.get("output.value")) or rec.name[len(HANDOFF_PREFIX) :]
    rec.tool_name = None
    rec.tool_call_id = None
    store_tool_arguments(rec, None)
    store_tool_result(rec, None)
    rec.attributes[ROLE_ATTR] = ROLE_HANDOFF
    return True


ADAPTER = Adapter(
    "openai_agents",
    scopes=("openinference.instrumentation.openai_agents",),
    adapt=adapt,
    doc="`handoff to <agent>` TOOL spans → hand-off (an agent step, not a tool call)",
)
