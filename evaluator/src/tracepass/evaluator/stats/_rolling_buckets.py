"""One key's outcomes in time buckets: what its sliding windows count, its decayed
window and its CUSUM.

A bucket holds, per task (reference id), the conversations n and successes c added
while the clock was in it (bucket number floor(t / bucket_s)). A sliding window of W
seconds counts the buckets j - ceil(W / bucket_s) < i <= j, j the current bucket, with
running totals (n, c, per task) updated as outcomes are added, revised away and as
buckets leave it; buckets no window holds are dropped. So a key costs buckets x tasks
seen per bucket, whatever the traffic (docs/statistics.md, "Buckets").

The bucket being filled is a dict task -> [n, c]; once the clock moves on it is frozen
into a tuple of tasks and one `array('q')` of (n, c) pairs (a revision may still
decrement it in place).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from tracepass.evaluator.stats.cusum import BernoulliCusum

__all__ = ["Bucket", "BucketStream", "Counts", "Decayed", "bucket_items"]

Key = tuple[str, str, str]
Frozen = tuple[tuple[str, ...], "array[int]"]
Bucket = dict[str, list[int]] | Frozen


@dataclass(slots=True)
class Counts:
    """Running totals of one window: n, c and per task [n_i, c_i] (a task leaves the
    dict when its n_i reaches 0)."""

    n: int = 0
    c: int = 0
    tasks: dict[str, list[int]] = field(default_factory=dict)

    def add(self, task: str, dn: int, dc: int) -> None:
        self.n += dn
        self.c += dc
        tc = self.tasks.get(task)
        if tc is None:
            tc = self.tasks[task] = [0, 0]
        tc[0] += dn
        tc[1] += dc
        if tc[0] <= 0:
            del self.tasks[task]


@dataclass(slots=True)
class Decayed:
    """Exponentially decayed counts, stored as of time `t` (decayed lazily)."""

    n: float = 0.0
    c: float = 0.0
    t: float = 0.0

    def advance(self, now: float, half_life: float) -> None:
        if now > self.t:
            f = math.exp2(-(now - self.t) / half_life)
            self.n *= f
            self.c *= f
            self.t = now

    def add(self, weight: float, ok: int) -> None:
        self.n = max(0.0, self.n + weight)
        self.c = min(self.n, max(0.0, self.c + weight * ok))


def bucket_items(b: Bucket) -> Iterator[tuple[str, int, int]]:
    """(task, n, c) of every cell of a bucket."""
    if isinstance(b, dict):
        for task, (n, c) in b.items():
            yield task, n, c
    else:
        tasks, counts = b
        for i, task in enumerate(tasks):
            yield task, counts[2 * i], counts[2 * i + 1]


def freeze(b: Bucket) -> Frozen:
    if not isinstance(b, dict):
        return b
    flat = array("q")
    for n, c in b.values():
        flat.append(n)
        flat.append(c)
    return tuple(b), flat


class BucketStream:
    """Buckets, window totals, decayed counts and CUSUM of one key. `number` names the
    key in the conversation index's rows."""

    __slots__ = (
        "base",
        "buckets",
        "counts",
        "cursors",
        "cusum",
        "decay",
        "decay_tasks",
        "key",
        "number",
        "numbers",
    )

    def __init__(self, key: Key, number: int, n_windows: int, cusum: BernoulliCusum) -> None:
        self.key = key
        self.number = number
        self.numbers: list[int] = []  # bucket numbers, ascending
        self.buckets: list[Bucket] = []
        self.base = 0  # absolute position of `buckets[0]`
        self.cursors = [0] * n_windows  # first bucket (absolute position) each window holds
        self.counts = [Counts() for _ in range(n_windows)]
        self.decay = Decayed()
        self.decay_tasks: dict[str, Decayed] = {}
        self.cusum = cusum

    @property
    def end(self) -> int:
        return self.base + len(self.buckets)

    def add(self, bucket: int, task: str, ok: int) -> None:
        """One countable outcome (ok 0/1) into bucket `bucket` (>= the last one) and
        every window."""
        numbers = self.numbers
        if numbers and numbers[-1] == bucket:
            b = self.buckets[-1]
            if not isinstance(b, dict):  # restored frozen: fill it again
                b = self.buckets[-1] = {t: [n, c] for t, n, c in bucket_items(b)}
        else:
            if self.buckets:
                self.buckets[-1] = freeze(self.buckets[-1])
            numbers.append(bucket)
            b = {}
            self.buckets.append(b)
        cell = b.get(task)
        if cell is None:
            b[task] = [1, ok]
        else:
            cell[0] += 1
            cell[1] += ok
        for counts in self.counts:
            counts.add(task, 1, ok)

    def remove(self, bucket: int, task: str, ok: int) -> None:
        """Undo one outcome added to bucket `bucket`, in the bucket (if still held) and
        in every window still holding it."""
        rel = bisect_left(self.numbers, bucket)
        if rel == len(self.numbers) or self.numbers[rel] != bucket:
            return  # already left every window
        b = self.buckets[rel]
        if isinstance(b, dict):
            cell = b[task]
            cell[0] -= 1
            cell[1] -= ok
        else:
            i = 2 * b[0].index(task)
            b[1][i] -= 1
            b[1][i + 1] -= ok
        position = self.base + rel
        for w, counts in enumerate(self.counts):
            if self.cursors[w] <= position:
                counts.add(task, -1, -ok)

    def expire(self, current: int, spans: list[int]) -> None:
        """Take out of each window the buckets before `current - spans[w] + 1`, then
        drop the buckets no window holds any more."""
        numbers, base = self.numbers, self.base
        end = base + len(numbers)
        for w, span in enumerate(spans):
            lower = current - span + 1
            cur = self.cursors[w]
            if cur >= end or numbers[cur - base] >= lower:
                continue  # the common case: nothing leaves
            counts = self.counts[w]
            while cur < end and numbers[cur - base] < lower:
                for task, n, c in bucket_items(self.buckets[cur - base]):
                    if n:
                        counts.add(task, -n, -c)
                cur += 1
            self.cursors[w] = cur
        drop = min(self.cursors, default=end) - base
        if drop:
            del numbers[:drop]
            del self.buckets[:drop]
            self.base += drop

    def load(
        self, numbers: list[int], buckets: list[Bucket], current: int, spans: list[int]
    ) -> None:
        """Restored buckets (ascending numbers): each window's totals summed from the
        buckets it holds at bucket `current`."""
        self.numbers, self.buckets, self.base = numbers, buckets, 0
        for w, span in enumerate(spans):
            cur = bisect_left(numbers, current - span + 1)
            self.cursors[w] = cur
            counts = self.counts[w] = Counts()
            for b in buckets[cur:]:
                for task, n, c in bucket_items(b):
                    if n:
                        counts.add(task, n, c)
        self.expire(current, spans)
