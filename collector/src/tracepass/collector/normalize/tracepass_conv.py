"""tracepass's own instrumentation: the parts not covered by the OTel GenAI semconv.

Turn and tool spans of `tracepass.instrumentation` are plain GenAI semconv spans
(`invoke_agent {name}`, `execute_tool {name}`) and go through `genai`. What is specific
to tracepass is the explicit end-of-conversation marker and a few attributes.
"""

from __future__ import annotations

from typing import Any

END_SPAN_NAME = "tracepass.conversation.end"
END_ATTR = "tracepass.conversation.end"
TURNS_ATTR = "tracepass.conversation.turns"
REFERENCE_ID = "tracepass.reference.id"
AGENT_VERSION = "tracepass.agent.version"
TRUNCATED = "tracepass.content.truncated"


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
