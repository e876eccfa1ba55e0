"""Tool-call arguments and results into the shapes `ToolCall` promises.

`ToolCall.arguments` is always a mapping. Sources send JSON text, structured values,
LangChain's callback wrapper (`{"input_str": "<python repr>", "tags": …, "metadata": …}`
or `{"inputs": {...}, "kwargs": …}`) or text cut short by a size limit; whatever cannot
be read as an object is kept verbatim under `"_raw"` so nothing is lost.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from tracepass.collector.records import pyrepr
from tracepass.collector.records.jsonvalue import (
    NOT_JSON,
    SCAN_ERRORS,
    loads,
    maybe_deep,
    scan_once,
)

RAW_KEY = "_raw"

# Keys LangChain's callback handlers add around the real tool input.
_LC_WRAPPER_KEYS = frozenset(
    {"input_str", "inputs", "tags", "metadata", "kwargs", "run_id", "parent_run_id", "name"}
)
_LC_META_KEYS = frozenset({"tags", "metadata", "kwargs", "run_id", "parent_run_id"})


def _unwrap_langchain(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The real arguments inside a LangChain callback wrapper, or None if `obj` is not one."""
    if not obj.keys() <= _LC_WRAPPER_KEYS:
        return None
    # `{"inputs": …}` alone may be a tool whose one parameter is called `inputs`; only
    # treat it as the wrapper when a callback-only key is next to it.
    if "input_str" not in obj and ("inputs" not in obj or not obj.keys() & _LC_META_KEYS):
        return None
    inputs = obj.get("inputs")
    if isinstance(inputs, dict) and inputs:
        return inputs
    input_str = obj.get("input_str")
    if isinstance(input_str, str):
        parsed = loads(input_str)
        if parsed is NOT_JSON:
            parsed = pyrepr.literal(input_str)
        if isinstance(parsed, dict):
            return parsed
        return {RAW_KEY: input_str}
    if isinstance(inputs, str):
        return coerce_arguments(inputs)
    return None


def coerce_arguments(value: Any) -> dict[str, Any]:
    """Arguments as a mapping; unreadable or non-object input kept under `"_raw"`."""
    if value is None:
        return {}
    if value.__class__ is str:
        # Fast path, the usual case: text that is exactly one JSON object and no
        # LangChain wrapper (those always carry `input_str` or `inputs`, see
        # `_unwrap_langchain`); anything else takes the general path below.
        if value[:1] == "{" and not maybe_deep(value):  # deep text: `loads` bounds it
            try:
                parsed, end = scan_once(value, 0)
            except SCAN_ERRORS:
                end = -1
            if end == len(value) and "input_str" not in parsed and "inputs" not in parsed:
                return _shared_keys(parsed)
        return _coerce_text(value, loads(value))
    if isinstance(value, dict):
        unwrapped = _unwrap_langchain(value)
        return unwrapped if unwrapped is not None else value
    if isinstance(value, str):
        return _coerce_text(value, loads(value))
    return {RAW_KEY: value}


intern = sys.intern


def _shared_keys(parsed: dict[str, Any]) -> dict[str, Any]:
    """`parsed` with its top-level keys interned: argument and result names repeat in
    every call of a tool, and the JSON decoder makes a new str for each (~55 bytes per
    key per buffered span)."""
    return {intern(k): v for k, v in parsed.items()}


def _coerce_text(value: str, parsed: Any) -> dict[str, Any]:
    """`coerce_arguments` of text whose JSON decoding (or `NOT_JSON`) is `parsed`."""
    if isinstance(parsed, dict):
        unwrapped = _unwrap_langchain(parsed)
        return unwrapped if unwrapped is not None else parsed
    if parsed is NOT_JSON:
        parsed = pyrepr.literal(value)
        if isinstance(parsed, dict):
            return parsed
    return {RAW_KEY: value} if value else {}


