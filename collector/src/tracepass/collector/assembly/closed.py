"""The life of a conversation after its evaluation: retained for late spans, looked
into when one arrives (read back from disk, or unpacked), re-opened, then buried as a
tombstone and forgotten. `retention.py` holds the rows, `links.py` the trace links;
this module moves conversations between them and the in-memory buffers, and counts
what is given up."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter

from tracepass.collector.instruments import CollectorInstruments
from tracepass.collector.records import SpanRecord
from tracepass.evaluator.ratelimited_log import RateLimitedLog

from .buffer import Buffer, State, count_unjoined, find, place
from .links import CompactTrace, TraceLinks
from .retention import Retained, RetentionStore

__all__ = ["ClosedConversations"]

_conversation_id = attrgetter("conversation_id")


class ClosedConversations:
    def __init__(
        self,
        retention: RetentionStore,
        links: TraceLinks,
        buffers: dict[str, Buffer],
        instruments: CollectorInstruments,
        log: RateLimitedLog,
        *,
        tombstone_ttl_s: float,
    ) -> None:
        self.retention = retention
        self.links = links
        self.buffers = buffers  # the assembler's buffers by key (open + looked into)
        self.instruments = instruments
        self._log = log
        self.tombstone_ttl_s = tombstone_ttl_s
        self._thawed: list[Buffer] = []  # retained buffers in memory until `expire`

    def retain(self, buf: Buffer, records: list[SpanRecord], now: float) -> None:
        """Keep an evaluated conversation for late spans (`retention.py`), with the
        trace links a late span could need (`links.py`, `TraceLinks.close`)."""
        unrooted = {t for t, root in buf.roots.items() if root is None}
        self.retention.retain(
            buf.key,
            closed_at=now,
            revision=buf.revision,
            records=records,
            truncated=buf.truncated,
            unjoined=count_unjoined(records) if buf.has_events else 0,
            traces=self.links.close(buf.key, None if buf.by_trace else unrooted),
        )

    def snapshot(self, key: str) -> tuple[tuple[SpanRecord, ...], int, bool] | None:
        """Records, pending revision and open-ness of a known conversation, open or
        closed (a retained one's records only when they are in memory)."""
        buf = self.buffers.get(key)
        if buf is not None:
            return tuple(buf.records.values()), buf.revision, buf.state is State.OPEN
        entry = self.retention.peek(key)
        if entry is None:
            return None
        return tuple(entry.records or ()), entry.revision, False

    # ------------------------------------------------------------------ late spans

    def keys_to_read_back(
        self, records: Iterable[SpanRecord], route: Callable[[SpanRecord], str]
    ) -> list[str]:
        """Conversations `records` route to that are retained with their records on disk
        only (and not in memory already)."""
        retention = self.retention
        if retention.keep_records or not len(retention):
            return []
        batch = records if isinstance(records, list) else list(records)
        keys = set(map(_conversation_id, batch))
        if None in keys:
            keys.discard(None)
            keys.update(route(r) for r in batch if r.conversation_id is None)
        return [k for k in keys if k is not None and k not in self.buffers and k in retention]

    def read_back(self, key: str, records: Iterable[SpanRecord], now: float) -> bool:
        """Take a retained conversation's records, read back from disk, into memory for
        the late span about to be added. False: no longer retained (expired meanwhile),
        nothing found on disk (then it becomes a tombstone), or already in memory."""
        if key in self.buffers or not self.retention.on_disk(key):
            return False
        records = list(records)
        if not records:
            # Nothing acknowledged is on disk for it any more: discarded after its
            # evaluation (sampled out) or purged. Nothing to revise: its late spans are
            # dropped like any after retention, not evaluated as a fragment.
            entry = self.retention.take(key)
            assert entry is not None
            self.bury(key, entry.traces, entry.unjoined, now)
            return False
        entry = self.retention.peek(key)
        assert entry is not None
        self._thaw(entry, records)
        return True

    def look_into(self, key: str) -> Buffer | None:
        """The buffer of a closed conversation a record arrived for: a retained one taken
        into memory (packed records unpacked), or None for a tombstone."""
        entry = self.retention.peek(key)
        if entry is None:
            return None
        if entry.records is None:  # on disk, and the ingest stage did not read it back
            self._log.error(
                "not_read_back",
                "late span for %s: its evaluated spans were not read back from the state "
                "file; the revision holds only the late spans",
                key,
            )
        return self._thaw(entry, entry.records or ())

    def _thaw(self, entry: Retained, records: Iterable[SpanRecord]) -> Buffer:
        t = entry.closed_at
        buf = Buffer(entry.key, State.RETAINED, revision=entry.revision, first_seen=t, last_seen=t)
        buf.closed_at, buf.truncated = t, entry.truncated
        for rec in records:
            if find(buf.records, rec.trace_id, rec.span_id) is None:
                place(buf, rec, t)
        self.buffers[entry.key] = buf
        self._thawed.append(buf)
        return buf

    def reopen(self, key: str) -> None:
        """A late span re-opens `key`: it leaves retention, its links become open ones."""
        entry = self.retention.take(key)
        if entry is not None:
            self.links.reopen(key, entry.traces)

    def drop_late(self, n: int, key: str, what: str) -> None:
        """`n` spans for a conversation past retention (a tombstone): dropped, counted."""
        self.instruments.late_spans.add(n)
        self.instruments.spans_dropped.add(n, {"reason": "after_retention"})
        self._log.info(
            "after_retention", "%s for closed conversation %s dropped (%d spans)", what, key, n
        )

    # ------------------------------------------------------------------ giving up

    def bury(self, key: str, traces: tuple[CompactTrace, ...], unjoined: int, now: float) -> None:
        """A conversation's records are given up for good; a tombstone remains so that
        later spans are dropped (counted) instead of opening a fragment."""
        if unjoined:
            # GenAI log events whose span never arrived: until now (idle timeout, then
            # `retention_s`) a late span would still have joined them.
            self.instruments.log_events_dropped.add(unjoined, {"reason": "no_span"})
            self._log.info(
                "unjoined_events",
                "conversation %s: %d GenAI log events never met their span",
                key,
                unjoined,
            )
        buf = self.buffers.get(key)
        if buf is not None and buf.state is State.RETAINED:
            del self.buffers[key]
        traces = traces + self.links.close(key)
        for old, old_traces in self.retention.bury(key, now + self.tombstone_ttl_s, traces):
            self.forget(old, old_traces)

    def forget(self, key: str, traces: tuple[CompactTrace, ...]) -> None:
        self.links.forget_closed(key, traces)
        self.links.forget_open(key)

    def evict(self, key: str, now: float, *, log_each: bool = True) -> int:
        """Give up a retained conversation early (memory); returns its spans."""
        entry = self.retention.take(key)
        assert entry is not None
        self.instruments.spans_dropped.add(entry.spans, {"reason": "retention_evicted"})
        if log_each:
            self._log.warning(
                "retention_evicted",
                "memory cap: freed %d spans of evaluated conversation %s early "
                "(late spans for it will be dropped)",
                entry.spans,
                key,
            )
        self.bury(key, entry.traces, entry.unjoined, now)
        return entry.spans

    def shed(self, now: float) -> int:
        """Give up every retained conversation (memory pressure): the cheapest memory to
        give up, since nothing unevaluated is lost (their late spans will be dropped,
        counted `retention_evicted`). Returns the spans freed."""
        freed = sum(self.evict(k, now, log_each=False) for k in self.retention.retained_keys())
        if freed:
            self._log.warning(
                "memory_shed", "memory limit: freed %d spans of evaluated conversations", freed
            )
        return freed

    def expire(self, now: float, retention_s: float) -> None:
        """Drop buffers looked into only by retries (still retained), bury what is past
        retention and forget tombstones past their time."""
        for buf in self._thawed:
            if buf.state is State.RETAINED and self.buffers.get(buf.key) is buf:
                del self.buffers[buf.key]
        self._thawed.clear()
        for entry in self.retention.expired(now - retention_s):
            self.bury(entry.key, entry.traces, entry.unjoined, now)
        for key, traces in self.retention.expired_tombs(now):
            self.forget(key, traces)
