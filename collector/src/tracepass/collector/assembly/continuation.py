"""A turn starts at a new user message, not at a trace.

Why: a trace is how an SDK happened to group spans, not what the user did. Stacks whose
spans each start their own trace (agento11y's tool spans; tools run from a queue) or
that trace each model call separately would otherwise show one "turn" per trace, with
no query and tool calls torn from the turn they belong to.

Rule, on the groups of one conversation in start order (each group a root record and
the records below it): a group built from a trace **without an agent span** (a trace of
tool or model spans only) whose query is none, or the same text as the previous turn's
query, continues the previous turn: its records join that turn. A group rooted at an
agent span continues the previous one only when both are in the same trace with the
same query (one run traced as two agent spans). A trace whose root is a span of its own
that is neither a tool nor a model call (an application's turn span, a run span no
convention names) and that holds a model call is one agent run: a turn of its own even when no query was read (content
capture off), so a conversation id joining several runs never folds them into one turn. A turn rooted at an agent span in a
trace of its own is always a turn, with or without a query (content capture off).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from tracepass.collector.records import RecordKind, SpanRecord

_BY_START = attrgetter("start_ns", "span_id")
_MODEL = RecordKind.MODEL
_TOOL = RecordKind.TOOL


@dataclass(slots=True)
class TurnGroup:
    """The records of one turn before it is built: its root, the records below it, and
    whether the root is a trace root standing in for a missing agent span."""

    root: SpanRecord
    members: list[SpanRecord]
    fallback: bool
    _query: str | None = field(default=None, init=False)
    _query_known: bool = field(default=False, init=False)

    def query(self) -> str | None:
        """The turn's query as `_build_turn` will read it: the root's input, else the
        first model call's (computed once; `members` only grows by later records)."""
        if not self._query_known:
            query = self.root.input_text
            if query is None:
                models = sorted((m for m in self.members if m.kind is _MODEL), key=_BY_START)
                query = next((m.input_text for m in models if m.input_text is not None), None)
            self._query = query
            self._query_known = True
        return self._query


def _own_run(group: TurnGroup) -> bool:
    """A fallback group rooted at a span of its own that is neither a tool nor a model
    call (an application's turn span, a framework's run span no convention names) and
    that called the model: one agent run with its own root, never a piece of the
    previous turn (a trace of tool calls alone, a queue worker's, still continues)."""
    root = group.root
    if root.parent_span_id is not None or root.kind is _TOOL or root.kind is _MODEL:
        return False
    return any(m.kind is _MODEL for m in group.members)


def _continues(group: TurnGroup, previous: TurnGroup) -> bool:
    query = group.query()
    if group.fallback:
        if _own_run(group):
            return False
        return query is None or query == previous.query()
    return (
        query is not None
        and group.root.trace_id == previous.root.trace_id
        and query == previous.query()
    )


def merge_continuations(groups: list[TurnGroup]) -> list[TurnGroup]:
    """`groups` (sorted by root start) with continuations joined to the turn before."""
    if len(groups) < 2:
        return groups
    out: list[TurnGroup] = [groups[0]]
    for group in groups[1:]:
        previous = out[-1]
        if _continues(group, previous):
            known = previous.query()
            if group.fallback:
                previous.members.extend(group.members)  # a fallback group holds its root
            else:
                previous.members.append(group.root)
                previous.members.extend(group.members)
            if known is None:
                previous._query_known = False  # the joined records may carry the query
            continue
        out.append(group)
    return out
