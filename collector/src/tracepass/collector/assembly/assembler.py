"""Buffer span records per conversation and decide when each conversation is complete.

`Assembler` routes, dedupes and buffers records and moves conversations through their
life: open → completed (handed to evaluation) → retained for late spans → tombstone →
forgotten. Each step's rules live with a collaborator of one job:

- `buffer.py` one conversation's records in memory (dedupe by span id);
- `links.py` trace -> conversation links (spans without a conversation id);
- `completion.py` turn segmentation and the completion rules, `deadlines.py` the
  deadlines' lazy min-heap (a span arrival only moves `last_seen`: no tick scans all);
- `retention.py` evaluated conversations kept for late spans, and tombstones, with no
  object per conversation; with `batch` durability their records are not in memory at
  all: the ingest stage reads them back from the state file's span buffer
  (`read_back`) before a late span is added;
- `open_set.py` the open conversations in LRU order and their spans, `orphans.py`
  buffers of GenAI log events whose spans have not come, and their budget;
- `closed.py` the moves after evaluation (retain, look into, re-open, bury, forget);
- `gauges.py` the batched instrument updates.

Memory is bounded by three caps. Whatever has to give is counted (with a reason) in
`CollectorInstruments` and logged: evaluated conversations held in memory for late spans
are shed first, then the least recently active open conversations are handed over as
incomplete (`Conversation.complete=False`). Time comes from an injected clock (seconds),
so every rule is testable without sleeping.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable

from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.ratelimited_log import RateLimitedLog

from .buffer import Buffer, State, count_unjoined, events_only, find, note_end, note_turn, restored
from .closed import ClosedConversations
from .completion import CompletionRules
from .deadlines import DeadlineHeap
from .gauges import AssemblyGauges
from .handover import AddOutcome, Clock, Completed, Reason, TurnTarget
from .limits import MemoryCaps
from .links import TraceLinks
from .open_set import OpenConversations
from .retention import RetentionStore

__all__ = ["Assembler", "complete_all"]

log = logging.getLogger(__name__)

_OPEN = State.OPEN
_RETAINED = State.RETAINED
_TURN = RecordKind.TURN
_END = RecordKind.END
_EVENT = RecordKind.EVENT


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
        records_on_disk: bool = False,
    ) -> None:
        """`records_on_disk`: the state file's span buffer keeps what was acknowledged
        for `retention_s` after evaluation (`batch` durability), so retained
        conversations keep no records in memory (else they are packed)."""
        self.config = config
        self.instruments = instruments
        self.clock = clock
        self.rules = CompletionRules(
            config,
            end_grace_s=end_grace_s,
            late_settle_s=late_settle_s if late_settle_s is not None else end_grace_s,
            turn_target=turn_target,
        )
        self.retention = RetentionStore(
            keep_records=not records_on_disk, max_tombstones=max_tombstones
        )
        self.links = TraceLinks()
        self._log = RateLimitedLog(log)  # per-span / per-eviction lines flood under overload
        self._convs: dict[str, Buffer] = {}  # open + retained ones looked into
        self.open = OpenConversations(self._convs, self.links, instruments, self._log)
        self.closed = ClosedConversations(
            self.retention,
            self.links,
            self._convs,
            instruments,
            self._log,
            tombstone_ttl_s=config.idle_timeout_s if tombstone_ttl_s is None else tombstone_ttl_s,
        )
        self.caps = MemoryCaps(
            config, self.open, self.retention, self.closed, instruments, self._log, self._evict
        )
        self._deadlines = DeadlineHeap()
        self._gauges = AssemblyGauges(instruments)
        self._ready: deque[Completed] = deque()

    def _flush(self) -> None:
        self._gauges.flush(self.open.spans, self.retention.spans, len(self.open))

    # ------------------------------------------------------------------ introspection

    @property
    def open_count(self) -> int:
        return len(self.open)

    @property
    def conversation_count(self) -> int:
        return self.open.conversation_count

    @property
    def orphan_events(self) -> int:  # GenAI log events held in buffers with no span yet
        return self.open.orphans.events

    def is_orphan(self, key: str) -> bool:
        return key in self.open.orphans

    @property
    def held_spans(self) -> int:
        """Records in memory (what `max_buffered_spans` bounds)."""
        return self.caps.held_spans

    @property
    def retained_spans(self) -> int:
        """Spans of evaluated conversations kept for late spans (on disk or packed)."""
        return self.retention.spans

    @property
    def ready_count(self) -> int:
        return len(self._ready)

    def open_keys(self) -> list[str]:
        return list(self.open.lru)

    def is_open(self, key: str) -> bool:
        return key in self.open

    def snapshot(self, key: str) -> tuple[tuple[SpanRecord, ...], int, bool] | None:
        """Records, pending revision and open-ness of a known conversation (views)."""
        return self.closed.snapshot(key)

    def route(self, rec: SpanRecord) -> str:
        return rec.conversation_id or self.links.route(rec.trace_id) or rec.trace_id

    def keys_to_read_back(self, records: Iterable[SpanRecord]) -> list[str]:
        """Conversations `records` route to that are retained with their records on disk
        (the ingest stage reads them back from the span buffer, `read_back`, first)."""
        return self.closed.keys_to_read_back(records, self.route)

    def read_back(self, key: str, records: Iterable[SpanRecord]) -> bool:
        """`ClosedConversations.read_back` (`closed.py`)."""
        return self.closed.read_back(key, records, self.clock())

    def take_given_up(self) -> list[str]:
        """Keys of the event-only buffers given up since the last call (`open_set.py`)."""
        return self.open.take_given_up()

    # ------------------------------------------------------------------ ingest

    def add(self, records: Iterable[SpanRecord]) -> AddOutcome:
        """Route, dedupe and buffer one batch; then check the touched conversations.

        One loop with `_insert` inlined (the ingest hot path: one pass per span, counters
        kept in locals); the caps are only consulted when the batch could cross one."""
        now = self.clock()
        batch = records if isinstance(records, list) else list(records)
        merged: list[tuple[str, str]] = []
        tc_get = self.links.open.get
        closed_route = self.links.closed_route
        # Pass 1: learn trace -> conversation links first, so spans without a conversation
        # id (e.g. a web framework's server span above the agent) join their conversation
        # whatever their position in the request.
        for rec in batch:
            cid = rec.conversation_id
            if cid is not None and tc_get(rec.trace_id) is None:
                self._link(rec.trace_id, cid, now, merged)
        # `route`, inlined.
        keys: list[str | None] = [
            r.conversation_id or tc_get(r.trace_id) or closed_route(r.trace_id) or r.trace_id
            for r in batch
        ]
        n = len(batch)
        cfg = self.config
        open_set = self.open
        orphans = open_set.orphans
        if (
            open_set.conversation_count + n > cfg.max_open_conversations
            or self.held_spans + n > cfg.max_buffered_spans
        ):
            # GenAI log events do not open conversations: only span keys need room.
            conversation_keys = {
                k
                for k, r in zip(keys, batch, strict=True)
                if k is not None and r.kind is not _EVENT
            }
            self.caps.make_room(n, {k for k in keys if k is not None}, now, conversation_keys)
        touched: dict[str, Buffer] = {}
        signalled: set[str] = set()
        duplicate_at: list[int] = []
        late = dropped = inserted = 0
        conv_get = self._convs.get
        retained = self.retention.index  # key -> row; tombstones: `tombs`
        tombs = self.retention.tombs.index
        orphan_buffers = orphans.buffers
        max_spans = cfg.max_spans_per_conversation
        last: Buffer | None = None
        for i in range(n):
            rec = batch[i]
            key: str = keys[i]  # type: ignore[assignment]
            conv = conv_get(key)
            span_id = rec.span_id
            held: SpanRecord | None = None
            if conv is None and (key in retained or key in tombs):
                conv = self.closed.look_into(key)
                if conv is None:  # a tombstone
                    keys[i] = None
                    late += 1
                    dropped += 1
                    self.closed.drop_late(1, key, f"span {rec.trace_id}/{span_id}")
                    continue
            if conv is None:
                conv = open_set.new(key, now)
            else:
                # `find`, inlined: the record under this span id, else the one under
                # (trace, span id) if another trace's record holds the span id.
                held = conv.records.get(span_id)
                if held is not None and (
                    held.trace_id == rec.trace_id or (rec.trace_id, span_id) in conv.records
                ):
                    duplicate_at.append(i)
                    continue
                if conv.state is _RETAINED:
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
                    rec.trace_id,
                    span_id,
                )
                continue
            # `_insert`, inlined; the conversation is OPEN here (new, open or re-opened).
            conv_records[span_id if held is None else (rec.trace_id, span_id)] = rec
            inserted += 1
            kind = rec.kind
            if orphan_buffers or kind is _EVENT:
                orphans.track(conv, kind)
            if rec.conversation_id is not None:
                conv.trace_only = False
            else:
                conv.by_trace = True
            if rec.reference_id and conv.reference_id is None:
                conv.reference_id = rec.reference_id
            if kind is _TURN:
                note_turn(conv, rec)
                signalled.add(key)
            elif kind is _END:
                note_end(conv, rec, now)
                signalled.add(key)
            elif kind is _EVENT:
                # May carry the first query the reference-turns rule waits for.
                conv.has_events = True
                signalled.add(key)
            if kind is not _END:
                if rec.parent_span_id is None:
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
        open_set.spans += inserted
        if orphans.events > cfg.max_orphan_events:
            open_set.trim_orphans(cfg.max_orphan_events)
        lru = open_set.lru
        for key, conv in touched.items():
            if conv.state is not _OPEN or key not in lru:  # completed or given up
                continue
            conv.events_wait = None
            conv.last_seen = now
            lru.move_to_end(key)
            if key in signalled:
                self._check_progress(conv)
            if conv.state is _OPEN:
                self._schedule(conv)
        self._flush()
        return AddOutcome(
            batch, keys, len(duplicate_at), late, dropped, merged, tuple(duplicate_at)
        )

    def _link(self, trace_id: str, cid: str, now: float, merged: list[tuple[str, str]]) -> None:
        self.links.link(trace_id, cid)
        orphan = self._convs.get(trace_id)
        if orphan is None or orphan.state is not _OPEN or not orphan.trace_only:
            return
        # Spans of this trace that arrived before any span naming the conversation.
        self.open.remove(orphan)
        del self._convs[trace_id]
        merged.append((trace_id, cid))
        n = len(orphan.records)
        target = self._convs.get(cid)
        if target is None and (cid in self.retention or self.retention.is_tomb(cid)):
            target = self.closed.look_into(cid)
            if target is None:  # a tombstone
                self.closed.drop_late(n, cid, f"trace {trace_id}")
                return
        if target is None:
            target = self.open.new(cid, now)
        elif target.state is _RETAINED:
            self.instruments.late_spans.add(n)
            self._reopen(target, now)
        for rec in orphan.records.values():
            if find(target.records, rec.trace_id, rec.span_id) is None:
                self.open.insert(target, rec, now)
        target.first_seen = min(target.first_seen, orphan.first_seen)

    def _reopen(self, buf: Buffer, now: float) -> None:
        self.closed.reopen(buf.key)
        self.open.reopen(buf, now)

    # ------------------------------------------------------------------ completion

    def _check_progress(self, buf: Buffer) -> None:
        reason = self.rules.complete_now(buf)
        if reason is not None:
            self._complete(buf, reason)

    def _schedule(self, buf: Buffer) -> None:
        self._deadlines.schedule(buf, self.rules.deadline(buf)[0])

    def _complete(self, buf: Buffer, reason: str, *, complete: bool = True) -> None:
        now = self.clock()
        self.open.remove(buf)
        if buf.revision > 0:
            reason = Reason.LATE_SPANS if complete else reason
            self._gauges.revisions += 1
        else:
            self._gauges.completed[reason] = self._gauges.completed.get(reason, 0) + 1
        buf.closed_at = now
        buf.state = _RETAINED  # closed: the buffer itself is dropped below
        records = tuple(buf.records.values())
        self._ready.append(
            Completed(
                key=buf.key,
                records=records,
                reason=reason,
                revision=buf.revision,
                complete=complete and not buf.truncated and not buf.evicted,
                last_seen=buf.last_seen,
                closed_at=now,
            )
        )
        self.open.forget(buf)
        if buf.evicted:
            self.closed.bury(buf.key, (), count_unjoined(records) if buf.has_events else 0, now)
        else:
            self.closed.retain(buf, list(records), now)

    def shed_retained(self) -> int:
        """Memory pressure: give up the retained conversations (`closed.py`, `shed`)."""
        freed = self.closed.shed(self.clock())
        self._flush()
        return freed

    def poll(self, now: float | None = None) -> list[Completed]:
        """Everything that completed since the last poll, including deadlines due now;
        also ages retained conversations into tombstones and forgets old tombstones."""
        now = self.clock() if now is None else now
        for buf in self._deadlines.due(now):
            deadline, reason = self.rules.deadline(buf)
            if deadline > now:
                self._schedule(buf)
            elif not events_only(buf):
                self._complete(buf, reason)
            elif reason is not Reason.NO_SPAN:
                buf.events_wait = buf.first_seen + self.config.retention_s
                if buf.events_wait > now:
                    self._schedule(buf)
                else:
                    self.open.give_up_events(buf)
            else:
                self.open.give_up_events(buf)
        self.closed.expire(now, self.config.retention_s)
        self._flush()
        out = list(self._ready)
        self._ready.clear()
        return out

    def next_deadline(self) -> float | None:
        return self._deadlines.next_deadline()

    def flush_all(self, reason: str = Reason.SHUTDOWN) -> list[Completed]:
        """Complete every open conversation now (end of an offline input)."""
        for buf in list(self.open.lru.values()):
            self._complete(buf, reason)
        self._flush()
        out = list(self._ready)
        self._ready.clear()
        return out

    def _evict(self, victim: Buffer) -> None:
        """Memory caps (`limits.py`): hand an open conversation over as incomplete."""
        victim.evicted = True
        self._complete(victim, Reason.EVICTED, complete=False)

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
        records = list(records)
        for rec in records:
            if rec.conversation_id is not None:
                self.links.add_trace(rec.trace_id, key)
        buf = restored(key, records, last_seen=last_seen, revision=revision, now=self.clock())
        if closed_at is not None:
            self.closed.retain(buf, list(buf.records.values()), closed_at)
        else:
            self.open.restore(buf, last_seen)
            self._check_progress(buf)
            if buf.state is _OPEN:
                self._schedule(buf)
        self._flush()


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
