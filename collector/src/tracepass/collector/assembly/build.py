"""Rebuild a `Conversation` from the span records of one conversation.

Pure function of the records (no clock, no state), so the live assembler, the offline
`tracepass conversations` path and restart recovery all produce the same conversation
from the same spans, whatever order they arrived in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from tracepass.collector.normalize.records import RecordKind, SpanRecord
from tracepass.evaluator.models import (
    Conversation,
    ToolCall,
    ToolDefinition,
    Turn,
    construct_unchecked,
)

SpanKey = tuple[str, str]

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


# The models below are built with `construct_unchecked` (every field given, nothing
# validated): every value comes from a typed `SpanRecord` whose fields already have the
# models' types, and validating ~20 objects per conversation was a tenth of the live
# evaluation path's CPU. tests/collector/test_build_unchecked.py checks that the result
# equals validated construction.


def _tool_call(rec: SpanRecord) -> ToolCall:
    return construct_unchecked(
        ToolCall,
        {
            "name": rec.tool_name or rec.name,
            "arguments": dict(rec.tool_arguments) if rec.tool_arguments is not None else {},
            "result": rec.tool_result,
            "error": rec.error,
            "call_id": rec.tool_call_id,
            "start_ns": rec.start_ns,
        },
    )


def _offered_tools(root: SpanRecord, models: list[SpanRecord]) -> tuple[ToolDefinition, ...] | None:
    """Every tool offered in the turn: declared on its agent span or to its model calls
    (first definition of a name wins); None when no span said."""
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
    return {
        d.name: d.parameters
        for r in tools
        for d in r.tool_definitions or ()
        if d.parameters is not None
    }


def _build_turn(root: SpanRecord, members: list[SpanRecord]) -> Turn:
    members.sort(key=lambda r: (r.start_ns, r.span_id))
    tools = [r for r in members if r.kind is RecordKind.TOOL]
    models = [r for r in members if r.kind is RecordKind.MODEL]
    if tools:
        calls = tuple(_tool_call(r) for r in tools)
    else:
        # Stacks that emit no tool spans still show the calls the model requested.
        calls = tuple(tc for m in models for tc in m.requested_tool_calls)
    query = root.input_text
    if query is None:
        query = next((m.input_text for m in models if m.input_text is not None), None)
    answer = root.output_text
    last_model = max(models, key=lambda r: (r.end_ns, r.start_ns), default=None)
    if answer is None and last_model is not None:
        answer = last_model.output_text
    uses_tools = root.final_answer_uses_tools
    if uses_tools is None and last_model is not None:
        uses_tools = last_model.final_answer_uses_tools
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
    conversation_id: str, records: Iterable[SpanRecord], *, complete: bool = True
) -> Conversation:
    """Turns = top-level TURN records (agent spans with no agent ancestor), or the trace
    root for traces without any; each turn owns every span below it."""
    index: dict[SpanKey, SpanRecord] = {}
    for rec in records:
        index.setdefault((rec.trace_id, rec.span_id), rec)
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for rec in index.values():
        if rec.kind is not RecordKind.END:
            by_trace[rec.trace_id].append(rec)

    turns: list[Turn] = []
    turn_roots: list[SpanRecord] = []
    for trace_records in by_trace.values():
        has_turn = any(r.kind is RecordKind.TURN for r in trace_records)
        if not has_turn:
            root = _trace_root(trace_records, index)
            turn_roots.append(root)
            turns.append(_build_turn(root, list(trace_records)))
            continue
        members: dict[SpanKey, list[SpanRecord]] = defaultdict(list)
        roots: dict[SpanKey, SpanRecord] = {}
        for rec in trace_records:
            top, _ = top_level_turn(rec, index)
            if top is None:
                continue  # spans outside any turn (e.g. an HTTP server span above it)
            key = (top.trace_id, top.span_id)
            roots[key] = top
            if rec is not top:
                members[key].append(rec)
        for key, root in roots.items():
            turn_roots.append(root)
            turns.append(_build_turn(root, members[key]))

    order = sorted(range(len(turns)), key=lambda i: (turn_roots[i].start_ns, turn_roots[i].span_id))
    turns = [turns[i] for i in order]
    turn_roots = [turn_roots[i] for i in order]

    agent_name = next((r.agent_name for r in turn_roots if r.agent_name), None)
    agent_version = next((r.agent_version for r in turn_roots if r.agent_version), None)
    all_records = sorted(index.values(), key=lambda r: (r.start_ns, r.span_id))
    if agent_name is None:
        agent_name = next((r.agent_name for r in all_records if r.agent_name), None)
    if agent_version is None:
        agent_version = next((r.agent_version for r in all_records if r.agent_version), None)
    reference_id = next((r.reference_id for r in all_records if r.reference_id), None)
    service = next((r.service_name for r in all_records if r.service_name), None)

    trace_ids: list[str] = []
    seen: set[str] = set()
    for rec in [*turn_roots, *all_records]:
        if rec.trace_id not in seen:
            seen.add(rec.trace_id)
            trace_ids.append(rec.trace_id)
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
        },
    )
