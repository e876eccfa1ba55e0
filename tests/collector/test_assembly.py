"""Conversation assembly: ordering, duplicates, completion rules, late spans, limits."""

from __future__ import annotations

import random

from _pipeline_support import (
    MODEL,
    OTHER,
    TOOL,
    TURN,
    Clock,
    Metrics,
    end_marker,
    rec,
    tid,
    turn_records,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.assembly import Assembler, Reason, build_conversation
from tracepass.collector.config import AssemblyConfig
from tracepass.collector.pipeline import assemble_records
from tracepass.evaluator.models import ToolCall


def make(clock: Clock | None = None, **cfg: float) -> tuple[Assembler, Clock, Metrics]:
    clock = clock or Clock()
    m = Metrics()
    target = cfg.pop("target", None)
    asm = Assembler(
        AssemblyConfig(**cfg),  # type: ignore[arg-type]
        m.instruments,
        clock=clock,
        end_grace_s=5.0,
        turn_target=(lambda ref, q: int(target)) if target is not None else None,
    )
    return asm, clock, m


def two_turn_conversation(conv: str = "c1") -> list:
    return [
        *turn_records(1, 100, conv, "weather in Paris?", "Sunny", ["geo", "weather"], t0=1_000),
        *turn_records(2, 200, conv, "and tomorrow?", "Rain", ["forecast"], t0=5_000),
    ]


def test_out_of_order_split_requests_end_marker_waits_for_turn_roots() -> None:
    asm, _clock, m = make()
    recs = two_turn_conversation()
    end = end_marker(3, 999, "c1", turns=2)
    # The end marker and children first, the turn roots last, over four requests.
    asm.add([end, recs[2], recs[1]])
    asm.add([recs[4]])
    assert asm.poll() == []
    asm.add([recs[0]])
    assert asm.poll() == []  # only one of the two turn roots has arrived
    asm.add([recs[3]])
    done = asm.poll()
    assert [d.reason for d in done] == [Reason.END_SIGNAL]
    conv = build_conversation(done[0].key, done[0].records)
    assert conv.id == "c1"
    assert [t.query for t in conv.turns] == ["weather in Paris?", "and tomorrow?"]
    assert [t.answer for t in conv.turns] == ["Sunny", "Rain"]
    assert [c.name for c in conv.turns[0].tool_calls] == ["geo", "weather"]
    assert conv.turns[0].tool_calls[1].arguments == {"i": 1}
    assert conv.turns[0].tool_calls[1].call_id == "call-100-1"
    assert conv.agent_name == "agent"
    assert conv.agent_version == "1.0"
    assert conv.trace_ids[:2] == (tid(1), tid(2))
    assert m.value("tracepass_conversations_completed", reason="end_signal") == 1


def test_duplicates_from_retries_are_ignored() -> None:
    asm, clock, _ = make()
    recs = two_turn_conversation()
    out1 = asm.add(recs)
    out2 = asm.add(recs)  # a retried export
    assert len(out1.accepted) == 5
    assert out1.duplicates == 0
    assert out2.accepted == []
    assert out2.duplicates == 5
    assert len(out2.held) == 5
    clock.advance(301)
    (done,) = asm.poll()
    assert done.reason == Reason.IDLE
    conv = build_conversation(done.key, done.records)
    assert sum(len(t.tool_calls) for t in conv.turns) == 3


def test_idle_timeout_is_measured_from_the_last_span() -> None:
    asm, clock, m = make(idle_timeout_s=60)
    recs = two_turn_conversation()
    asm.add(recs[:3])
    clock.advance(50)
    asm.add(recs[3:])
    clock.advance(50)  # 100 s after the first span, 50 s after the last
    assert asm.poll() == []
    clock.advance(10.5)
    (done,) = asm.poll()
    assert done.reason == Reason.IDLE
    assert done.complete
    assert m.value("tracepass_conversations_completed", reason="idle") == 1
    assert m.value("tracepass_open_conversations") == 0


def test_end_marker_grace_when_announced_turns_never_arrive() -> None:
    asm, clock, _ = make()
    recs = two_turn_conversation()
    asm.add([*recs[:3], end_marker(3, 999, "c1", turns=2)])
    clock.advance(4.9)
    assert asm.poll() == []
    clock.advance(0.2)
    (done,) = asm.poll()
    assert done.reason == Reason.END_SIGNAL
    assert len(build_conversation(done.key, done.records).turns) == 1


def test_end_marker_without_turn_count_completes_when_every_trace_has_its_root() -> None:
    asm, _, _ = make()
    recs = two_turn_conversation()
    asm.add([*recs[1:], end_marker(3, 999, "c1", turns=None)])
    assert asm.poll() == []  # trace 1 has no root yet
    asm.add([recs[0]])
    assert [d.reason for d in asm.poll()] == [Reason.END_SIGNAL]


def test_reference_turn_count_completes_the_conversation() -> None:
    asm, _, m = make(target=2)
    recs = two_turn_conversation()
    asm.add(recs[:3])
    assert asm.poll() == []
    asm.add(recs[3:])
    (done,) = asm.poll()
    assert done.reason == Reason.REFERENCE_TURNS
    assert m.value("tracepass_conversations_completed", reason="reference_turns") == 1


def test_trace_only_conversation_completes_after_root_plus_grace() -> None:
    asm, clock, _ = make(trace_grace_s=30)
    calls = (ToolCall(name="search", arguments={"q": "x"}, call_id="a"),)
    recs = [
        rec(7, 2, 1, MODEL, start=20, input_text="find x", requested_tool_calls=calls),
        rec(7, 3, 1, MODEL, start=40, end=60, output_text="x is 1"),
        rec(7, 1, None, OTHER, start=10, end=100, name="chain"),
    ]
    asm.add(recs[:2])
    clock.advance(100)
    assert asm.poll() == []  # root not ended yet: only the idle timeout applies
    asm.add(recs[2:])
    clock.advance(29)
    assert asm.poll() == []
    clock.advance(2)
    (done,) = asm.poll()
    assert done.reason == Reason.TRACE_GRACE
    assert done.key == tid(7)
    conv = build_conversation(done.key, done.records)
    (turn,) = conv.turns
    assert turn.query == "find x"
    assert turn.answer == "x is 1"
    assert turn.tool_calls == calls


def test_server_span_without_conversation_id_joins_its_conversation() -> None:
    asm, clock, _ = make()
    server = rec(1, 50, None, OTHER, start=0, end=99_999, name="POST /chat")
    recs = turn_records(1, 100, "c9", "hi", "hello", ["t"], t0=10)
    recs[0] = rec(
        1, 100, 50, TURN, start=10, end=1000, conv="c9", input_text="hi", output_text="hello"
    )
    out = asm.add([server])  # arrives first: trace-only for now
    assert out.accepted[0][0] == tid(1)
    out = asm.add(recs)
    assert out.merged == [(tid(1), "c9")]
    assert asm.open_count == 1
    clock.advance(301)
    (done,) = asm.poll()
    assert done.key == "c9"
    assert len(done.records) == 3
    conv = build_conversation(done.key, done.records)
    assert [t.query for t in conv.turns] == ["hi"]


def test_nested_agent_is_part_of_its_parent_turn() -> None:
    recs = [
        rec(1, 1, None, TURN, start=0, end=100, conv="c", input_text="q", output_text="a"),
        rec(1, 2, 1, TURN, start=10, end=50, conv="c", input_text="sub q", output_text="sub a"),
        rec(1, 3, 2, TOOL, start=20, conv="c", tool_name="inner"),
        rec(1, 4, 1, TOOL, start=60, conv="c", tool_name="outer"),
    ]
    conv = build_conversation("c", recs)
    (turn,) = conv.turns
    assert [c.name for c in turn.tool_calls] == ["inner", "outer"]
    assert turn.query == "q"


def test_parent_cycle_does_not_hang() -> None:
    recs = [rec(1, 1, 2, TURN, conv="c"), rec(1, 2, 1, TOOL, conv="c", tool_name="x")]
    conv = build_conversation("c", recs)
    assert len(conv.turns) == 1


def test_late_spans_reopen_with_next_revision_then_drop_after_retention() -> None:
    asm, clock, m = make(retention_s=100, idle_timeout_s=60)
    recs = two_turn_conversation()
    asm.add([*recs[:4], end_marker(3, 999, "c1", turns=None)])
    (first,) = asm.poll()
    assert first.revision == 0
    clock.advance(10)
    asm.add([recs[4]])  # late tool span, within retention
    assert m.value("tracepass_late_spans") == 1
    assert asm.poll() == []
    clock.advance(5.1)
    (second,) = asm.poll()
    assert second.revision == 1
    assert second.reason == Reason.LATE_SPANS
    assert len(second.records) == len(first.records) + 1
    assert m.value("tracepass_revisions") == 1
    # Completed counter counts conversations, not revisions.
    assert m.value("tracepass_conversations_completed") == 1
    clock.advance(101)
    asm.poll()  # retention over: records freed, tombstone kept
    out = asm.add([rec(2, 299, 200, TOOL, start=9_000, conv="c1", tool_name="x")])
    assert out.dropped == 1
    assert out.accepted == []
    assert m.value("tracepass_spans_dropped", reason="after_retention") == 1
    assert m.value("tracepass_late_spans") == 2
    assert asm.held_spans == 0


def test_retried_span_after_completion_is_a_duplicate_not_late() -> None:
    asm, _, m = make()
    recs = two_turn_conversation()
    asm.add([*recs, end_marker(3, 999, "c1", turns=2)])
    assert len(asm.poll()) == 1
    out = asm.add(recs[:2])
    assert out.duplicates == 2
    assert m.value("tracepass_late_spans") == 0


def test_max_open_conversations_evicts_least_recently_active_as_incomplete() -> None:
    asm, clock, m = make(max_open_conversations=2)
    asm.add(turn_records(1, 10, "a", "q", "x", [], t0=0))
    clock.advance(1)
    asm.add(turn_records(2, 20, "b", "q", "x", [], t0=0))
    clock.advance(1)
    asm.add(turn_records(1, 11, "a", "q2", "x", [], t0=5))  # 'a' active again
    asm.add(turn_records(3, 30, "c", "q", "x", [], t0=0))
    (done,) = asm.poll()
    assert done.key == "b"
    assert not done.complete
    assert done.reason == Reason.EVICTED
    assert m.value("tracepass_conversations_evicted", reason="max_open_conversations") == 1
    assert m.value("tracepass_conversations_completed", reason="evicted") == 1
    # An evicted conversation is closed for good: its later spans are dropped, counted.
    out = asm.add([rec(2, 29, 20, TOOL, conv="b", tool_name="t")])
    assert out.dropped == 1
    assert m.value("tracepass_spans_dropped", reason="after_retention") == 1


def test_max_buffered_spans_sheds_retained_then_evicts_open() -> None:
    asm, _, m = make(max_buffered_spans=6)
    asm.add([*turn_records(1, 10, "a", "q", "x", ["t"], t0=0), end_marker(9, 99, "a", 1)])
    assert len(asm.poll()) == 1  # 'a' evaluated, its 3 records retained
    asm.add(turn_records(2, 20, "b", "q", "x", ["t", "u"], t0=0))  # 3 more -> 6 held
    asm.add(turn_records(3, 30, "c", "q", "x", ["t"], t0=0))  # needs room for 2
    assert m.value("tracepass_spans_dropped", reason="retention_evicted") == 3
    assert asm.poll() == []
    asm.add(turn_records(4, 40, "d", "q", "x", ["t", "u", "v"], t0=0))  # needs 4
    (evicted,) = asm.poll()
    assert evicted.key == "b"
    assert not evicted.complete
    assert m.value("tracepass_conversations_evicted", reason="max_buffered_spans") == 1
    assert asm.held_spans <= 6


def test_max_spans_per_conversation_drops_extra_and_marks_incomplete() -> None:
    asm, clock, m = make(max_spans_per_conversation=3)
    out = asm.add(turn_records(1, 10, "a", "q", "x", ["t1", "t2", "t3"], t0=0))
    assert len(out.accepted) == 3
    assert out.dropped == 1
    assert m.value("tracepass_spans_dropped", reason="max_spans_per_conversation") == 1
    clock.advance(301)
    (done,) = asm.poll()
    assert not done.complete


def test_outcome_routes_every_record_and_marks_dropped_ones() -> None:
    # The request log stores `keys` as each record's routing: aligned with the batch,
    # None exactly for what was dropped, duplicates keeping their key.
    asm, _, _ = make(max_spans_per_conversation=3)
    batch = turn_records(1, 10, "a", "q", "x", ["t1", "t2", "t3"], t0=0)
    out = asm.add(batch)
    assert out.records == batch
    assert [k is None for k in out.keys] == [False, False, False, True]
    assert set(out.keys[:3]) == {"a"}
    assert out.any_held
    again = asm.add(batch[:2])
    assert again.keys == ["a", "a"]
    assert again.duplicate_at == (0, 1)
    assert again.accepted == []
    assert again.held == [("a", r) for r in batch[:2]]
    assert again.any_held


def test_offline_assembly_completes_everything_at_end_of_input() -> None:
    recs = [*two_turn_conversation("x"), *turn_records(5, 500, None, "solo", "ok", [], t0=0)]
    random.Random(1).shuffle(recs)
    convs = assemble_records(recs)
    assert [c.id for c in convs] == [tid(5), "x"]
    assert [len(c.turns) for c in convs] == [1, 2]


def test_poll_does_not_scan_idle_conversations() -> None:
    """Many open conversations, none due: a poll touches only the heap top."""
    asm, clock, _ = make()
    for i in range(2_000):
        asm.add(turn_records(i + 1, 10, f"c{i}", "q", "a", [], t0=0))
    clock.advance(10)
    assert asm.poll() == []
    assert asm.next_deadline() == 1_000 + 300


def _records_for_property() -> list:
    return [
        *two_turn_conversation("p"),
        rec(4, 400, None, OTHER, start=0, end=99, conv="p", name="server"),
        rec(
            4, 401, 400, TURN, start=9_000, end=9_500, conv="p", input_text="third", output_text="3"
        ),
        rec(4, 402, 401, MODEL, start=9_010, conv="p", output_text="m"),
        rec(4, 403, 401, TOOL, start=9_020, conv="p", tool_name="z"),
        end_marker(6, 600, "p", 3),
    ]


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=1, max_value=5))
def test_any_order_and_split_with_duplicates_rebuilds_the_same_conversation(
    rnd: random.Random, parts: int
) -> None:
    base = _records_for_property()
    expected = build_conversation("p", base)
    recs = base + rnd.sample(base, k=3)  # retried spans
    rnd.shuffle(recs)
    asm, _, _ = make()
    cuts = sorted(rnd.sample(range(1, len(recs)), k=parts - 1)) if parts > 1 else []
    chunks = [recs[i:j] for i, j in zip([0, *cuts], [*cuts, len(recs)], strict=True)]
    done = []
    for chunk in chunks:
        asm.add(chunk)
        done += asm.poll()
        asm.clock.advance(0.001)  # type: ignore[attr-defined]
    asm.clock.advance(10)  # type: ignore[attr-defined]
    done += asm.poll()
    # Completion may come before the last chunk (the end marker and every turn root are
    # in); what arrives after is late and yields revisions 1, 2, ... The last revision
    # always rebuilds exactly the conversation of the full record set.
    assert done
    assert done[0].reason == Reason.END_SIGNAL
    assert [d.revision for d in done] == list(range(len(done)))
    assert build_conversation("p", done[-1].records) == expected
    assert [t.query for t in expected.turns] == ["weather in Paris?", "and tomorrow?", "third"]
    assert expected.turns[2].tool_calls[0].name == "z"


