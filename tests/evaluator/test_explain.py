"""Failure explanations: the call-by-call diff against the reference and the reasons,
for every built-in argument matcher, and agreement with the scorer's verdict."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracepass.evaluator.models import (
    Conversation,
    ExpectedTool,
    Reference,
    ReferenceTurn,
    ToolCall,
    Turn,
)
from tracepass.evaluator.scoring.argmatch import MATCHERS, ArgumentMatchError, match_arguments
from tracepass.evaluator.scoring.evaluator import Evaluator
from tracepass.evaluator.scoring.explain import argument_diffs, failure_reasons, trajectory_rows


def _keys(expected: ExpectedTool, actual: dict[str, Any]) -> list[tuple[str, str]]:
    kinds = []
    for d in argument_diffs(expected, ToolCall(name=expected.name, arguments=actual)):
        kind = "missing" if d.missing else "unexpected" if d.unexpected else "differs"
        kinds.append((d.key, kind))
    return kinds


@pytest.mark.parametrize(
    ("mode", "expected", "actual", "diffs"),
    [
        ("exact", {"a": 1, "b": "x"}, {"a": 1, "b": "x"}, []),
        ("exact", {"a": 1, "b": "x"}, {"a": 1.0, "b": "y"}, [("b", "differs")]),
        ("exact", {"a": 1}, {"a": True}, [("a", "differs")]),  # True is not 1
        ("exact", {"a": 1}, {}, [("a", "missing")]),
        ("exact", {"a": 1}, {"a": 1, "z": 0}, [("z", "unexpected")]),
        ("subset", {"a": 1}, {"a": 1, "z": 0}, []),
        ("subset", {"a": 1}, {"a": 2, "z": 0}, [("a", "differs")]),
        ("superset", {"a": 1, "b": 2}, {"a": 1}, []),
        ("superset", {"a": 1}, {"a": 1, "z": 0}, [("z", "unexpected")]),
        ("regex", {"city": "Par.*"}, {"city": "Paris"}, []),
        ("regex", {"city": "Par.*"}, {"city": "Lyon"}, [("city", "differs")]),
        ("numeric", {"x": 1.0}, {"x": 1.05}, [("x", "differs")]),
        ("ignore", {"x": 1}, {"x": 2}, []),
    ],
)
def test_argument_diffs_follow_the_matcher(
    mode: str, expected: dict[str, Any], actual: dict[str, Any], diffs: list[tuple[str, str]]
) -> None:
    tool = ExpectedTool(name="t", arguments=expected, argument_match=mode, abs_tol=0.01)
    assert _keys(tool, actual) == diffs


def test_numeric_tolerance_is_respected() -> None:
    tool = ExpectedTool(name="t", arguments={"x": 1.0}, argument_match="numeric", abs_tol=0.1)
    assert _keys(tool, {"x": 1.05}) == []


def test_repeated_tool_pairs_the_matching_call_first() -> None:
    expected = (ExpectedTool(name="get", arguments={"id": 2}),)
    calls = (ToolCall(name="get", arguments={"id": 1}), ToolCall(name="get", arguments={"id": 2}))
    rows = trajectory_rows(calls, expected)
    assert [(r.status, r.actual.arguments if r.actual else None) for r in rows] == [
        ("extra", {"id": 1}),
        ("match", {"id": 2}),
    ]


def test_unchecked_tools_are_shown_as_calls() -> None:
    rows = trajectory_rows((ToolCall(name="x"),), None)
    assert [(r.status, r.expected) for r in rows] == [("match", None)]


@pytest.mark.parametrize(
    ("calls", "reasons"),
    [
        ((), ["turn 1: missing call search", "turn 1: missing call book"]),
        (
            (ToolCall(name="book", arguments={"id": "A"}), ToolCall(name="search")),
            ["turn 1: book out of order"],
        ),
        (
            (ToolCall(name="search"), ToolCall(name="book", arguments={"id": "A"}),
             ToolCall(name="cancel")),
            ["turn 1: extra call cancel"],
        ),
    ],
)  # fmt: skip
def test_reasons_agree_with_a_failing_tool_verdict(
    calls: tuple[ToolCall, ...], reasons: list[str]
) -> None:
    reference = Reference(
        id="r",
        turns=(
            ReferenceTurn(
                query="q",
                expected_tools=(
                    ExpectedTool(name="search"),
                    ExpectedTool(name="book", arguments={"id": "A"}),
                ),
                tool_sequence_matters=True,
            ),
        ),
    )
    conv = Conversation(id="c", turns=(Turn(query="q", answer="ok", tool_calls=calls),))
    result = Evaluator().evaluate(conv, reference)
    assert result.turns[0].tool_correctness is not None
    assert not result.turns[0].tool_correctness.correct
    assert failure_reasons(result) == reasons


_leaf = st.one_of(
    st.integers(-3, 3),
    st.floats(-2, 2, allow_nan=False),
    st.booleans(),
    st.sampled_from(["a", "b", "a.*", "1"]),
    st.none(),
)
_value = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner, max_size=2)
    ),
    max_leaves=4,
)
_arguments = st.dictionaries(st.sampled_from("abc"), _value, max_size=3)


@settings(max_examples=400, deadline=None)
@given(
    mode=st.sampled_from([m for m in MATCHERS if m != "ignore"]),
    want=_arguments,
    got=_arguments,
    tol=st.sampled_from([0.0, 0.5]),
)
def test_a_full_match_has_no_argument_diffs(
    mode: str, want: dict[str, Any], got: dict[str, Any], tol: float
) -> None:
    """`trajectory_rows` skips the per-key diff of a pair whose arguments match fully:
    for every built-in matcher a full match means every key matches."""
    expected = ExpectedTool(name="t", arguments=want, argument_match=mode, abs_tol=tol)
    try:
        score = match_arguments(want, got, mode, abs_tol=tol)
    except ArgumentMatchError:
        return
    if score >= 1.0:
        assert argument_diffs(expected, ToolCall(name="t", arguments=got)) == ()
