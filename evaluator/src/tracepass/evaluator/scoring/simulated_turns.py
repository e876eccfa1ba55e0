"""A simulated-user conversation as the scoring sees it: one turn.

A reference with a `user:` scenario cannot say what the user types on turn 3: the
simulator reacts to the agent. What it can say is what the conversation as a whole must
do — τ-bench's view: the tool calls over every turn (order and arguments, as a reference
turn checks them today) and the end answer. So the conversation's turns are folded into
one: the first query, every tool call in order, the last answer. Conversation judges
still read the real turns.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracepass.evaluator.models import Conversation, Reference, ToolDefinition, Turn

__all__ = ["scored_turns"]


def scored_turns(conversation: Conversation, reference: Reference) -> tuple[Turn, ...]:
    """The turns scored against `reference`: the conversation's own, or (a simulated
    user's reference) the one folded turn."""
    turns = conversation.turns
    if reference.user is None or len(turns) <= 1:
        return turns
    first, last = turns[0], turns[-1]
    offered = [t.offered_tools for t in turns if t.offered_tools is not None]
    schemas: dict[str, dict[str, object]] = {}
    for t in turns:
        schemas.update(t.tool_schemas)
    errors = [t.error for t in turns if t.error]
    return (
        last.model_copy(
            update={
                "query": first.query,
                "tool_calls": tuple(c for t in turns for c in t.tool_calls),
                "offered_tools": None if not offered else _union(offered),
                "tool_schemas": schemas,
                "error": "; ".join(errors) if errors else None,
                "trace_id": first.trace_id,
                "span_id": first.span_id,
                "start_ns": first.start_ns,
                "spans": tuple(s for t in turns for s in t.spans),
                "steps": tuple(s for t in turns for s in t.steps),
            }
        ),
    )


def _union(offered: Sequence[tuple[ToolDefinition, ...]]) -> tuple[ToolDefinition, ...]:
    seen: dict[str, ToolDefinition] = {}
    for tools in offered:
        for tool in tools:
            seen.setdefault(tool.name, tool)
    return tuple(seen.values())
