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


def loads(text: Any) -> Any:
    """Decoded JSON if `text` is a JSON string, the value itself if it is already
    structured (an OTLP kvlist/array attribute), else `NOT_JSON`."""
    if not isinstance(text, str):
        return text if isinstance(text, dict | list) else _NOT_JSON
    if not text or text[0] not in '{["-0123456789tfn ':
        return _NOT_JSON
    try:
        if text[0] != " ":
            value, end = _scan_once(text, 0)
            if end == len(text) or not text[end:].strip(" \t\n\r"):
                return value
            return _NOT_JSON  # trailing data after the document
        return _decode(text)
    # StopIteration: the scanner found no value; RecursionError: hostile `[[[[…` nesting
    except (ValueError, StopIteration, RecursionError):
        return _NOT_JSON
