"""Safe parsing of Python `repr` text found in LangChain spans.

OpenLLMetry records LangChain tool input as `{"input_str": "{'city': 'Paris'}"}`: the
`str()` of the argument dict, i.e. Python literal syntax, not JSON. Only
`ast.literal_eval` is used (it evaluates literals and containers, never calls or names),
and only on bounded input so a hostile span cannot make the parser burn CPU or memory.
"""

from __future__ import annotations

import ast
import io
import tokenize
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


# How a LangChain `ToolMessage` is printed: its `repr` (`ToolMessage(content='…', …)`) or
# pydantic's `str` (`content='…' name='…' tool_call_id='…'`); some instrumentations record
# that text as the tool's result instead of the content.
MESSAGE_REPR_PREFIXES = ("ToolMessage(content=", "content=")


def message_content(text: str, *, max_chars: int = MAX_REPR_CHARS) -> Any:
    """The string content of a printed ToolMessage (see `MESSAGE_REPR_PREFIXES`), or
    `NOT_PARSED` (not such text, content not a string literal, or too long)."""
    if len(text) > max_chars:
        return _NOT_PARSED
    for prefix in MESSAGE_REPR_PREFIXES:
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            break
    else:
        return _NOT_PARSED
    if rest[:1] not in ("'", '"'):
        return _NOT_PARSED
    try:
        token = next(tokenize.generate_tokens(io.StringIO(rest).readline))
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return _NOT_PARSED
    if token.type != tokenize.STRING:
        return _NOT_PARSED
    after = rest[len(token.string) :]
    if after and after[0] not in " ,)":  # the literal must end the field
        return _NOT_PARSED
    try:
        value = ast.literal_eval(token.string)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return _NOT_PARSED
    return value if isinstance(value, str) else _NOT_PARSED
