"""Frameworks' built-in hand-off tools, read as hand-offs wherever their tool spans come
from: a hand-off is an agent step of the turn, not a tool call of its trajectory.

Which tools: `transfer_to_<agent>` (the OpenAI Agents SDK's hand-off functions,
LangGraph swarm's and supervisor's `create_handoff_tool`), and `transfer_to_agent`
with an `agent_name` argument (Google ADK). The agent handed to is `<agent>` as the
tool name spells it (assembly matches it to agent spans ignoring case and
punctuation: `booking_agent` is `booking-agent`), or ADK's argument.

Applied after the conventions and adapters (an adapter that already made the span a
hand-off leaves nothing to do here), to TOOL records only.
"""

from __future__ import annotations

from typing import Final

from tracepass.collector.normalize.registry import ROLE_ATTR, ROLE_HANDOFF
from tracepass.collector.records import (
    RecordKind,
    SpanRecord,
    store_tool_arguments,
    store_tool_result,
)

__all__ = ["PREFIX", "read_handoff_tool"]

PREFIX: Final = "transfer_to_"
ADK_TOOL: Final = "transfer_to_agent"
MAX_AGENT_NAME: Final = 256


def _target(rec: SpanRecord, name: str) -> str | None:
    if name == ADK_TOOL:
        arguments = rec.tool_arguments or {}
        found = arguments.get("agent_name")
        return found if isinstance(found, str) and found else None
    target = name[len(PREFIX) :]
    return target if 0 < len(target) <= MAX_AGENT_NAME else None


def read_handoff_tool(rec: SpanRecord) -> bool:
    """Make a built-in hand-off TOOL record a hand-off (see the module docstring);
    whether it was one."""
    name = rec.tool_name
    if not name or not name.startswith(PREFIX):
        return False
    target = _target(rec, name)
    if target is None:
        return False
    rec.kind = RecordKind.OTHER
    rec.agent_name = target
    rec.tool_name = None
    rec.tool_call_id = None
    store_tool_arguments(rec, None)
    store_tool_result(rec, None)
    rec.attributes[ROLE_ATTR] = ROLE_HANDOFF
    return True
