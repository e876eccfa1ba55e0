"""A compiled JSON parser for reference files and datasets, behind a duplicate-key check.

The precise reader (`json.loads` with a pure-Python `object_pairs_hook` that refuses a
repeated key, YAML's composer for the line) spends more time in the hook than in the
parse. orjson parses ≈ 2× faster but keeps the last of two equal keys silently, so its
answer is used only when it provably equals the precise reader's:

* **no key was dropped**: every key/value separator `:` outside a string is one object
  entry. orjson writes back what it kept with every `:` inside a string as itself, so
  the text and the re-encoded document hold the same number of `:` exactly when no
  entry was dropped — provided the text spells no colon as an escape (`\\u003a`), which
  would count once decoded and not before (such text takes the precise path);
* **the values are the same**: orjson reads integers beyond 64 bits as floats where
  `json` keeps them exact, so text with a run of 19 or more digits takes the precise
  path; everything orjson refuses and `json` accepts (`NaN`, `Infinity`, lone surrogate
  escapes, numbers that overflow to infinity) also does, because a refusal is never
  reported from here.

Anything else (a refusal, a possible duplicate, nesting deeper than orjson re-encodes)
returns `MAY_DIFFER` and the caller runs the precise reader, which accepts or reports the error with its file and line as before.
Tested with hypothesis against the precise reader (tests/evaluator/test_fast_json.py).
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["MAY_DIFFER", "fast_loads"]

MAY_DIFFER = object()
"""Returned when the compiled parse cannot stand for the precise one."""

_DIGIT_OR_SPACE = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_DIGIT_RUN = b"0" * 19  # > 2**63 needs 19 digits; shorter runs fit in 64 bits
_ESCAPED_COLON = b"\\u003"  # \u003a / \u003A (and harmless \u0030-\u0039: precise path)


def fast_loads(text: str) -> Any:
    """The document `text` holds, or `MAY_DIFFER` when only the precise reader can say
    (orjson refused it, it may repeat a key, or its numbers or escapes need `json`)."""
    data = text.encode("utf-8", "surrogatepass")
    if _ESCAPED_COLON in data or _LONG_DIGIT_RUN in data.translate(_DIGIT_OR_SPACE):
        return MAY_DIFFER
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return MAY_DIFFER
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (254 levels)
        return MAY_DIFFER
    if encoded.count(b":") != data.count(b":"):
        return MAY_DIFFER  # an entry was dropped: a repeated key
    return value
