"""Buffer span records per conversation and decide when each conversation is complete.

Why it is shaped like this:
- Records arrive in any order, split across requests and repeated by exporter retries,
  so each conversation keeps a dict of its records by span id (by (trace_id, span_id)
  for the rare record whose span id another of its traces holds): dedupe is one lookup.
- Deadlines (idle timeout, end-signal grace, trace grace, late-span settle) live in a
  lazy min-heap: a span arrival only moves `last_seen` forward (O(1)); the heap entry is
  re-checked and re-pushed when it pops, so no tick ever scans all conversations.
- Memory is bounded by three caps. Whatever has to give is counted (with a reason) in
  `CollectorInstruments` and logged: evaluated conversations kept for late spans are shed
  first, then the least recently active open conversations are handed over as
  incomplete (`Conversation.complete=False`).
- After evaluation a conversation is *retained* (records kept) for `retention_s` so late
  spans can trigger a re-evaluation with revision + 1; then a small tombstone remains so
  spans arriving even later are dropped and counted instead of opening a bogus fragment.
  Retained records are *packed* (`packed.py`: one bytes object per conversation, ≈ 4x
  smaller than the records and invisible to the GC) and unpacked only when a late span,
  a view or the end of retention needs them: at a steady rate memory stays flat instead
  of growing with every conversation evaluated in the last hour.
- GenAI events received as log records (EVENT records) travel separately from their
  spans. A buffer holding nothing but events is not a conversation yet: when its idle
  deadline comes it keeps waiting for its spans (so a span naming the conversation still
  merges it), up to `retention_s` after it opened; then its events are given up and
  counted (`tracepass_log_events_dropped{reason="no_span"}`), like events whose own span
  never arrived in a conversation that completed. Events may also hold the first query
  the reference-turns rule needs (`_first_query`).
- Such event-only buffers ("orphans") have a budget of their own,
  `max_orphan_events`: they do not count as open conversations and are never made room
  for by evicting one; beyond the budget the oldest are given up (counted
  `reason="orphan_budget"`). Before, one request of 100k orphan events pushed open
  conversations to twice the cap and evicted all 30 legitimate ones as incomplete.

Time comes from an injected clock (seconds), so every rule is testable without sleeping.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.ratelimited_log import RateLimitedLog

from .build import MAX_DEPTH, build_conversation
from .packed import pack_records, unpack_records

log = logging.getLogger(__name__)

Clock = Callable[[], float]
SpanKey = tuple[str, str]
# (reference_id, first user query) -> number of turns the matched reference has.
TurnTarget = Callable[[str | None, str | None], int | None]

END_TURNS_ATTRIBUTE = "tracepass.conversation.turns"


class Reason:
    """Completion reasons (label values of `tracepass_conversations_completed`)."""

    END_SIGNAL = "end_signal"
    REFERENCE_TURNS = "reference_turns"
    IDLE = "idle"
    TRACE_GRACE = "trace_grace"
    EVICTED = "evicted"
    LATE_SPANS = "late_spans"  # a re-evaluation (revision > 0); counted in `revisions`
    SHUTDOWN = "shutdown"  # offline / flush-all: end of input
    NO_SPAN = "no_span"  # only GenAI log events, their spans never came: dropped, not closed


class _State(Enum):
    OPEN = 1
    RETAINED = 2  # evaluated (or being evaluated); records kept for late spans
    TOMBSTONE = 3  # records freed; later spans are dropped


_OPEN = _State.OPEN
_RETAINED = _State.RETAINED
_TOMBSTONE = _State.TOMBSTONE
_TURN = RecordKind.TURN
_END = RecordKind.END
_EVENT = RecordKind.EVENT


@dataclass(frozen=True, slots=True)
class Completed:
    """A conversation handed over for evaluation."""

    key: str
    records: tuple[SpanRecord, ...]
    reason: str
    revision: int
    complete: bool
    last_seen: float
    closed_at: float


@dataclass(frozen=True, slots=True)
class AddOutcome:
    """What `Assembler.add` did with one batch.

    Stored as the batch plus one routing key per record (None: not held) instead of
    lists of `(key, record)` pairs: building two tuples and two list entries per span
    cost more than everything else `add` does for it. `accepted`/`held` build those
    lists on demand."""

    records: list[SpanRecord]  # the batch, in order
    keys: list[str | None]  # per record: the conversation holding it, None if dropped
    duplicates: int
    late: int
    dropped: int
    merged: list[tuple[str, str]]  # (trace-only key, conversation key) buffers merged
    duplicate_at: tuple[int, ...] = ()  # positions of records that were duplicates

    @property
    def held(self) -> list[tuple[str, SpanRecord]]:
        """New records + duplicates of records already held, with their keys: what a
        durable store must contain before the request is acknowledged (a retry after a
        failed commit is a duplicate)."""
        return [(k, r) for k, r in zip(self.keys, self.records, strict=True) if k is not None]

    @property
    def accepted(self) -> list[tuple[str, SpanRecord]]:
        """New records with the key they were routed to."""
        dup = set(self.duplicate_at)
        return [
            (k, r)
            for i, (k, r) in enumerate(zip(self.keys, self.records, strict=True))
            if k is not None and i not in dup
        ]

    @property
    def any_held(self) -> bool:
        # Only dropped records have no key (duplicates keep theirs).
        return len(self.keys) > self.dropped


@dataclass(eq=False, slots=True)
class _Conv:
    key: str
    state: _State
    # The conversation's records by span id; a record whose span id another trace's
    # record already holds goes under (trace_id, span_id) instead. Span ids are unique
    # per trace and random, so that is rare, and keying every record by the pair cost a
    # 56-byte tuple per buffered span. Look up with `_find`; records are never removed
    # one by one (the dict is replaced whole), so a pair key exists only next to its
    # span-id key.
    records: dict[str | SpanKey, SpanRecord] = field(default_factory=dict)
    trace_only: bool = True
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
    tomb_until: float = 0.0
    # RETAINED only: the records packed (`packed.py`; `records`, `turn_records`, `roots`
    # and `first_turn` are emptied meanwhile) and how many they are.
    packed: bytes | None = None
    packed_n: int = 0
    # Set while the buffer holds only GenAI log events: the latest time to wait for
    # their spans. Cleared by any arrival (re-established when the deadline finds the
    # buffer still without spans).
    events_wait: float | None = None
    has_events: bool = False  # holds GenAI log events (content not on the spans)
    events_query: str | None = None  # first query found through them (kept once found)


class Assembler:
    def __init__(
        self,
        config: AssemblyConfig,
        instruments: CollectorInstruments,
        *,
        clock: Clock = time.time,
        end_grace_s: float = 5.0,
        late_settle_s: float | None = None,
        tombstone_ttl_s: float | None = None,
        max_tombstones: int = 100_000,
        turn_target: TurnTarget | None = None,
    ) -> None:
        self.config = config
        self.instruments = instruments
        self.clock = clock
        self.end_grace_s = end_grace_s
        self.late_settle_s = late_settle_s if late_settle_s is not None else end_grace_s
        self.tombstone_ttl_s = (
            tombstone_ttl_s if tombstone_ttl_s is not None else config.idle_timeout_s
        )
        self.max_tombstones = max_tombstones
        self.turn_target = turn_target
        self._log = RateLimitedLog(log)  # per-span / per-eviction lines flood under overload
        self._convs: dict[str, _Conv] = {}
        self._open: OrderedDict[str, _Conv] = OrderedDict()  # LRU by activity
        self._retained: OrderedDict[str, _Conv] = OrderedDict()  # by closed_at
        self._tombs: OrderedDict[str, _Conv] = OrderedDict()  # by tomb_until
        self._trace_conv: dict[str, str] = {}
        # conversation -> the traces linked to it (few, each linked once: a list, ~150
        # bytes less per conversation than a set).
        self._conv_traces: dict[str, list[str]] = {}
        self._heap: list[tuple[float, int, _Conv]] = []
        self._seq = 0
        self._ready: deque[Completed] = deque()
        self._given_up: list[str] = []  # keys of event buffers dropped (`take_given_up`)
        # Open buffers holding only GenAI log events, oldest first, and their events.
        self._orphans: OrderedDict[str, _Conv] = OrderedDict()
        self._orphan_events = 0
        self._held = 0  # records held in open + retained conversations
        self._open_spans = 0
        # Instrument updates not yet reported: one `add` per instrument at the end of each
        # public call instead of one per span or conversation (an OTel SDK `add` costs
        # ~5 us; per conversation opened and completed that was ~15 us).
        self._gauge_delta = 0  # buffered_spans
        self._retained_delta = 0  # retained_spans
        self._open_delta = 0  # open_conversations
        self._completed: dict[str, int] = {}  # conversations_completed by reason
        self._revisions = 0
        # Both gauges exist from the start (at 0): batched deltas that net to zero would
        # otherwise leave them absent, and an absent series reads as "no data".
        self.instruments.buffered_spans.add(0)
        self.instruments.retained_spans.add(0)
        self.instruments.open_conversations.add(0)

    def _flush_gauge(self) -> None:
        """Report the instrument updates accumulated since the last flush."""
        if self._gauge_delta:
            self.instruments.buffered_spans.add(self._gauge_delta)
            self._gauge_delta = 0
        if self._retained_delta:
            self.instruments.retained_spans.add(self._retained_delta)
            self._retained_delta = 0
        if self._open_delta:
            self.instruments.open_conversations.add(self._open_delta)
            self._open_delta = 0
        if self._completed:
            for reason, n in self._completed.items():
                self.instruments.conversations_completed.add(n, {"reason": reason})
            self._completed.clear()
        if self._revisions:
            self.instruments.revisions.add(self._revisions)
            self._revisions = 0

    # ------------------------------------------------------------------ introspection

    @property
    def open_count(self) -> int:
        return len(self._open)

    @property
    def conversation_count(self) -> int:
        """Open conversations that hold spans: what `max_open_conversations` bounds
        (event-only buffers have their own budget, `max_orphan_events`)."""
        return len(self._open) - len(self._orphans)

    @property
    def orphan_events(self) -> int:
        """GenAI log events held in buffers with no span yet."""
        return self._orphan_events

    def is_orphan(self, key: str) -> bool:
        return key in self._orphans

    @property
    def held_spans(self) -> int:
        return self._held

    @property
    def retained_spans(self) -> int:
        """Spans of evaluated conversations kept for late spans (packed)."""
        return self._held - self._open_spans

    @property
    def ready_count(self) -> int:
        return len(self._ready)

    def open_keys(self) -> list[str]:
        return list(self._open)

    def is_open(self, key: str) -> bool:
        return key in self._open

    def snapshot(self, key: str) -> tuple[tuple[SpanRecord, ...], int, bool] | None:
        """Records, pending revision and open-ness of a known conversation (for views)."""
        conv = self._convs.get(key)
        if conv is None or conv.state is _State.TOMBSTONE:
            return None
        if conv.packed is not None:
            return tuple(unpack_records(conv.packed)), conv.revision, False
        return tuple(conv.records.values()), conv.revision, conv.state is _State.OPEN

    def route(self, rec: SpanRecord) -> str:
        return rec.conversation_id or self._trace_conv.get(rec.trace_id) or rec.trace_id

    # ------------------------------------------------------------------ ingest

    def add(self, records: Iterable[SpanRecord]) -> AddOutcome:
        """Route, dedupe and buffer one batch; then check the touched conversations.

        One loop with `_insert` inlined (the ingest hot path: one pass per span, counters
        kept in locals); the caps are only consulted when the batch could cross one."""
        now = self.clock()
        batch = records if isinstance(records, list) else list(records)
        merged: list[tuple[str, str]] = []
        trace_conv = self._trace_conv
        tc_get = trace_conv.get
        # Pass 1: learn trace -> conversation links first, so spans without a conversation
        # id (e.g. a web framework's server span above the agent) join their conversation
        # whatever their position in the request.
        for rec in batch:
            cid = rec.conversation_id
            if cid is not None and tc_get(rec.trace_id) is None:
                self._link(rec.trace_id, cid, now, merged)
        # `route`, inlined.
        keys: list[str | None] = [
            r.conversation_id or tc_get(r.trace_id) or r.trace_id for r in batch
        ]
        n = len(batch)
        cfg = self.config
        orphans = self._orphans
        if (
            len(self._open) - len(orphans) + n > cfg.max_open_conversations
            or self._held + n > cfg.max_buffered_spans
        ):
            # GenAI log events do not open conversations: only span keys need room.
            conversation_keys = {
                k
                for k, r in zip(keys, batch, strict=True)
                if k is not None and r.kind is not _EVENT
            }
            self._make_room(n, {k for k in keys if k is not None}, now, conversation_keys)
        touched: dict[str, _Conv] = {}
        signalled: set[str] = set()
        duplicate_at: list[int] = []
        unpacked: list[_Conv] = []  # retained conversations a record had to look into
        late = dropped = inserted = 0
        convs = self._convs
        conv_get = convs.get
        max_spans = cfg.max_spans_per_conversation
        last: _Conv | None = None
        for i in range(n):
            rec = batch[i]
            key: str = keys[i]  # type: ignore[assignment]
            conv = conv_get(key)
            span_id = rec.span_id
            held: SpanRecord | None = None
            if conv is None:
                conv = self._new_open(key, now)
            else:
                state = conv.state
                if state is _TOMBSTONE:
                    keys[i] = None
                    self.instruments.late_spans.add(1)
                    self.instruments.spans_dropped.add(1, {"reason": "after_retention"})
                    late += 1
                    dropped += 1
                    self._log.info(
                        "after_retention",
                        "span %s/%s for closed conversation %s dropped",
                        *_ids(rec),
                        key,
                    )
                    continue
                if conv.packed is not None:
                    _unpack(conv)
                    unpacked.append(conv)
                # `_find`, inlined: the record under this span id, else the one under
                # (trace, span id) if another trace's record holds the span id.
                held = conv.records.get(span_id)
                if held is not None and (
                    held.trace_id == rec.trace_id or (rec.trace_id, span_id) in conv.records
                ):
                    duplicate_at.append(i)
                    continue
                if state is _RETAINED:
                    self.instruments.late_spans.add(1)
                    late += 1
                    self._reopen(conv, now)
            conv_records = conv.records
            if len(conv_records) >= max_spans:
                keys[i] = None
                conv.truncated = True
                dropped += 1
                self.instruments.spans_dropped.add(1, {"reason": "max_spans_per_conversation"})
                self._log.warning(
                    "max_spans_per_conversation",
                    "conversation %s exceeds %d spans; span %s/%s dropped",
                    key,
                    max_spans,
                    *_ids(rec),
                )
                continue
            # `_insert`, inlined; the conversation is OPEN here (new, open or re-opened).
            conv_records[span_id if held is None else (rec.trace_id, span_id)] = rec
            inserted += 1
            if orphans or rec.kind is _EVENT:
                self._track_orphan(conv, rec.kind)
            if rec.conversation_id is not None:
                conv.trace_only = False
            if rec.reference_id and conv.reference_id is None:
                conv.reference_id = rec.reference_id
            kind = rec.kind
            parent = rec.parent_span_id
            if kind is _TURN:
                self._note_turn(conv, rec)
                signalled.add(key)
            elif kind is _END:
                self._note_end(conv, rec, now)
                signalled.add(key)
            elif kind is _EVENT:
                # May carry the first query the reference-turns rule waits for.
                conv.has_events = True
                signalled.add(key)
            if kind is not _END:
                if parent is None:
                    conv.roots[rec.trace_id] = rec
                    conv.root_seen_at = now
                    signalled.add(key)
                else:
                    conv.roots.setdefault(rec.trace_id, None)
            if conv.missing and (rec.trace_id, span_id) in conv.missing:
                signalled.add(key)
            if conv is not last:
                touched[key] = conv
                last = conv
        self._held += inserted
        self._open_spans += inserted
        self._gauge_delta += inserted
        for conv in unpacked:  # only duplicates came: still retained, packed again
            if conv.state is _RETAINED:
                _pack(conv)
        if self._orphan_events > cfg.max_orphan_events:
            self._trim_orphans()
        for key, conv in touched.items():
            if conv.state is not _OPEN or key not in self._open:  # completed or given up
                continue
            conv.events_wait = None
            conv.last_seen = now
            self._open.move_to_end(key)
            if key in signalled:
                self._check_progress(conv, now)
            if conv.state is _OPEN:
                self._schedule(conv)
        self._flush_gauge()
        return AddOutcome(
            batch, keys, len(duplicate_at), late, dropped, merged, tuple(duplicate_at)
        )

    def _link(self, trace_id: str, cid: str, now: float, merged: list[tuple[str, str]]) -> None:
        self._trace_conv[trace_id] = cid
        self._conv_traces.setdefault(cid, []).append(trace_id)
        orphan = self._convs.get(trace_id)
        if orphan is None or orphan.state is not _State.OPEN or not orphan.trace_only:
            return
        # Spans of this trace that arrived before any span naming the conversation.
        self._remove_open(orphan)
        del self._convs[trace_id]
        self._held -= len(orphan.records)
        target = self._convs.get(cid)
        if target is None:
            target = self._new_open(cid, now)
        elif target.state is _State.RETAINED:
            self.instruments.late_spans.add(len(orphan.records))
            self._reopen(target, now)
        elif target.state is _State.TOMBSTONE:
            n = len(orphan.records)
            self.instruments.late_spans.add(n)
            self.instruments.spans_dropped.add(n, {"reason": "after_retention"})
            self._log.info(
                "after_retention",
                "%d spans of trace %s for closed conversation %s dropped",
                n,
                trace_id,
                cid,
            )
            merged.append((trace_id, cid))
            return
        for rec in orphan.records.values():
            if _find(target.records, rec.trace_id, rec.span_id) is None:
                self._insert(target, rec, now)
        target.first_seen = min(target.first_seen, orphan.first_seen)
        merged.append((trace_id, cid))

    def _track_orphan(self, conv: _Conv, kind: RecordKind) -> None:
        """Keep `_orphans` right after `conv` took one record of `kind`: a buffer whose
        first record is an event is an orphan until a span joins it."""
        if conv.state is not _OPEN:
            return
        orphans = self._orphans
        if kind is _EVENT:
            if conv.key in orphans:
                self._orphan_events += 1
            elif len(conv.records) == 1:
                orphans[conv.key] = conv
                self._orphan_events += 1
        elif conv.key in orphans:
            del orphans[conv.key]
            self._orphan_events -= len(conv.records) - 1

    def _trim_orphans(self) -> None:
        """Give up the oldest event-only buffers until the budget holds."""
        limit = self.config.max_orphan_events
        while self._orphan_events > limit and self._orphans:
            conv = next(iter(self._orphans.values()))
            self._give_up_events(conv, reason="orphan_budget")

    def _new_open(self, key: str, now: float) -> _Conv:
        conv = _Conv(key=key, state=_State.OPEN, first_seen=now, last_seen=now)
        self._convs[key] = conv
        self._open[key] = conv
        self._open_delta += 1
        return conv

    def _insert(self, conv: _Conv, rec: SpanRecord, now: float) -> None:
        """Buffer one record (merges and restores; `add` inlines the same steps)."""
        records = conv.records
        span_id = rec.span_id
        records[span_id if span_id not in records else (rec.trace_id, span_id)] = rec
        self._held += 1
        if conv.state is _State.OPEN:
            self._open_spans += 1
            self._gauge_delta += 1
        if rec.conversation_id is not None:
            conv.trace_only = False
        if rec.reference_id and conv.reference_id is None:
            conv.reference_id = rec.reference_id
        if rec.kind is RecordKind.TURN:
            self._note_turn(conv, rec)
        elif rec.kind is RecordKind.END:
            self._note_end(conv, rec, now)
        elif rec.kind is _EVENT:
            conv.has_events = True
        if self._orphans or rec.kind is _EVENT:
            self._track_orphan(conv, rec.kind)
        if rec.kind is not RecordKind.END:
            if rec.parent_span_id is None:
                conv.roots[rec.trace_id] = rec
                conv.root_seen_at = now
            else:
                conv.roots.setdefault(rec.trace_id, None)

    @staticmethod
    def _note_turn(conv: _Conv, rec: SpanRecord) -> None:
        conv.turn_records.append(rec)
        if rec.input_text is not None and (
            conv.first_turn is None or rec.start_ns < conv.first_turn.start_ns
        ):
            conv.first_turn = rec

    @staticmethod
    def _note_end(conv: _Conv, rec: SpanRecord, now: float) -> None:
        conv.end_at = now
        turns = rec.attributes.get(END_TURNS_ATTRIBUTE)
        if isinstance(turns, int | float | str):
            try:
                conv.end_turns = int(turns)
            except ValueError:
                log.warning("conversation %s: bad %s=%r", conv.key, END_TURNS_ATTRIBUTE, turns)

    def _reopen(self, conv: _Conv, now: float) -> None:
        """A late span for an evaluated conversation: assemble again as revision + 1."""
        _unpack(conv)
        if self._retained.pop(conv.key, None) is not None:
            self._retained_delta -= len(conv.records)
        conv.state = _State.OPEN
        conv.revision += 1
        conv.last_seen = now
        self._open[conv.key] = conv
        self._open_spans += len(conv.records)
        self._open_delta += 1
        self._gauge_delta += len(conv.records)

    def _remove_open(self, conv: _Conv) -> None:
        if self._orphans.pop(conv.key, None) is not None:
            self._orphan_events -= len(conv.records)
        if self._open.pop(conv.key, None) is not None:
            self._open_spans -= len(conv.records)
            self._open_delta -= 1
            self._gauge_delta -= len(conv.records)
        conv.heap_deadline = None
        conv.heap_seq = -1

    # ------------------------------------------------------------------ completion

    def _turns_done(self, conv: _Conv) -> tuple[int, bool]:
        """(top-level turns whose whole ancestry up to the trace root has arrived,
        whether every trace seen so far has its root). Cost: turns x depth, not spans."""
        missing: set[SpanKey] = set()
        count = 0
        traces_with_turns: set[str] = set()
        for rec in conv.turn_records:
            traces_with_turns.add(rec.trace_id)
            parent = rec.parent_span_id
            nested = False
            steps = 0
            while parent is not None and steps < MAX_DEPTH:
                node = _find(conv.records, rec.trace_id, parent)
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
        conv.missing = missing or None
        roots = conv.roots
        count += sum(1 for t, r in roots.items() if r is not None and t not in traces_with_turns)
        all_rooted = all(r is not None for r in roots.values())
        return count, all_rooted

    def _check_progress(self, conv: _Conv, now: float) -> None:
        if self.turn_target is not None:
            wanted = (conv.reference_id, self._first_query(conv))
            if conv.target_for != wanted:
                conv.target_for = wanted
                conv.target = self.turn_target(*wanted)
        if conv.revision > 0 or (conv.end_at is None and conv.target is None):
            # Re-opened by late spans: those trickle in over several requests, so a
            # re-evaluation waits for `late_settle_s` of quiet instead of firing per request.
            return
        done, all_rooted = self._turns_done(conv)
        if conv.end_at is not None and all_rooted and done >= (conv.end_turns or 0):
            self._complete(conv, Reason.END_SIGNAL)
        elif conv.target is not None and conv.target > 0 and done >= conv.target:
            self._complete(conv, Reason.REFERENCE_TURNS)

    @staticmethod
    def _first_query(conv: _Conv) -> str | None:
        """The first turn's query, for the reference-turns rule: a turn span's own input,
        else — when the content came as GenAI log events, joined only when the
        conversation is built — the query of the conversation built so far."""
        if conv.first_turn is not None:
            return conv.first_turn.input_text
        if not conv.has_events or conv.events_query is not None:
            return conv.events_query
        # Built once per check until found, then kept: no rebuild per arriving batch.
        turns = build_conversation(conv.key, conv.records.values(), complete=False).turns
        conv.events_query = turns[0].query if turns else None
        return conv.events_query

    def _deadline(self, conv: _Conv) -> tuple[float, str]:
        if conv.events_wait is not None:
            return conv.events_wait, Reason.NO_SPAN
        best = (conv.last_seen + self.config.idle_timeout_s, Reason.IDLE)
        if conv.revision > 0:
            return min(best, (conv.last_seen + self.late_settle_s, Reason.LATE_SPANS))
        if conv.end_at is not None:
            best = min(best, (conv.end_at + self.end_grace_s, Reason.END_SIGNAL))
        if conv.trace_only and conv.root_seen_at is not None:
            best = min(best, (conv.root_seen_at + self.config.trace_grace_s, Reason.TRACE_GRACE))
        return best

    def _schedule(self, conv: _Conv) -> None:
        deadline, _ = self._deadline(conv)
        if conv.heap_deadline is not None and conv.heap_deadline <= deadline:
            return  # the earlier entry will pop first and be re-checked then
        self._seq += 1
        conv.heap_seq = self._seq
        conv.heap_deadline = deadline
        heapq.heappush(self._heap, (deadline, self._seq, conv))

    def _complete(self, conv: _Conv, reason: str, *, complete: bool = True) -> None:
        now = self.clock()
        self._remove_open(conv)
        if conv.revision > 0:
            reason = Reason.LATE_SPANS if complete else reason
            self._revisions += 1
        else:
            self._completed[reason] = self._completed.get(reason, 0) + 1
        conv.closed_at = now
        self._ready.append(
            Completed(
                key=conv.key,
                records=tuple(conv.records.values()),
                reason=reason,
                revision=conv.revision,
                complete=complete and not conv.truncated and not conv.evicted,
                last_seen=conv.last_seen,
                closed_at=now,
            )
        )
        if conv.evicted:
            self._to_tombstone(conv, now)
        else:
            self._retain(conv)

    def _retain(self, conv: _Conv) -> None:
        conv.state = _State.RETAINED
        self._retained[conv.key] = conv
        self._retained_delta += _size(conv)
        _pack(conv)

    def shed_retained(self) -> int:
        """Free every evaluated conversation kept for late spans (memory pressure): the
        cheapest memory to give up, since nothing unevaluated is lost (their late spans
        will be dropped, counted `retention_evicted`). Returns the spans freed."""
        now = self.clock()
        freed = 0
        for conv in list(self._retained.values()):
            n = _size(conv)
            freed += n
            self.instruments.spans_dropped.add(n, {"reason": "retention_evicted"})
            self._to_tombstone(conv, now)
        if freed:
            self._log.warning(
                "memory_shed", "memory limit: freed %d spans of evaluated conversations", freed
            )
        return freed

    def _to_tombstone(self, conv: _Conv, now: float) -> None:
        if conv.has_events:
            _unpack(conv)  # `_count_unjoined` reads the records
        self._count_unjoined(conv)
        if self._retained.pop(conv.key, None) is not None:
            self._retained_delta -= _size(conv)
        if conv.state is _State.OPEN:
            self._remove_open(conv)
        self._held -= _size(conv)
        conv.packed = None
        conv.packed_n = 0
        conv.records = {}
        conv.turn_records = []
        conv.roots = {}
        conv.missing = None
        conv.state = _State.TOMBSTONE
        conv.tomb_until = now + self.tombstone_ttl_s
        self._tombs[conv.key] = conv
        while len(self._tombs) > self.max_tombstones:
            _, old = self._tombs.popitem(last=False)
            self._forget(old)

    def _count_unjoined(self, conv: _Conv) -> None:
        """GenAI log events (EVENT records) whose span never arrived are given up with
        the conversation's records: until then (idle timeout, then `retention_s`) a late
        span would still have joined them, so this is the first moment they are lost."""
        if not conv.has_events:
            return  # no EVENT records
        n = unjoined_events({(r.trace_id, r.span_id): r for r in conv.records.values()})
        if n:
            self.instruments.log_events_dropped.add(n, {"reason": "no_span"})
            log.info("conversation %s: %d GenAI log events never met their span", conv.key, n)

    def _give_up_events(self, conv: _Conv, reason: str = "no_span") -> None:
        """A buffer of GenAI log events whose spans never came (or, `orphan_budget`, did
        not come before the orphan budget needed room): dropped and counted. No
        tombstone: spans of its trace arriving later start afresh."""
        n = len(conv.records)
        self._remove_open(conv)
        self._held -= n
        self.instruments.log_events_dropped.add(n, {"reason": reason})
        self._log.info(
            f"events_dropped:{reason}",
            "%d GenAI log events of %s never met their spans: dropped (%s)",
            n,
            conv.key,
            reason,
        )
        self._forget(conv)
        self._given_up.append(conv.key)

    def take_given_up(self) -> list[str]:
        """Keys of the event-only buffers given up since the last call: a durable store
        deletes what it holds for them, or a restart would restore them."""
        out, self._given_up = self._given_up, []
        return out

    def _forget(self, conv: _Conv) -> None:
        if self._convs.get(conv.key) is conv:
            del self._convs[conv.key]
        for trace in self._conv_traces.pop(conv.key, ()):
            if self._trace_conv.get(trace) == conv.key:
                del self._trace_conv[trace]

    def poll(self, now: float | None = None) -> list[Completed]:
        """Everything that completed since the last poll, including deadlines due now;
        also ages retained conversations into tombstones and forgets old tombstones."""
        now = self.clock() if now is None else now
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, conv = heapq.heappop(heap)
            if conv.heap_seq != seq or conv.state is not _State.OPEN:
                continue  # superseded entry
            conv.heap_deadline = None
            deadline, reason = self._deadline(conv)
            if deadline > now:
                self._schedule(conv)
            elif not _events_only(conv):
                self._complete(conv, reason)
            elif reason is not Reason.NO_SPAN:
                conv.events_wait = conv.first_seen + self.config.retention_s
                if conv.events_wait > now:
                    self._schedule(conv)
                else:
                    self._give_up_events(conv)
            else:
                self._give_up_events(conv)
        retention = self.config.retention_s
        while self._retained:
            conv = next(iter(self._retained.values()))
            if conv.closed_at + retention > now:
                break
            self._to_tombstone(conv, now)
        while self._tombs:
            conv = next(iter(self._tombs.values()))
            if conv.tomb_until > now:
                break
            self._tombs.popitem(last=False)
            self._forget(conv)
        self._flush_gauge()
        out = list(self._ready)
        self._ready.clear()
        return out

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def flush_all(self, reason: str = Reason.SHUTDOWN) -> list[Completed]:
        """Complete every open conversation now (end of an offline input)."""
        for conv in list(self._open.values()):
            self._complete(conv, reason)
        self._flush_gauge()
        out = list(self._ready)
        self._ready.clear()
        return out

    # ------------------------------------------------------------------ limits

    def _make_room(
        self,
        incoming: int,
        keep: set[str],
        now: float,
        conversation_keys: set[str] | None = None,
    ) -> None:
        cfg = self.config
        opening = keep if conversation_keys is None else conversation_keys
        new_keys = sum(1 for k in opening if k not in self._convs)
        while self.conversation_count and (
            self.conversation_count + new_keys > cfg.max_open_conversations
        ):
            if not self._evict_lru(keep, "max_open_conversations"):
                break
        while self._held + incoming > cfg.max_buffered_spans:
            if self._orphans:  # events without spans go before any conversation does
                self._give_up_events(next(iter(self._orphans.values())), "orphan_budget")
                continue
            conv = next((c for k, c in self._retained.items() if k not in keep), None)
            if conv is not None:
                n = _size(conv)
                self.instruments.spans_dropped.add(n, {"reason": "retention_evicted"})
                self._log.warning(
                    "retention_evicted",
                    "memory cap: freed %d spans of evaluated conversation %s early "
                    "(late spans for it will be dropped)",
                    n,
                    conv.key,
                )
                self._to_tombstone(conv, now)
                continue
            if not self._evict_lru(keep, "max_buffered_spans"):
                self._log.warning(
                    "nothing_to_evict",
                    "memory cap: %d spans held + %d incoming > max_buffered_spans=%d and "
                    "nothing left to evict",
                    self._held,
                    incoming,
                    cfg.max_buffered_spans,
                )
                break

    def _evict_lru(self, keep: set[str], reason: str) -> bool:
        orphans = self._orphans
        victim = next(
            (c for k, c in self._open.items() if k not in keep and k not in orphans), None
        )
        if victim is None:
            return False
        self.instruments.conversations_evicted.add(1, {"reason": reason})
        self._log.warning(
            reason,
            "%s reached: conversation %s (%d spans) evaluated as incomplete",
            reason,
            victim.key,
            len(victim.records),
        )
        victim.evicted = True
        self._complete(victim, Reason.EVICTED, complete=False)
        return True

    # ------------------------------------------------------------------ recovery

    def restore(
        self,
        key: str,
        records: Iterable[SpanRecord],
        *,
        last_seen: float,
        revision: int = 0,
        closed_at: float | None = None,
    ) -> None:
        """Put back a conversation read from durable state: open (closed_at None) or
        retained after evaluation `revision`."""
        now = self.clock()
        conv = _Conv(key=key, state=_State.RETAINED, first_seen=last_seen, last_seen=last_seen)
        conv.revision = revision
        self._convs[key] = conv
        for rec in records:
            if rec.conversation_id is not None:
                self._trace_conv.setdefault(rec.trace_id, rec.conversation_id)
                linked = self._conv_traces.setdefault(key, [])
                if rec.trace_id not in linked:
                    linked.append(rec.trace_id)
            if _find(conv.records, rec.trace_id, rec.span_id) is None:
                self._insert(conv, rec, now)
        if closed_at is None:
            conv.state = _State.OPEN
            self._open[key] = conv
            if conv.records and _events_only(conv):
                self._orphans[key] = conv
                self._orphan_events += len(conv.records)
            self._open_spans += len(conv.records)
            self._open_delta += 1
            self._gauge_delta += len(conv.records)
            conv.last_seen = last_seen
            if conv.root_seen_at is not None:
                conv.root_seen_at = min(conv.root_seen_at, last_seen)
            if conv.end_at is not None:
                conv.end_at = min(conv.end_at, last_seen)
            self._check_progress(conv, now)
            if conv.state is _State.OPEN:
                self._schedule(conv)
        else:
            conv.closed_at = closed_at
            self._retain(conv)
        self._flush_gauge()


def _pack(conv: _Conv) -> None:
    """Hold a retained conversation's records packed (see the module docstring)."""
    if conv.packed is not None or not conv.records:
        return
    conv.packed_n = len(conv.records)
    conv.packed = pack_records(list(conv.records.values()))
    conv.records = {}
    conv.turn_records = []
    conv.roots = {}
    conv.first_turn = None
    conv.missing = None


