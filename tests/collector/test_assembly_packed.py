"""Retained conversations are packed (compact bytes, untracked by the GC) and come back
whole: late-span revisions, views, duplicates and the retention gauges."""

from __future__ import annotations

import gc

from _pipeline_support import TOOL, TURN, Clock, Metrics, end_marker, rec, turn_records
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.assembly import Assembler, Reason
from tracepass.collector.assembly.packed import pack_records, unpack_records
from tracepass.collector.config import AssemblyConfig
from tracepass.collector.records import (
    DeferredResult,
    SpanRecord,
    store_tool_arguments,
    store_tool_result,
    stored_tool_arguments,
    stored_tool_result,
)
from tracepass.evaluator.models import ToolCall, ToolDefinition

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def _record(i: int, args: object, result: object, attrs: dict[str, object]) -> SpanRecord:
    r = rec(
        1, 100 + i, 100 if i else None, TOOL if i else TURN, start=i, conv="c", attributes=attrs
    )
    r.tool_name = "lookup"
    store_tool_arguments(r, args)  # type: ignore[arg-type]
    store_tool_result(r, result)
    return r


def _raw(records: list[SpanRecord]) -> list[tuple[object, object, object]]:
    out: list[tuple[object, object, object]] = []
    for r in records:
        res = stored_tool_result(r)
        out.append(
            (
                stored_tool_arguments(r),
                ("deferred", res.text) if isinstance(res, DeferredResult) else res,
                r,
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.none(), st.dictionaries(st.text(), _json, max_size=3), st.just('{"a": 1}')
            ),
            st.one_of(_json, st.builds(DeferredResult, st.just('{"ok": true}'))),
            st.dictionaries(st.text(max_size=5), _json, max_size=3),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_pack_round_trip_is_equal_and_keeps_deferred_values_raw(
    rows: list[tuple[object, object, dict[str, object]]], with_models: bool
) -> None:
    records = [_record(i, a, r, attrs) for i, (a, r, attrs) in enumerate(rows)]
    if with_models and records:
        records[0].requested_tool_calls = (ToolCall(name="t", arguments={"x": 1}),)
        records[0].tool_definitions = (ToolDefinition(name="t"),)
    back = unpack_records(pack_records(records))
    assert back == records
    assert [(a, r) for a, r, _ in _raw(back)] == [(a, r) for a, r, _ in _raw(records)]


def _make(**cfg: float) -> tuple[Assembler, Clock, Metrics]:
    clock, m = Clock(), Metrics()
    asm = Assembler(AssemblyConfig(**cfg), m.instruments, clock=clock, end_grace_s=5.0)  # type: ignore[arg-type]
    return asm, clock, m


def _conversation() -> list[SpanRecord]:
    return [
        *turn_records(1, 100, "c1", "weather in Paris?", "Sunny", ["geo", "weather"], t0=1_000),
        *turn_records(2, 200, "c1", "and tomorrow?", "Rain", ["forecast"], t0=5_000),
        end_marker(3, 999, "c1", turns=2),
    ]


def test_retained_conversation_is_packed_and_untracked_then_reopens_whole() -> None:
    asm, clock, m = _make(retention_s=100, idle_timeout_s=60)
    recs = _conversation()
    asm.add(recs)
    (first,) = asm.poll()
    conv = asm._convs["c1"]  # the packed form is what this test checks
    assert conv.packed is not None
    assert conv.records == {}
    assert not gc.is_tracked(conv.packed)
    assert asm.held_spans == len(recs) == asm.retained_spans
    m.collect()
    assert m.value("tracepass_retained_spans") == len(recs)
    assert m.value("tracepass_buffered_spans") == 0
    snap = asm.snapshot("c1")
    assert snap is not None
    assert list(snap[0]) == list(first.records)
    assert snap[2] is False
    # A retry of an evaluated span is a duplicate: still retained, packed again.
    out = asm.add(recs[:2])
    assert out.duplicates == 2
    assert conv.packed is not None
    clock.advance(10)
    late = rec(2, 299, 200, TOOL, start=6_000, conv="c1", tool_name="late")
    asm.add([late])
    assert conv.packed is None
    m.collect()
    assert m.value("tracepass_retained_spans") == 0
    assert m.value("tracepass_buffered_spans") == len(recs) + 1
    clock.advance(5.1)
    (second,) = asm.poll()
    assert second.revision == 1
    assert second.reason == Reason.LATE_SPANS
    assert list(second.records) == [*first.records, late]
    clock.advance(101)
    asm.poll()
    assert asm.held_spans == 0
    m.collect()
    assert m.value("tracepass_retained_spans") == 0


def test_memory_cap_sheds_packed_conversations_by_their_span_count() -> None:
    asm, _clock, m = _make(max_buffered_spans=10)
    asm.add(_conversation())
    asm.poll()
    asm.add(turn_records(5, 500, "c2", "q", "a", ["x", "y", "z", "w"], t0=0))
    assert asm.held_spans == 5
    assert m.value("tracepass_spans_dropped", reason="retention_evicted") == 6
