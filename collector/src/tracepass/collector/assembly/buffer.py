"""One conversation's records while they are in memory: being assembled (open), or
evaluated and looked into by a late span (retained, taken back from `retained.py`).

Why it is shaped like this: records arrive in any order, split across requests and
repeated by exporter retries, so a buffer keeps a dict of its records by span id (by
(trace_id, span_id) for the rare record whose span id another of its traces holds):
dedupe is one lookup. Alongside it, what the completion rules (`completion.py`) read
without scanning the records: the turn records, each trace's root, the end marker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from tracepass.collector.records import RecordKind, SpanRecord

from .handover import END_TURNS_ATTRIBUTE, SpanKey

__all__ = [
    "Buffer",
    "State",
    "count_unjoined",
    "events_only",
    "find",
    "note_end",
    "note_turn",
    "place",
    "restored",
    "unjoined_events",
]

log = logging.getLogger(__name__)

_TURN = RecordKind.TURN
_END = RecordKind.END
_EVENT = RecordKind.EVENT


class State(Enum):
    OPEN = 1
    RETAINED = 2  # evaluated; taken back into memory for a late span (or a duplicate)


@dataclass(eq=False, slots=True)
class Buffer:
    key: str
    state: State
    # The conversation's records by span id; a record whose span id another trace's
    # record already holds goes under (trace_id, span_id) instead. Span ids are unique
    # per trace and random, so that is rare, and keying every record by the pair cost a
    # 56-byte tuple per buffered span. Look up with `find`; records are never removed
    # one by one (the dict is replaced whole), so a pair key exists only next to its
    # span-id key.
    records: dict[str | SpanKey, SpanRecord] = field(default_factory=dict)
    trace_only: bool = True
    by_trace: bool = False  # holds a record with no conversation id (routed by trace)
    revision: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    closed_at: float = 0.0
    truncated: bool = False
    evicted: bool = False
    turn_records: list[SpanRecord] = field(default_factory=list)
    # trace_id -> its root record, None until the root arrives: every trace with
    # non-END records is a key (one dict instead of a dict and a set per conversation).
    roots: dict[str, SpanRecord | None] = field(default_factory=dict)
    root_seen_at: float | None = None
    end_at: float | None = None
    end_turns: int | None = None
    reference_id: str | None = None
    first_turn: SpanRecord | None = None
    target: int | None = None
    target_for: tuple[str | None, str | None] | None = None
    # Parents a turn waits for; None while there are none (an empty set is ~200 bytes
    # per open conversation).
    missing: set[SpanKey] | None = None
    heap_seq: int = -1
    heap_deadline: float | None = None
    # Set while the buffer holds only GenAI log events: the latest time to wait for
    # their spans. Cleared by any arrival (re-established when the deadline finds the
    # buffer still without spans).
    events_wait: float | None = None
    has_events: bool = False  # holds GenAI log events (content not on the spans)
    events_query: str | None = None  # first query found through them (kept once found)


def place(buf: Buffer, rec: SpanRecord, now: float) -> None:
    """Put one record into `buf` with its bookkeeping (`Assembler.add` inlines the same
    steps on the hot path; merges, restores and read-backs come here)."""
    records = buf.records
    span_id = rec.span_id
    records[span_id if span_id not in records else (rec.trace_id, span_id)] = rec
    if rec.conversation_id is not None:
        buf.trace_only = False
    else:
        buf.by_trace = True
    if rec.reference_id and buf.reference_id is None:
        buf.reference_id = rec.reference_id
    kind = rec.kind
    if kind is _TURN:
        note_turn(buf, rec)
    elif kind is _END:
        note_end(buf, rec, now)
    elif kind is _EVENT:
        buf.has_events = True
    if kind is not _END:
        if rec.parent_span_id is None:
            buf.roots[rec.trace_id] = rec
            buf.root_seen_at = now
        else:
            buf.roots.setdefault(rec.trace_id, None)


def note_turn(buf: Buffer, rec: SpanRecord) -> None:
    buf.turn_records.append(rec)
    if rec.input_text is not None and (
        buf.first_turn is None or rec.start_ns < buf.first_turn.start_ns
    ):
        buf.first_turn = rec


def note_end(buf: Buffer, rec: SpanRecord, now: float) -> None:
    buf.end_at = now
    turns = rec.attributes.get(END_TURNS_ATTRIBUTE)
    if isinstance(turns, int | float | str):
        try:
            buf.end_turns = int(turns)
        except ValueError:
            log.warning("conversation %s: bad %s=%r", buf.key, END_TURNS_ATTRIBUTE, turns)


def find(
    records: Mapping[str | SpanKey, SpanRecord], trace_id: str, span_id: str
) -> SpanRecord | None:
    """The record (trace_id, span_id) of a `Buffer.records`, or None."""
    rec = records.get(span_id)
    if rec is None or rec.trace_id == trace_id:
        return rec
    return records.get((trace_id, span_id))


def unjoined_events(records: Mapping[SpanKey, SpanRecord]) -> int:
    """GenAI log events (EVENT records) in `records` whose span is not among them."""
    return sum(
        1
        for r in records.values()
        if r.kind is _EVENT and (r.trace_id, r.parent_span_id) not in records
    )


def count_unjoined(records: Iterable[SpanRecord]) -> int:
    """`unjoined_events` of a buffer's records (keyed by (trace_id, span_id))."""
    return unjoined_events({(r.trace_id, r.span_id): r for r in records})


def events_only(buf: Buffer) -> bool:
    return all(r.kind is _EVENT for r in buf.records.values())


def restored(
    key: str, records: Iterable[SpanRecord], *, last_seen: float, revision: int, now: float
) -> Buffer:
    """A buffer rebuilt from durable state (restart recovery), deduplicated."""
    buf = Buffer(key=key, state=State.OPEN, first_seen=last_seen, last_seen=last_seen)
    buf.revision = revision
    for rec in records:
        if find(buf.records, rec.trace_id, rec.span_id) is None:
            place(buf, rec, now)
    return buf
