"""`BoundedCache`: a memo bounded in entries AND in bytes, its evictions counted.

Why one helper: every memo whose keys come from a sender (OTLP/JSON key names, model
and provider names, agent versions) grew without bound in the third attack (issue 33:
unique 400 KB JSON keys took a collector from 113 to 730 MB, unique long model names
~1 MB per span). A count bound alone does not bound memory when the sender chooses the
size of each key, and a byte bound alone lets a flood of tiny keys cost per-entry
overhead without limit; so both, checked on every store, the oldest entries leaving
first. A value alone larger than the byte budget is not kept at all (`refused`).

Each cache has a `name`; `eviction_counts()` sums evictions (refusals included) by
name over the live caches, for the collector's
`tracepass_cache_evictions_total{cache}` (an observable counter read at scrape time:
the caches know nothing of metrics). Sizes are estimates (`approx_size`: Python's own
object sizes, one container level deep), cheap enough for a hot path.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["BoundedCache", "approx_size", "eviction_counts", "note_evictions"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_CONTAINERS = (tuple, list, set, frozenset)


def approx_size(obj: object) -> int:
    """Bytes `obj` holds, estimated: `sys.getsizeof` of it and, for a tuple, list, set,
    frozenset or dict, of what it holds one level down (strings are exact)."""
    size = sys.getsizeof(obj)
    if isinstance(obj, _CONTAINERS):
        size += sum(map(sys.getsizeof, obj))
    elif isinstance(obj, dict):
        size += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in obj.items())
    return size


def _entry_size(key: object, value: object) -> int:
    return approx_size(key) + approx_size(value)


_LIVE: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()
_GONE: dict[str, int] = {}  # evictions of caches no longer alive, by name
_LIVE_LOCK = threading.Lock()


def eviction_counts() -> dict[str, int]:
    """Evictions (and refusals) so far, summed by cache name, caches gone included."""
    with _LIVE_LOCK:
        out = dict(_GONE)
        for cache in list(_LIVE):
            out[cache.name] = out.get(cache.name, 0) + cache.evicted
    return out


def note_evictions(name: str, n: int = 1) -> None:
    """Count `n` evictions from a memo that is not a `BoundedCache` (a library's own,
    emptied when it grew past its bound) under `name`."""
    with _LIVE_LOCK:
        _GONE[name] = _GONE.get(name, 0) + n


def _retire(name: str, counter: list[int]) -> None:
    note_evictions(name, counter[0])


class BoundedCache(Generic[K, V]):
    """A map of at most `max_entries` entries and `max_bytes` estimated bytes (`size`
    of each key and value, `approx_size` by default). Beyond either, the least
    recently used entries go (`lru=True`), or the least recently stored (`lru=False`:
    a hit is then a single dictionary read, for hot paths). Thread-safe."""

    def __init__(
        self,
        name: str,
        *,
        max_entries: int,
        max_bytes: int,
        lru: bool = True,
        size: Callable[[K, V], int] = _entry_size,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("a bounded cache needs room for one entry")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lru = lru
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        # A list so the finalizer can read the final count without holding `self`.
        self._evicted = [0]
        with _LIVE_LOCK:
            _LIVE.add(self)
        weakref.finalize(self, _retire, name, self._evicted)

    @property
    def evicted(self) -> int:
        """Entries dropped to stay within the bounds, plus values refused as too big."""
        return self._evicted[0]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        if found is None:
            return None
        if self._lru:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V) -> bool:
        """Store `value` (replacing any); False when it alone exceeds `max_bytes` (not
        kept, counted as evicted)."""
        size = self._size(key, value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                self._evicted[0] += 1
                return False
            self._entries[key] = (value, size)
            self.bytes += size
            while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, gone) = self._entries.popitem(last=False)
                self.bytes -= gone
                self._evicted[0] += 1
        return True

    def pop(self, key: K) -> V | None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is None:
                return None
            self.bytes -= old[1]
            return old[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
