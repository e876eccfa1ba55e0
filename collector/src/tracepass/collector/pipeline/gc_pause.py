"""No cyclic garbage collection while a batch of conversations is evaluated and stored.

Why: evaluating a batch allocates tens of thousands of short-lived container objects
(the rebuilt conversation's models, the result's, the encoded row's), and while the
batch runs they are all alive. Every young collection that fires in the middle of it
scans them and frees nothing (measured on `tracepass serve`: ≈ 35–40 µs of GC per
conversation, issue 36), then moves them to the older generations, whose collections
scan them again. Holding collections off for the length of the batch and letting the
first allocation after it run the young collection means that collection finds the
batch's objects already freed by reference counting: what it scans is what survived.

Only reference cycles wait: a batch is bounded (the conversations one loop iteration
completed), and `MAX_PAUSED_ALLOCATIONS` ends a pause early when a batch allocates more
than that many container objects without freeing them. Process-wide, like any GC
setting, so only `tracepass serve` turns it on (`enable`); a library user (tests, the
demo, an embedding application) keeps its own GC policy.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MAX_PAUSED_ALLOCATIONS", "BatchGcPause", "batch_gc_pause"]

# Net container allocations after which a paused batch lets the collector run anyway
# (about 40 MB of small objects): the bound on what a pause can hold back.
MAX_PAUSED_ALLOCATIONS = 200_000


class BatchGcPause:
    """Nested pauses from concurrent batches on one event loop: collections resume when
    the last one ends (and only if this pause turned them off)."""

    def __init__(self, limit: int = MAX_PAUSED_ALLOCATIONS) -> None:
        self.enabled = False
        self.limit = limit
        self._depth = 0
        self._disabled_by_us = False

    def enable(self, on: bool = True) -> None:
        self.enabled = on

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold young collections off for the body (a no-op unless enabled)."""
        if not self.enabled:
            yield
            return
        if self._depth == 0 and gc.isenabled():
            gc.disable()
            self._disabled_by_us = True
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._disabled_by_us:
                self._disabled_by_us = False
                gc.enable()

    def check(self) -> None:
        """Between two conversations of a batch: resume collections if the pause has
        held back more than `limit` allocations (the next allocation collects)."""
        if self._disabled_by_us and gc.get_count()[0] > self.limit:
            self._disabled_by_us = False
            gc.enable()


# The one pause of the process (the GC is process-wide too).
batch_gc_pause = BatchGcPause()
