"""The memory caps: making room before a batch would cross `max_open_conversations` or
`max_buffered_spans`.

What gives, in order, each counted with a reason and logged (rate-limited): event-only
buffers (`orphan_budget`), then evaluated conversations whose records are held in memory
for late spans (`retention_evicted`; with `batch` durability they hold none, so none are
given up for memory), then the least recently active open conversations, evaluated as
incomplete (`tracepass_conversations_evicted`, `Conversation.complete=False`).
"""

from __future__ import annotations

from collections.abc import Callable

from tracepass.collector.config import AssemblyConfig
from tracepass.collector.instruments import CollectorInstruments
from tracepass.evaluator.ratelimited_log import RateLimitedLog

from .buffer import Buffer
from .closed import ClosedConversations
from .open_set import OpenConversations
from .retention import RetentionStore

__all__ = ["MemoryCaps"]


class MemoryCaps:
    def __init__(
        self,
        config: AssemblyConfig,
        open_set: OpenConversations,
        retention: RetentionStore,
        closed: ClosedConversations,
        instruments: CollectorInstruments,
        log: RateLimitedLog,
        evict: Callable[[Buffer], None],
    ) -> None:
        """`evict(buf)` hands an open conversation over for evaluation as incomplete."""
        self.config = config
        self.open = open_set
        self.retention = retention
        self.closed = closed
        self.instruments = instruments
        self._log = log
        self._evict = evict

    @property
    def held_spans(self) -> int:
        """Records in memory: open conversations' and retained ones' kept packed."""
        return self.open.spans + self.retention.packed_spans

    def make_room(
        self, incoming: int, keep: set[str], now: float, conversation_keys: set[str]
    ) -> None:
        """Room for `incoming` records opening `conversation_keys`; never gives up the
        conversations in `keep` (the batch's own)."""
        cfg = self.config
        open_set = self.open
        new_keys = sum(1 for k in conversation_keys if k not in open_set.buffers)
        while open_set.conversation_count and (
            open_set.conversation_count + new_keys > cfg.max_open_conversations
        ):
            if not self._evict_lru(keep, "max_open_conversations"):
                break
        while self.held_spans + incoming > cfg.max_buffered_spans:
            if open_set.orphans:  # events without spans go before any conversation does
                open_set.give_up_events(open_set.orphans.oldest(), "orphan_budget")
                continue
            key = self.retention.oldest(keep) if self.retention.packed_spans else None
            if key is not None:
                self.closed.evict(key, now)
                continue
            if not self._evict_lru(keep, "max_buffered_spans"):
                self._log.warning(
                    "nothing_to_evict",
                    "memory cap: %d spans held + %d incoming > max_buffered_spans=%d and "
                    "nothing left to evict",
                    self.held_spans,
                    incoming,
                    cfg.max_buffered_spans,
                )
                break

    def _evict_lru(self, keep: set[str], reason: str) -> bool:
        victim = self.open.victim(keep)
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
        self._evict(victim)
        return True
