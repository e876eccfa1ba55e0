"""Qualified tool names scored as the reference's plain names (scoring/tool_names.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.tool_names import SEPARATORS, align_turns, plain_name

EXPECTED = frozenset({"get_weather", "book_flight", "Plugin-function"})


def test_qualified_names_become_the_plain_expected_name() -> None:
    assert plain_name("travel.get_weather", EXPECTED) == "get_weather"
    assert plain_name("Travel-get_weather", EXPECTED) == "get_weather"
    assert plain_name("mcp/travel/book_flight", EXPECTED) == "book_flight"
    assert plain_name("ns:book_flight", EXPECTED) == "book_flight"
    assert plain_name("travel__book_flight", EXPECTED) == "book_flight"


def test_names_the_reference_names_never_change() -> None:
    assert plain_name("Plugin-function", EXPECTED | {"function"}) == "Plugin-function"
    assert plain_name("get_weather", EXPECTED) == "get_weather"


def test_a_single_underscore_is_no_separator() -> None:
    assert plain_name("get_weather", frozenset({"weather"})) == "get_weather"
    assert plain_name("travel_get_weather", EXPECTED) == "travel_get_weather"


@given(st.text(max_size=40), st.sampled_from(SEPARATORS), st.sampled_from(sorted(EXPECTED)))
def test_any_prefix_before_a_separator_is_dropped(prefix: str, sep: str, name: str) -> None:
    qualified = f"{prefix or 'x'}{sep}{name}"
    result = plain_name(qualified, EXPECTED)
    assert result in EXPECTED or result == qualified
    if qualified not in EXPECTED:
        assert result == name or result in EXPECTED


def test_unchanged_turns_are_the_same_tuple() -> None:
    turns = (Turn(query="q", answer="a", tool_calls=(ToolCall(name="get_weather"),)),)
    assert align_turns(turns, EXPECTED) is turns


def test_a_qualified_call_scores_as_the_expected_tool() -> None:
    reference = Reference(
        id="r",
        turns=[
            ReferenceTurn(
                query="q",
                expected_answer=None,
                expected_tools=[ExpectedTool(name="get_weather", arguments={"city": "Paris"})],
            )
        ],
    )
    conversation = Conversation(
        id="c",
        turns=(
            Turn(
                query="q",
                answer="a",
                tool_calls=(ToolCall(name="travel.get_weather", arguments={"city": "Paris"}),),
            ),
        ),
    )
    result = Evaluator().evaluate(conversation, reference)
    (turn,) = result.turns
    assert turn.tool_correctness is not None
    assert turn.tool_correctness.correct
