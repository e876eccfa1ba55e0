"""Tool arguments and results kept as text until read (records.py): whatever the text,
reading a deferred value gives what `coerce_arguments` / `coerce_result` give at ingest,
and what ingest reads without decoding (empty arguments? kept raw? result missing?) is
answered the same as from the decoded value."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.records import (
    RAW_KEY,
    DeferredResult,
    RecordKind,
    SpanRecord,
    coerce_arguments,
    coerce_result,
    deferred_arguments,
    deferred_result,
    store_tool_arguments,
    store_tool_result,
    stored_tool_arguments,
    stored_tool_result,
)

TEXTS = [
    '{"order_id": "O-3-1"}',
    '{"status":"shipped","eta":"Tuesday"}',
    '{"a": 1, "b": -2.5e3, "c": true, "d": null, "e": "x y"}',
    '{"_raw": "kept"}',
    '{"note": "_raw"}',
    '{"input_str": "{}"}',
    '{"input_str": "x", "tags": []}',
    '{"inputs": "{\\"a\\": 1}", "tags": []}',
    '{"output": null}',
    '{"output": "done", "kwargs": {}}',
    '{"type": "tool", "content": null}',
    '{"lc": 1, "kwargs": {"type": "tool", "content": "hi"}}',
    '{"\\u0074ype": "tool", "content": null}',
    '{"a": "\\"quoted\\""}',
    '{"nested": {"x": [1, 2]}}',
    '{"cut": "the text was cu',
    '{"a": 1} ',
    '{"a": 1}{"b": 2}',
    "{'python': 'repr'}",
    "{}",
    "{ }",
    '{"a" : 1}',
    '{"a": 01}',
    '{"a": NaN}',
    "null",
    '"text"',
    "[1, 2]",
    "plain text",
    "",
]


def _record() -> SpanRecord:
    return SpanRecord("0" * 32, "1" * 16, None, RecordKind.TOOL, "execute_tool t", 0, 1)


def _check(text: str) -> None:
    rec = _record()
    store_tool_arguments(rec, deferred_arguments(text))
    store_tool_result(rec, deferred_result(text))
    expected_args = coerce_arguments(text)
    expected_result = coerce_result(text)
    assert rec.tool_arguments == expected_args
    assert rec.tool_result == expected_result
    # What normalize and the adapters read from the slots, undecoded.
    stored: Any = stored_tool_arguments(rec)
    assert bool(stored) == bool(expected_args)
    assert (isinstance(stored, dict) and RAW_KEY in stored) == (RAW_KEY in expected_args)
    assert (stored_tool_result(rec) is None) == (expected_result is None)
    # Equality, replace and the codec go through the properties.
    eager = _record()
    eager.tool_arguments, eager.tool_result = expected_args, expected_result
    assert rec == eager


def test_deferred_reads_equal_ingest_decoding() -> None:
    for text in TEXTS:
        _check(text)


def test_simple_json_is_kept_as_text() -> None:
    rec = _record()
    store_tool_arguments(rec, deferred_arguments('{"order_id": "O-3-1"}'))
    store_tool_result(rec, deferred_result('{"status":"shipped"}'))
    assert stored_tool_arguments(rec) == '{"order_id": "O-3-1"}'
    assert isinstance(stored_tool_result(rec), DeferredResult)
    assert rec.tool_arguments == {"order_id": "O-3-1"}
    assert rec.tool_result == {"status": "shipped"}
    rec.tool_arguments = {"x": 1}  # an assigned value is stored as is
    assert stored_tool_arguments(rec) == {"x": 1}


flat = st.dictionaries(
    st.text(max_size=6),
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    flat,
    st.sampled_from([(", ", ": "), (",", ":"), (", ", ":"), (" ,", " : ")]),
    st.booleans(),
)
def test_deferred_reads_equal_ingest_decoding_generated(
    value: dict[str, Any], separators: tuple[str, str], ascii_only: bool
) -> None:
    _check(json.dumps(value, separators=separators, ensure_ascii=ascii_only))
