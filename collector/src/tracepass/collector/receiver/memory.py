"""A resident-memory cap for the collector (`limits.max_memory_mb`), modelled on the
OpenTelemetry Collector's memory_limiter.

Why RSS and not a count of buffered spans: overload fills memory in places no single
counter sees (request bodies being read, decoded protobufs, evaluation queues, SQLite
caches, allocator fragmentation); under a 3× overload the process reached 278 MB where
the sizing formula predicted 197 MB. The guard reads the process's RSS (Linux
`/proc/self/statm`, at most every `interval_s`, ~10 µs a read) and answers:

* below the soft limit (`soft_limit_ratio` × cap): admit;
* at or above it: refuse new export requests with retryable codes, before their bodies
  are read, so exporters back off and retry instead of losing data;
* at or above the cap: refuse as well and call `on_hard` (at most once a second), which
  sheds memory that costs nothing acknowledged to give up.

RSS alone is blind to what is about to arrive: 48 requests of 15.9 MB that stop just
before their end all pass a check made before their bodies are read, and took RSS to
925 MB (HTTP) and 1,399 MB (gRPC) against a 300 MB cap. So bytes in flight are
*reserved* (`Reservation`): a request reserves its declared size (HTTP
`Content-Length`; a gRPC call, whose message grpc buffers before the handler sees it,
the largest message it may send) before anything is read, grows the reservation as
decompressed bytes arrive, and releases it when answered or aborted. A reservation is
granted only while RSS + all reservations stay under the cap.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from typing import Literal

__all__ = ["MemoryGuard", "MemoryLevel", "Reservation", "current_rss_bytes"]

MemoryLevel = Literal["ok", "soft", "hard"]
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def current_rss_bytes() -> int:
    """Resident set size now (Linux); elsewhere the peak RSS, which errs on the safe side."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if os.uname().sysname == "Darwin" else peak * 1024


class MemoryGuard:
    def __init__(
        self,
        max_memory_mb: float,
        soft_limit_ratio: float = 0.8,
        *,
        read_rss: Callable[[], int] = current_rss_bytes,
        interval_s: float = 0.05,
        on_hard: Callable[[], None] | None = None,
    ) -> None:
        self.hard_bytes = int(max_memory_mb * 1024 * 1024)
        self.soft_bytes = int(self.hard_bytes * soft_limit_ratio)
        self.on_hard = on_hard
        self._read = read_rss
        self._interval = interval_s
        self._checked_at = -1e18
        self._rss = 0
        self._shed_at = -1e18
        self.sheds = 0
        self.reserved_bytes = 0  # bytes in flight (`Reservation`s not yet released)

    def level(self) -> MemoryLevel:
        now = time.monotonic()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self._rss = self._read()
        if self._rss >= self.hard_bytes:
            if self.on_hard is not None and now - self._shed_at >= 1.0:
                self._shed_at = now
                self.sheds += 1
                self.on_hard()
                self._checked_at = -1e18  # measure again after shedding
            return "hard"
        return "soft" if self._rss >= self.soft_bytes else "ok"

    def try_reserve(self, nbytes: int) -> bool:
        """Add `nbytes` to the bytes in flight if RSS + every reservation stays within
        the cap; False (nothing reserved) otherwise."""
        self.level()  # refresh the RSS reading (rate-limited)
        if self._rss + self.reserved_bytes + nbytes > self.hard_bytes:
            return False
        self.reserved_bytes += nbytes
        return True

    def unreserve(self, nbytes: int) -> None:
        self.reserved_bytes = max(0, self.reserved_bytes - nbytes)

    def describe_reservation(self, nbytes: int) -> str:
        mb = 1024 * 1024
        return (
            f"{nbytes / mb:.1f} MB more in flight would exceed the memory limit "
            f"({self._rss / mb:.0f} MB resident + {self.reserved_bytes / mb:.0f} MB in flight, "
            f"{self.hard_bytes / mb:.0f} MB limit)"
        )

    def describe(self) -> str:
        mb = 1024 * 1024
        return (
            f"memory {self._rss / mb:.0f} MB above the "
            f"{'limit' if self._rss >= self.hard_bytes else 'soft limit'} "
            f"({self.soft_bytes / mb:.0f} MB soft, {self.hard_bytes / mb:.0f} MB limit)"
        )


class Reservation:
    """The bytes one request holds in flight against a `MemoryGuard` (none: unbounded).
    `grow_to` never shrinks below what is held except through `shrink_to`; `release`
    returns everything and is idempotent (called on answer, abort and cancellation)."""

    def __init__(self, guard: MemoryGuard | None) -> None:
        self._guard = guard
        self.held = 0

    def grow_to(self, nbytes: int) -> bool:
        """Hold at least `nbytes`; False when the cap cannot cover the growth."""
        if self._guard is None or nbytes <= self.held:
            return True
        if not self._guard.try_reserve(nbytes - self.held):
            return False
        self.held = nbytes
        return True

    def shrink_to(self, nbytes: int) -> None:
        if self._guard is not None and nbytes < self.held:
            self._guard.unreserve(self.held - nbytes)
            self.held = nbytes

    def release(self) -> None:
        self.shrink_to(0)
