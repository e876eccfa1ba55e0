"""What a convention module reads out of one span's attributes.

Convention modules return an `Extract`; `normalize_request` adds the fields every
convention shares (ids, times, conversation, agent, status) and builds the record, so
each module only knows its own attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracepass.collector.normalize.records import RecordKind
from tracepass.evaluator.models import ToolCall


@dataclass(slots=True)
class Extract:
    kind: RecordKind
    convention: str
    input_text: str | None = None
    output_text: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: dict[str, Any] | None = None
    tool_result: Any = None
    requested_tool_calls: tuple[ToolCall, ...] = ()
    # A convention-specific agent name (Traceloop entity name of a workflow/agent span),
    # used when the span has no `gen_ai.agent.name`.
    agent_name: str | None = None


def as_str(value: Any) -> str | None:
    """Attribute value as a non-empty string (ids are sometimes sent as ints)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(value)
    return None
