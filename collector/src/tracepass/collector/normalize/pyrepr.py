"""Safe parsing of Python `repr` text found in LangChain spans.

OpenLLMetry records LangChain tool input as `{"input_str": "{'city': 'Paris'}"}`: the
`str()` of the argument dict, i.e. Python literal syntax, not JSON. Only
`ast.literal_eval` is used (it evaluates literals and containers, never calls or names),
and only on bounded input so a hostile span cannot make the parser burn CPU or memory.
"""

from __future__ import annotations

import ast
from typing import Any

MAX_REPR_CHARS = 64 * 1024

_NOT_PARSED = object()


def literal(text: str, *, max_chars: int = MAX_REPR_CHARS) -> Any:
    """The Python literal in `text`, or the module sentinel `NOT_PARSED`."""
    if len(text) > max_chars:
        return _NOT_PARSED
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[(\"'-0123456789TFN":
        return _NOT_PARSED  # cheap pre-check: plain prose never reaches the parser
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOT_PARSED


NOT_PARSED: Any = _NOT_PARSED