class DeferredResult:
    """A tool result's JSON text, coerced when read (`SpanRecord.tool_result`); a bare
    str would be ambiguous there: `coerce_result` returns strings as results."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


# A flat JSON object of plain values, keys and strings without escapes or control
# characters, `": "`/`", "` or compact separators (what `json.dumps` writes for simple
# arguments): text it matches decodes to a non-empty dict, and since no string in it can
# hold a quote, a key `k` is present exactly when `"k":` occurs in the text.
_STRING = r'"[^"\\\x00-\x1f]*"'
_VALUE = rf"(?:{_STRING}|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)"
_MEMBER = rf"{_STRING}: ?{_VALUE}"
_flat_object = re.compile(rf"\{{{_MEMBER}(?:, ?{_MEMBER})*\}}", re.ASCII).fullmatch


def deferred_arguments(value: Any) -> dict[str, Any] | str:
    """`value` itself when it is text whose `coerce_arguments` is known without decoding
    it to be a non-empty mapping without `"_raw"` (a flat JSON object that is no
    LangChain wrapper, see `_flat_object`): the record keeps the text and decodes it when
    read (records.py). Anything else: `coerce_arguments(value)` now.

    Checking costs ~0.3 us where decoding cost ~0.9 us; what ingest reads of the
    arguments (empty? kept raw?) is decided the same either way."""
    if (
        value.__class__ is str
        and _flat_object(value) is not None
        and RAW_KEY not in value
        and "input_str" not in value
        and "inputs" not in value
    ):
        return value
    return coerce_arguments(value)


def deferred_result(value: Any) -> Any:
    """A `DeferredResult` of `value` when it is text whose `coerce_result` is known
    without decoding it not to be None: it opens an object, holds no escape (so the keys
    are spelled out) and none of the keys that make a callback wrapper or a ToolMessage
    (`output`, `lc`, `type`) — its result is then that object decoded, or the text
    itself if it is not JSON. Anything else: `coerce_result(value)` now."""
    if (
        value.__class__ is str
        and value[:1] == "{"
        and "\\" not in value
        and not maybe_deep(value)
        and '"output"' not in value
        and '"lc"' not in value
        and '"type"' not in value
    ):
        return DeferredResult(value)
    return coerce_result(value)


def decode_deferred_arguments(text: str) -> dict[str, Any]:
    """`coerce_arguments(text)` for text `deferred_arguments` kept: its fast path without
    interning the keys (the dict lives only while the conversation is rebuilt)."""
    try:
        parsed, end = scan_once(text, 0)
    except SCAN_ERRORS:
        end = -1
    if end == len(text) and "input_str" not in parsed and "inputs" not in parsed:
        return parsed  # type: ignore[no-any-return]
    return coerce_arguments(text)


def decode_deferred_result(text: str) -> Any:
    """`coerce_result(text)` for text `deferred_result` kept (its fast path, inlined)."""
    try:
        parsed, end = scan_once(text, 0)
    except SCAN_ERRORS:
        end = -1
    if (
        end == len(text)
        and parsed.__class__ is dict
        and "output" not in parsed
        and "lc" not in parsed
        and "type" not in parsed
    ):
        return parsed
    return coerce_result(text)


def _langchain_tool_message_content(obj: dict[str, Any]) -> tuple[bool, Any]:
    """(True, content) when `obj` is a serialized LangChain ToolMessage."""
    if obj.get("lc") == 1 and isinstance(obj.get("kwargs"), dict):
        kwargs = obj["kwargs"]
        if kwargs.get("type") == "tool" or "tool_call_id" in kwargs:
            return True, kwargs.get("content")
    data = obj.get("data")
    if obj.get("type") == "tool" and isinstance(data, dict):
        return True, data.get("content")
    if obj.get("type") == "tool" and "content" in obj:
        return True, obj.get("content")
    return False, None


def coerce_result(value: Any) -> Any:
    """Tool result: JSON decoded when possible, LangChain ToolMessage / callback wrapper
    (`{"output": …, "kwargs": …}`) reduced to the message content, else the raw value."""
    if value.__class__ is str and value[:1] == "{" and not maybe_deep(value):
        # Fast path: exactly one JSON object that can be neither a callback wrapper nor
        # a ToolMessage (those need `output`, `lc` or `type`, see below).
        try:
            parsed, end = scan_once(value, 0)
        except SCAN_ERRORS:
            end = -1
        if (
            end == len(value)
            and "output" not in parsed
            and "lc" not in parsed
            and "type" not in parsed
        ):
            return _shared_keys(parsed)
    if isinstance(value, str):
        parsed = loads(value)
        if parsed is NOT_JSON:
            if value.startswith(pyrepr.MESSAGE_REPR_PREFIXES):  # a printed ToolMessage
                content = pyrepr.message_content(value)
                if content is not pyrepr.NOT_PARSED:
                    return coerce_result(content)
            return value
        value = parsed
    if (
        value.__class__ is dict
        and "output" not in value
        and "lc" not in value
        and "type" not in value
    ):
        # Neither a callback wrapper nor a ToolMessage (those need `output`, `lc` or
        # `type`): the usual case, answered without the checks below.
        return value
    if isinstance(value, dict):
        if "output" in value and value.keys() <= {"output", "kwargs"}:
            value = value["output"]
            if isinstance(value, str):
                return value
        if isinstance(value, dict):
            is_msg, content = _langchain_tool_message_content(value)
            if is_msg:
                return content
    return value


def tool_call_id_from_result(value: Any) -> str | None:
    """LangChain ToolMessages carry the id of the call they answer; OpenInference and
    OpenLLMetry tool spans have no other place for it."""
    if not isinstance(value, str) or "tool_call_id" not in value:
        return None
    parsed = loads(value)
    if not isinstance(parsed, dict):
        return None
    if set(parsed) <= {"output", "kwargs"} and isinstance(parsed.get("output"), dict):
        parsed = parsed["output"]
    for holder in (parsed.get("kwargs"), parsed.get("data"), parsed):
        if isinstance(holder, dict):
            call_id = holder.get("tool_call_id")
            if isinstance(call_id, str) and call_id:
                return call_id
    return None
