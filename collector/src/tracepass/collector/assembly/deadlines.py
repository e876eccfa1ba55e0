"""Completion scheduling: the open conversations' deadlines in one lazy min-heap.

A span arrival only moves a conversation's `last_seen` forward (O(1)); its heap entry
is re-checked when it pops and pushed again if the deadline moved, and an earlier entry
is never replaced by a later one, so no tick ever scans all conversations. An entry is
current only while its sequence number is the buffer's `heap_seq`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from .buffer import Buffer, State

__all__ = ["DeadlineHeap"]


class DeadlineHeap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Buffer]] = []
        self._seq = 0

    def schedule(self, buf: Buffer, deadline: float) -> None:
        """Make sure `buf` pops no later than `deadline`."""
        if buf.heap_deadline is not None and buf.heap_deadline <= deadline:
            return  # the earlier entry will pop first and be re-checked then
        self._seq += 1
        buf.heap_seq = self._seq
        buf.heap_deadline = deadline
        heapq.heappush(self._heap, (deadline, self._seq, buf))

    @staticmethod
    def cancel(buf: Buffer) -> None:
        """Forget `buf`'s entry (it pops later and is skipped)."""
        buf.heap_deadline = None
        buf.heap_seq = -1

    def due(self, now: float) -> Iterator[Buffer]:
        """Open buffers whose current entry is due by `now` (each entry consumed)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, buf = heapq.heappop(heap)
            if buf.heap_seq != seq or buf.state is not State.OPEN:
                continue  # superseded entry
            buf.heap_deadline = None
            yield buf

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None
