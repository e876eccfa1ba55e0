"""Helpers the convention modules share.

Convention modules fill a `SpanRecord` that `normalize_request` has already built with
the fields every convention shares (ids, times, conversation, agent, status) and kind
OTHER: each module only knows its own attribute names, and no intermediate object is
built per span (the hot path makes one object per span: the record).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def as_str(value: Any) -> str | None:
    """Attribute value as a non-empty string (ids are sometimes sent as ints)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def first_str(attrs: dict[str, Any], keys: Iterable[str]) -> str | None:
    """The first of `keys` whose value reads as a string (`as_str`): where a convention
    takes one value from whichever of several names carries it."""
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            text = as_str(value)
            if text is not None:
                return text
    return None