def _unpack(conv: _Conv) -> None:
    """Put a packed conversation's records back as `Assembler._insert` had left them
    (without counting them again: they were held all along)."""
    packed = conv.packed
    if packed is None:
        return
    conv.packed = None
    conv.packed_n = 0
    records = conv.records
    roots = conv.roots
    for rec in unpack_records(packed):
        span_id = rec.span_id
        records[span_id if span_id not in records else (rec.trace_id, span_id)] = rec
        kind = rec.kind
        if kind is _TURN:
            Assembler._note_turn(conv, rec)
        if kind is not _END:
            if rec.parent_span_id is None:
                roots[rec.trace_id] = rec
            else:
                roots.setdefault(rec.trace_id, None)


def _size(conv: _Conv) -> int:
    """Records a conversation holds, packed or not."""
    return len(conv.records) + conv.packed_n


def _find(
    records: Mapping[str | SpanKey, SpanRecord], trace_id: str, span_id: str
) -> SpanRecord | None:
    """The record (trace_id, span_id) of a `_Conv.records`, or None."""
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


def _events_only(conv: _Conv) -> bool:
    return all(r.kind is _EVENT for r in conv.records.values())


def _ids(rec: SpanRecord) -> tuple[str, str]:
    return rec.trace_id, rec.span_id


def complete_all(
    records: Iterable[SpanRecord], instruments: CollectorInstruments
) -> list[Completed]:
    """Every conversation of a finite set of records, completed at end of input (offline
    use: `tracepass conversations`, `tracepass inspect`): unbounded caps, a frozen clock."""
    big = 2**62
    config = AssemblyConfig(
        max_open_conversations=big, max_buffered_spans=big, max_spans_per_conversation=big
    )
    asm = Assembler(config, instruments, clock=lambda: 0.0)
    asm.add(records)
    return asm.poll(0.0) + asm.flush_all(Reason.SHUTDOWN)
