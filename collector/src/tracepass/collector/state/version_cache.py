"""`VersionCache`: what the failure-mode indexes remember per (agent, version), bounded.

Agent versions come from span attributes: a sender that stamps a fresh version on each
conversation made every version's "signatures already stored" set live for good
(issue 33, ~2 KB per new version, never released). Those sets are caches of what the
tables hold (`failure_index.py` rebuilds one from its counters, `pg_failure_modes.py`
re-reads the database under its lock), so the least recently used are dropped past
`max_entries`; `evicted` counts them. Nothing is lost: a dropped version is read back
on its next result.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["VERSION_CACHE_ENTRIES", "VersionCache"]

VERSION_CACHE_ENTRIES = 1024
K = TypeVar("K")
V = TypeVar("V")


class VersionCache(Generic[K, V]):
    """A least-recently-used map of at most `max_entries` entries."""

    def __init__(self, max_entries: int = VERSION_CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self.evicted = 0
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self.evicted += 1
