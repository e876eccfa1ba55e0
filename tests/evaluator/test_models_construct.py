"""`construct_unchecked` (the scoring hot path's way to build result models) gives the
same objects as validated construction: equal, same dump, same fields set, and copies
behave. It writes pydantic internals, so this is the guard behind the `pydantic<3` pin."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import (
    ConversationResult,
    GraderResult,
    Outcome,
    ToolCall,
    ToolCorrectness,
    TrajectoryScores,
    TurnResult,
    Violation,
    construct_unchecked,
)

text = st.none() | st.text(max_size=20)
unit = st.floats(min_value=0.0, max_value=1.0)
maybe_bool = st.none() | st.booleans()

tool_calls = st.lists(
    st.builds(
        ToolCall,
        name=st.text(min_size=1, max_size=10),
        arguments=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
        result=st.none() | st.text(max_size=10),
        call_id=text,
    ),
    max_size=3,
).map(tuple)
graders = st.lists(
    st.builds(GraderResult, grader=st.text(max_size=8), score=st.none() | unit, passed=maybe_bool),
    max_size=2,
).map(tuple)
tool_correctness = st.none() | st.builds(
    ToolCorrectness,
    selection=unit,
    parameters=unit,
    sequence=unit,
    utilization=unit,
    overall=unit,
    correct=st.booleans(),
)
trajectory = st.none() | st.builds(
    TrajectoryScores,
    exact=st.booleans(),
    in_order=st.booleans(),
    any_order=st.booleans(),
    precision=unit,
    recall=unit,
    f1=unit,
)

violations = st.lists(
    st.builds(
        Violation,
        rule=st.sampled_from(["unknown_tool", "order", "grader"]),
        turn=st.integers(min_value=0, max_value=5),
        tool_call=st.none() | st.integers(min_value=0, max_value=5),
        message=st.text(max_size=10),
        path=text,
    ),
    max_size=2,
).map(tuple)


@st.composite
def turn_values(draw: st.DrawFn) -> dict[str, Any]:
    """Every field of TurnResult, as the scorer passes them."""
    return {
        "index": draw(st.integers(min_value=0, max_value=50)),
        "query": draw(text),
        "answer": draw(text),
        "expected_answer": draw(text),
        "answer_score": draw(st.none() | unit),
        "answer_correct": draw(maybe_bool),
        "answer_error": draw(text),
        "graders": draw(graders),
        "tool_correctness": draw(tool_correctness),
        "trajectory": draw(trajectory),
        "tool_calls": draw(tool_calls),
        "expected_tools": None,
        "correct": draw(maybe_bool),
        "tool_error": draw(text),
        "single_tool_use": draw(
            st.none() | st.dictionaries(st.text(max_size=5), st.booleans(), max_size=2)
        ),
        "violations": draw(violations),
        "policy_passed": draw(maybe_bool),
        "policy_graders": draw(graders),
        "policy_error": draw(text),
    }


def _same(fast: Any, checked: Any) -> None:
    assert fast == checked
    assert fast.model_dump(mode="json") == checked.model_dump(mode="json")
    assert fast.model_fields_set == checked.model_fields_set
    update = {"index": 99} if "index" in type(fast).model_fields else {}
    assert fast.model_copy(update=update) == checked.model_copy(update=update)
    assert type(fast).model_validate(fast.model_dump()) == checked


@settings(max_examples=200, deadline=None)
@given(turn_values())
def test_turn_result_equals_validated_construction(values: dict[str, Any]) -> None:
    # Every field given, as the scorer does: construct_unchecked fills nothing.
    assert set(values) == set(TurnResult.model_fields)
    _same(construct_unchecked(TurnResult, dict(values)), TurnResult.model_validate(values))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(turn_values(), max_size=3),
    st.sampled_from(list(Outcome)),
    trajectory,
    text,
)
def test_conversation_result_equals_validated_construction(
    turns: list[dict[str, Any]], outcome: Outcome, traj: TrajectoryScores | None, ref: str | None
) -> None:
    built = tuple(construct_unchecked(TurnResult, t) for t in turns)
    values = {
        "conversation_id": "c",
        "reference_id": ref,
        "reference_set": None,
        "agent_name": "a",
        "agent_version": None,
        "correct": outcome is Outcome.PASS,
        "outcome": outcome,
        "turns": built,
        "trajectory": traj,
        "single_tool_use": None,
        "policy_id": None if outcome is Outcome.UNSCORED else "p",
        "policy_outcome": None if outcome is Outcome.UNSCORED else outcome,
        "violations": tuple(v for t in built for v in t.violations),
        "judgements": (),
    }
    assert set(values) == set(ConversationResult.model_fields)
    checked = ConversationResult.model_validate(
        {**values, "turns": tuple(TurnResult.model_validate(t) for t in turns)}
    )
    _same(construct_unchecked(ConversationResult, values), checked)
