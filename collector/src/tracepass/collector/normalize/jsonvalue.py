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

_decode = json.JSONDecoder().decode


def loads(text: Any) -> Any:
    """Decoded JSON if `text` is a JSON string, the value itself if it is already
    structured (an OTLP kvlist/array attribute), else `NOT_JSON`."""
    if not isinstance(text, str):
        return text if isinstance(text, dict | list) else _NOT_JSON
    if not text or text[0] not in '{["-0123456789tfn ':
        return _NOT_JSON
    try:
        return _decode(text)
    except (ValueError, RecursionError):  # RecursionError: hostile `[[[[…` nesting
        return _NOT_JSON
