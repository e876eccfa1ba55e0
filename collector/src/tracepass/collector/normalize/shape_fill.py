"""Fill a record from the shape reader (`shape.py`) where its convention and adapters
left it incomplete: the last step of `normalize_request` for a span.

What it fills, never overwriting what a convention or adapter read (each field it
fills is noted with `SOURCE_SHAPE` in `tracepass.sources`):

* TURN / MODEL missing a query or an answer: the query and answer by shape; a MODEL
  also its requested tool calls and the tool results its input history carries.
* OTHER spans that no convention claimed and whose content is a model exchange (an
  answer or requested tool calls by shape): a MODEL record.
* TOOL without an error whose payload flags a failure (`is_error: true`, `isError`,
  a tool message's `status: "error"`): the error, with the result's text; a TOOL
  without a result: the result by shape.

What shape could not read (a value too large, too deep, or past the span's budget) is
kept as `SHAPE_UNREAD_ATTR`: the attribute keys, for read warnings.
"""

from __future__ import annotations

from typing import Any, Final

from tracepass.collector.normalize.registry import TOOL_RESPONSES_ATTR, note_source
from tracepass.collector.normalize.shape import read_shape
from tracepass.collector.records import RecordKind, SpanRecord, stored_tool_result

__all__ = ["SHAPE_UNREAD_ATTR", "SOURCE_SHAPE", "fill_by_shape"]

SOURCE_SHAPE: Final = "shape"
SHAPE_UNREAD_ATTR: Final = "tracepass.shape_unread"

_FLAG_MARKS = ('"error"', 'rror":true', 'rror": true')


def _maybe_flagged(attrs: dict[str, Any]) -> bool:
    """Whether any text attribute could hold an error flag (C-speed substring tests: the
    usual successful tool span is not read by shape at all)."""
    for value in attrs.values():
        # one scan for the common part of every mark first: most values have none
        if value.__class__ is str and "rror" in value and any(m in value for m in _FLAG_MARKS):
            return True
    return False


def _fill_tool(rec: SpanRecord, attrs: dict[str, Any]) -> None:
    missing = stored_tool_result(rec) is None
    if not missing and not _maybe_flagged(attrs):
        return
    reading = read_shape(attrs)
    own = reading.own_result
    if own is None and rec.tool_call_id and rec.tool_call_id in reading.tool_results:
        own = (reading.tool_results[rec.tool_call_id], reading.tool_errors.get(rec.tool_call_id))
    if own is None:
        return
    result, error = own
    if missing and result is not None:
        rec.tool_result = result
        note_source(rec, "tool_result", SOURCE_SHAPE)
    if error is not None and rec.error is None:
        rec.error = error
        note_source(rec, "error", SOURCE_SHAPE)


def fill_by_shape(rec: SpanRecord, attrs: dict[str, Any], unclaimed: bool) -> None:
    """See the module docstring; `unclaimed`: no convention claimed the span."""
    kind = rec.kind
    if kind is RecordKind.TOOL:
        _fill_tool(rec, attrs)
        return
    reading = read_shape(attrs)
    if reading.unread:
        rec.attributes[SHAPE_UNREAD_ATTR] = tuple(reading.unread)
    if not reading.found:
        return
    if kind is RecordKind.OTHER:
        if not unclaimed or (reading.answer is None and not reading.tool_calls):
            return
        rec.kind = kind = RecordKind.MODEL
    if rec.input_text is None and reading.query is not None:
        rec.input_text = reading.query
        note_source(rec, "input_text", SOURCE_SHAPE)
    if rec.output_text is None and reading.answer is not None:
        rec.output_text = reading.answer
        note_source(rec, "output_text", SOURCE_SHAPE)
    if kind is RecordKind.MODEL:
        if not rec.requested_tool_calls and reading.tool_calls:
            rec.requested_tool_calls = reading.tool_calls
            note_source(rec, "requested_tool_calls", SOURCE_SHAPE)
        if reading.tool_results and TOOL_RESPONSES_ATTR not in rec.attributes:
            rec.attributes[TOOL_RESPONSES_ATTR] = reading.tool_results
