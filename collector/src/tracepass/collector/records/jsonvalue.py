"""Lenient JSON decoding of attribute values.

Instrumentations put JSON in string attributes (messages, tool arguments, chain state),
sometimes truncated by a size limit. Decoding failures are expected data, not errors:
callers get `NOT_JSON` and fall back to the raw text.
"""

from __future__ import annotations

import json
from typing import Any

_NOT_JSON = object()
NOT_JSON: Any = _NOT_JSON

_DECODER = json.JSONDecoder()
_decode = _DECODER.decode
# The C scanner behind `decode`, called directly: `decode` adds two regex whitespace
# matches and a Python frame per call, which cost more than scanning a small document.
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]
# For callers that inline the common case (text that is exactly one JSON object):
# `scan_once(text, 0)` → (value, end); raises one of `SCAN_ERRORS` on bad input.
scan_once = _scan_once
SCAN_ERRORS = (ValueError, StopIteration, RecursionError)


# Deeper JSON is kept as text: a conversation holding it could not be stored (pydantic's
# serializer stops at about 255 levels, so the result of a span carrying 300 nested
# arguments or tool schemas was lost to an evaluation error; found by the issue 21 fuzz).
MAX_JSON_DEPTH = 128


def _too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return False


def maybe_deep(text: str) -> bool:
    """Whether `text` has enough brackets to nest beyond `MAX_JSON_DEPTH` (two C-speed
    counts): fast paths that decode with `scan_once` leave such text to `loads`."""
    return text.count("{") + text.count("[") >= MAX_JSON_DEPTH


def _bounded(text: str, value: Any) -> Any:
    """`value`, or `NOT_JSON` when nested deeper than `MAX_JSON_DEPTH` (checked only when
    the text has that many brackets at all: the common case costs two counts)."""
    if maybe_deep(text) and _too_deep(value):
        return _NOT_JSON
    return value


def loads(text: Any) -> Any:
    """Decoded JSON if `text` is a JSON string, the value itself if it is already
    structured (an OTLP kvlist/array attribute), else `NOT_JSON` (also for JSON nested
    deeper than `MAX_JSON_DEPTH`)."""
    if not isinstance(text, str):
        return text if isinstance(text, dict | list) else _NOT_JSON
    if not text or text[0] not in '{["-0123456789tfn ':
        return _NOT_JSON
    try:
        if text[0] != " ":
            value, end = _scan_once(text, 0)
            if end == len(text) or not text[end:].strip(" \t\n\r"):
                return _bounded(text, value)
            return _NOT_JSON  # trailing data after the document
        return _bounded(text, _decode(text))
    # StopIteration: the scanner found no value; RecursionError: hostile `[[[[…` nesting
    except (ValueError, StopIteration, RecursionError):
        return _NOT_JSON
