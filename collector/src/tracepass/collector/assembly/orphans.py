"""Open buffers holding nothing but GenAI log events ("orphans"), and their budget.

GenAI events received as log records (EVENT records) travel separately from their
spans. A buffer holding nothing but events is not a conversation yet: when its idle
deadline comes it keeps waiting for its spans (so a span naming the conversation still
merges it), up to `retention_s` after it opened; then its events are given up and
counted (`tracepass_log_events_dropped{reason="no_span"}`).

Orphans have a budget of their own, `max_orphan_events`: they do not count as open
conversations and are never made room for by evicting one; beyond the budget the oldest
are given up (`reason="orphan_budget"`). Before, one request of 100k orphan events
pushed open conversations to twice the cap and evicted all 30 legitimate ones as
incomplete.
"""

from __future__ import annotations

from collections import OrderedDict

from tracepass.collector.records import RecordKind

from .buffer import Buffer, State

__all__ = ["Orphans"]


class Orphans:
    def __init__(self) -> None:
        self.buffers: OrderedDict[str, Buffer] = OrderedDict()  # oldest first
        self.events = 0  # GenAI log events they hold

    def __len__(self) -> int:
        return len(self.buffers)

    def __bool__(self) -> bool:
        return bool(self.buffers)

    def __contains__(self, key: object) -> bool:
        return key in self.buffers

    def track(self, buf: Buffer, kind: RecordKind) -> None:
        """Keep the set right after `buf` took one record of `kind`: a buffer whose
        first record is an event is an orphan until a span joins it."""
        if buf.state is not State.OPEN:
            return
        buffers = self.buffers
        if kind is RecordKind.EVENT:
            if buf.key in buffers:
                self.events += 1
            elif len(buf.records) == 1:
                buffers[buf.key] = buf
                self.events += 1
        elif buf.key in buffers:
            del buffers[buf.key]
            self.events -= len(buf.records) - 1

    def add(self, buf: Buffer) -> None:
        """`buf` (restored) holds only events."""
        self.buffers[buf.key] = buf
        self.events += len(buf.records)

    def discard(self, buf: Buffer) -> None:
        if self.buffers.pop(buf.key, None) is not None:
            self.events -= len(buf.records)

    def oldest(self) -> Buffer:
        return next(iter(self.buffers.values()))
