"""The persisted form of the bucketed rolling windows (format version 3).

Split from `rolling.py` because encoding is a job of its own: the aggregator hands out
a `StateCapture` copy (cheap, under its caller's lock) and reads back what `decode_*`
return; base64 columns, dictionary encoding and validating a state file live here
(earlier formats: `_rolling_legacy.py`).

Per key: its buckets (bucket numbers, cells per bucket, and per cell the task, n and
c), decayed counts and CUSUM. Once: the conversation index's live rows within the
revision horizon (96-bit hashes, times, revisions, key, task, tag, outcome, CUSUM flag). Its
size depends on keys x buckets x tasks and on the conversations of one revision
horizon, not on the longest window's traffic.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracepass.evaluator.stats._rolling_buckets import Bucket
from tracepass.evaluator.stats._rolling_columns import (
    check_times,
    dictionary,
    pack,
    undictionary,
    unpack,
)
from tracepass.evaluator.stats._rolling_config import RollingConfig
from tracepass.evaluator.stats._rolling_index import IndexColumns
from tracepass.evaluator.stats._rolling_legacy import NOT_COUNTED

__all__ = [
    "STATE_VERSION",
    "BucketCapture",
    "StateCapture",
    "decode_buckets",
    "decode_index",
]

STATE_VERSION = 3
Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class BucketCapture:
    """One key's buckets as (number, cells) with cells (task, n, c), n > 0."""

    key: Key
    numbers: list[int]
    cells: list[list[tuple[str, int, int]]]
    decay: tuple[float, float, float]
    decay_tasks: dict[str, list[float]]
    cusum: dict[str, float | int]


@dataclass(frozen=True, slots=True)
class StateCapture:
    """A copy of the aggregator taken by `RollingAggregator.capture()`; `to_state()`
    encodes it without touching the aggregator, so it may run in another thread."""

    config: RollingConfig
    last_now: float
    streams: tuple[BucketCapture, ...]
    index: IndexColumns

    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "config": self.config.to_dict(),
            "last_now": self.last_now if math.isfinite(self.last_now) else None,
            "streams": [_stream(s) for s in self.streams],
            "index": _index(self.index),
        }


def _stream(s: BucketCapture) -> dict[str, Any]:
    flat = [cell for cells in s.cells for cell in cells]
    task_values, task_codes = dictionary([t for t, _, _ in flat])
    return {
        "key": list(s.key),
        "buckets": len(s.numbers),
        "bucket": pack(np.asarray(s.numbers, dtype=np.int64), "<i8"),
        "cells_per_bucket": pack(np.asarray([len(c) for c in s.cells], dtype=np.int64), "<u4"),
        "cells": len(flat),
        "task_values": task_values,
        "task": pack(task_codes),
        "n": pack(np.asarray([n for _, n, _ in flat], dtype=np.int64), "<i8"),
        "c": pack(np.asarray([c for _, _, c in flat], dtype=np.int64), "<i8"),
        "decay": list(s.decay),
        "decay_tasks": s.decay_tasks,
        "cusum": s.cusum,
    }


def _index(ix: IndexColumns) -> dict[str, Any]:
    task_values, task_codes = dictionary(ix.tasks)
    tag_values, tag_codes = dictionary(ix.tags)
    return {
        "size": len(ix.times),
        "h1": pack(np.frombuffer(ix.h1, np.uint64), "<u8"),
        "h2": pack(np.frombuffer(ix.h2, np.uint32), "<u4"),
        "t": pack(np.frombuffer(ix.times, np.float64), "<f8"),
        "rev": pack(np.frombuffer(ix.revs, np.int64), "<i8"),
        "stream": pack(np.frombuffer(ix.streams, np.uint32), "<u4"),
        "ok": pack(np.frombuffer(ix.ok, np.int8)),
        "fed": pack(np.frombuffer(ix.fed, np.uint8)),
        "task_values": task_values,
        "task": pack(task_codes),
        "tag_values": tag_values,
        "tag": pack(tag_codes),
    }


def _count(s: Mapping[str, Any], field: str) -> int:
    value = s[field]
    if not (isinstance(value, int) and value >= 0):
        raise ValueError(f"field {field!r}: expected a count, got {value!r}")
    return value


def decode_buckets(s: Mapping[str, Any]) -> tuple[list[int], list[Bucket]]:
    """One key's bucket numbers (ascending) and frozen buckets."""
    size = _count(s, "buckets")
    numbers = unpack(s, "bucket", "<i8", size)
    if size > 1 and bool((np.diff(numbers) <= 0).any()):
        raise ValueError("field 'bucket': bucket numbers not ascending")
    per = unpack(s, "cells_per_bucket", "<u4", size).astype(np.int64)
    cells = _count(s, "cells")
    if int(per.sum()) != cells:
        raise ValueError(f"field 'cells_per_bucket': sums to {int(per.sum())}, not {cells}")
    tasks = undictionary(s, "task", cells)
    n = unpack(s, "n", "<i8", cells)
    c = unpack(s, "c", "<i8", cells)
    if cells and (int(n.min()) < 1 or bool((c < 0).any()) or bool((c > n).any())):
        raise ValueError("fields 'n', 'c': need 0 <= c <= n and n >= 1 per cell")
    pairs = np.stack([n, c], axis=1).astype("=i8").reshape(-1)
    buckets: list[Bucket] = []
    start = 0
    for m in per.tolist():
        buckets.append(
            (
                tuple(tasks[start : start + m]),
                array("q", pairs[2 * start : 2 * (start + m)].tobytes()),
            )
        )
        start += m
    return numbers.tolist(), buckets


def decode_index(s: Mapping[str, Any], streams: int) -> IndexColumns:
    """The conversation index's rows; `streams`: how many keys the state has."""
    size = _count(s, "size")
    ok = unpack(s, "ok", "i1", size)
    if size and (int(ok.min()) < NOT_COUNTED or int(ok.max()) > 1):
        raise ValueError("field 'ok': values must be -1 (not counted), 0 or 1")
    stream = unpack(s, "stream", "<u4", size)
    if size and int(stream.max()) >= streams:
        raise ValueError(f"field 'stream': key {int(stream.max())} of {streams}")
    fed = unpack(s, "fed", "u1", size)
    if size and int(fed.max()) > 1:
        raise ValueError("field 'fed': values must be 0 or 1")
    return IndexColumns(
        h1=array("Q", unpack(s, "h1", "<u8", size).astype("=u8").tobytes()),
        h2=array("I", unpack(s, "h2", "<u4", size).astype("=u4").tobytes()),
        times=array("d", check_times(unpack(s, "t", "<f8", size)).astype("=f8").tobytes()),
        revs=array("q", unpack(s, "rev", "<i8", size).astype("=i8").tobytes()),
        streams=array("I", stream.astype("=u4").tobytes()),
        tasks=undictionary(s, "task", size),
        tags=undictionary(s, "tag", size),
        ok=array("b", ok.tobytes()),
        fed=bytearray(fed.tobytes()),
    )
