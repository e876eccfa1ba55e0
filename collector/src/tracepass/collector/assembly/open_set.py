"""The open conversations: their buffers in least-recently-active order, the spans they
hold (what `max_buffered_spans` bounds), the event-only ones (`orphans.py`), and giving
up an event-only buffer whose spans never came."""

from __future__ import annotations

from collections import OrderedDict

from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.records import RecordKind, SpanRecord
from tracepass.evaluator.ratelimited_log import RateLimitedLog

from .buffer import Buffer, State, place
from .deadlines import DeadlineHeap
from .links import TraceLinks
from .orphans import Orphans

__all__ = ["OpenConversations"]


class OpenConversations:
    def __init__(
        self,
        buffers: dict[str, Buffer],
        links: TraceLinks,
        instruments: CollectorInstruments,
        log: RateLimitedLog,
    ) -> None:
        self.buffers = buffers  # the assembler's buffers by key (open + looked into)
        self.links = links
        self.instruments = instruments
        self._log = log
        self.lru: OrderedDict[str, Buffer] = OrderedDict()  # by activity
        self.orphans = Orphans()
        self.spans = 0  # records of open conversations
        self._given_up: list[str] = []  # keys of event buffers dropped (`take_given_up`)

    def __len__(self) -> int:
        return len(self.lru)

    def __contains__(self, key: object) -> bool:
        return key in self.lru

    @property
    def conversation_count(self) -> int:
        """Open conversations that hold spans: what `max_open_conversations` bounds
        (event-only buffers have their own budget, `max_orphan_events`)."""
        return len(self.lru) - len(self.orphans)

    def new(self, key: str, now: float) -> Buffer:
        buf = Buffer(key=key, state=State.OPEN, first_seen=now, last_seen=now)
        self.buffers[key] = buf
        self.lru[key] = buf
        return buf

    def insert(self, buf: Buffer, rec: SpanRecord, now: float) -> None:
        """Buffer one record in an open conversation (merges; `add` inlines it)."""
        place(buf, rec, now)
        self.spans += 1
        if self.orphans or rec.kind is RecordKind.EVENT:
            self.orphans.track(buf, rec.kind)

    def reopen(self, buf: Buffer, now: float) -> None:
        """A late span for an evaluated conversation: assemble again as revision + 1."""
        buf.state = State.OPEN
        buf.revision += 1
        buf.last_seen = now
        self.lru[buf.key] = buf
        self.spans += len(buf.records)

    def restore(self, buf: Buffer, last_seen: float) -> None:
        """Take back an open conversation read from durable state: its deadlines run
        from when its spans were last received, not from the restart."""
        self.buffers[buf.key] = buf
        self.lru[buf.key] = buf
        if buf.records and all(r.kind is RecordKind.EVENT for r in buf.records.values()):
            self.orphans.add(buf)
        self.spans += len(buf.records)
        if buf.root_seen_at is not None:
            buf.root_seen_at = min(buf.root_seen_at, last_seen)
        if buf.end_at is not None:
            buf.end_at = min(buf.end_at, last_seen)

    def remove(self, buf: Buffer) -> None:
        self.orphans.discard(buf)
        if self.lru.pop(buf.key, None) is not None:
            self.spans -= len(buf.records)
        DeadlineHeap.cancel(buf)

    def forget(self, buf: Buffer) -> None:
        if self.buffers.get(buf.key) is buf:
            del self.buffers[buf.key]

    def victim(self, keep: set[str]) -> Buffer | None:
        """The least recently active conversation not in `keep` (no event-only one)."""
        orphans = self.orphans
        return next((c for k, c in self.lru.items() if k not in keep and k not in orphans), None)

    def give_up_events(self, buf: Buffer, reason: str = "no_span") -> None:
        """A buffer of GenAI log events whose spans never came (or, `orphan_budget`, did
        not come before the orphan budget needed room): dropped and counted. No
        tombstone: spans of its trace arriving later start afresh."""
        n = len(buf.records)
        self.remove(buf)
        self.instruments.log_events_dropped.add(n, {"reason": reason})
        self._log.info(
            f"events_dropped:{reason}",
            "%d GenAI log events of %s never met their spans: dropped (%s)",
            n,
            buf.key,
            reason,
        )
        self.forget(buf)
        self.links.forget_open(buf.key)
        self._given_up.append(buf.key)

    def trim_orphans(self, limit: int) -> None:
        """Give up the oldest event-only buffers until the budget holds."""
        while self.orphans.events > limit and self.orphans:
            self.give_up_events(self.orphans.oldest(), reason="orphan_budget")

    def take_given_up(self) -> list[str]:
        out, self._given_up = self._given_up, []
        return out
