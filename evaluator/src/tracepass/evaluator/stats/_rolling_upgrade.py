"""Folding an earlier persisted state (one entry per conversation: versions 1 and 2)
into buckets and the conversation index, and re-bucketing when `bucket_s` changed.

An entry's outcome goes to the bucket of its time; its conversation goes into the index
when it is younger than the revision horizon. The upgraded windows are what the
bucketed aggregator would have built from the same evaluations (the per-entry windows
counted an entry until its exact age reached the window; the buckets round that edge:
docs/statistics.md, "Buckets").
"""

from __future__ import annotations

from array import array

import numpy as np

from tracepass.evaluator.stats._rolling_buckets import Bucket, bucket_items
from tracepass.evaluator.stats._rolling_columns import dictionary
from tracepass.evaluator.stats._rolling_index import IndexColumns, conversation_hash
from tracepass.evaluator.stats._rolling_legacy import NOT_COUNTED, Columns

__all__ = ["legacy_buckets", "legacy_index", "rebucket"]


def _frozen(cells: dict[int, dict[str, list[int]]]) -> tuple[list[int], list[Bucket]]:
    numbers = sorted(cells)
    buckets: list[Bucket] = []
    for number in numbers:
        flat = array("q")
        for n, c in cells[number].values():
            flat.extend((n, c))
        buckets.append((tuple(cells[number]), flat))
    return numbers, buckets


def legacy_buckets(cols: Columns, bucket_s: float) -> tuple[list[int], list[Bucket]]:
    """One key's counted entries as buckets (vectorized: a 24 h log held millions)."""
    ok = np.frombuffer(cols.ok, dtype=np.int8)
    counted = ok != NOT_COUNTED
    if not counted.any():
        return [], []
    values, codes = dictionary(cols.tasks)
    numbers = np.floor(np.frombuffer(cols.times, dtype=np.float64)[counted] / bucket_s)
    width = max(1, len(values))
    combined = numbers.astype(np.int64) * width + codes[counted].astype(np.int64)
    cells_of, inverse = np.unique(combined, return_inverse=True)
    n = np.bincount(inverse)
    c = np.bincount(inverse, weights=ok[counted].astype(np.float64)).astype(np.int64)
    cells: dict[int, dict[str, list[int]]] = {}
    for key, ni, ci in zip(cells_of.tolist(), n.tolist(), c.tolist(), strict=True):
        number, code = divmod(key, width)
        cells.setdefault(number, {})[values[code]] = [ni, ci]
    return _frozen(cells)


def legacy_index(streams: list[Columns], cutoff: float) -> IndexColumns:
    """The conversations of every key's log younger than `cutoff`, in time order (the
    stream number is the key's position in the state)."""
    rows: list[tuple[float, int, int, int, str, str, int, int]] = []
    for number, cols in enumerate(streams):
        for i, t in enumerate(cols.times):
            cid = cols.convs[i]
            if cid is None or t <= cutoff:
                continue
            rows.append(
                (
                    t,
                    number,
                    i,
                    cols.revs[i],
                    cols.tasks[i],
                    cols.tags[i],
                    cols.ok[i],
                    int(cols.fed[i]),
                )
            )
    rows.sort(key=lambda r: (r[0], r[1], r[2]))  # the order they were added in
    hashes = [conversation_hash(str(streams[r[1]].convs[r[2]])) for r in rows]
    return IndexColumns(
        h1=array("Q", [h[0] for h in hashes]),
        h2=array("I", [h[1] for h in hashes]),
        times=array("d", [r[0] for r in rows]),
        revs=array("q", [r[3] for r in rows]),
        streams=array("I", [r[1] for r in rows]),
        tasks=[r[4] for r in rows],
        tags=[r[5] for r in rows],
        ok=array("b", [r[6] for r in rows]),
        fed=bytearray(r[7] for r in rows),
    )


def rebucket(
    numbers: list[int], buckets: list[Bucket], saved_s: float, bucket_s: float
) -> tuple[list[int], list[Bucket]]:
    """Buckets of `saved_s` seconds as buckets of `bucket_s`: each saved bucket's
    counts go to the new bucket holding its start."""
    cells: dict[int, dict[str, list[int]]] = {}
    for number, b in zip(numbers, buckets, strict=True):
        target = cells.setdefault(int(np.floor(number * saved_s / bucket_s)), {})
        for task, n, c in bucket_items(b):
            cell = target.setdefault(task, [0, 0])
            cell[0] += n
            cell[1] += c
    return _frozen(cells)
