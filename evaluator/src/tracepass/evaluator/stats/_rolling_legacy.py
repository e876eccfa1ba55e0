"""Readers of the rolling windows' earlier persisted formats, for the upgrade.

Versions 1 and 2 held one entry per evaluated conversation (version 1: a JSON list per
column; version 2: base64 columns). The bucketed aggregator (`rolling.py`) reads them
into `Columns` and folds the entries into its buckets and conversation index
(`RollingAggregator.from_state`), so a collector upgraded in place keeps its windows.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tracepass.evaluator.stats._rolling_columns import check_times, column, undictionary, unpack

__all__ = ["NOT_COUNTED", "Columns", "decode_columns", "decode_columns_v1"]

NOT_COUNTED = -1  # `ok` of an entry that is no trial (success None: error, unscored)


@dataclass(frozen=True, slots=True)
class Columns:
    """One key's log as read back; `fed`: the entry's conversation already fed the
    CUSUM."""

    times: array[float]
    tasks: list[str]
    ok: array[int]
    convs: list[str | None]
    revs: array[int]
    tags: list[str]
    fed: npt.NDArray[np.bool_]


def decode_columns(s: Mapping[str, Any]) -> Columns:
    """Version 2 (base64 columns)."""
    size = s["size"]
    if not (isinstance(size, int) and size >= 0):
        raise ValueError(f"field 'size': expected a count, got {size!r}")
    times = check_times(unpack(s, "t", "<f8", size))
    ok = unpack(s, "ok", "i1", size)
    if size and (int(ok.min()) < NOT_COUNTED or int(ok.max()) > 1):
        raise ValueError("field 'ok': values must be -1 (not counted), 0 or 1")
    lengths = unpack(s, "conv_len", "<i4", size)
    chars = s["conv"]
    if not isinstance(chars, str):
        raise ValueError("field 'conv': expected a string")
    ends = np.cumsum(np.maximum(lengths, 0)).tolist()
    if (ends[-1] if ends else 0) != len(chars):
        raise ValueError(f"field 'conv': {len(chars)} characters, lengths sum to a different total")
    convs: list[str | None] = [
        None if n < 0 else chars[e - n : e] for n, e in zip(lengths.tolist(), ends, strict=True)
    ]
    fed = ok != NOT_COUNTED
    for i in s["fed_uncounted"]:
        fed[i] = True
    return Columns(
        times=column("d", times),
        tasks=undictionary(s, "task", size),
        ok=column("b", ok),
        convs=convs,
        revs=column("q", unpack(s, "rev", "<i8", size)),
        tags=undictionary(s, "tag", size),
        fed=fed,
    )


def decode_columns_v1(s: Mapping[str, Any]) -> Columns:
    """Version 1: one JSON list per column."""
    size = len(s["t"])
    tags = s.get("tag") or [""] * size
    columns = (s["task"], s["ok"], s["conv"], s["rev"], s["fed"], tags)
    if any(len(col) != size for col in columns):
        raise ValueError("columns differ in length")
    ok = [int(o) for o in s["ok"]]
    if any(o not in (NOT_COUNTED, 0, 1) for o in ok):
        raise ValueError("field 'ok': values must be -1 (not counted), 0 or 1")
    return Columns(
        times=array("d", check_times(np.asarray(s["t"], dtype=np.float64)).tolist()),
        tasks=[sys.intern(str(t)) for t in s["task"]],
        ok=array("b", ok),
        convs=list(s["conv"]),
        revs=array("q", [int(r) for r in s["rev"]]),
        tags=[sys.intern(str(t)) for t in tags],
        fed=np.array([bool(f) for f in s["fed"]], dtype=bool),
    )
