"""Rebuild a `Conversation` from the span records of one conversation.

Pure function of the records (no clock, no state), so the live assembler, the offline
`tracepass conversations` path and restart recovery all produce the same conversation
from the same spans, whatever order they arrived in.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from operator import attrgetter

from tracepass.collector.normalize import (
    ROLE_ANSWER,
    ROLE_ATTR,
    RUN_IDS_ATTR,
    TOOL_RESPONSE_NAMES_ATTR,
    TOOL_RESPONSES_ATTR,
)
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.cost_latency import combine_latency, combine_usage
from tracepass.evaluator.models import Conversation, ToolDefinition, Turn, construct_unchecked
from tracepass.evaluator.pricing import PriceBook

from .continuation import TurnGroup, merge_continuations
from .event_join import join_log_events
from .request_arguments import Responses, requested_calls, responses_of, tool_calls
from .runs import link_runs
from .steps import agent_steps, declared_agent, is_handoff, tool_agents
from .timeline import DEFAULT_PRICES, turn_figures

SpanKey = tuple[str, str]

_AGENT_WORK = frozenset({RecordKind.TOOL, RecordKind.MODEL})
_TURN = RecordKind.TURN
_TOOL = RecordKind.TOOL
_MODEL = RecordKind.MODEL
_END = RecordKind.END
_EVENT = RecordKind.EVENT

# Sort keys as C callables: the same tuples the lambdas they replace built, without a
# Python frame per record (rebuilding runs once per evaluated conversation).
_BY_START = attrgetter("start_ns", "span_id")
_BY_END = attrgetter("end_ns", "start_ns")

# What `responses_of` returns for a turn whose records carry none (see
# `_carries_responses`); read-only (`Responses.get` and `take_by_name` never change it).
_NO_RESPONSES = Responses()
_RESPONSE_KEYS = frozenset({TOOL_RESPONSES_ATTR, TOOL_RESPONSE_NAMES_ATTR})

# Parent chains longer than this are treated as broken (protects against cycles in
# malformed input: a span cannot be its own ancestor, but a client can claim it is).
MAX_DEPTH = 512


def top_level_turn(
    record: SpanRecord, index: Mapping[SpanKey, SpanRecord]
) -> tuple[SpanRecord | None, bool]:
    """The outermost TURN ancestor-or-self of `record` within its trace, and whether the
    walk reached the trace root (False: a parent is missing, so the answer may change)."""
    found: SpanRecord | None = record if record.kind is RecordKind.TURN else None
    parent = record.parent_span_id
    steps = 0
    while parent is not None and steps < MAX_DEPTH:
        node = index.get((record.trace_id, parent))
        if node is None:
            return found, False
        if node.kind is RecordKind.TURN:
            found = node
        parent = node.parent_span_id
        steps += 1
    return found, parent is None


def _merge_duplicate_tools(tools: list[SpanRecord], members: list[SpanRecord]) -> list[SpanRecord]:
    """One tool call seen by two instrumentations (AutoGen's native `execute_tool` span
    inside OpenInference's TOOL span) is one call: a TOOL record below a TOOL record of
    the same tool name is merged into it, filling only what the outer one lacks."""
    # A tool can only have a TOOL ancestor if some span of the turn has a TOOL parent:
    # without one (the usual turn: every tool span a child of the agent span) there is
    # nothing to merge, and the parent walks below are skipped.
    tool_ids = {r.span_id for r in tools}
    for rec in members:
        if rec.parent_span_id in tool_ids:
            break
    else:
        return tools
    by_id = {r.span_id: r for r in members}
    merged: dict[str, SpanRecord] = {}
    inner: set[str] = set()
    for rec in tools:
        parent = rec.parent_span_id
        steps = 0
        while parent is not None and steps < MAX_DEPTH:
            node = by_id.get(parent)
            if node is None:
                break
            if node.kind is RecordKind.TOOL and (node.tool_name or node.name) == (
                rec.tool_name or rec.name
            ):
                outer = merged.get(node.span_id, node)
                merged[node.span_id] = dataclasses.replace(
                    outer,
                    tool_call_id=outer.tool_call_id or rec.tool_call_id,
                    tool_arguments=outer.tool_arguments or rec.tool_arguments,
                    tool_result=outer.tool_result
                    if outer.tool_result is not None
                    else rec.tool_result,
                    error=outer.error or rec.error,
                )
                inner.add(rec.span_id)
                break
            parent = node.parent_span_id
            steps += 1
    if not inner:
        return tools
    return [merged.get(r.span_id, r) for r in tools if r.span_id not in inner]


def _offered_tools(root: SpanRecord, models: list[SpanRecord]) -> tuple[ToolDefinition, ...] | None:
    """Every tool offered in the turn: declared on its agent span or to its model calls
    (first definition of a name wins); None when no span said."""
    if not models and (root.tool_definitions is None or root.kind is RecordKind.TOOL):
        return None  # the usual agent span without model-call spans: nothing offered
    found: dict[str, ToolDefinition] = {}
    known = False
    # A TOOL record's definitions are its own schema, not an offer (see _tool_schemas).
    declaring = (root, *models) if root.kind is not RecordKind.TOOL else models
    for m in declaring:
        if m.tool_definitions is None:
            continue
        known = True
        for d in m.tool_definitions:
            found.setdefault(d.name, d)
    return tuple(found.values()) if known else None


def _tool_schemas(tools: list[SpanRecord]) -> dict[str, dict[str, object]]:
    for r in tools:  # most tool spans declare no schema: no comprehension to run then
        if r.tool_definitions:
            break
    else:
        return {}
    return {
        d.name: d.parameters
        for r in tools
        for d in r.tool_definitions or ()
        if d.parameters is not None
    }


def _carries_responses(root: SpanRecord, members: list[SpanRecord]) -> bool:
    """Whether any record of the turn carries tool responses (model inputs, adapters):
    without one `responses_of` is empty, so the usual turn (tool spans with their own
    results) skips collecting them. Reads only `attributes`, never a tool's result
    (which a record may hold as text, decoded per read)."""
    if not _RESPONSE_KEYS.isdisjoint(root.attributes):
        return True
    for rec in members:  # a loop, not `any(...)`: no generator object per turn
        if not _RESPONSE_KEYS.isdisjoint(rec.attributes):
            break
    else:
        return False
    return True


def _build_turn(
    root: SpanRecord,
    members: list[SpanRecord],
    prices: PriceBook = DEFAULT_PRICES,
    walls: list[tuple[int, int] | None] | None = None,
) -> Turn:
    members.sort(key=_BY_START)
    # One pass instead of a list comprehension per kind.
    tools: list[SpanRecord] = []
    models: list[SpanRecord] = []
    nested: list[SpanRecord] = []
    handoffs = False
    for r in members:
        kind = r.kind
        if kind is _TOOL:
            tools.append(r)
        elif kind is _MODEL:
            models.append(r)
        elif kind is _TURN:
            nested.append(r)
        elif not handoffs and ROLE_ATTR in r.attributes:
            handoffs = is_handoff(r)
    if len(tools) > 1:
        tools = _merge_duplicate_tools(tools, members)
    responses = (
        responses_of([root, *members]) if _carries_responses(root, members) else _NO_RESPONSES
    )
    agents, per_tool = tool_agents(root, members, tools, bool(nested) or handoffs)
    # Stacks that emit no tool spans still show the calls the model requested.
    calls = (
        tool_calls(tools, models, responses, per_tool)
        if tools
        else requested_calls(models, responses)
    )
    steps = agent_steps(agents, tools, calls, models) if agents is not None else ()
    query = root.input_text
    if query is None:
        query = next((m.input_text for m in models if m.input_text is not None), None)
    # A model call standing in for a missing agent span answers only as the last model
    # call of its turn (continuations join later ones: the last step's answer).
    answer = root.output_text if root.kind is not _MODEL else None
    if answer is None:
        # An answer-carrying tool (smolagents `final_answer`): the turn's answer.
        answer = next(
            (
                r.output_text
                for r in reversed(members)
                if r.attributes.get(ROLE_ATTR) == ROLE_ANSWER and r.output_text is not None
            ),
            None,
        )
    last_model = max(models, key=_BY_END) if models else None
    if answer is None and last_model is not None:
        answer = last_model.output_text
    if query is None:
        # Nested agent spans (another instrumentation's view of the same run).
        query = next((r.input_text for r in nested if r.input_text is not None), None)
    if answer is None:
        answer = next((r.output_text for r in reversed(nested) if r.output_text), None)
    uses_tools = root.final_answer_uses_tools
    if uses_tools is None and last_model is not None:
        uses_tools = last_model.final_answer_uses_tools
    # Built unchecked (every field given, nothing validated), like the Conversation
    # below: every value comes from typed records or validated models, and validating
    # them again per evaluated conversation was a tenth of the live evaluation path.
    # tests/collector/test_build_unchecked.py checks it against validated construction.
    spans, usage, latency, wall = turn_figures(root, members, prices)
    if walls is not None:
        walls.append(wall)
    return construct_unchecked(
        Turn,
        {
            "query": query,
            "answer": answer,
            "tool_calls": calls,
            "final_answer_uses_tools": uses_tools,
            "error": root.error,
            "trace_id": root.trace_id,
            "span_id": root.span_id,
            "start_ns": root.start_ns,
            "end_ns": root.end_ns,
            "offered_tools": _offered_tools(root, models),
            "tool_schemas": _tool_schemas(tools),
            "steps": steps,
            "spans": spans,
            "usage": usage,
            "latency": latency,
        },
    )


def _trace_root(records: list[SpanRecord], index: Mapping[SpanKey, SpanRecord]) -> SpanRecord:
    roots = [r for r in records if r.parent_span_id is None]
    if not roots:
        # The real root never arrived: take the outermost spans we have.
        roots = [r for r in records if (r.trace_id, r.parent_span_id or "") not in index]
    if not roots:  # a parent cycle: every span claims a present parent
        roots = records
    return min(roots, key=lambda r: (r.start_ns, -r.end_ns, r.span_id))


def build_conversation(
    conversation_id: str,
    records: Iterable[SpanRecord],
    *,
    complete: bool = True,
    prices: PriceBook = DEFAULT_PRICES,
) -> Conversation:
    """Turns = top-level TURN records (agent spans with no agent ancestor), or the trace
    root for traces without any that hold tool or model calls (a trace of neither is no
    turn); each turn owns every span below it."""
    index: dict[SpanKey, SpanRecord] = {}
    setdefault = index.setdefault
    has_events = False
    has_run_ids = False
    for rec in records:
        setdefault((rec.trace_id, rec.span_id), rec)
        if rec.kind is _EVENT:
            has_events = True
        elif RUN_IDS_ATTR in rec.attributes:
            has_run_ids = True
    if has_events:  # GenAI log events are rare: no join pass without any
        join_log_events(index)
    original_traces: list[str] | None = None
    if has_run_ids:  # SDKs that link runs by id, not by trace (runs.py)
        original_traces = [r.trace_id for r in sorted(index.values(), key=_BY_START)]
        link_runs(index)
    by_trace: dict[str, list[SpanRecord]] = {}
    turn_traces: set[str] = set()
    for rec in index.values():
        kind = rec.kind
        if kind is not _END and kind is not _EVENT:
            trace_records = by_trace.get(rec.trace_id)
            if trace_records is None:
                by_trace[rec.trace_id] = [rec]
            else:
                trace_records.append(rec)
            if kind is _TURN:
                turn_traces.add(rec.trace_id)

    groups: list[TurnGroup] = []
    for trace_id, trace_records in by_trace.items():
        if trace_id not in turn_traces:
            if not any(r.kind in _AGENT_WORK for r in trace_records):
                # Nothing an agent did (e.g. a lone `create_agent` span in its own
                # trace): not a turn.
                continue
            root = _trace_root(trace_records, index)
            groups.append(TurnGroup(root, list(trace_records), True))
            continue
        # Keyed by the turn's span id (one trace here).
        members: dict[str, list[SpanRecord]] = defaultdict(list)
        roots: dict[str, SpanRecord] = {}
        for rec in trace_records:
            # `top_level_turn`, inlined for a root and for a child of a root turn (the
            # tool spans of the usual turn); deeper spans take the general walk.
            parent_id = rec.parent_span_id
            if parent_id is None:
                top = rec if rec.kind is _TURN else None
            else:
                parent = index.get((trace_id, parent_id))
                if parent is not None and parent.parent_span_id is None:
                    top = parent if parent.kind is _TURN else (rec if rec.kind is _TURN else None)
                else:
                    top, _ = top_level_turn(rec, index)
            if top is None:
                continue  # spans outside any turn (e.g. an HTTP server span above it)
            key = top.span_id
            roots[key] = top
            if rec is not top:
                members[key].append(rec)
        for key, root in roots.items():
            groups.append(TurnGroup(root, members[key], False))

    groups.sort(key=lambda g: (g.root.start_ns, g.root.span_id))
    # A turn starts at a new user message, not at a trace (continuation.py).
    groups = merge_continuations(groups)
    walls: list[tuple[int, int] | None] = []  # per turn, for the conversation's wall time
    turns = [_build_turn(g.root, g.members, prices, walls) for g in groups]
    turn_roots = [g.root for g in groups]

    # The agent a span names (`gen_ai.agent.name`, a convention's agent name) on the
    # turns' roots, else on any span of the conversation, before the resource's
    # `service.name` that normalization puts where a span names none.
    agent_name = next((n for r in turn_roots if (n := declared_agent(r))), None)
    agent_version = next((r.agent_version for r in turn_roots if r.agent_version), None)
    all_records = sorted(index.values(), key=_BY_START)
    if agent_name is None:
        agent_name = next((n for r in all_records if (n := declared_agent(r))), None)
    if agent_name is None:
        agent_name = next((r.agent_name for r in turn_roots if r.agent_name), None)
    if agent_name is None:
        agent_name = next((r.agent_name for r in all_records if r.agent_name), None)
    if agent_version is None:
        agent_version = next((r.agent_version for r in all_records if r.agent_version), None)
    reference_id = next((r.reference_id for r in all_records if r.reference_id), None)
    service = next((r.service_name for r in all_records if r.service_name), None)

    trace_ids: list[str] = []
    seen: set[str] = set()
    for trace_id in [r.trace_id for r in (*turn_roots, *all_records)] + (original_traces or []):
        if trace_id not in seen:
            seen.add(trace_id)
            trace_ids.append(trace_id)
    return construct_unchecked(
        Conversation,
        {
            "id": conversation_id,
            "agent_name": agent_name,
            "agent_version": agent_version,
            "turns": tuple(turns),
            "reference_id": reference_id,
            "trace_ids": tuple(trace_ids),
            "complete": complete,
            "attributes": {"service.name": service} if service else {},
            "usage": combine_usage([t.usage for t in turns if t.usage is not None]),
            "latency": combine_latency([t.latency for t in turns if t.latency is not None], walls),
        },
    )
