"""TEST ORACLE (`_rolling_columns_oracle.py`): `evaluator/stats/_rolling_state.py` at
f528d52, the version-2 encoder the product now only reads (`_rolling_legacy.py`).

The persisted form of `RollingAggregator` state (columnar, versioned).

Split from `rolling.py` because encoding is a job of its own: the aggregator only hands
out a `StateCapture` copy (cheap, under its lock) and reads back `Columns`; everything
about base64 columns, dictionary encoding, format versions and validating a state file
lives here.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
import numpy.typing as npt

from tracepass.evaluator.stats._rolling_config import RollingConfig

Key = tuple[str, str, str]  # (agent_name, agent_version, reference_set)
STATE_VERSION = 2
NOT_COUNTED = -1  # `ok` of an entry that is no trial (success None: error, unscored)


@dataclass(frozen=True, slots=True)
class StreamCapture:
    key: Key
    fed_uncounted: list[int]  # positions in the log columns below (tombstones included)
    times: array[float]
    tasks: list[str]
    ok: array[int]
    alive: bytearray
    convs: list[str | None]
    revs: array[int]
    tags: list[str]
    decay: tuple[float, float, float]
    decay_tasks: dict[str, list[float]]
    cusum: dict[str, float | int]


@dataclass(frozen=True, slots=True)
class StateCapture:
    """A copy of the aggregator taken by `RollingAggregator.capture()`; `to_state()`
    encodes it without touching the aggregator, so it may run in another thread.

    The state is columnar because a 24 h window can hold a million entries and the
    collector persists it every few seconds: numeric columns are little-endian arrays in
    base64, the few distinct reference ids and tags are dictionary-encoded, conversation
    ids are one string plus a length column. That keeps `json.dumps` / `json.loads` of
    the whole state to a handful of large strings instead of millions of small values
    (docs/statistics.md has the measured figures). Superseded entries are not kept.
    """

    config: RollingConfig
    last_now: float
    streams: tuple[StreamCapture, ...]

    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "config": self.config.to_dict(),
            "last_now": self.last_now if math.isfinite(self.last_now) else None,
            "streams": [self._stream(s) for s in self.streams],
        }

    def _stream(self, s: StreamCapture) -> dict[str, Any]:
        fed_uncounted = s.fed_uncounted
        # The numeric columns are flat arrays: numpy reads them in place.
        times = np.frombuffer(s.times, dtype=np.float64)
        ok = np.frombuffer(s.ok, dtype=np.int8)
        revs = np.frombuffer(s.revs, dtype=np.int64)
        tasks, convs, tags = s.tasks, s.convs, s.tags
        if 0 in s.alive:  # revision tombstones: superseded entries are not kept
            alive = s.alive
            mask = np.frombuffer(alive, dtype=np.uint8).astype(bool)
            times, ok, revs = times[mask], ok[mask], revs[mask]
            tasks = list(compress(tasks, alive))
            convs = list(compress(convs, alive))
            tags = list(compress(tags, alive))
            # Positions among the live entries: live entries before each position.
            live_before = np.cumsum(mask, dtype=np.int64) - 1
            fed_uncounted = live_before[np.asarray(fed_uncounted, dtype=np.int64)].tolist()
        task_values, task_codes = _dictionary(tasks)
        tag_values, tag_codes = _dictionary(tags)
        return {
            "key": list(s.key),
            "size": len(times),
            "t": _pack(times.astype("<f8", copy=False)),
            "ok": _pack(ok),
            "rev": _pack(revs.astype("<i8", copy=False)),
            "task_values": task_values,
            "task": _pack(task_codes),
            "tag_values": tag_values,
            "tag": _pack(tag_codes),
            "conv_len": _pack(
                np.fromiter((-1 if c is None else len(c) for c in convs), "<i4", len(convs))
            ),
            "conv": "".join([c for c in convs if c is not None]),
            "fed_uncounted": fed_uncounted,
            "decay": list(s.decay),
            "decay_tasks": s.decay_tasks,
            "cusum": s.cusum,
        }


@dataclass(frozen=True, slots=True)
class Columns:
    """A stream's log as read back: the aggregator's column types, and `fed` (the
    entry's conversation already fed the CUSUM) for building its conversation refs."""

    times: array[float]
    tasks: list[str]
    ok: array[int]
    convs: list[str | None]
    revs: array[int]
    tags: list[str]
    fed: npt.NDArray[np.bool_]


def _column(typecode: str, values: npt.NDArray[Any]) -> array[Any]:
    """A numpy column as the aggregator's flat `array` (native byte order)."""
    return array(typecode, values.astype(values.dtype.newbyteorder("="), copy=False).tobytes())


def _pack(arr: npt.NDArray[Any]) -> str:
    # base64 reads the array in place (no `tobytes()` copy of a million-entry column).
    return base64.b64encode(np.ascontiguousarray(arr).data.cast("B")).decode("ascii")


def _unpack(s: Mapping[str, Any], field: str, dtype: str, size: int) -> npt.NDArray[Any]:
    value = s[field]
    if not isinstance(value, str):
        raise ValueError(f"field {field!r}: expected a base64 string, got {type(value).__name__}")
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"field {field!r}: invalid base64 ({exc})") from exc
    arr = np.frombuffer(raw, dtype=dtype)
    if arr.size != size or arr.nbytes != len(raw):
        raise ValueError(f"field {field!r}: {len(raw)} bytes, expected {size} {dtype} values")
    return arr


