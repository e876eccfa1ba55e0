"""Columns of the persisted rolling windows: little-endian arrays in base64, strings
dictionary-encoded. Shared by the current format (`_rolling_state.py`) and the readers
of earlier ones (`_rolling_legacy.py`): `json.dumps` / `json.loads` of a state then
handle a few large strings instead of millions of small values.
"""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["check_times", "column", "dictionary", "pack", "undictionary", "unpack"]


def column(typecode: str, values: npt.NDArray[Any]) -> array[Any]:
    """A numpy column as a flat `array` (native byte order)."""
    return array(typecode, values.astype(values.dtype.newbyteorder("="), copy=False).tobytes())


def pack(arr: npt.ArrayLike, dtype: str | None = None) -> str:
    """base64 of the array's bytes (read in place: no `tobytes()` copy)."""
    a = np.asarray(arr) if dtype is None else np.asarray(arr).astype(dtype, copy=False)
    return base64.b64encode(np.ascontiguousarray(a).data.cast("B")).decode("ascii")


def unpack(s: Mapping[str, Any], field: str, dtype: str, size: int) -> npt.NDArray[Any]:
    """The column `field` of `size` values; ValueError naming the field otherwise."""
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


def dictionary(values: list[str]) -> tuple[list[str], npt.NDArray[np.uint32]]:
    """(distinct values in first-seen order, code per entry)."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), np.uint32, len(values))
    return list(index), codes.astype("<u4", copy=False)


def undictionary(s: Mapping[str, Any], field: str, size: int) -> list[str]:
    """The strings of a dictionary-encoded column (`<field>_values` + `<field>` codes)."""
    values = s[f"{field}_values"]
    if not isinstance(values, list):
        raise ValueError(f"field '{field}_values': expected a list of strings")
    codes = unpack(s, field, "<u4", size)
    if size and int(codes.max()) >= len(values):
        raise ValueError(f"field {field!r}: code {int(codes.max())} >= {len(values)} values")
    table = np.array([sys.intern(str(v)) for v in values] or [""], dtype=object)
    out: list[str] = table[codes].tolist()
    return out


def check_times(times: npt.NDArray[np.float64], field: str = "t") -> npt.NDArray[np.float64]:
    """Finite and ascending (logs are time-sorted by construction: the clock never runs
    backwards), since readers bisect them."""
    if not np.isfinite(times).all():
        raise ValueError(f"field {field!r}: non-finite timestamp")
    if times.size > 1 and bool((np.diff(times) < 0).any()):
        raise ValueError(f"field {field!r}: timestamps not in ascending order")
    return times
