"""Finding JSON inside model or agent output, and comparing JSON values.

Used by `json_match`, `constraint` (format: json) and the LLM judge's non-structured
path. Output seldom is bare JSON: it comes fenced in markdown or wrapped in prose, so the
search tries, in order, the whole text, the text between the markers, then the first
position from which a JSON object (or array) decodes.
"""

from __future__ import annotations

import json
import math
from typing import Any

_decoder = json.JSONDecoder()


def between_markers(text: str, start: str, end: str) -> str | None:
    """The text between the first `start` marker and the next `end` marker after it."""
    i = text.find(start)
    if i < 0:
        return None
    i += len(start)
    j = text.find(end, i)
    if j < 0:
        return None
    return text[i:j]


def last_between_markers(text: str, start: str, end: str) -> str | None:
    """The text between the LAST `start` marker that has an `end` marker after it and
    that end marker (for verdicts: what a model says last is its conclusion)."""
    i = text.rfind(start)
    while i >= 0:
        j = text.find(end, i + len(start))
        if j >= 0:
            return text[i + len(start) : j]
        i = text.rfind(start, 0, i)
    return None


def last_json_object(text: str) -> tuple[bool, Any, str]:
    """(found, value, source text) for the JSON object that ends last in `text`: the
    decodable object starting at the rightmost `{` that is not nested in a later one."""
    i = text.rfind("{")
    best: tuple[int, int] | None = None
    while i >= 0:
        try:
            _, end = _decoder.raw_decode(text, i)
        except ValueError:
            pass
        else:
            if best is None or end >= best[1]:
                best = (i, end)  # an enclosing object that ends later (or as late) wins
        i = text.rfind("{", 0, i)
    if best is None:
        return False, None, ""
    source = text[best[0] : best[1]]
    return True, json.loads(source), source


def first_json(text: str, *, objects_only: bool = False) -> tuple[bool, Any]:
    """(found, value) for the first decodable JSON object/array at a `{` or `[`."""
    openers = "{" if objects_only else "{["
    for i, ch in enumerate(text):
        if ch in openers:
            try:
                value, _ = _decoder.raw_decode(text, i)
            except ValueError:
                continue
            return True, value
    return False, None


def find_json(
    text: str, markers: tuple[str, str] = ("```json", "```"), *, objects_only: bool = False
) -> tuple[bool, Any]:
    """(found, value): the whole text, else between markers, else the first JSON value."""
    found = _whole_json(text.strip(), objects_only)
    if found[0]:
        return found
    inner = between_markers(text, *markers)
    if inner is not None:
        found = _whole_json(inner, objects_only)
        if found[0]:
            return found
    return first_json(text, objects_only=objects_only)


def _whole_json(text: str, objects_only: bool) -> tuple[bool, Any]:
    """(found, value) when all of `text` is one JSON document (an object, with
    `objects_only`)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False, None
    if objects_only and not isinstance(value, dict):
        return False, None
    return True, value


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality with JSON's notion of types.

    1 == 1.0 (JSON has one number type), but 1 != "1" and True != 1 (Python's
    `True == 1` is an accident of bool subclassing int, not a JSON truth). Objects
    compare key by key regardless of order, arrays element by element in order.
    NaN equals NaN here so a document compares equal to itself.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return type(a) is type(b) and bool(a == b)
