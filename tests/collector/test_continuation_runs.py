"""Where a turn starts when no query was read (continuation.py) and when one run is split
over several traces: runs with their own root stay turns, pieces of a run rejoin it."""

from __future__ import annotations

from _pipeline_support import MODEL, OTHER, TOOL, TURN, rec

from tracepass.collector.assembly import build_conversation
from tracepass.collector.records import SpanRecord
from tracepass.evaluator.models import ToolCall


def _run(trace: int, start: int, conv: str) -> list[SpanRecord]:
    """An application's turn span (no convention names it) holding a model call and a
    tool call, content capture off: no query, no answer."""
    return [
        rec(trace, trace * 10, None, OTHER, conv=conv, start=start),
        rec(trace, trace * 10 + 1, trace * 10, MODEL, conv=conv, start=start + 1),
        rec(trace, trace * 10 + 2, trace * 10, TOOL, conv=conv, start=start + 2, tool_name="t"),
    ]


def test_scripted_three_two_two_turns_stay_turns_without_queries() -> None:
    """3 + 2 + 2 runs under three conversation ids come back as 3, 2 and 2 turns (the
    continuation rule once folded each conversation into 1 turn)."""
    shape = []
    trace = 1
    for conv, turns in (("a", 3), ("b", 2), ("c", 2)):
        records: list[SpanRecord] = []
        for k in range(turns):
            records += _run(trace, 100 * k, conv)
            trace += 1
        shape.append(len(build_conversation(conv, records).turns))
    assert shape == [3, 2, 2]


def test_a_trace_of_tools_alone_still_continues_the_turn() -> None:
    records = [
        *_run(1, 0, "c"),
        rec(2, 20, None, OTHER, conv="c", start=50),
        rec(2, 21, 20, TOOL, conv="c", start=51, tool_name="t"),
    ]
    (turn,) = build_conversation("c", records).turns
    assert [c.name for c in turn.tool_calls] == ["t", "t"]


def test_one_run_split_over_traces_is_one_turn() -> None:
    """Every span the root of its own trace (an SDK that starts each span detached), the
    conversation id on each: the model and tool traces rejoin the agent run's turn."""
    calls = (ToolCall(name="lookup", arguments={"x": 1}, call_id="c1"),)
    records = [
        rec(1, 2, None, TURN, conv="c", start=1, input_text="q", agent_name="bot"),
        rec(3, 3, None, MODEL, conv="c", start=2, input_text="q", requested_tool_calls=calls),
        rec(4, 4, None, TOOL, conv="c", start=3, tool_name="lookup", tool_call_id="c1"),
        rec(5, 5, None, MODEL, conv="c", start=4, input_text="q", output_text="a"),
        rec(6, 6, None, TURN, conv="c", start=10, input_text="q2", agent_name="bot"),
        rec(7, 7, None, MODEL, conv="c", start=11, input_text="q2", output_text="a2"),
    ]
    conv = build_conversation("c", records)
    assert [(t.query, t.answer, [c.name for c in t.tool_calls]) for t in conv.turns] == [
        ("q", "a", ["lookup"]),
        ("q2", "a2", []),
    ]
