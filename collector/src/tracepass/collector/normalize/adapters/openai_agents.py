"""OpenAI Agents SDK under OpenInference: Python (`openinference.instrumentation.openai_agents`)
and JavaScript (`@arizeai/openinference-instrumentation-openai-agents`).

The SDK's hand-off is a span of its own, which OpenInference marks as a TOOL span named
`handoff to <agent>` (Python: input the agent handing off, output the agent taking over,
no tool name; JS: tool name `handoff_to_<agent>`, output `{"to_agent": …}`). It is not a
tool the agent chose to call but a change of agent: it becomes a hand-off record
(`ROLE_HANDOFF`, the agent taken over in `agent_name`), which assembly turns into an
agent step (assembly/steps.py). The JS processor names an agent span's agent only in
`graph.node.id` (the span's name): that is its agent name.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracepass.collector.normalize.extract import as_str
from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF, Adapter
from tracepass.collector.records import (
    NOT_JSON,
    RecordKind,
    SpanRecord,
    loads,
    store_tool_arguments,
    store_tool_result,
)

HANDOFF_PREFIX = "handoff to "
HANDOFF_TOOL_PREFIX = "handoff_to_"
GRAPH_NODE = "graph.node.id"


def _target(attrs: dict[str, Any], name: str) -> str:
    """The agent handed to: the span's output (`"agent"` or `{"to_agent": "agent"}`),
    else its name."""
    output = attrs.get("output.value")
    decoded = loads(output)
    if isinstance(decoded, dict):
        found = as_str(decoded.get("to_agent"))
        if found:
            return found
    text = as_str(output) if decoded is NOT_JSON else None
    return text or name[len(HANDOFF_PREFIX) :]


def adapt(rec: SpanRecord, attrs: dict[str, Any], span: Span) -> bool:
    if rec.kind is RecordKind.TURN:
        if rec.agent_name is None:
            node = as_str(attrs.get(GRAPH_NODE))
            if node is not None:
                rec.agent_name = node
                return True
        return False
    if rec.kind is not RecordKind.TOOL or not rec.name.startswith(HANDOFF_PREFIX):
        return False
    tool_name = attrs.get("tool.name")
    if tool_name is not None and not str(tool_name).startswith(HANDOFF_TOOL_PREFIX):
        return False
    rec.kind = RecordKind.OTHER
    rec.agent_name = _target(attrs, rec.name)
    rec.tool_name = None
    rec.tool_call_id = None
    store_tool_arguments(rec, None)
    store_tool_result(rec, None)
    rec.attributes[ROLE_ATTR] = ROLE_HANDOFF
    return True


ADAPTER = Adapter(
    "openai_agents",
    scopes=(
        "openinference.instrumentation.openai_agents",
        "@arizeai/openinference-instrumentation-openai-agents",
    ),
    adapt=adapt,
    doc="`handoff to <agent>` TOOL spans → hand-off (an agent step, not a tool call); "
    "JS agent spans: agent name from `graph.node.id`",
)