def _dictionary(values: list[str]) -> tuple[list[str], npt.NDArray[np.uint32]]:
    """(distinct values in first-seen order, code per entry)."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), np.uint32, len(values))
    return list(index), codes.astype("<u4", copy=False)


def _undictionary(s: Mapping[str, Any], field: str, size: int) -> list[str]:
    values = s[f"{field}_values"]
    if not isinstance(values, list):
        raise ValueError(f"field '{field}_values': expected a list of strings")
    codes = _unpack(s, field, "<u4", size)
    if size and int(codes.max()) >= len(values):
        raise ValueError(f"field {field!r}: code {int(codes.max())} >= {len(values)} values")
    table = np.array([sys.intern(str(v)) for v in values] or [""], dtype=object)
    out: list[str] = table[codes].tolist()
    return out


def _check_times(times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Window cursors are found by bisection, so the log must be time-sorted (it is by
    construction: the clock never runs backwards)."""
    if not np.isfinite(times).all():
        raise ValueError("field 't': non-finite timestamp")
    if times.size > 1 and bool((np.diff(times) < 0).any()):
        raise ValueError("field 't': timestamps not in ascending order")
    return times


def decode_columns(s: Mapping[str, Any]) -> Columns:
    size = s["size"]
    if not (isinstance(size, int) and size >= 0):
        raise ValueError(f"field 'size': expected a count, got {size!r}")
    times = _check_times(_unpack(s, "t", "<f8", size))
    ok = _unpack(s, "ok", "i1", size)
    if size and (int(ok.min()) < NOT_COUNTED or int(ok.max()) > 1):
        raise ValueError("field 'ok': values must be -1 (not counted), 0 or 1")
    lengths = _unpack(s, "conv_len", "<i4", size)
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
        times=_column("d", times),
        tasks=_undictionary(s, "task", size),
        ok=_column("b", ok),
        convs=convs,
        revs=_column("q", _unpack(s, "rev", "<i8", size)),
        tags=_undictionary(s, "tag", size),
        fed=fed,
    )


def decode_columns_v1(s: Mapping[str, Any]) -> Columns:
    """Version 1: one JSON list per column (states written before the columnar format)."""
    size = len(s["t"])
    tags = s.get("tag") or [""] * size
    columns = (s["task"], s["ok"], s["conv"], s["rev"], s["fed"], tags)
    if any(len(col) != size for col in columns):
        raise ValueError("columns differ in length")
    ok = [int(o) for o in s["ok"]]
    if any(o not in (NOT_COUNTED, 0, 1) for o in ok):
        raise ValueError("field 'ok': values must be -1 (not counted), 0 or 1")
    return Columns(
        times=array("d", _check_times(np.asarray(s["t"], dtype=np.float64)).tolist()),
        tasks=[sys.intern(str(t)) for t in s["task"]],
        ok=array("b", ok),
        convs=list(s["conv"]),
        revs=array("q", [int(r) for r in s["rev"]]),
        tags=[sys.intern(str(t)) for t in tags],
        fed=np.array([bool(f) for f in s["fed"]], dtype=bool),
    )
