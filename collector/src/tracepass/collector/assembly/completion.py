"""When is an open conversation complete: turn segmentation and the completion rules.

A conversation completes when its end marker came and every turn's ancestry has
arrived (`end_signal`), when it has as many whole turns as its matched reference
(`reference_turns`), or when a deadline passes (idle timeout, end-signal grace, the
trace grace of a conversation that is only a trace, the settle time of a revision).
Counting turns costs turns x depth, not spans: only the turn records and each trace's
root are looked at, never every record.
"""

from __future__ import annotations

from tracepass.collector.config import AssemblyConfig
from tracepass.collector.records import RecordKind

from .buffer import Buffer, find
from .build import MAX_DEPTH, build_conversation
from .handover import Reason, SpanKey, TurnTarget

__all__ = ["CompletionRules"]


class CompletionRules:
    """The completion rules of one assembler (its config, graces and turn target)."""

    def __init__(
        self,
        config: AssemblyConfig,
        *,
        end_grace_s: float,
        late_settle_s: float,
        turn_target: TurnTarget | None,
    ) -> None:
        self.config = config
        self.end_grace_s = end_grace_s
        self.late_settle_s = late_settle_s
        self.turn_target = turn_target

    def complete_now(self, buf: Buffer) -> str | None:
        """The reason `buf` is complete as it stands, or None (deadlines aside)."""
        if self.turn_target is not None:
            wanted = (buf.reference_id, first_query(buf))
            if buf.target_for != wanted:
                buf.target_for = wanted
                buf.target = self.turn_target(*wanted)
        if buf.revision > 0 or (buf.end_at is None and buf.target is None):
            # Re-opened by late spans: those trickle in over several requests, so a
            # re-evaluation waits for `late_settle_s` of quiet instead of firing per request.
            return None
        done, all_rooted = turns_done(buf)
        if buf.end_at is not None and all_rooted and done >= (buf.end_turns or 0):
            return Reason.END_SIGNAL
        if buf.target is not None and buf.target > 0 and done >= buf.target:
            return Reason.REFERENCE_TURNS
        return None

    def deadline(self, buf: Buffer) -> tuple[float, str]:
        """The earliest deadline of `buf` and the reason it would complete for."""
        if buf.events_wait is not None:
            return buf.events_wait, Reason.NO_SPAN
        best = (buf.last_seen + self.config.idle_timeout_s, Reason.IDLE)
        if buf.revision > 0:
            return min(best, (buf.last_seen + self.late_settle_s, Reason.LATE_SPANS))
        if buf.end_at is not None:
            best = min(best, (buf.end_at + self.end_grace_s, Reason.END_SIGNAL))
        if buf.trace_only and buf.root_seen_at is not None:
            best = min(best, (buf.root_seen_at + self.config.trace_grace_s, Reason.TRACE_GRACE))
        return best


def turns_done(buf: Buffer) -> tuple[int, bool]:
    """(top-level turns whose whole ancestry up to the trace root has arrived, whether
    every trace seen so far has its root); notes the parents turns wait for."""
    missing: set[SpanKey] = set()
    count = 0
    traces_with_turns: set[str] = set()
    for rec in buf.turn_records:
        traces_with_turns.add(rec.trace_id)
        parent = rec.parent_span_id
        nested = False
        steps = 0
        while parent is not None and steps < MAX_DEPTH:
            node = find(buf.records, rec.trace_id, parent)
            if node is None:
                missing.add((rec.trace_id, parent))
                break
            if node.kind is RecordKind.TURN:
                nested = True
                break
            parent = node.parent_span_id
            steps += 1
        if parent is None and not nested:
            count += 1
    buf.missing = missing or None
    roots = buf.roots
    count += sum(1 for t, r in roots.items() if r is not None and t not in traces_with_turns)
    all_rooted = all(r is not None for r in roots.values())
    return count, all_rooted


def first_query(buf: Buffer) -> str | None:
    """The first turn's query, for the reference-turns rule: a turn span's own input,
    else — when the content came as GenAI log events, joined only when the conversation
    is built — the query of the conversation built so far."""
    if buf.first_turn is not None:
        return buf.first_turn.input_text
    if not buf.has_events or buf.events_query is not None:
        return buf.events_query
    # Built once per check until found, then kept: no rebuild per arriving batch.
    turns = build_conversation(buf.key, buf.records.values(), complete=False).turns
    buf.events_query = turns[0].query if turns else None
    return buf.events_query