def test_the_same_span_id_in_two_traces_of_a_conversation_is_two_spans() -> None:
    # The assembler keys records by span id and falls back to (trace, span id) when
    # another trace of the conversation already holds that id: both are kept, retries
    # of either are duplicates, parent lookups stay within the trace.
    asm, _clock, _m = make()
    first = turn_records(1, 100, "c1", "q1", "a1", ["geo", "weather"], t0=1_000)
    second = turn_records(2, 100, "c1", "q2", "a2", ["forecast"], t0=5_000)
    asm.add([second[1], first[1]])  # children first: parents missing
    asm.add([first[0], first[2]])
    out = asm.add([second[0], *first])  # a retry of the first turn
    assert out.duplicates == 3
    assert asm.held_spans == 5
    asm.add([end_marker(3, 100, "c1", turns=2)])
    (done,) = asm.poll()
    assert done.reason == Reason.END_SIGNAL
    assert len(done.records) == 6
    conv = build_conversation(done.key, done.records)
    assert [t.query for t in conv.turns] == ["q1", "q2"]
    assert [[c.name for c in t.tool_calls] for t in conv.turns] == [
        ["geo", "weather"],
        ["forecast"],
    ]


def test_restore_keeps_records_sharing_a_span_id_across_traces() -> None:
    asm, _clock, _m = make()
    records = [
        *turn_records(1, 100, "c1", "q1", "a1", ["geo"], t0=1_000),
        *turn_records(2, 100, "c1", "q2", "a2", ["forecast"], t0=5_000),
    ]
    asm.restore("c1", [*records, records[3]], last_seen=0.0)
    snap = asm.snapshot("c1")
    assert snap is not None
    assert sorted((r.trace_id, r.span_id) for r in snap[0]) == sorted(
        (r.trace_id, r.span_id) for r in records
    )
    assert asm.add(records).duplicates == 4
