"""Retained conversations are packed (compact bytes, untracked by the GC) and come back
whole: late-span revisions, views, duplicates and the retention gauges."""

from __future__ import annotations

import dataclasses
import gc

import pytest
from _pipeline_support import TOOL, TURN, Clock, Metrics, end_marker, rec, sid, turn_records
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


def _make(records_on_disk: bool = False, **cfg: float) -> tuple[Assembler, Clock, Metrics]:
    clock, m = Clock(), Metrics()
    asm = Assembler(
        AssemblyConfig(**cfg),  # type: ignore[arg-type]
        m.instruments,
        clock=clock,
        end_grace_s=5.0,
        records_on_disk=records_on_disk,
    )
    return asm, clock, m


def _conversation() -> list[SpanRecord]:
    return [
        *turn_records(1, 100, "c1", "weather in Paris?", "Sunny", ["geo", "weather"], t0=1_000),
        *turn_records(2, 200, "c1", "and tomorrow?", "Rain", ["forecast"], t0=5_000),
        end_marker(3, 999, "c1", turns=2),
    ]


def _untracked_rows(asm: Assembler) -> None:
    """No retained conversation is an object of its own: the store's index holds only
    strings and ints (a dict the GC does not track), its packed records are bytes."""
    store = asm.retention
    gc.collect()
    assert not gc.is_tracked(store.index)
    assert all(p is None or not gc.is_tracked(p) for p in store.packed)
    assert "c1" not in asm._convs  # no buffer in memory for it


def _many(asm: Assembler, start: int, n: int) -> None:
    for i in range(start, start + n):
        key = f"m{i}"
        asm.add(
            [
                *turn_records(10_000 + i, 100, key, "q", "a", ["t"], t0=0),
                end_marker(20_000 + i, 999, key, turns=1),
            ]
        )
        asm.poll()


@pytest.mark.parametrize("records_on_disk", [False, True])
def test_retained_conversations_add_no_object_for_the_gc_to_scan(records_on_disk: bool) -> None:
    """What a full collection scans does not grow with the conversations retained
    (`retention.py`: columns, not objects): 2,000 more retained, a handful more objects."""
    asm, _clock, _m = _make(records_on_disk=records_on_disk, retention_s=3600)
    _many(asm, 0, 500)
    gc.collect()
    before = len(gc.get_objects())
    _many(asm, 500, 2000)
    gc.collect()
    assert asm.retention.spans == 2500 * 3  # turn, tool, end marker
    assert len(gc.get_objects()) - before < 100


def test_retained_conversation_is_packed_and_untracked_then_reopens_whole() -> None:
    asm, clock, m = _make(retention_s=100, idle_timeout_s=60)
    recs = _conversation()
    asm.add(recs)
    (first,) = asm.poll()
    _untracked_rows(asm)
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
    asm.poll()
    _untracked_rows(asm)
    assert asm.retained_spans == len(recs)
    clock.advance(10)
    late = rec(2, 299, 200, TOOL, start=6_000, conv="c1", tool_name="late")
    asm.add([late])
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


def test_records_on_disk_keep_nothing_in_memory_and_revise_from_what_is_read_back() -> None:
    """`batch` durability: a retained conversation holds no records in memory (the span
    buffer has them); a late span revises it from the records read back."""
    asm, clock, m = _make(records_on_disk=True, retention_s=100, idle_timeout_s=60)
    recs = _conversation()
    asm.add(recs)
    (first,) = asm.poll()
    _untracked_rows(asm)
    assert asm.retained_spans == len(recs)
    assert asm.held_spans == 0  # nothing in memory counts against max_buffered_spans
    m.collect()
    assert m.value("tracepass_retained_spans") == len(recs)
    assert asm.snapshot("c1") == ((), 0, False)
    clock.advance(10)
    late = rec(2, 299, 200, TOOL, start=6_000, conv="c1", tool_name="late")
    assert asm.keys_to_read_back([late]) == ["c1"]
    assert asm.read_back("c1", list(first.records))
    assert asm.keys_to_read_back([late]) == []  # in memory now
    asm.add([late])
    clock.advance(5.1)
    (second,) = asm.poll()
    assert (second.revision, second.reason) == (1, Reason.LATE_SPANS)
    assert list(second.records) == [*first.records, late]
    _untracked_rows(asm)
    # A retry only: read back, found a duplicate, dropped from memory at the next poll.
    assert asm.read_back("c1", list(second.records))
    assert asm.add([late]).duplicates == 1
    asm.poll()
    _untracked_rows(asm)
    clock.advance(101)
    asm.poll()
    assert asm.retained_spans == 0
    assert not asm.read_back("c1", [late])  # past retention: a tombstone
    out = asm.add([late])
    assert out.dropped == 1
    assert m.value("tracepass_spans_dropped", reason="after_retention") == 1


def test_a_span_without_conversation_id_finds_its_retained_conversation_by_trace() -> None:
    """A retained conversation keeps the trace links a late span may need (compact):
    those of traces whose root has not arrived (the server span above the agent, which
    ends last); a trace whose root came and whose spans all named the conversation keeps
    none (its late spans name it too)."""
    asm, clock, _m = _make(records_on_disk=True, retention_s=100, idle_timeout_s=60)
    recs = _conversation()
    recs[0] = dataclasses.replace(recs[0], parent_span_id=sid(50))  # under a server span
    asm.add(recs)
    clock.advance(5.1)  # the end marker's grace: trace 1 has no root
    (first,) = asm.poll()
    server = rec(1, 50, None, start=900, conv=None, name="http")
    assert asm.route(server) == "c1"
    stray = rec(2, 250, 200, start=5_500, conv=None, name="stray")
    assert asm.route(stray) == stray.trace_id  # trace 2 is rooted: no link kept
    assert len(asm.links) == 1
    assert asm.keys_to_read_back([server]) == ["c1"]
    asm.read_back("c1", list(first.records))
    asm.add([server])
    clock.advance(5.1)
    (second,) = asm.poll()
    assert second.revision == 1
    assert len(second.records) == len(recs) + 1
    assert asm.route(server) == "c1"
    clock.advance(200)
    asm.poll()
    assert asm.route(server) == "c1"  # the tombstone keeps the links: dropped, no fragment
    clock.advance(1000)
    asm.poll()
    assert asm.route(server) == server.trace_id  # forgotten with the tombstone
    assert len(asm.links) == 0


def test_memory_cap_sheds_packed_conversations_by_their_span_count() -> None:
    asm, _clock, m = _make(max_buffered_spans=10)
    asm.add(_conversation())
    asm.poll()
    asm.add(turn_records(5, 500, "c2", "q", "a", ["x", "y", "z", "w"], t0=0))
    assert asm.held_spans == 5
    assert m.value("tracepass_spans_dropped", reason="retention_evicted") == 6


def test_nothing_on_disk_to_read_back_buries_the_conversation() -> None:
    """Discarded after evaluation (sampled out): nothing to revise, so a late span is
    dropped (counted), not evaluated as a fragment of the conversation."""
    asm, clock, m = _make(records_on_disk=True, retention_s=100, idle_timeout_s=60)
    asm.add(_conversation())
    asm.poll()
    clock.advance(90)
    late = rec(2, 299, 200, TOOL, start=6_000, conv="c1", tool_name="late")
    assert not asm.read_back("c1", [])
    assert asm.retained_spans == 0
    clock.advance(59)  # the tombstone lasts idle_timeout_s from now, not from closing
    asm.poll()
    assert asm.add([late]).dropped == 1
    assert asm.poll() == []
    assert m.value("tracepass_spans_dropped", reason="after_retention") == 1
