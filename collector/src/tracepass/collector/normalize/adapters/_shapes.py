"""Shapes several framework adapters unwrap (not an adapter: modules starting with `_`
are not discovered)."""

from __future__ import annotations

from typing import Any

from tracepass.collector.normalize.registry import SOURCE_ADAPTER, note_source
from tracepass.collector.records import NOT_JSON, SpanRecord, coerce_result, loads, pyrepr


def decoded(value: Any) -> Any:
    """JSON text decoded, anything else unchanged."""
    if isinstance(value, str):
        parsed = loads(value)
        return value if parsed is NOT_JSON else parsed
    return value


def call_wrapper(value: Any, keys: frozenset[str]) -> dict[str, Any] | None:
    """The arguments inside a Python call wrapper `{"args": [...], "kwargs": {...}, …}`
    whose keys are within `keys` (and include `kwargs`): the keyword arguments, positional
    ones under `"_args"` (their parameter names are not recorded); None if not one."""
    if not isinstance(value, dict) or "kwargs" not in value or not value.keys() <= keys:
        return None
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict):
        return None
    out = dict(kwargs)
    args = value.get("args")
    if isinstance(args, list) and args:
        out["_args"] = args
    return out


def unwrap_call_arguments(rec: SpanRecord, keys: frozenset[str]) -> bool:
    """Replace a call wrapper (see `call_wrapper`) in the record's arguments by the
    arguments; whether it was one."""
    args = call_wrapper(rec.tool_arguments, keys)
    if args is None:
        return False
    set_arguments(rec, args)
    return True


def set_arguments(rec: SpanRecord, arguments: dict[str, Any]) -> None:
    rec.tool_arguments = arguments
    note_source(rec, "tool_arguments", SOURCE_ADAPTER)


def set_result(rec: SpanRecord, value: Any) -> None:
    """The plain result (JSON text decoded, as for any tool result)."""
    rec.tool_result = coerce_result(value)
    note_source(rec, "tool_result", SOURCE_ADAPTER)


def text_blocks(value: Any) -> str | None:
    """`[{"text": …}, …]` content blocks (Strands / Bedrock tool results, LlamaIndex
    ToolOutput blocks) as their joined text; None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    texts: list[str] = []
    for block in value:
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            return None
        texts.append(block["text"])
    return "\n".join(texts)


def string_literal_at(text: str, start: int) -> tuple[str, int] | None:
    """The Python string literal starting at `text[start]` (a quote) and the index after
    it; None when there is none. Used to read values out of `repr()` text, parsed by
    `ast.literal_eval` only (never evaluated)."""
    if start >= len(text) or text[start] not in "'\"":
        return None
    quote = text[start]
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == quote:
            parsed = pyrepr.literal(text[start : i + 1])
            return (parsed, i + 1) if isinstance(parsed, str) else None
        i += 1
    return None


def literal_after(text: str, marker: str, start: int = 0) -> tuple[str, int] | None:
    """The string literal right after the first `marker` at or after `start`."""
    at = text.find(marker, start)
    if at < 0:
        return None
    return string_literal_at(text, at + len(marker))
