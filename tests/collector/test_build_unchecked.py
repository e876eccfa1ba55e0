"""`build_conversation` builds its models without validation (`construct_unchecked`):
the objects it returns must equal validated construction of the same data, for turns
with tool spans, turns whose calls come from model spans, and spans outside any turn."""

from __future__ import annotations

import dataclasses

from _pipeline_support import MODEL, OTHER, TOOL, TURN, rec, turn_records
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.collector.assembly import build_conversation
from tracepass.evaluator.models import Conversation, ToolCall, ToolDefinition, Turn

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def assert_same_as_validated(conv: Conversation) -> None:
    # Compared through dumps: `ToolCall.arguments_source` is excluded from them (and so
    # absent from a validated copy made from one); every exported field must match.
    validated = Conversation.model_validate(conv.model_dump())
    assert conv.model_dump() == validated.model_dump()
    assert conv.model_dump_json() == validated.model_dump_json()
    assert conv.model_dump(mode="json", exclude_defaults=True) == validated.model_dump(
        mode="json", exclude_defaults=True
    )
    for turn in conv.turns:
        assert type(turn) is Turn
        assert turn.model_fields_set == set(Turn.model_fields)


@settings(max_examples=60, deadline=None)
@given(
    tools=st.lists(st.sampled_from(["a", "b", "c"]), max_size=4),
    args=st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    result=json_values,
    service=st.none() | st.text(min_size=1, max_size=5),
)
def test_tool_turns_equal_validated_construction(
    tools: list[str], args: dict[str, object], result: object, service: str | None
) -> None:
    records = turn_records(1, 10, "c", "q?", "ans", tools, 0)
    records[1:] = [
        dataclasses.replace(r, tool_arguments=args, tool_result=result) for r in records[1:]
    ]
    records += turn_records(2, 20, "c", "again?", "ok", [], 5000)
    if service is not None:
        records[0] = dataclasses.replace(records[0], service_name=service)
    assert_same_as_validated(build_conversation("c", records, complete=False))


def test_model_requested_calls_and_spans_outside_turns() -> None:
    calls = (ToolCall(name="lookup", arguments={"x": 1}),)
    offered = (ToolDefinition(name="lookup", description="find", parameters={"type": "object"}),)
    schema = (ToolDefinition(name="lookup", parameters={"type": "object"}),)
    records = [
        rec(1, 1, None, OTHER, conv="c", start=0),  # an HTTP server span above the turn
        rec(1, 2, 1, TURN, conv="c", start=1, input_text="q", agent_name="bot"),
        rec(
            1,
            3,
            2,
            MODEL,
            conv="c",
            start=2,
            requested_tool_calls=calls,
            output_text="a",
            final_answer_uses_tools=True,
        ),
        rec(3, 4, None, OTHER, conv="c", start=9),  # a trace without any turn …
        # … whose own query (a model input) starts a turn of its own
        rec(3, 6, 4, MODEL, conv="c", start=9, input_text="q2"),
        rec(3, 5, 4, TOOL, conv="c", start=10, tool_name="lookup", tool_definitions=schema),
    ]
    records[2] = dataclasses.replace(records[2], tool_definitions=offered)
    conv = build_conversation("c", records)
    assert conv.turns[0].tool_calls == calls
    assert conv.turns[0].offered_tools == offered
    assert conv.turns[1].tool_schemas == {"lookup": {"type": "object"}}
    assert_same_as_validated(conv)


def test_a_tool_trace_without_a_query_continues_the_turn_before() -> None:
    """A turn starts at a new user message: the tool of a trace without an agent span
    (and so without a query) joins the turn before it, its arguments from that turn's
    model request."""
    calls = (ToolCall(name="lookup", arguments={"x": 1}),)
    records = [
        rec(1, 2, None, TURN, conv="c", start=1, input_text="q", agent_name="bot"),
        rec(1, 3, 2, MODEL, conv="c", start=2, requested_tool_calls=calls, output_text="a"),
        rec(3, 4, None, OTHER, conv="c", start=9),  # a trace without any agent span
        rec(3, 5, 4, TOOL, conv="c", start=10, tool_name="lookup"),
    ]
    conv = build_conversation("c", records)
    assert len(conv.turns) == 1
    (call,) = conv.turns[0].tool_calls
    assert (call.name, call.arguments, call.agent) == ("lookup", {"x": 1}, "bot")
    assert_same_as_validated(conv)
